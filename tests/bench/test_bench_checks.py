"""Every result is checked before it is timed: a wrong kernel is reported, never timed."""

from __future__ import annotations

import dataclasses
import os
from types import SimpleNamespace

import numpy as np
import polytile as pt
import pytest
import polytile.language as pl

import bench
from bench import polytile_kernels
from bench.cases import CASES
from bench.devices import TIMING_PLANS, NumpyDevice
from bench.report import format_table
from bench.throughput import CHECKED_ROWS, measure, measure_all, sample_rows


@pt.jit
def subtracting_add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: pl.constexpr):
    offsets = pl.program_id(axis=0) * BLOCK_SIZE + pl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    pl.store(out_ptr + offsets, pl.load(x_ptr + offsets, mask=mask) - pl.load(y_ptr + offsets, mask=mask), mask=mask)


@pt.jit
def idle_add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: pl.constexpr):
    pass


@pt.jit
def unfinished_softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: pl.constexpr):
    row = pl.program_id(0)
    cols = pl.arange(0, BLOCK_SIZE)
    pl.store(out_ptr + row * out_row_stride + cols, pl.exp(undefined_name), mask=cols < n_cols)  # noqa: F821


def kernels_with(**replaced):
    """The real kernel module with some kernels replaced, as the harness takes it (every
    kernel, the ones it loads from the examples when asked included)."""
    return SimpleNamespace(**{**{name: getattr(polytile_kernels, name) for name in dir(polytile_kernels)},
                              **replaced})


class RecordingDevice(NumpyDevice):
    """The interpreter's device, remembering every call it was asked to time."""

    def __init__(self):
        self.timed = 0

    def time_ms(self, fn, plan):
        self.timed += 1
        return super().time_ms(fn, plan)


def measure_vector_add(lib):
    device = RecordingDevice()
    case = CASES["vector_add"]
    size = case.sizes["tiny"][0]
    problem = case.make(device, size, "f32")
    return measure(case, problem, "f32", size, lib, device, TIMING_PLANS["tiny"]), device


def test_a_right_kernel_is_checked_then_timed():
    result, device = measure_vector_add(polytile_kernels)
    assert result.status == "ok"
    assert device.timed == 1
    assert result.samples == 3 and result.ms > 0 and result.value > 0


def test_a_wrong_kernel_is_reported_and_not_timed():
    result, device = measure_vector_add(kernels_with(add_kernel=subtracting_add_kernel))
    assert result.status == "mismatch"
    assert device.timed == 0
    assert result.value is None and result.ms is None and result.samples == 0
    assert result.detail.startswith("output 'out' differs from NumPy at ")
    assert "first at index (" in result.detail and "(rtol 0.0001, atol 1e-05)" in result.detail


def test_a_kernel_that_writes_nothing_cannot_pass_on_what_another_wrote():
    # The right kernel runs first and leaves a right answer in the shared output.
    device = RecordingDevice()
    case = CASES["vector_add"]
    size = case.sizes["tiny"][0]
    problem = case.make(device, size, "f32")
    plan = TIMING_PLANS["tiny"]
    assert measure(case, problem, "f32", size, polytile_kernels, device, plan).status == "ok"
    result = measure(case, problem, "f32", size, kernels_with(add_kernel=idle_add_kernel), device, plan)
    assert result.status == "mismatch"
    assert device.timed == 1


def test_a_kernel_that_does_not_compile_is_an_error_row():
    report = bench.run("memory", target="interp", sizes="tiny", kernels=["softmax"],
                       compilers={"polytile": kernels_with(softmax_kernel=unfinished_softmax_kernel)})
    f32 = [row for row in report.rows if row.dtype == "f32"]
    assert f32 and all(row.results["polytile"].status == "error" for row in f32)
    detail = f32[0].results["polytile"].detail
    assert "undefined_name" in detail and "test_bench_checks.py" in detail
    assert report.failed()


def test_the_table_and_the_exit_status_report_a_mismatch(tmp_path, monkeypatch, capsys):
    wrong = kernels_with(add_kernel=subtracting_add_kernel)
    report = bench.run("memory", target="interp", sizes="tiny", kernels=["vector_add"], compilers={"polytile": wrong})
    (row,) = [row for row in report.rows if row.dtype == "f32"]
    assert row.results["polytile"].status == "mismatch"
    assert report.failed()
    table = format_table(report)
    line = next(line for line in table.splitlines() if line.startswith("vector_add") and " f32 " in line)
    assert "MISMATCH [1]" in line and "GB/s" not in line
    assert "[1] vector_add f32 2^12 polytile: mismatch: output 'out' differs from NumPy" in table
    assert report.to_json()["rows"][0]["results"]["polytile"]["status"] == "mismatch"


def test_the_launch_mode_checks_before_timing():
    from bench.overhead import run_launch

    rows = run_launch(RecordingDevice(), {"polytile": kernels_with(add_kernel=subtracting_add_kernel)}, "tiny")
    assert [row.kernel for row in rows] == ["launch, tuple grid", "launch, callable grid"]
    for row in rows:
        assert row.results["polytile"].status == "mismatch"
        assert row.results["polytile"].value is None


def test_row_sample_covers_the_first_and_last_rows():
    assert sample_rows(CHECKED_ROWS) is None
    rows = sample_rows(100_000)
    assert len(rows) <= CHECKED_ROWS
    assert rows[0] == 0 and rows[-1] == 99_999
    assert np.all(np.diff(rows) > 0)


def test_a_mismatch_in_a_sampled_row_names_the_real_row():
    device = NumpyDevice()
    case = CASES["row_sum"]
    size = (2000, 8)
    problem = case.make(device, size, "f32")
    case.launch(polytile_kernels, problem)
    problem.out[1999] += 1.0
    from bench.throughput import check

    assert "first at index (1999,)" in check(case, problem, "f32", device)


def test_the_launch_mode_times_in_fresh_processes_each_with_an_empty_cache(monkeypatch):
    import os

    from polytile import config

    from bench import overhead

    caches = []
    real_run_child = overhead._run_child

    def recording(args, env, cpu=None):
        cache = env[config.SETTINGS["cache_dir"].env[0]]
        caches.append((cache, os.path.exists(cache)))
        return real_run_child(args, env, cpu=cpu)

    monkeypatch.setattr(overhead, "_run_child", recording)
    rows = overhead.run_launch(RecordingDevice(), {"polytile": polytile_kernels}, "tiny", "interp", processes=3)
    assert len(caches) == 3 and len({cache for cache, _ in caches}) == 3
    assert not any(existed for _, existed in caches)  # each process starts from an empty cache
    for row in rows:
        result = row.results["polytile"]
        assert result.status == "ok" and result.samples == 3 and len(result.processes) == 3
        assert result.low <= result.value <= result.high
        assert sorted([p["us"] for p in result.processes])[1] == result.value  # the median process
        for process in result.processes:  # every round kept, the process's value their median
            assert len(process["rounds"]) == overhead.LAUNCH_ROUNDS
            assert sorted(process["rounds"])[overhead.LAUNCH_ROUNDS // 2] == pytest.approx(process["us"], abs=1e-3)
    from bench.report import Report

    table = format_table(Report({}, rows))
    assert f"({rows[0].results['polytile'].low:.3g}-" in table
    assert "launch: the median of fresh processes" in table


def test_the_launch_mode_needs_a_module_it_can_import_in_a_child():
    from bench.overhead import run_launch

    rows = run_launch(RecordingDevice(), {"polytile": kernels_with()}, "tiny", "interp", processes=1)
    for row in rows:
        assert row.results["polytile"].status == "error"
        assert "pass a module" in row.results["polytile"].detail


def test_processes_must_be_a_positive_number(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["launch", "--target", "interp", "--processes", "0"])
    assert exit_info.value.code == 2
    assert "must be a whole number of processes, 1 or more, not '0'" in capsys.readouterr().err


def test_the_launch_mode_says_whether_every_timed_launch_was_the_native_dispatchers():
    from bench.overhead import _process_summary

    native = {"us": 4.7, "native": 51000, "python": 0, "why": {}}
    slow = {"us": 13.4, "native": 0, "python": 51000, "why": {"native launcher pending": 51000}}
    assert _process_summary([{"us": 400.0}]) == ""  # (the interpreter: no launch counts)
    assert _process_summary([native, native]) == ("every timed launch of every process went through the native "
                                                   "dispatcher (2 processes)")
    assert _process_summary([slow, native]) == ("1 of 2 processes made timed launches through Python: 51000 native "
                                                "launcher pending")


def test_the_children_find_polytiles_bytecode_even_where_python_writes_none(monkeypatch, tmp_path):
    """With PYTHONDONTWRITEBYTECODE set, each child would compile polytile's sources again
    (counted in its compile and launch times); the harness writes the bytecode first."""
    import importlib.util
    import sys

    import polytile.runtime.cache  # noqa: F401

    from bench import overhead

    module = sys.modules["polytile.runtime.cache"]

    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path))  # a fresh bytecode tree: nothing written yet
    cached = importlib.util.cache_from_source(module.__file__)
    assert cached.startswith(str(tmp_path)) and not os.path.exists(cached)
    overhead.precompile_sources()
    assert os.path.exists(cached)


@pytest.mark.parametrize("name", ["attention", "attention_causal"])
def test_attention_is_checked_on_sampled_query_rows_against_their_own_heads(name):
    """The reference of a sampled query row reads its head's keys and values (the check
    gives it the rows it sampled); a wrong row is found and named by its real index."""
    from bench.throughput import check

    device = NumpyDevice()
    case = CASES[name]
    size = (1, 3, 256, 16)  # 768 query rows: more than are checked, so they are sampled
    problem = case.make(device, size, "f16")
    q, k, v = (problem.arrays[n].astype(np.float64).reshape(3, 256, 16) for n in ("q", "k", "v"))
    scores = q @ np.swapaxes(k, 1, 2) / 4.0
    if name == "attention_causal":
        scores = np.where(np.tril(np.ones((256, 256), bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=2, keepdims=True))
    problem.out[...] = ((weights / weights.sum(axis=2, keepdims=True)) @ v).reshape(768, 16)
    assert check(case, problem, "f16", device) is None
    problem.out[767, 3] += 1.0  # the last row (always sampled), in the last head
    assert "first at index (767, 3)" in check(case, problem, "f16", device)


def test_compilers_are_timed_in_turn_and_each_rate_is_the_median_of_its_rounds():
    # Rounds interleave the compilers (a GPU's clocks drift during a long run: whoever
    # ran last would pay for it); a wrong kernel is checked out before any round.
    class ScriptedDevice(NumpyDevice):
        def __init__(self):
            self.order, self.times = [], iter([1.0, 2.0, 5.0, 2.0, 2.0, 2.0])

        def time_ms(self, fn, plan):
            self.order.append(fn)
            return [next(self.times)] * 2

    device = ScriptedDevice()
    case = CASES["vector_add"]
    size = case.sizes["tiny"][0]
    problem = case.make(device, size, "f32")
    plan = dataclasses.replace(TIMING_PLANS["tiny"], rounds=3)
    libs = {"polytile": polytile_kernels, "other": kernels_with(), "wrong": kernels_with(add_kernel=subtracting_add_kernel)}
    results = measure_all(case, problem, "f32", size, libs, device, plan)
    assert results["wrong"].status == "mismatch" and len(device.order) == 6
    polytile, other = results["polytile"], results["other"]
    # Rounds of polytile: 1, 5, 2 ms; of the other: 2, 2, 2 ms.
    assert polytile.ms == 2.0 and other.ms == 2.0 and polytile.samples == other.samples == 6
    assert polytile.rounds == [case.rate(size, "f32", ms) for ms in (1.0, 5.0, 2.0)]
