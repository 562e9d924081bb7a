"""pl.extra.libdevice (Triton's tl.extra.cuda.libdevice / tl.extra.libdevice): every
function against NumPy's (or Python's math module's) on every target's pipeline."""

import math

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.language.extra import libdevice
from polytile.language.extra.cuda import libdevice as cuda_libdevice
from polytile.language.extra.hip import libdevice as hip_libdevice

N = 64


def _elementwise(fn):
    return lambda *xs: np.vectorize(fn, otypes=[np.float64])(*xs)


def _c_round(x):
    whole = np.trunc(x)
    return whole + np.sign(x) * (np.abs(x - whole) >= 0.5)


# name -> (reference, input range)
UNARY = {
    "acos": (np.arccos, (-0.99, 0.99)), "acosh": (np.arccosh, (1.0, 8.0)), "asin": (np.arcsin, (-0.99, 0.99)),
    "asinh": (np.arcsinh, (-8.0, 8.0)), "atan": (np.arctan, (-8.0, 8.0)), "atanh": (np.arctanh, (-0.9, 0.9)),
    "cbrt": (np.cbrt, (-8.0, 8.0)), "cos": (np.cos, (-3.0, 3.0)), "cosh": (np.cosh, (-4.0, 4.0)),
    "erf": (_elementwise(math.erf), (-3.0, 3.0)), "erfc": (_elementwise(math.erfc), (-3.0, 3.0)),
    "exp": (np.exp, (-4.0, 4.0)), "exp10": (lambda x: 10.0 ** x, (-2.0, 2.0)), "exp2": (np.exp2, (-4.0, 4.0)),
    "expm1": (np.expm1, (-1.0, 1.0)), "log": (np.log, (0.1, 8.0)), "log10": (np.log10, (0.1, 8.0)),
    "log1p": (np.log1p, (-0.5, 4.0)), "log2": (np.log2, (0.1, 8.0)),
    "lgamma": (_elementwise(math.lgamma), (0.2, 6.0)), "tgamma": (_elementwise(math.gamma), (0.2, 5.0)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.1, 8.0)), "sin": (np.sin, (-3.0, 3.0)), "sinh": (np.sinh, (-4.0, 4.0)),
    "sqrt": (np.sqrt, (0.0, 8.0)), "tan": (np.tan, (-1.2, 1.2)), "tanh": (np.tanh, (-4.0, 4.0)),
    "ceil": (np.ceil, (-4.0, 4.0)), "floor": (np.floor, (-4.0, 4.0)), "trunc": (np.trunc, (-4.0, 4.0)),
    "rint": (np.rint, (-4.0, 4.0)), "nearbyint": (np.rint, (-4.0, 4.0)), "round": (_c_round, (-4.0, 4.0)),
    "fabs": (np.abs, (-4.0, 4.0)), "fast_expf": (np.exp, (-4.0, 4.0)), "fast_logf": (np.log, (0.1, 8.0)),
    "fast_tanf": (np.tan, (-1.2, 1.2)),
}
BINARY = {
    "atan2": np.arctan2, "hypot": np.hypot, "copysign": np.copysign, "fmax": np.fmax, "fmin": np.fmin,
    "fdim": lambda x, y: np.where(x > y, x - y, 0.0), "pow": lambda x, y: np.abs(x) ** y,
    "fmod": np.fmod, "div_rn": np.divide, "fast_dividef": np.divide, "nextafter": np.nextafter,
}


@pt.jit
def unary_kernel(x_ptr, out_ptr, FN: pl.constexpr, N: pl.constexpr):
    offs = pl.arange(0, N)
    pl.store(out_ptr + offs, FN(pl.load(x_ptr + offs)))


@pt.jit
def binary_kernel(x_ptr, y_ptr, out_ptr, FN: pl.constexpr, N: pl.constexpr):
    offs = pl.arange(0, N)
    pl.store(out_ptr + offs, FN(pl.load(x_ptr + offs), pl.load(y_ptr + offs)))


def _inputs(low, high, dtype, seed=0):
    x = np.random.default_rng(seed).uniform(low, high, N).astype(dtype)
    x[:4] = np.array([low, high, (low + high) / 2, low + (high - low) / 4], dtype)
    if low < 0.5 < high:
        x[4:8] = np.array([0.5, 1.5, -0.5, 2.5], dtype).clip(low, high)  # halfway cases of the roundings
    return x


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(target, name):
    reference, (low, high) = UNARY[name]
    x = _inputs(low, high, np.float32)
    out = np.zeros(N, np.float32)
    unary_kernel[(1,)](x, out, FN=getattr(libdevice, name), N=N, target=target)
    np.testing.assert_allclose(out, reference(x.astype(np.float64)), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(target, name):
    x, y = _inputs(-4.0, 4.0, np.float32, 1), _inputs(0.5, 3.0, np.float32, 2)
    if name == "pow":
        x = np.abs(x)
    y[::3] *= -1  # both signs of the second operand (copysign, atan2, fmax...)
    out = np.zeros(N, np.float32)
    binary_kernel[(1,)](x, y, out, FN=getattr(libdevice, name), N=N, target=target)
    expected = BINARY[name](x.astype(np.float64), y.astype(np.float64))
    if name == "nextafter":  # one ulp away: compared exactly, at fp32
        np.testing.assert_array_equal(out, np.nextafter(x, y))
    else:
        np.testing.assert_allclose(out, expected, rtol=2e-5, atol=2e-6)


@pt.jit
def edges_kernel(x_ptr, out_ptr, N: pl.constexpr):
    offs = pl.arange(0, N)
    x = pl.load(x_ptr + offs)
    pl.store(out_ptr + offs, libdevice.tgamma(x))
    pl.store(out_ptr + N + offs, libdevice.lgamma(x))
    pl.store(out_ptr + 2 * N + offs, libdevice.round(x))


def test_poles_overflow_and_signed_zeros(target):
    x = np.array([172.0, 200.0, 0.0, -0.3, 1e10, 5.0, -2.5, 2.5], np.float32)
    out = np.zeros(24, np.float32)
    edges_kernel[(1,)](x, out, N=8, target=target)
    tgamma, lgamma, rounded = out.reshape(3, 8)
    assert np.isposinf(tgamma[[0, 1, 2, 4]]).all() and abs(tgamma[5] - 24.0) < 1e-4  # libdevice: 23.999998
    assert np.isposinf(lgamma[2]) and np.isfinite(lgamma[4])  # lgamma(1e10) is about 2.2e11
    np.testing.assert_array_equal(rounded, np.array([172, 200, 0, -0.0, 1e10, 5, -3, 3], np.float32))
    assert np.signbit(rounded[3])  # C's round(-0.3) is -0.0


@pt.jit
def narrow_nextafter_kernel(x_ptr):
    v = pl.load(x_ptr + pl.arange(0, 4))
    pl.store(x_ptr + pl.arange(0, 4), libdevice.nextafter(v, v + 1))


def test_nextafter_of_narrow_floats_is_refused():
    with pytest.raises(pt.CompilationError, match="libdevice.nextafter takes fp32 or fp64 values"):
        narrow_nextafter_kernel[(1,)](np.zeros(4, np.float16))


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_types(target, dtype):
    x = _inputs(-3.0, 3.0, dtype)
    out = np.zeros(N, dtype)
    unary_kernel[(1,)](x, out, FN=libdevice.tanh, N=N, target=target)
    np.testing.assert_allclose(out, np.tanh(x.astype(np.float64)), rtol=2e-3 if dtype == np.float16 else 1e-12)
    binary_kernel[(1,)](x, x + 1, out, FN=libdevice.atan2, N=N, target=target)
    expected = np.arctan2(x.astype(np.float64), (x + 1).astype(np.float64))
    np.testing.assert_allclose(out, expected, rtol=2e-3 if dtype == np.float16 else 1e-12, atol=1e-3)


@pt.jit
def predicates_kernel(x_ptr, out_ptr, N: pl.constexpr):
    offs = pl.arange(0, N)
    x = pl.load(x_ptr + offs)
    pl.store(out_ptr + offs, libdevice.isnan(x))
    pl.store(out_ptr + N + offs, libdevice.isinf(x))
    pl.store(out_ptr + 2 * N + offs, libdevice.finitef(x))
    pl.store(out_ptr + 3 * N + offs, libdevice.signbit(x))


def test_predicates_give_int32(target):
    x = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, -np.nan], np.float32)
    out = np.zeros(4 * 8, np.int32)
    predicates_kernel[(1,)](x, out, N=8, target=target)
    isnan, isinf, finite, sign = out.reshape(4, 8)
    assert isnan.tolist() == np.isnan(x).astype(int).tolist()
    assert isinf.tolist() == np.isinf(x).astype(int).tolist()
    assert finite.tolist() == np.isfinite(x).astype(int).tolist()
    assert sign.tolist() == np.signbit(x).astype(int).tolist()


@pt.jit
def bits_kernel(x_ptr, counts_ptr, reversed_ptr, N: pl.constexpr):
    offs = pl.arange(0, N)
    x = pl.load(x_ptr + offs)
    pl.store(counts_ptr + offs, libdevice.clz(x))
    pl.store(counts_ptr + N + offs, libdevice.popc(x))
    pl.store(reversed_ptr + offs, libdevice.brev(x))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_bit_counts(target, dtype):
    width = np.dtype(dtype).itemsize * 8
    x = np.array([0, 1, 2, 3, -1, np.iinfo(dtype).max, np.iinfo(dtype).min, 12345], dtype)
    counts, reversed_ = np.zeros(16, np.int32), np.zeros(8, dtype)
    bits_kernel[(1,)](x, counts, reversed_, N=8, target=target)
    as_bits = [int(v) & ((1 << width) - 1) for v in x]
    assert counts[:8].tolist() == [width - b.bit_length() for b in as_bits]
    assert counts[8:].tolist() == [bin(b).count("1") for b in as_bits]
    expected = [int(format(b, f"0{width}b")[::-1], 2) for b in as_bits]
    assert [int(v) & ((1 << width) - 1) for v in reversed_] == expected


def test_every_spelling_is_one_module():
    assert cuda_libdevice.tanh is libdevice.tanh is hip_libdevice.tanh is pl.extra.libdevice.tanh
    assert pl.extra.cuda.libdevice.atan2 is libdevice.atan2
    assert "tanh" in libdevice.__all__ and "clz" in libdevice.__all__


@pt.jit
def missing_name_kernel(x_ptr):
    pl.store(x_ptr, libdevice.j0(pl.load(x_ptr)))


def test_a_missing_function_is_named():
    with pytest.raises(pt.CompilationError, match="'pl.extra.libdevice' has no attribute 'j0'"):
        missing_name_kernel[(1,)](np.zeros(1, np.float32))


@pt.jit
def integer_argument_kernel(x_ptr):
    pl.store(x_ptr, libdevice.isnan(pl.load(x_ptr)))


def test_a_wrong_argument_type_is_named():
    with pytest.raises(pt.CompilationError, match="libdevice.isnan needs a float, got"):
        integer_argument_kernel[(1,)](np.zeros(1, np.int32))
