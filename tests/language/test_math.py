"""Elementwise math (pl.exp ... pl.umulhi) against NumPy, per dtype and shape, with
tolerances in units of each dtype's precision: exact where the operation is exact
(floor, ceil, abs, sqrt_rn, min/max, where, clamp), a few ulps for transcendentals."""

import math

import numpy as np
import pytest

import polytile.language as pl
from polytile import next_power_of_2
from polytile.runtime import jit

FLOATS = [np.float16, np.float32, np.float64]
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
SHAPES = [(1, 37), (6, 20)]

#: (name, NumPy reference, domain): "pos" inputs lie in [0.1, 4], "any" in [-4, 4].
UNARY = [
    ("exp", np.exp, "any"), ("exp2", np.exp2, "any"), ("log", np.log, "pos"), ("log2", np.log2, "pos"),
    ("sqrt", np.sqrt, "pos"), ("sqrt_rn", np.sqrt, "pos"), ("rsqrt", lambda x: 1 / np.sqrt(x), "pos"),
    ("sin", np.sin, "any"), ("cos", np.cos, "any"), ("erf", np.vectorize(math.erf, otypes=[np.float64]), "any"),
    ("floor", np.floor, "any"), ("ceil", np.ceil, "any"), ("abs", np.abs, "any"),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), "any"),
]
EXACT = {"floor", "ceil", "abs", "sqrt_rn"}


@jit
def unary_math_kernel(pos_ptr, any_ptr, out_ptr, M, N, BM: pl.constexpr, BN: pl.constexpr):
    rows = pl.arange(0, BM)[:, None]
    cols = pl.arange(0, BN)[None, :]
    mask = (rows < M) & (cols < N)
    offs = rows * N + cols
    p = pl.load(pos_ptr + offs, mask=mask, other=1)
    a = pl.load(any_ptr + offs, mask=mask, other=1)
    size = M * N
    # One row of `out` per function, in UNARY's order.
    pl.store(out_ptr + offs, pl.exp(a), mask=mask)
    pl.store(out_ptr + size + offs, pl.exp2(a), mask=mask)
    pl.store(out_ptr + 2 * size + offs, pl.log(p), mask=mask)
    pl.store(out_ptr + 3 * size + offs, pl.log2(p), mask=mask)
    pl.store(out_ptr + 4 * size + offs, pl.sqrt(p), mask=mask)
    pl.store(out_ptr + 5 * size + offs, pl.sqrt_rn(p), mask=mask)
    pl.store(out_ptr + 6 * size + offs, pl.rsqrt(p), mask=mask)
    pl.store(out_ptr + 7 * size + offs, pl.sin(a), mask=mask)
    pl.store(out_ptr + 8 * size + offs, pl.cos(a), mask=mask)
    pl.store(out_ptr + 9 * size + offs, pl.erf(a), mask=mask)
    pl.store(out_ptr + 10 * size + offs, pl.floor(a), mask=mask)
    pl.store(out_ptr + 11 * size + offs, pl.ceil(a), mask=mask)
    pl.store(out_ptr + 12 * size + offs, pl.abs(a), mask=mask)
    pl.store(out_ptr + 13 * size + offs, pl.sigmoid(a), mask=mask)


def _tolerance(dtype):
    eps = np.finfo(dtype).eps
    return {"rtol": 4 * eps, "atol": 4 * eps}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_math(target, dtype, shape):
    rng = np.random.default_rng(0)
    pos = rng.uniform(0.1, 4, shape).astype(dtype)
    anyv = rng.uniform(-4, 4, shape).astype(dtype)
    out = np.zeros((len(UNARY),) + shape, dtype)
    unary_math_kernel[(1,)](pos, anyv, out, *shape, BM=next_power_of_2(shape[0]), BN=next_power_of_2(shape[1]),
                            target=target)
    for i, (name, fn, domain) in enumerate(UNARY):
        x = (pos if domain == "pos" else anyv).astype(np.float64)
        expected = fn(x).astype(dtype)  # the exact result, rounded once to the dtype
        if name in EXACT:
            np.testing.assert_array_equal(out[i], expected, err_msg=name)
        else:
            np.testing.assert_allclose(out[i], expected, err_msg=name, **_tolerance(dtype))
        assert out[i].dtype == dtype


@jit
def int_math_kernel(x_ptr, out_ptr, abs_ptr, N: pl.constexpr):
    offs = pl.arange(0, N)
    x = pl.load(x_ptr + offs)
    pl.static_assert(pl.exp(x).dtype == pl.float32, "math on integers computes in fp32, as Triton")
    pl.store(out_ptr + offs, pl.sqrt(pl.abs(x)))
    pl.store(abs_ptr + offs, pl.abs(x))


@pytest.mark.parametrize("dtype", INTS)
def test_math_on_integers(target, dtype):
    x = (np.arange(16) * 7 - (0 if np.dtype(dtype).kind == "u" else 50)).astype(dtype)
    out, absolute = np.zeros(16, np.float32), np.zeros(16, dtype)
    int_math_kernel[(1,)](x, out, absolute, N=16, target=target)
    np.testing.assert_array_equal(absolute, np.abs(x))
    np.testing.assert_allclose(out, np.sqrt(np.abs(x.astype(np.float64))).astype(np.float32), rtol=1e-6)


@jit
def binary_math_kernel(x_ptr, y_ptr, z_ptr, out_ptr, M, N, IS_FLOAT: pl.constexpr, BM: pl.constexpr,
                       BN: pl.constexpr):
    rows = pl.arange(0, BM)[:, None]
    cols = pl.arange(0, BN)[None, :]
    mask = (rows < M) & (cols < N)
    offs = rows * N + cols
    x = pl.load(x_ptr + offs, mask=mask, other=1)
    y = pl.load(y_ptr + offs, mask=mask, other=1)
    z = pl.load(z_ptr + offs, mask=mask, other=1)
    size = M * N
    pl.store(out_ptr + offs, pl.minimum(x, y), mask=mask)
    pl.store(out_ptr + size + offs, pl.maximum(x, y), mask=mask)
    pl.store(out_ptr + 2 * size + offs, pl.where(x > y, x, z), mask=mask)
    pl.store(out_ptr + 3 * size + offs, pl.clamp(x, pl.minimum(y, z), pl.maximum(y, z)), mask=mask)
    pl.store(out_ptr + 4 * size + offs, pl.where(x < 0, 1, x), mask=mask)  # a number as one side
    if IS_FLOAT:
        pl.store(out_ptr + 5 * size + offs, pl.fma(x, y, z), mask=mask)
        pl.store(out_ptr + 6 * size + offs, pl.fdiv(x, y), mask=mask)
        pl.store(out_ptr + 7 * size + offs, pl.div_rn(x, y), mask=mask)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", INTS + FLOATS)
def test_binary_math(target, dtype, shape):
    dt = np.dtype(dtype)
    rng = np.random.default_rng(1)
    lo = 0 if dt.kind == "u" else -50
    x, y, z = (rng.integers(lo, 50, shape).astype(dtype) if dt.kind != "f" else
               np.where(np.abs(v := rng.uniform(-4, 4, shape)) < 0.25, 1.0, v).astype(dtype) for _ in range(3))
    is_float = dt.kind == "f"
    out = np.zeros((8 if is_float else 5,) + shape, dtype)
    binary_math_kernel[(1,)](x, y, z, out, *shape, IS_FLOAT=is_float, BM=next_power_of_2(shape[0]),
                             BN=next_power_of_2(shape[1]), target=target)
    np.testing.assert_array_equal(out[0], np.minimum(x, y))
    np.testing.assert_array_equal(out[1], np.maximum(x, y))
    np.testing.assert_array_equal(out[2], np.where(x > y, x, z))
    np.testing.assert_array_equal(out[3], np.clip(x, np.minimum(y, z), np.maximum(y, z)))
    np.testing.assert_array_equal(out[4], np.where(x < 0, dtype(1), x))
    if is_float:
        wide = [v.astype(np.float64) for v in (x, y, z)]
        np.testing.assert_allclose(out[5], (wide[0] * wide[1] + wide[2]).astype(dtype), **_tolerance(dtype))
        # Triton computes 16-bit division in fp32; one rounding to the dtype either way.
        quotient = (wide[0] / wide[1]).astype(dtype)
        if target == "nvidia" and dt == np.float32:
            # pl.fdiv is '/', div.full.f32 there as in Triton: within 2 ulp.
            np.testing.assert_array_max_ulp(out[6], quotient, maxulp=2)
        else:
            np.testing.assert_array_equal(out[6], quotient)
        np.testing.assert_array_equal(out[7], quotient)  # div_rn: correctly rounded everywhere


@jit
def umulhi_kernel(x_ptr, y_ptr, out_ptr, N: pl.constexpr):
    offs = pl.arange(0, N)
    pl.store(out_ptr + offs, pl.umulhi(pl.load(x_ptr + offs), pl.load(y_ptr + offs)))


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_umulhi(target, dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(2)
    x = rng.integers(info.min, info.max, 32, dtype=dtype, endpoint=True)
    y = rng.integers(info.min, info.max, 32, dtype=dtype, endpoint=True)
    x[:2], y[:2] = info.max, info.min  # the extremes
    out = np.zeros(32, dtype)
    umulhi_kernel[(1,)](x, y, out, N=32, target=target)
    bits = np.dtype(dtype).itemsize * 8
    # The high half of the exact 2N-bit product; signed operands multiply as signed, as
    # Triton's (libdevice __nv_mulhi / __nv_umulhi and their 64-bit forms).
    expected = [((int(a) * int(b)) >> bits) & ((1 << bits) - 1) for a, b in zip(x, y)]
    np.testing.assert_array_equal(out.view(f"u{bits // 8}"), np.array(expected, dtype=f"u{bits // 8}"))


@jit
def softmax_kernel(x_ptr, out_ptr, M, N, DIM: pl.constexpr, BM: pl.constexpr, BN: pl.constexpr):
    rows = pl.arange(0, BM)[:, None]
    cols = pl.arange(0, BN)[None, :]
    mask = (rows < M) & (cols < N)
    x = pl.load(x_ptr + rows * N + cols, mask=mask, other=-float("inf"))
    pl.store(out_ptr + rows * N + cols, pl.softmax(x, dim=DIM, keep_dims=True), mask=mask)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dim", [0, 1])
def test_softmax(target, shape, dim):
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    out = np.zeros_like(x)
    softmax_kernel[(1,)](x, out, *shape, DIM=dim, BM=next_power_of_2(shape[0]), BN=next_power_of_2(shape[1]),
                         target=target)
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=dim, keepdims=True), rtol=1e-6, atol=1e-7)


@jit
def math_namespace_kernel(x_ptr, out_ptr, N: pl.constexpr):
    offs = pl.arange(0, N)
    x = pl.load(x_ptr + offs)
    pl.store(out_ptr + offs, pl.math.exp(x) + pl.math.sqrt_rn(pl.math.abs(x)) + pl.math.fma(x, x, 1.0))


def test_pl_math_is_tritons_namespace_of_the_same_builtins(target):
    for name in pl.math.__all__:
        assert getattr(pl.math, name) is getattr(pl, name), name
    assert "math" in dir(pl) and pl.pi32_t == pl.pointer_type(pl.int32)
    x = np.linspace(-2, 2, 16).astype(np.float32)
    out = np.zeros_like(x)
    math_namespace_kernel[(1,)](x, out, N=16, target=target)
    np.testing.assert_allclose(out, np.exp(x) + np.sqrt(np.abs(x)) + x * x + 1, rtol=1e-5)
