"""The epilogue's layout conversion of 16-bit MMA accumulators stores whole 8x8 matrices
with ``stmatrix.x4`` on sm_90 and later (polytile_nvidia.mma.store_rows), run by the CTA
simulator (tests/gpu/llvm_cta.py) against NumPy: every element lands where the loads
after the barrier look for it.  sm_80 has no stmatrix and keeps plain stores."""

from __future__ import annotations

import re

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.compiler import compile_module
from polytile.gpu.linear_layout import LinearLayout

from tests.gpu.llvm_cta import run_kernel

pytest.importorskip("polytile_nvidia")

from polytile_nvidia.mma import stmatrix_plan  # noqa: E402
from polytile.gpu.lowering.shared import PaddedPlacement  # noqa: E402


@pt.jit
def epilogue_kernel(a_ptr, b_ptr, c_ptr, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr,
                    OUT: pl.constexpr):
    offs_m, offs_n, offs_k = pl.arange(0, BM), pl.arange(0, BN), pl.arange(0, BK)
    a = pl.load(a_ptr + offs_m[:, None] * BK + offs_k[None, :])
    b = pl.load(b_ptr + offs_k[:, None] * BN + offs_n[None, :])
    acc = pl.dot(a, b)
    out_ptr = c_ptr.to(pl.pointer_type(OUT))  # c holds the results' bits
    pl.store(out_ptr + offs_m[:, None] * BN + offs_n[None, :], acc.to(OUT))


def _run(arch: str, m: int, n: int, k: int, num_warps: int, out: str) -> tuple[np.ndarray, np.ndarray, str]:
    rng = np.random.default_rng(m * n + k + num_warps)
    a = rng.integers(-3, 4, (m, k)).astype(np.float16)
    b = rng.integers(-3, 4, (k, n)).astype(np.float16)
    c = np.zeros((m, n), np.uint16)  # the 16-bit results as bits
    dtype = {"f16": pl.float16, "bf16": pl.bfloat16}[out]
    module = epilogue_kernel.lower(a, b, c, BM=m, BN=n, BK=k, OUT=dtype)
    artifacts = compile_module(module, f"nvidia:{arch}", num_warps=num_warps).context.artifacts
    run_kernel(artifacts, [a, b, c], num_warps)
    expected = a.astype(np.float64) @ b.astype(np.float64)  # small integers: exact in both types
    if out == "f16":
        got = c.view(np.float16).astype(np.float64)
    else:
        got = (c.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return got, expected, artifacts["ptx"]


@pytest.mark.parametrize("out", ["f16", "bf16"])
@pytest.mark.parametrize("arch, m, n, k, num_warps", [
    ("sm_90a", 64, 64, 32, 4),     # wgmma, one warpgroup
    ("sm_90a", 128, 128, 16, 8),   # wgmma, two warpgroups
    ("sm_90", 64, 64, 32, 4),      # mma.sync accumulators: the same fragments
    ("sm_90", 32, 64, 16, 2),
])
def test_accumulators_are_stored_as_matrices_and_read_back_right(arch, m, n, k, num_warps, out):
    got, expected, ptx = _run(arch, m, n, k, num_warps, out)
    np.testing.assert_array_equal(got, expected)
    assert re.search(r"stmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16", ptx)
    # Pairs of f32 -> 16-bit conversions are one instruction whose result stmatrix takes.
    assert re.search(rf"cvt\.rn\.{out}x2\.f32", ptx) and not re.search(rf"cvt\.rn\.{out}\.f32", ptx)
    # No 16- or 32-bit shared stores of the tile remain: stmatrix moved all of it.
    assert not re.search(r"st\.shared\.(b16|u16|f16|b32|u32|f32)\b", ptx)


def test_sm_80_has_no_stmatrix_and_stores_plainly():
    got, expected, ptx = _run("sm_80", 64, 64, 32, 4, "f16")
    np.testing.assert_array_equal(got, expected)
    assert "stmatrix" not in ptx


def test_the_plan_refuses_what_stmatrix_cannot_store():
    # Registers that are not 8x8 fragments (a blocked layout: 4 consecutive elements a thread).
    blocked = LinearLayout((64, 64), register=((0, 1), (0, 2)), lane=((0, 4), (0, 8), (0, 16), (0, 32), (1, 0)),
                           warp=((2, 0), (4, 0)))
    placement = PaddedPlacement((64, 64), 1, (0,), 8)
    assert stmatrix_plan(blocked, placement, 16) is None
    fragment = LinearLayout((64, 64), register=((0, 1), (8, 0), (0, 8), (0, 16)),
                            lane=((0, 2), (0, 4), (1, 0), (2, 0), (4, 0)), warp=((16, 0), (32, 0)))
    assert stmatrix_plan(fragment, placement, 16) is not None
    assert stmatrix_plan(fragment, placement, 32) is None                            # only 16-bit elements
    assert stmatrix_plan(fragment, PaddedPlacement((64, 64), 1, (0,), 2), 16) is None  # rows not 16-byte aligned
    assert stmatrix_plan(fragment, PaddedPlacement((64, 64), 0, (1,), 8), 16) is None  # rows along the other dim
