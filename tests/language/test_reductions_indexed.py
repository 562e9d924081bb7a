"""argmax / argmin / max(return_indices=True) / xor_sum and the float16 sum, against NumPy."""

import numpy as np
import pytest

import polytile.language as pl
from polytile.runtime import jit


@jit
def arg_kernel(x_ptr, idx_ptr, val_ptr, OP: pl.constexpr, AXIS: pl.constexpr, M: pl.constexpr, N: pl.constexpr):
    offs = pl.arange(0, M)[:, None] * N + pl.arange(0, N)[None, :]
    x = pl.load(x_ptr + offs)
    if OP == "argmax":
        i = pl.argmax(x, AXIS)
        v = pl.max(x, AXIS)
    elif OP == "argmin":
        i = pl.argmin(x, axis=AXIS)
        v = pl.min(x, AXIS)
    elif OP == "max_indices":
        v, i = pl.max(x, AXIS, return_indices=True)
    else:
        v, i = pl.min(x, AXIS, return_indices=True)
    out = pl.arange(0, N if AXIS == 0 else M)
    pl.store(idx_ptr + out, i)
    pl.store(val_ptr + out, v)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint32, np.int64, np.float16, np.float32, np.float64])
@pytest.mark.parametrize("op", ["argmax", "argmin", "max_indices", "min_indices"])
@pytest.mark.parametrize("axis", [0, 1])
def test_argmax_argmin(target, dtype, op, axis):
    rng = np.random.default_rng(0)
    m, n = 8, 16
    x = rng.integers(0, 6, (m, n)).astype(dtype)  # few distinct values: many ties
    idx = np.zeros(n if axis == 0 else m, dtype=np.int32)
    val = np.zeros(idx.size, dtype=dtype)
    arg_kernel[(1,)](x, idx, val, OP=op, AXIS=axis, M=m, N=n, target=target)
    is_max = op in ("argmax", "max_indices")
    expected = (np.argmax if is_max else np.argmin)(x, axis=axis)  # NumPy: first index on ties
    np.testing.assert_array_equal(idx, expected)
    np.testing.assert_array_equal(val, (np.max if is_max else np.min)(x, axis=axis))


@jit
def argmax_flat_kernel(x_ptr, out_ptr, TIE_LEFT: pl.constexpr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    x = pl.load(x_ptr + offs)
    pl.store(out_ptr, pl.argmax(x, 0, tie_break_left=TIE_LEFT))
    i2 = pl.argmin(pl.reshape(x, (4, BLOCK // 4)), None, keep_dims=True)
    pl.store(out_ptr + 1 + pl.arange(0, 1)[:, None], i2)


def test_argmax_whole_tensor_and_tie_break(target):
    x = np.array([1, 7, 3, 7, 0, 5, 0, 7], dtype=np.float32)
    out = np.zeros(2, dtype=np.int32)
    argmax_flat_kernel[(1,)](x, out, TIE_LEFT=True, BLOCK=8, target=target)
    assert out.tolist() == [1, 4]
    argmax_flat_kernel[(1,)](x, out, TIE_LEFT=False, BLOCK=8, target=target)
    assert out[0] in (1, 3, 7)


def test_argmax_with_nan_gives_an_index_in_range(target):
    x = np.array([1, np.nan, 3, 2, 0, 5, 0, 4], dtype=np.float32)
    out = np.zeros(2, dtype=np.int32)
    argmax_flat_kernel[(1,)](x, out, TIE_LEFT=True, BLOCK=8, target=target)
    assert 0 <= out[0] < 8  # which index NaN gives is unspecified, as in Triton


@jit
def sum_kernel(x_ptr, out_ptr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(out_ptr, pl.sum(pl.load(x_ptr + offs), axis=0))


def test_float16_sum_accumulates_in_float32(target):
    # Rounding every partial sum to fp16 drifts by several ulps; fp32 partial sums round once.
    x = np.random.default_rng(4).uniform(0, 1, 4096).astype(np.float16)
    out = np.zeros(1, dtype=np.float16)
    sum_kernel[(1,)](x, out, BLOCK=4096, target=target)
    assert out[0] == np.float16(x.astype(np.float64).sum())
    assert "tile<4096xf32>" in str(sum_kernel.lower(x, out, BLOCK=4096))


@jit
def xor_sum_kernel(x_ptr, out_ptr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(out_ptr, pl.xor_sum(pl.load(x_ptr + offs), 0))


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint64])
def test_xor_sum(target, dtype):
    x = np.random.default_rng(1).integers(0, 100, 64).astype(dtype)
    out = np.zeros(1, dtype=dtype)
    xor_sum_kernel[(1,)](x, out, BLOCK=64, target=target)
    assert out[0] == np.bitwise_xor.reduce(x)
