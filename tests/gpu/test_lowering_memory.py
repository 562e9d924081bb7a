"""Masked loads and stores (core/polytile/gpu/lowering/memory.py) through the NVIDIA
pipeline, run on the thread-block simulator (tests/gpu/llvm_cta.py): the predicated
vector accesses read only the unmasked elements, keep ``other`` elsewhere, and write
only where the mask holds."""

from __future__ import annotations

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.compiler import compile_module

from .llvm_cta import run_kernel

pytest.importorskip("polytile_nvidia")

NUM_WARPS = 2


@pt.jit
def masked_shift(x, out, n, BLOCK: pl.constexpr):
    cols = pl.arange(0, BLOCK)
    row = pl.load(x + cols, mask=cols < n, other=-3)
    pl.store(out + cols, row + 1, mask=cols < BLOCK - 16)


def run(kernel, args, **meta) -> str:
    artifacts = compile_module(kernel.lower(*args, **meta), "nvidia:sm_90a", num_warps=NUM_WARPS).context.artifacts
    run_kernel(artifacts, args, NUM_WARPS)
    return artifacts["llvm_ir"]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int8, np.float64])
@pytest.mark.parametrize("n", [96, 37])  # a multiple of the vectors, and one inside a vector
def test_masked_loads_keep_other_and_masked_stores_skip(dtype, n):
    block = 256
    x = (np.arange(block) % 50).astype(dtype)
    out = np.full(block, 7, dtype)
    llvm_ir = run(masked_shift, [x, out, n], BLOCK=block)
    expected = np.where(np.arange(block) < n, x, -3).astype(dtype) + dtype(1)
    np.testing.assert_array_equal(out[:block - 16], expected[:block - 16])
    np.testing.assert_array_equal(out[block - 16:], 7)
    assert "ld.global" in llvm_ir and "llvm.masked" not in llvm_ir
