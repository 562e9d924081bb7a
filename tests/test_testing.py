"""polytile.testing: Triton's triton.testing names (do_bench, do_bench_cudagraph,
Benchmark, perf_report, assert_close), on the host clock here; the GPU path (CUDA events,
CUDA graphs) runs in tests/backends/nvidia/test_gpu_testing.py."""

from __future__ import annotations

import time

import numpy as np
import pytest

import polytile.language as pl
from polytile import testing
from polytile.runtime import jit


@jit
def double(x_ptr, n, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(x_ptr + offs, pl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def test_do_bench_times_a_kernel_on_the_interpreter_in_milliseconds():
    x = np.ones(64, np.float32)
    ms = testing.do_bench(lambda: double[(1,)](x, 64, BLOCK=64), warmup=1, rep=5)
    assert isinstance(ms, float) and 0 < ms < 1000
    assert x[0] > 1  # it ran


def test_do_bench_returns_what_triton_returns():
    fn = lambda: time.sleep(0.0005)  # noqa: E731
    low, mid, high = testing.do_bench(fn, warmup=1, rep=10, quantiles=[0.2, 0.5, 0.8])
    assert 0.4 < low <= mid <= high
    assert isinstance(testing.do_bench(fn, warmup=1, rep=5, quantiles=[0.5]), float)
    every = testing.do_bench(fn, warmup=1, rep=5, return_mode="all")
    assert isinstance(every, list) and every and testing.do_bench(fn, 1, 5, return_mode="min") >= 0.4
    with pytest.raises(ValueError, match="return_mode='avg': use one of min, max, mean, median, all"):
        testing.do_bench(fn, return_mode="avg")
    with pytest.raises(ValueError, match=r"quantiles must be in \[0, 1\], got 2"):
        testing.do_bench(fn, warmup=1, rep=1, quantiles=[2])


def test_do_bench_cudagraph_needs_a_cuda_device():
    if testing._cuda_torch() is not None:
        pytest.skip("a CUDA device is here: the GPU test covers it")
    with pytest.raises(RuntimeError, match="do_bench_cudagraph needs torch with a CUDA device"):
        testing.do_bench_cudagraph(lambda: None)


def test_assert_close_follows_triton_defaults():
    testing.assert_close(np.array([1.0, 2.0]), np.array([1.005, 2.0]))  # atol 1e-2
    with pytest.raises(AssertionError, match="off by"):
        testing.assert_close(np.array([1.0]), np.array([1.5]), err_msg="off by")
    testing.assert_close(1.0, 1.0)
    testing.assert_close(np.array([1.0]), np.array([1.0005]), atol=lambda dtype: 1e-3 if dtype == np.float64 else 0)
    testing.assert_close(np.array([np.nan]), np.array([np.nan]))
    testing.assert_close(np.array([True, False]), np.array([True, False]))
    with pytest.raises(AssertionError):
        testing.assert_close(np.array([True]), np.array([False]))


def test_perf_report_runs_every_configuration(tmp_path, capsys):
    calls = []

    @testing.perf_report(testing.Benchmark(x_names=["size"], x_vals=[1, 2, 4], line_arg="provider",
                                           line_vals=["a", "b"], line_names=["A", "B"], plot_name="sizes",
                                           args={"scale": 10}, ylabel="ms"))
    def bench(size, provider, scale):
        calls.append((size, provider, scale))
        return size * scale + (1 if provider == "b" else 0), 0, 0

    table = bench.run(print_data=True, return_df=True)
    assert calls == [(s, p, 10) for s in (1, 2, 4) for p in ("a", "b")]
    printed = capsys.readouterr().out
    assert printed.startswith("sizes:") and "size" in printed and "41" in printed
    columns, rows = (list(table.columns), table.values.tolist()) if hasattr(table, "values") else table
    assert columns == ["size", "A", "A-min", "A-max", "B", "B-min", "B-max"]  # Triton's columns
    assert [row[:2] + row[4:5] for row in rows] == [[1, 10, 11], [2, 20, 21], [4, 40, 41]]
    with pytest.raises(ValueError, match="2 line_vals but 1 line_names"):
        testing.Benchmark(["n"], [1], "p", ["a", "b"], ["A"], "broken")


def test_the_ir_helpers_moved_with_a_warning():
    from polytile import ir_testing

    with pytest.warns(DeprecationWarning, match="polytile.testing.dedent moved to polytile.ir_testing.dedent"):
        assert testing.dedent is ir_testing.dedent
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        testing.nothing
