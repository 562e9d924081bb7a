"""pl.load / pl.store through tiles of pointers: masks, `other`, cache and eviction hints,
on every dtype and on masked (non power of two) shapes.  Atomics: test_atomics.py;
block pointers: test_block_pointers.py."""

import numpy as np
import pytest

import polytile.language as pl
from polytile import next_power_of_2
from polytile.runtime import jit

ALL = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.float16,
       np.float32, np.float64]
SHAPES = [(1, 37), (6, 20)]


@jit
def copy_kernel(x_ptr, out_ptr, M, N, OTHER: pl.constexpr, CACHE: pl.constexpr, EVICT: pl.constexpr,
                BM: pl.constexpr, BN: pl.constexpr):
    rows = pl.arange(0, BM)[:, None]
    cols = pl.arange(0, BN)[None, :]
    inside = (rows < M) & (cols < N)
    # Load the whole block: lanes outside the array take `other` (and read nothing).
    x = pl.load(x_ptr + rows * N + cols, mask=inside, other=OTHER, cache_modifier=CACHE, eviction_policy=EVICT)
    # Store every lane of the block into a buffer of the block's size.
    pl.store(out_ptr + rows * BN + cols, x)
    # And a masked store back into an array of the original size: only the checkerboard.
    pl.store(out_ptr + BM * BN + rows * N + cols, x, mask=inside & ((rows + cols) % 2 == 0))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ALL)
def test_masked_load_with_other_and_masked_store(target, dtype, shape):
    m, n = shape
    bm, bn = next_power_of_2(m), next_power_of_2(n)
    x = (np.arange(m * n).reshape(shape) % 50 + 1).astype(dtype)
    other = True if dtype is np.bool_ else (-1 if np.dtype(dtype).kind != "u" else 9)
    sentinel = np.array(0 if dtype is np.bool_ else 7).astype(dtype)
    out = np.full(bm * bn + m * n, sentinel, dtype)
    copy_kernel[(1,)](x, out, m, n, OTHER=other, CACHE=".cg", EVICT="evict_last", BM=bm, BN=bn, target=target)
    block = np.full((bm, bn), other, dtype)
    block[:m, :n] = x
    np.testing.assert_array_equal(out[:bm * bn].reshape(bm, bn), block)
    checker = (np.arange(m)[:, None] + np.arange(n)[None, :]) % 2 == 0
    np.testing.assert_array_equal(out[bm * bn:].reshape(shape), np.where(checker, x, sentinel))


@pytest.mark.parametrize("cache, evict", [("", ""), (".ca", "evict_first"), (".cg", "evict_last"),
                                          (".cv", "evict_normal")])
def test_cache_and_eviction_hints_keep_values_and_reach_the_ir(target, cache, evict):
    x = np.arange(20, dtype=np.float32)
    out = np.zeros(32 + 20, np.float32)
    copy_kernel[(1,)](x, out, 1, 20, OTHER=0.0, CACHE=cache, EVICT=evict, BM=1, BN=32, target=target)
    np.testing.assert_array_equal(out[:20], x)
    text = str(copy_kernel.lower(x, out, 1, 20, OTHER=0.0, CACHE=cache, EVICT=evict, BM=1, BN=32))
    assert (f'cache = "{cache}"' in text) == bool(cache) and (f'evict = "{evict}"' in text) == bool(evict)


@jit
def scalar_memory_kernel(x_ptr, out_ptr, n):
    # Scalars: a load without a mask, a masked scalar load, and a scalar store.
    first = pl.load(x_ptr)
    last = pl.load(x_ptr + n - 1, mask=n > 0, other=-1.0)
    pl.store(out_ptr, first + last)
    pl.store(out_ptr + 1, last, mask=n > 1)
    # A tile of values broadcast from one pointer, and a scalar value stored to a tile of pointers.
    pl.store(out_ptr + 2 + pl.arange(0, 4), pl.load(x_ptr + pl.arange(0, 4) * 0) * 2)
    pl.store(out_ptr + 6 + pl.arange(0, 2), 5)


@pytest.mark.parametrize("n", [1, 5])
def test_scalar_loads_and_stores(target, n):
    x = np.arange(1, 9, dtype=np.float32)
    out = np.zeros(8, np.float32)
    scalar_memory_kernel[(1,)](x, out, n, target=target)
    assert out.tolist() == [x[0] + x[n - 1], x[n - 1] if n > 1 else 0.0, *[x[0] * 2] * 4, 5.0, 5.0]


@jit
def gather_scatter_kernel(x_ptr, idx_ptr, out_ptr, N: pl.constexpr):
    offs = pl.arange(0, N)
    idx = pl.load(idx_ptr + offs)
    pl.store(out_ptr + idx, pl.load(x_ptr + idx) + 1)  # indirect addressing both ways


def test_gather_and_scatter(target):
    x = np.arange(16, dtype=np.int64) * 10
    idx = np.random.default_rng(0).permutation(16).astype(np.int32)
    out = np.zeros(16, np.int64)
    gather_scatter_kernel[(1,)](x, idx, out, N=16, target=target)
    np.testing.assert_array_equal(out, x + 1)
