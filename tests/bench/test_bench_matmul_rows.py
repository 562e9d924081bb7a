"""The fp8, autotuned and persistent matmul rows, checked without a GPU.

NumPy holds no fp8, so the fp8 row is skipped on the interpreter.  Its launch code and
B's layout (an (N, K) array, K-major, given to the kernel as B's strides) are run here in float16 on
the interpreter, for polytile's kernel and Triton's; and the very launch the row makes on
a GPU (its arguments, blocks and options, recorded) is compiled for sm_90a with fp8
operands, down to a cubin.  The autotuned row runs on the interpreter, and every config
it tunes over is compiled for sm_90a; so is the persistent row's launch.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

import bench
import bench.polytile_kernels as polytile_kernels
from bench.cases import CASES, Problem
from bench.devices import NumpyDevice
from bench.matmul_configs import AUTOTUNE_CONFIGS
from bench.throughput import check
from polytile import config
from polytile.ir import types as t
from tests.bench.loading import triton_kernels_on_polytile


class Recorder:
    """A kernel module's ``matmul_kernel``, recording its launches instead of running them."""

    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append((grid, args, kwargs))


@pytest.mark.parametrize("compiler", ["polytile", "triton"])
@pytest.mark.parametrize("size", [(40, 24, 50), (96, 64, 80)])
def test_the_fp8_rows_layout_computes_the_product_in_float16_on_the_interpreter(compiler, size):
    device, case = NumpyDevice(), CASES["matmul_fp8"]
    lib = polytile_kernels if compiler == "polytile" else triton_kernels_on_polytile()
    problem = case.make(device, size, "f16")
    m, n, k = size
    assert problem.b.shape == (n, k) and problem.b.flags.c_contiguous  # B K-major
    device.fill_nan(problem.c)
    case.launch(lib, problem)
    assert check(case, problem, "f16", device) is None
    want = problem.a.astype(np.float64) @ problem.b.astype(np.float64).T
    np.testing.assert_allclose(problem.c, want, rtol=1e-2, atol=1e-2)


def recorded_fp8_launch(size):
    recorder = Recorder()
    case = CASES["matmul_fp8"]
    case.launch(SimpleNamespace(matmul_kernel=recorder), case.make(NumpyDevice(), size, "f16"))
    (launch,) = recorder.launches
    return launch


def compile_for_sm90a(args, kwargs, element_types, kernel=None):
    """``kernel`` (default ``matmul_kernel``) compiled for sm_90a as a launch with ``args``
    and ``kwargs`` would compile it (arrays as pointers to ``element_types[name]``, ints
    specialized as the runtime does: equal to 1, divisible by 16, or neither), without
    launching."""
    kernel = kernel or polytile_kernels.matmul_kernel
    names = [p for p in kernel.param_names if p not in kernel.constexpr_names()]
    types, hints = {}, []
    for name, value in zip(names, args, strict=True):
        if isinstance(value, np.ndarray):
            types[name], hint = t.PointerType(element_types[name]), "D"
        else:
            types[name], hint = t.i32, "1" if value == 1 else "" if value % 16 else "D"
        hints.append(hint)
    options = {k: v for k, v in kwargs.items() if k in ("num_warps", "num_stages")}
    constexprs = {k: v for k, v in kwargs.items() if k not in options}
    with config.override(cache=False):  # compiled in this process: its PTX is at hand
        return kernel.compile(types, constexprs, target="nvidia:sm_90a", options=options, hints=tuple(hints))


def test_the_fp8_row_compiles_to_fp8_wgmma_on_sm_90a():
    grid, args, kwargs = recorded_fp8_launch((4096, 4096, 4096))
    assert grid == (32 * 16,)  # 4096/128 block rows, 4096/256 block columns
    assert kwargs == {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 8, "num_warps": 8, "num_stages": 3}
    assert args[8:10] == (1, 4096)  # stride_bk, stride_bn: B K-major
    f8 = {"a_ptr": t.f8e4m3, "b_ptr": t.f8e4m3, "c_ptr": t.f16}
    compiled = compile_for_sm90a(args, kwargs, f8)
    ptx = compiled.result.context.artifacts["ptx"]
    wgmma = "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3"  # fp8 operands, f32 accumulator
    assert set(re.findall(r"wgmma\.mma_async\.[\w.]+", ptx)) == {wgmma}
    assert compiled.binaries["cubin"][:4] == b"\x7fELF"


def test_the_persistent_row_prefetches_the_next_tile_during_the_store_on_sm_90a():
    # The bench's launch on an H100 (132 SMs): 128x256x64 tiles, 8 warps, 3 stages.
    recorder = Recorder()
    problem = Problem({"a": None, "b": None, "c": None},
                      {"M": 4096, "N": 4096, "K": 4096, "stride_am": 4096, "stride_bk": 4096, "stride_cm": 4096,
                       "programs": 132}, outputs=("c",))
    CASES["matmul_persistent"].launch(SimpleNamespace(persistent_matmul_kernel=recorder), problem)
    (grid, args, kwargs), = recorder.launches
    assert grid == (132,) and kwargs["NUM_PROGRAMS"] == 132 and kwargs["num_warps"] == 8
    a = np.zeros((64, 64), np.float16)
    args = (a, a, a, *args[3:])
    f16 = {"a_ptr": t.f16, "b_ptr": t.f16, "c_ptr": t.f16}
    compiled = compile_for_sm90a(args, kwargs, f16, polytile_kernels.persistent_matmul_kernel)
    assert compiled.result.context.statistics.get("pipeline-loops.prefetched-across") == 1
    assert "wgmma.mma_async" in compiled.result.context.artifacts["ptx"]
    assert compiled.binaries["cubin"][:4] == b"\x7fELF"


@pytest.mark.parametrize("config", AUTOTUNE_CONFIGS, ids=lambda c: "x".join(str(v) for v in c[0].values()))
def test_every_autotuned_config_compiles_for_sm_90a(config):
    meta, warps, stages = config
    a, b, c = (np.zeros((64, 64), np.float16) for _ in range(3))
    args = (a, b, c, 4096, 4096, 4096, 4096, 1, 4096, 1, 4096, 1)
    f16 = {"a_ptr": t.f16, "b_ptr": t.f16, "c_ptr": t.f16}
    compiled = compile_for_sm90a(args, {**meta, "num_warps": warps, "num_stages": stages}, f16)
    assert "wgmma.mma_async" in compiled.result.context.artifacts["ptx"]
    assert compiled.binaries["cubin"][:4] == b"\x7fELF"


def test_the_autotuned_row_says_which_config_it_chose():
    report = bench.run("matmul", target="interp", sizes="tiny", kernels=["matmul_autotuned"])
    (row,) = report.rows
    result = row.results["polytile"]
    assert result.status == "ok", result.detail
    chosen = polytile_kernels.matmul_kernel_autotuned.best_config
    assert chosen in polytile_kernels.matmul_kernel_autotuned.configs
    assert result.detail == f"tuned: {chosen}"
    assert len(polytile_kernels.matmul_kernel_autotuned.configs_timings) == len(AUTOTUNE_CONFIGS)


def test_the_fp8_row_is_skipped_on_the_interpreter_saying_why():
    report = bench.run("matmul", target="interp", sizes="tiny", kernels=["matmul_fp8"])
    (row,) = report.rows
    assert row.dtype == "e4m3"
    assert row.results["polytile"].status == "skipped"
    assert row.results["polytile"].detail == "numpy arrays cannot hold e4m3 (the interp target)"


def test_the_fp8_row_is_checked_with_its_own_tolerance():
    # There is no default tolerance for fp8: the case's own must be found without one
    # (a GPU run once failed every fp8 check looking the default up first).
    fp8 = CASES["matmul_fp8"]
    assert fp8.tolerance_for("e4m3") == (2e-2, 4.0)
    matmul = CASES["matmul"]
    assert matmul.tolerance_for("f16") == (1e-2, 1e-2)
