"""pl.flip, pl.sort and pl.topk (language/sorting.py) against NumPy, along either
dimension, ascending and descending, for floats and integers of every width."""

from __future__ import annotations

import numpy as np
import pytest

import polytile.language as pl
from polytile.errors import CompilationError
from polytile.runtime import jit


@jit
def reorder_kernel(x_ptr, sorted_ptr, flipped_ptr, top_ptr, M: pl.constexpr, N: pl.constexpr, DIM: pl.constexpr,
                   DESCENDING: pl.constexpr, K: pl.constexpr):
    offsets = pl.arange(0, M)[:, None] * N + pl.arange(0, N)[None, :]
    x = pl.load(x_ptr + offsets)
    pl.store(sorted_ptr + offsets, pl.sort(x, dim=DIM, descending=DESCENDING))
    pl.store(flipped_ptr + offsets, pl.flip(x, dim=DIM))
    pl.store(top_ptr + pl.arange(0, M)[:, None] * K + pl.arange(0, K)[None, :], pl.topk(x, K))


# Every dtype once in each direction; the shapes and dims across them (each case compiles
# for every GPU arch in the suite's compile run, so the product would cost minutes).
CASES = [(np.float32, (4, 8), 2, 1, False), (np.float32, (2, 32), 8, 0, True), (np.float16, (4, 8), 4, -1, True),
         (np.int32, (1, 16), 16, 1, True), (np.int8, (8, 1), 1, 0, False), (np.int8, (2, 32), 8, 1, True),
         (np.uint8, (4, 8), 2, 0, True), (np.int64, (2, 32), 32, -1, False)]


@pytest.mark.parametrize("dtype, shape, k, dim, descending", CASES)
def test_sort_flip_and_topk_match_numpy(target, dtype, shape, k, dim, descending):
    rng = np.random.default_rng(sum(shape) + k)
    low = 0 if np.dtype(dtype).kind == "u" else -50
    x = rng.integers(low, 100, shape).astype(dtype)  # repeats: ties are sorted too
    out_sorted, out_flipped = np.zeros_like(x), np.zeros_like(x)
    out_top = np.zeros((shape[0], k), dtype)
    reorder_kernel[(1,)](x, out_sorted, out_flipped, out_top, M=shape[0], N=shape[1], DIM=dim,
                         DESCENDING=descending, K=k, target=target)
    expected = np.sort(x, axis=dim)
    np.testing.assert_array_equal(out_sorted, np.flip(expected, axis=dim) if descending else expected)
    np.testing.assert_array_equal(out_flipped, np.flip(x, axis=dim))
    np.testing.assert_array_equal(out_top, np.flip(np.sort(x, axis=1), axis=1)[:, :k])


def test_every_combination_on_the_interpreter():
    # The product the GPU compile run would take minutes for: dtypes, shapes, dims, orders.
    for dtype in (np.float32, np.float16, np.int32, np.int8, np.uint8, np.int64):
        for shape, k in (((4, 8), 2), ((2, 32), 8), ((1, 16), 16), ((8, 1), 1)):
            for dim in (0, 1):
                for descending in (False, True):
                    rng = np.random.default_rng(sum(shape))
                    x = rng.integers(0 if np.dtype(dtype).kind == "u" else -50, 100, shape).astype(dtype)
                    got = [np.zeros_like(x), np.zeros_like(x), np.zeros((shape[0], k), dtype)]
                    reorder_kernel[(1,)](x, *got, M=shape[0], N=shape[1], DIM=dim, DESCENDING=descending, K=k)
                    expected = np.sort(x, axis=dim)
                    np.testing.assert_array_equal(got[0], np.flip(expected, axis=dim) if descending else expected)
                    np.testing.assert_array_equal(got[1], np.flip(x, axis=dim))
                    np.testing.assert_array_equal(got[2], np.flip(np.sort(x, axis=1), axis=1)[:, :k])


@jit
def sort_1d_kernel(x_ptr, N: pl.constexpr):
    offsets = pl.arange(0, N)
    pl.store(x_ptr + offsets, pl.sort(pl.load(x_ptr + offsets)))


def test_sort_of_floats_with_infinities_and_signed_zeros(target):
    x = np.array([3.5, -np.inf, 0.0, np.inf, -2.0, 1e-30, -0.0, 7.0], np.float32)
    expected = np.sort(x)
    sort_1d_kernel[(1,)](x, N=8, target=target)
    np.testing.assert_array_equal(x, expected)


@jit
def bad_reorder_kernel(x_ptr, WHAT: pl.constexpr):
    x = pl.load(x_ptr + pl.arange(0, 8))
    if WHAT == "dim":
        pl.sort(x, dim=2)
    elif WHAT == "k":
        pl.topk(x, 16)
    elif WHAT == "k-power":
        pl.topk(x, 3)
    elif WHAT == "descending":
        pl.sort(x, descending=x)


@pytest.mark.parametrize("what, message", [
    ("dim", "pl.sort: dim=2 is not a dimension of a tensor of rank 1"),
    ("k", "pl.topk: k=16 is not between 1 and the dimension's size 8"),
    ("k-power", "pl.topk's k needs a power-of-two dimension, got 3"),
    ("descending", "pl.sort: descending must be a compile-time bool"),
])
def test_reorder_errors(what, message):
    with pytest.raises(CompilationError, match=message):
        bad_reorder_kernel[(1,)](np.zeros(8, np.float32), WHAT=what)
