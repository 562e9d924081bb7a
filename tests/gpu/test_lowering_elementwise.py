"""Elementwise lowering (core/polytile/gpu/lowering/elementwise.py): registers that axis
info proves equal are computed once, and the kernel still computes the right values
(run on the thread-block simulator, tests/gpu/llvm_cta.py)."""

from __future__ import annotations

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.compiler import compile_module

from .llvm_cta import run_kernel

pytest.importorskip("polytile_nvidia")

NUM_WARPS = 4
BLOCK = 1024


@pt.jit
def where_below(x, out, n, BLOCK: pl.constexpr):
    cols = pl.arange(0, BLOCK)
    pl.store(out + cols, pl.where(cols < n, pl.load(x + cols), -1.0))


def compile_and_run(n: int) -> str:
    """The kernel's LLVM IR, after checking its output against NumPy."""
    x = np.arange(BLOCK, dtype=np.float32)
    out = np.zeros(BLOCK, np.float32)
    module = where_below.lower(x, out, n, BLOCK=BLOCK)
    artifacts = compile_module(module, "nvidia:sm_90a", num_warps=NUM_WARPS).context.artifacts
    run_kernel(artifacts, [x, out, n], NUM_WARPS)
    np.testing.assert_array_equal(out, np.where(np.arange(BLOCK) < n, x, -1.0))
    return artifacts["llvm_ir"]


def compares(llvm_ir: str) -> int:
    return llvm_ir.count("icmp slt")


def test_a_compare_constant_over_a_thread_run_is_made_once_per_run():
    # n a multiple of 16: cols < n is constant over each thread's runs of 4 f32 registers
    # (8 registers a thread: 2 compares); n = 523 proves nothing: one compare a register.
    proven = compile_and_run(528)
    unknown = compile_and_run(523)
    assert compares(proven) == 2
    assert compares(unknown) == 8


@pt.jit
def rows_below(x, out, n, ROWS: pl.constexpr, COLS: pl.constexpr):
    rows = pl.arange(0, ROWS)[:, None]
    cols = pl.arange(0, COLS)[None, :]
    offsets = rows * COLS + cols
    pl.store(out + offsets, pl.load(x + offsets, mask=rows < n, other=-1.0))


def test_a_compare_constant_over_rows_is_made_once_per_block_of_rows():
    # A 64 x 128 f16 tile on 4 warps: each thread holds one run of 8 columns in 8 rows,
    # 8 rows apart.  With n a multiple of 16, rows r and r + 8 of a block of 16 compare
    # alike: 4 compares, not 8 (the repetitions' register bits stay inside the block).
    rows, cols = 64, 128
    x = np.arange(rows * cols, dtype=np.float16).reshape(rows, cols)
    counts = {}
    for n in (48, 45):
        out = np.zeros_like(x)
        module = rows_below.lower(x, out, n, ROWS=rows, COLS=cols)
        artifacts = compile_module(module, "nvidia:sm_90a", num_warps=NUM_WARPS).context.artifacts
        run_kernel(artifacts, [x, out, n], NUM_WARPS)
        np.testing.assert_array_equal(out, np.where(np.arange(rows)[:, None] < n, x, -1.0))
        counts[n] = compares(artifacts["llvm_ir"])
    assert counts == {48: 4, 45: 8}
