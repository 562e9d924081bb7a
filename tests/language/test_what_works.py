"""What docs/language.md once listed as interpreter-only compiles for every backend's
pipeline and runs on the interpreter: scans, join/split/cat, device_print/assert,
debug_barrier, block pointers, a descending run-time range."""

from __future__ import annotations

import numpy as np
import pytest

import polytile.language as pl
from polytile.compiler import compile_module
from polytile.runtime import jit


@jit
def once_interpreter_only(x_ptr, y_ptr, n, PRINT: pl.constexpr):
    offs = pl.arange(0, 16)
    x = pl.load(x_ptr + offs)
    running = pl.cumsum(x, 0)
    a, b = pl.split(pl.join(x, running))
    both = pl.cat(a, b, can_reorder=True)
    if PRINT:
        pl.device_print("both", both)
    pl.device_assert(x == x, "x is NaN")
    pl.debug_barrier()
    block = pl.make_block_ptr(y_ptr, (n,), (1,), (0,), (32,), (0,))
    pl.store(block, both * 0.0 + pl.sum(both, 0), boundary_check=(0,))
    for i in range(n - 1, 31, -1):  # descending, run-time bounds
        pl.store(y_ptr + i, i * 1.0)


@pytest.mark.parametrize("target", ["nvidia:sm_80", "nvidia:sm_90a", "amd:gfx942"])
def test_they_compile_for_every_backend(target):
    pytest.importorskip("polytile_amd" if target.startswith("amd") else "polytile_nvidia")
    x = np.zeros(40, np.float32)
    result = compile_module(once_interpreter_only.lower(x, x, 40, PRINT=True), target, num_warps=4)
    assert result.artifacts.get("ptx" if target.startswith("nvidia") else "hsaco")


def test_they_run_on_the_interpreter():
    x = np.arange(16, dtype=np.float32)
    y = np.zeros(40, np.float32)
    once_interpreter_only[(1,)](x, y, 40, PRINT=False, target="interp")
    total = x.sum() + np.cumsum(x).sum()
    np.testing.assert_array_equal(y[:32], np.full(32, total, np.float32))
    np.testing.assert_array_equal(y[32:], np.arange(32, 40, dtype=np.float32))
