"""pl.dot_scaled and bf16 dots compiled for NVIDIA targets and run on the CTA simulator
(tests/gpu/llvm_cta.py) against NumPy: the fp4 unpacking, the fp8 conversions (sm_90's
``cvt`` instructions, sm_80's integer code), the scales' broadcasts through the GPU
layouts, and the bf16 tensor-core operands (wgmma on sm_90a, mma.sync's bf16 fragments on
sm_80), without a GPU (tests/language/test_dot_scaled.py runs them on devices)."""

from __future__ import annotations

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile import reinterpret
from polytile.compiler import compile_module

from .language_tests import language_tests
from .llvm_cta import run_kernel

pytest.importorskip("polytile_nvidia")

test_dot_scaled = language_tests("test_dot_scaled")


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("fa, fb, scale_a, scale_b", [("e5m2", "bf16", True, False), ("e2m1", "e4m3", True, True),
                                                      ("fp16", "e5m2", False, True)])
def test_dot_scaled_on_the_simulator(arch, fa, fb, scale_a, scale_b):
    m, n, k = 32, 64, 64
    rng = np.random.default_rng(0)
    a_shape = (m, k // 2 if fa == "e2m1" else k)
    b_shape = (k // 2 if fb == "e2m1" else k, n)
    a, b = test_dot_scaled.operand(rng, fa, a_shape), test_dot_scaled.operand(rng, fb, b_shape)
    sa = rng.integers(118, 136, (m, k // 32), dtype=np.uint8) if scale_a else None
    sb = rng.integers(118, 136, (n, k // 32), dtype=np.uint8) if scale_b else None
    out = np.zeros((m, n), np.float32)
    wrapped = [reinterpret(x, pl.bfloat16) if f == "bf16" else x for x, f in ((a, fa), (b, fb))]
    module = test_dot_scaled.dot_scaled_kernel.lower(
        wrapped[0], sa, wrapped[1], sb, None, out, M=m, N=n, K=k, FA=fa, FB=fb, A_SHAPE=a_shape, B_SHAPE=b_shape,
        A_K_PACK=True, B_K_PACK=True, FAST=False)
    artifacts = compile_module(module, f"nvidia:{arch}", num_warps=4).context.artifacts
    run_kernel(artifacts, [x for x in (a, sa, b, sb, out) if x is not None], 4)
    test_dot_scaled.assert_close(out, test_dot_scaled.reference(a, sa, fa, b, sb, fb))


@pt.jit
def bf16_dot_kernel(a_ptr, b_ptr, c_ptr, M: pl.constexpr, N: pl.constexpr, K: pl.constexpr):
    a = pl.load(a_ptr + pl.arange(0, M)[:, None] * K + pl.arange(0, K)[None, :]).to(pl.bfloat16)
    b = pl.load(b_ptr + pl.arange(0, K)[:, None] * N + pl.arange(0, N)[None, :]).to(pl.bfloat16)
    pl.store(c_ptr + pl.arange(0, M)[:, None] * N + pl.arange(0, N)[None, :], pl.dot(a, b))


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_bf16_dot_on_the_simulator(arch):
    # mma.sync's bf16 fragments are f16's (the simulator once read them as neither).
    rng = np.random.default_rng(1)
    a = rng.integers(-4, 5, (32, 64)).astype(np.float32)
    b = rng.integers(-4, 5, (64, 64)).astype(np.float32)
    c = np.zeros((32, 64), np.float32)
    module = bf16_dot_kernel.lower(a, b, c, M=32, N=64, K=64)
    run_kernel(compile_module(module, f"nvidia:{arch}", num_warps=4).context.artifacts, [a, b, c], 4)
    np.testing.assert_array_equal(c, a @ b)
