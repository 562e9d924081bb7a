"""pl.dot(a, b, acc=None, input_precision=..., out_dtype=...) against NumPy."""

import re

import numpy as np
import pytest

import polytile.language as pl
from polytile.errors import CompilationError
from polytile.runtime import jit


@jit
def dot_kernel(a_ptr, b_ptr, c_ptr, acc_ptr, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr,
               ACC: pl.constexpr, PRECISION: pl.constexpr, OUT: pl.constexpr):
    rm, rn, rk = pl.arange(0, BM), pl.arange(0, BN), pl.arange(0, BK)
    a = pl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0)
    b = pl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0)
    c_mask = (rm[:, None] < M) & (rn[None, :] < N)
    if ACC:
        acc = pl.load(acc_ptr + rm[:, None] * N + rn[None, :], mask=c_mask, other=0)
        c = pl.dot(a, b, acc, input_precision=PRECISION)
    elif OUT is None:
        c = pl.dot(a, b, input_precision=PRECISION)
    else:
        c = pl.dot(a, b, input_precision=PRECISION, out_dtype=OUT)
        pl.static_assert(c.dtype == OUT)
    pl.store(c_ptr + rm[:, None] * N + rn[None, :], c, mask=c_mask)


# (operand dtype, result dtype without acc): integers accumulate in int32, fp64 in fp64.
CASES = [(np.float16, np.float32), (np.float32, np.float32), (np.int8, np.int32), (np.float64, np.float64)]


# The second masked in every dimension; the others under the matrix instructions' 16:
# multiply-adds on GPUs (Triton's interpreter takes them too).
@pytest.mark.parametrize("mnk", [(16, 16, 16), (20, 33, 45), (4, 2, 8), (1, 16, 5)])
@pytest.mark.parametrize("dtype, result", CASES)
@pytest.mark.parametrize("acc", [False, True])
def test_dot(target, dtype, result, mnk, acc):
    m, n, k = mnk
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 5, (m, k)).astype(dtype)  # small integers: every product and sum is exact
    b = rng.integers(-4, 5, (k, n)).astype(dtype)
    c_init = rng.integers(-4, 5, (m, n)).astype(result)
    c = np.zeros((m, n), result)
    blocks = [1 << (d - 1).bit_length() for d in mnk]
    dot_kernel[(1,)](a, b, c, c_init, m, n, k, *blocks, ACC=acc, PRECISION="ieee", OUT=None, target=target)
    expected = a.astype(np.int64) @ b.astype(np.int64) + (c_init if acc else 0)
    np.testing.assert_array_equal(c, expected.astype(result))


@jit
def batched_dot_kernel(a_ptr, b_ptr, c_ptr, acc_ptr, B: pl.constexpr, M: pl.constexpr, N: pl.constexpr,
                       K: pl.constexpr, PRECISION: pl.constexpr):
    rb = pl.arange(0, B)[:, None, None]
    rm, rn, rk = pl.arange(0, M), pl.arange(0, N), pl.arange(0, K)
    a = pl.load(a_ptr + rb * M * K + rm[None, :, None] * K + rk[None, None, :])
    b = pl.load(b_ptr + rb * K * N + rk[None, :, None] * N + rn[None, None, :])
    c_offsets = rb * M * N + rm[None, :, None] * N + rn[None, None, :]
    c = pl.dot(a, b, pl.load(acc_ptr + c_offsets), input_precision=PRECISION)
    pl.static_assert(len(c.shape) == 3)
    pl.store(c_ptr + c_offsets, c)


@pytest.mark.parametrize("bmnk", [(2, 16, 16, 16), (4, 2, 8, 4), (1, 16, 16, 32)])
@pytest.mark.parametrize("dtype, result", CASES)
def test_batched_dot(target, dtype, result, bmnk):
    """3-D (batched) pl.dot, as Triton's: one product per entry of the first dimension."""
    batch, m, n, k = bmnk
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 5, (batch, m, k)).astype(dtype)
    b = rng.integers(-4, 5, (batch, k, n)).astype(dtype)
    c_init = rng.integers(-4, 5, (batch, m, n)).astype(result)
    c = np.zeros((batch, m, n), result)
    batched_dot_kernel[(1,)](a, b, c, c_init, B=batch, M=m, N=n, K=k, PRECISION="ieee", target=target)
    np.testing.assert_array_equal(c, (a.astype(np.int64) @ b.astype(np.int64) + c_init).astype(result))


@jit
def bf16_dot_kernel(a_ptr, b_ptr, c_ptr, M: pl.constexpr, N: pl.constexpr, K: pl.constexpr):
    rm, rn, rk = pl.arange(0, M), pl.arange(0, N), pl.arange(0, K)
    a = pl.load(a_ptr + rm[:, None] * K + rk[None, :]).to(pl.bfloat16)
    b = pl.load(b_ptr + rk[:, None] * N + rn[None, :]).to(pl.bfloat16)
    c = pl.dot(a, b)
    pl.static_assert(c.dtype == pl.float32)
    pl.store(c_ptr + rm[:, None] * N + rn[None, :], c)


@pytest.mark.parametrize("mnk", [(16, 16, 16), (32, 64, 32)])
def test_dot_bf16(target, mnk):
    # bf16 operands (made in the kernel from f32) accumulate in fp32; small integers keep
    # every product and sum exact, on every target.
    m, n, k = mnk
    rng = np.random.default_rng(1)
    a = rng.integers(-4, 5, (m, k)).astype(np.float32)
    b = rng.integers(-4, 5, (k, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    bf16_dot_kernel[(1,)](a, b, c, M=m, N=n, K=k, target=target)
    np.testing.assert_array_equal(c, a @ b)


@pytest.mark.parametrize("precision", ["ieee", "tf32", "tf32x3"])
def test_dot_input_precision(target, precision):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((32, 16)).astype(np.float32)
    c = np.zeros((16, 16), np.float32)
    dot_kernel[(1,)](a, b, c, c, 16, 16, 32, 16, 16, 32, ACC=False, PRECISION=precision, OUT=None, target=target)
    # tf32 keeps 10 mantissa bits of each input: a relative error of about 2**-11 per product.
    tolerance = {"ieee": 1e-5, "tf32x3": 1e-5, "tf32": 5e-3}[precision]
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=tolerance, atol=tolerance * 8)


def test_dot_out_dtype(target):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((16, 16)).astype(np.float16), rng.standard_normal((16, 16)).astype(np.float16)
    c = np.zeros((16, 16), np.float16)
    dot_kernel[(1,)](a, b, c, c, 16, 16, 16, 16, 16, 16, ACC=False, PRECISION="ieee", OUT=pl.float16, target=target)
    np.testing.assert_allclose(c, (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16), rtol=2e-3,
                               atol=2e-3)


@jit
def bad_dot_kernel(a_ptr, WHAT: pl.constexpr):
    a = pl.load(a_ptr + pl.arange(0, 16)[:, None] * 16 + pl.arange(0, 16)[None, :])
    if WHAT == "inner":
        pl.dot(a, pl.reshape(a, (32, 8)))
    elif WHAT == "rank":
        pl.dot(pl.reshape(a, (256,)), a)
    elif WHAT == "precision":
        pl.dot(a, a, input_precision="bf16x9")
    elif WHAT == "acc":
        pl.dot(a, a, acc=pl.zeros((16, 32), pl.float32))


@pytest.mark.parametrize("what, message", [
    ("inner", "pl.dot: the inner dimensions differ: [16, 16] @ [32, 8]"),
    ("rank", "pl.dot needs 2-D tensors, or 3-D ones batched along the first dimension, got shapes [256] and "
             "[16, 16]"),
    ("precision", "unknown input_precision 'bf16x9'"),
    ("acc", "pl.dot: acc has shape [16, 32], expected [16, 16]"),
])
def test_dot_errors(target, what, message):
    with pytest.raises(CompilationError, match=re.escape(message)):
        bad_dot_kernel[(1,)](np.zeros(256, np.float32), WHAT=what, target=target)
