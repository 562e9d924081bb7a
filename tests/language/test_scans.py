"""Scans against NumPy: cumsum, cumprod and associative_scan (with a user combine)."""

import numpy as np
import pytest

import polytile.language as pl
from polytile.errors import CompilationError
from polytile.runtime import jit


@jit
def scan_kernel(x_ptr, out_ptr, OP: pl.constexpr, AXIS: pl.constexpr, REVERSE: pl.constexpr,
                M: pl.constexpr, N: pl.constexpr):
    offs = pl.arange(0, M)[:, None] * N + pl.arange(0, N)[None, :]
    x = pl.load(x_ptr + offs)
    if OP == "cumsum":
        r = pl.cumsum(x, axis=AXIS, reverse=REVERSE)
    else:
        r = pl.cumprod(x, AXIS, REVERSE)
    pl.store(out_ptr + offs, r)


def _reference(op, x, axis, reverse):
    fn = np.cumsum if op == "cumsum" else np.cumprod
    if reverse:
        return np.flip(fn(np.flip(x, axis), axis=axis), axis)
    return fn(x, axis=axis)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint32, np.float32, np.float64])
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("axis, reverse", [(0, False), (1, False), (1, True), (-2, True)])
def test_cumsum_cumprod(target, dtype, op, axis, reverse):
    rng = np.random.default_rng(0)
    m, n = 4, 8
    if op == "cumprod":
        x = rng.choice([1, 2, -1] if np.dtype(dtype).kind != "u" else [1, 2], (m, n)).astype(dtype)
    else:
        x = rng.integers(0, 50, (m, n)).astype(dtype)
    expected = _reference(op, x.astype(np.int64) if x.dtype.kind in "iu" and op == "cumsum" else x, axis, reverse)
    if op == "cumsum" and np.dtype(dtype).itemsize < 4:
        out_dtype = np.int32  # narrow integers sum in int32, as Triton
    else:
        out_dtype = dtype
    out = np.zeros((m, n), dtype=out_dtype)
    scan_kernel[(1,)](x, out, OP=op, AXIS=axis, REVERSE=reverse, M=m, N=n, target=target)
    np.testing.assert_allclose(out, expected.astype(out_dtype), rtol=1e-6)


@jit
def cumsum_1d_kernel(x_ptr, out_ptr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(out_ptr + offs, pl.cumsum(pl.load(x_ptr + offs)))


@pytest.mark.parametrize("n", [1, 2, 64, 1024])
def test_cumsum_sizes(target, n):
    x = np.arange(n, dtype=np.float32) % 5
    out = np.zeros(n, dtype=np.float32)
    cumsum_1d_kernel[(1,)](x, out, BLOCK=n, target=target)
    np.testing.assert_array_equal(out, np.cumsum(x))


@jit
def _affine(a1, b1, a2, b2):
    # Composition of x -> a*x + b maps (first a1,b1 then a2,b2): associative, not commutative.
    return a1 * a2, b1 * a2 + b2


@jit
def linear_recurrence_kernel(a_ptr, b_ptr, out_ptr, BLOCK: pl.constexpr, REVERSE: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    a = pl.load(a_ptr + offs)
    b = pl.load(b_ptr + offs)
    _, h = pl.associative_scan((a, b), 0, _affine, reverse=REVERSE)
    pl.store(out_ptr + offs, h)


@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_with_a_non_commutative_combine(target, reverse):
    rng = np.random.default_rng(2)
    n = 16
    a = rng.choice([0.5, 1.0, 2.0], n)
    b = rng.integers(-3, 4, n).astype(np.float64)
    out = np.zeros(n)
    linear_recurrence_kernel[(1,)](a, b, out, BLOCK=n, REVERSE=reverse, target=target)
    # h[i] = a[i] * h[i-1] + b[i] from h = 0, walking in scan order.
    expected, h = np.zeros(n), 0.0
    for i in (range(n - 1, -1, -1) if reverse else range(n)):
        h = a[i] * h + b[i]
        expected[i] = h
    np.testing.assert_allclose(out, expected)


@jit
def _maxc(a, b):
    return pl.maximum(a, b)


@jit
def cummax_kernel(x_ptr, out_ptr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(out_ptr + offs, pl.associative_scan(pl.load(x_ptr + offs), 0, _maxc))


def test_running_max(target):
    x = np.random.default_rng(3).standard_normal(32).astype(np.float32)
    out = np.zeros_like(x)
    cummax_kernel[(1,)](x, out, BLOCK=32, target=target)
    np.testing.assert_array_equal(out, np.maximum.accumulate(x))


def test_scan_ir_and_errors():
    text = str(cumsum_1d_kernel.lower(np.zeros(8, np.float32), np.zeros(8, np.float32), BLOCK=8))
    assert "tile.scan" in text and "tile.scan_return" in text

    @jit
    def scalar_scan(x_ptr):
        pl.cumsum(pl.load(x_ptr))

    with pytest.raises(CompilationError, match="a scan needs a tensor with at least one dimension"):
        scalar_scan.lower(np.zeros(1, np.float32))

    @jit
    def bad_axis(x_ptr):
        pl.cumsum(pl.load(x_ptr + pl.arange(0, 4)), axis=1)

    with pytest.raises(CompilationError, match="axis 1 is out of range for a tensor of rank 1"):
        bad_axis.lower(np.zeros(4, np.float32))
