"""Each language builtin against NumPy, on the `target` fixture's target."""

import numpy as np
import pytest

import polytile.language as pl
from polytile.runtime import jit

INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32]
FLOAT_DTYPES = [np.float16, np.float32, np.float64]


@jit
def binary_kernel(x_ptr, y_ptr, out_ptr, n, OP: pl.constexpr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    mask = offs < n
    x = pl.load(x_ptr + offs, mask=mask)
    y = pl.load(y_ptr + offs, mask=mask)
    if OP == "add":
        r = x + y
    elif OP == "sub":
        r = x - y
    elif OP == "mul":
        r = x * y
    elif OP == "div":
        r = x / y
    elif OP == "floordiv":
        r = x // y
    elif OP == "mod":
        r = x % y
    elif OP == "and":
        r = x & y
    elif OP == "or":
        r = x | y
    elif OP == "xor":
        r = x ^ y
    elif OP == "minimum":
        r = pl.minimum(x, y)
    elif OP == "maximum":
        r = pl.maximum(x, y)
    elif OP == "lt":
        r = x < y
    elif OP == "eq":
        r = x == y
    else:
        r = pl.where(x > y, x, y)
    pl.store(out_ptr + offs, r, mask=mask)


def _data(dtype, n, rng, nonzero=False):
    if np.dtype(dtype).kind == "f":
        x = rng.standard_normal(n).astype(dtype)
        return np.where(np.abs(x) < 0.1, 1.0, x).astype(dtype) if nonzero else x
    info = np.iinfo(dtype)
    lo, hi = (max(info.min, -100), min(info.max, 100))
    x = rng.integers(1 if nonzero else lo, hi, n).astype(dtype)
    return x


@pytest.mark.parametrize("dtype", INT_DTYPES + FLOAT_DTYPES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "minimum", "maximum", "lt", "eq", "where"])
def test_binary_ops(target, dtype, op):
    rng = np.random.default_rng(0)
    n = 100
    x, y = _data(dtype, n, rng), _data(dtype, n, rng)
    expected = {"add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y,
                "minimum": lambda: np.minimum(x, y), "maximum": lambda: np.maximum(x, y),
                "lt": lambda: x < y, "eq": lambda: x == y, "where": lambda: np.where(x > y, x, y)}[op]()
    out = np.zeros(n, dtype=expected.dtype)
    with np.errstate(all="ignore"):
        binary_kernel[(1,)](x, y, out, n, OP=op, BLOCK=128, target=target)
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("op", ["floordiv", "mod", "and", "or", "xor"])
def test_integer_ops(target, dtype, op):
    rng = np.random.default_rng(1)
    x, y = _data(dtype, 64, rng), _data(dtype, 64, rng, nonzero=True)
    if np.dtype(dtype).kind == "i":
        # C semantics (truncation), as Triton: compare with NumPy on magnitudes and signs
        q = np.trunc(x.astype(np.float64) / y).astype(dtype)
        expected = {"floordiv": q, "mod": (x - q * y).astype(dtype)}.get(op)
    else:
        expected = {"floordiv": x // y, "mod": x % y}.get(op)
    if expected is None:
        expected = {"and": x & y, "or": x | y, "xor": x ^ y}[op]
    out = np.zeros(64, dtype=dtype)
    binary_kernel[(1,)](x, y, out, 64, OP=op, BLOCK=64, target=target)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_true_division(target, dtype):
    rng = np.random.default_rng(2)
    x, y = _data(dtype, 50, rng), _data(dtype, 50, rng, nonzero=True)
    out = np.zeros(50, dtype=dtype)
    binary_kernel[(1,)](x, y, out, 50, OP="div", BLOCK=64, target=target)
    np.testing.assert_allclose(out, x / y, rtol=1e-3 if dtype == np.float16 else 1e-6)


@jit
def unary_kernel(x_ptr, out_ptr, n, FN: pl.constexpr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    mask = offs < n
    x = pl.load(x_ptr + offs, mask=mask, other=1.0)
    if FN == "exp":
        r = pl.exp(x)
    elif FN == "exp2":
        r = pl.exp2(x)
    elif FN == "log":
        r = pl.log(x)
    elif FN == "log2":
        r = pl.log2(x)
    elif FN == "sqrt":
        r = pl.sqrt(x)
    elif FN == "rsqrt":
        r = pl.rsqrt(x)
    elif FN == "sin":
        r = pl.sin(x)
    elif FN == "cos":
        r = pl.cos(x)
    elif FN == "abs":
        r = pl.abs(x - 1.5)
    elif FN == "neg":
        r = -x
    elif FN == "sigmoid":
        r = pl.sigmoid(x)
    elif FN == "floor":
        r = pl.floor(x * 3.0)
    else:
        r = pl.ceil(x * 3.0)
    pl.store(out_ptr + offs, r, mask=mask)


UNARY_REFERENCE = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin, "cos": np.cos, "abs": lambda x: np.abs(x - 1.5),
    "neg": np.negative, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "floor": lambda x: np.floor(x * 3),
    "ceil": lambda x: np.ceil(x * 3),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn", sorted(UNARY_REFERENCE))
def test_unary_math(target, dtype, fn):
    x = np.random.default_rng(3).uniform(0.1, 3.0, 40).astype(dtype)
    out = np.zeros_like(x)
    unary_kernel[(1,)](x, out, 40, FN=fn, BLOCK=64, target=target)
    np.testing.assert_allclose(out, UNARY_REFERENCE[fn](x).astype(dtype), rtol=1e-5)


@jit
def reduce_kernel(x_ptr, out_ptr, M: pl.constexpr, N: pl.constexpr, FN: pl.constexpr, AXIS: pl.constexpr,
                  KEEP: pl.constexpr):
    rows = pl.arange(0, M)
    cols = pl.arange(0, N)
    x = pl.load(x_ptr + rows[:, None] * N + cols[None, :])
    if FN == "sum":
        r = pl.sum(x, axis=AXIS, keep_dims=KEEP)
    elif FN == "max":
        r = pl.max(x, axis=AXIS, keep_dims=KEEP)
    else:
        r = pl.min(x, axis=AXIS, keep_dims=KEEP)
    if AXIS is None:
        pl.store(out_ptr + pl.arange(0, 1), r)
    elif AXIS == 0:
        pl.store(out_ptr + cols[None, :] if KEEP else out_ptr + cols, r)
    else:
        pl.store(out_ptr + rows[:, None] if KEEP else out_ptr + rows, r)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("fn", ["sum", "max", "min"])
@pytest.mark.parametrize("axis,keep", [(0, False), (1, False), (1, True), (None, False)])
def test_reductions(target, dtype, fn, axis, keep):
    x = _data(dtype, 8 * 16, np.random.default_rng(4)).reshape(8, 16)
    expected = getattr(np, fn)(x, axis=axis)
    out = np.zeros(1 if axis is None else x.shape[1 - axis], dtype=dtype)
    reduce_kernel[(1,)](x, out, 8, 16, FN=fn, AXIS=axis, KEEP=keep, target=target)
    np.testing.assert_allclose(out.reshape(np.shape(expected) or (1,)), np.reshape(expected, out.shape), rtol=1e-5)


@jit
def add_combine(a, b):
    return a + b


@jit
def reduce_user_kernel(x_ptr, out_ptr, N: pl.constexpr):
    x = pl.load(x_ptr + pl.arange(0, N))
    pl.store(out_ptr, pl.reduce(x, 0, add_combine))


def test_reduce_with_jit_combine(target):
    x = np.arange(32, dtype=np.int32)
    out = np.zeros(1, dtype=np.int32)
    reduce_user_kernel[(1,)](x, out, N=32, target=target)
    assert out[0] == x.sum()


@jit
def softmax_builtin_kernel(x_ptr, out_ptr, M: pl.constexpr, N: pl.constexpr):
    offs = pl.arange(0, M)[:, None] * N + pl.arange(0, N)[None, :]
    x = pl.load(x_ptr + offs)
    pl.store(out_ptr + offs, pl.softmax(x))  # along axis 0, as Triton's


def test_softmax_builtin(target):
    x = np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32)
    out = np.zeros_like(x)
    softmax_builtin_kernel[(1,)](x, out, 4, 8, target=target)
    e = np.exp(x - x.max(0))
    np.testing.assert_allclose(out, e / e.sum(0), rtol=1e-5)


@jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: pl.constexpr, N: pl.constexpr, K: pl.constexpr, ACC: pl.constexpr):
    rm, rn, rk = pl.arange(0, M), pl.arange(0, N), pl.arange(0, K)
    a = pl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = pl.load(b_ptr + rk[:, None] * N + rn[None, :])
    if ACC:
        c = pl.dot(a, b, acc=pl.full((M, N), 1.0, pl.float32))
    else:
        c = pl.dot(a, b)
    pl.store(c_ptr + rm[:, None] * N + rn[None, :], c)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("acc", [False, True])
def test_dot(target, dtype, acc):
    rng = np.random.default_rng(6)
    a = rng.standard_normal((16, 32)).astype(dtype)
    b = rng.standard_normal((32, 16)).astype(dtype)
    c = np.zeros((16, 16), np.float32)
    dot_kernel[(1,)](a, b, c, 16, 16, 32, ACC=acc, target=target)
    # An f32 dot defaults to tf32 on GPUs, as in Triton: 10 mantissa bits per input.
    tolerance = 5e-3 if dtype == np.float32 else 1e-3
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32) + (1.0 if acc else 0.0),
                               rtol=tolerance, atol=tolerance * 8)


@jit
def shape_kernel(x_ptr, out_ptr, FN: pl.constexpr):
    offs = pl.arange(0, 4)[:, None] * 8 + pl.arange(0, 8)[None, :]
    x = pl.load(x_ptr + offs)  # 4 x 8
    if FN == "trans":
        r = pl.trans(x)
        pl.store(out_ptr + pl.arange(0, 8)[:, None] * 4 + pl.arange(0, 4)[None, :], r)
    elif FN == "permute":
        r = pl.permute(x, (1, 0))
        pl.store(out_ptr + pl.arange(0, 8)[:, None] * 4 + pl.arange(0, 4)[None, :], r)
    elif FN == "reshape":
        r = pl.reshape(x, (32,))
        pl.store(out_ptr + pl.arange(0, 32), r)
    elif FN == "expand_dims":
        row = pl.load(x_ptr + pl.arange(0, 8))
        r = pl.broadcast_to(pl.expand_dims(row, 0), (4, 8))
        pl.store(out_ptr + offs, r)
    else:
        r = x * 2 + pl.zeros_like(x) + pl.full((4, 8), 1, pl.int32)
        pl.store(out_ptr + offs, r)


@pytest.mark.parametrize("fn", ["trans", "permute", "reshape", "expand_dims", "full"])
def test_shapes(target, fn):
    x = np.arange(32, dtype=np.int32).reshape(4, 8)
    out = np.zeros(32, dtype=np.int32)
    shape_kernel[(1,)](x, out, FN=fn, target=target)
    expected = {"trans": x.T, "permute": x.T, "reshape": x, "expand_dims": np.broadcast_to(x[0], (4, 8)),
                "full": x * 2 + 1}[fn]
    np.testing.assert_array_equal(out, expected.reshape(-1))


@jit
def cast_kernel(x_ptr, out_ptr, DST: pl.constexpr, BITCAST: pl.constexpr):
    offs = pl.arange(0, 16)
    pl.store(out_ptr + offs, pl.load(x_ptr + offs).to(DST, bitcast=BITCAST))


@pytest.mark.parametrize("src,dst", [(np.float32, np.int32), (np.int32, np.float32), (np.float32, np.float16),
                                     (np.float16, np.float64), (np.int8, np.int64), (np.int64, np.int16),
                                     (np.uint8, np.int32), (np.int32, np.uint32)])
def test_casts(target, src, dst):
    x = (np.arange(16) * 3 - 20).astype(src)
    out = np.zeros(16, dtype=dst)
    cast_kernel[(1,)](x, out, getattr(pl, {"float32": "float32", "int32": "int32", "float16": "float16",
                                           "float64": "float64", "int64": "int64", "int16": "int16",
                                           "uint32": "uint32"}[np.dtype(dst).name]), False, target=target)
    np.testing.assert_array_equal(out, x.astype(dst))


def test_bitcast(target):
    x = np.linspace(-2, 2, 16).astype(np.float32)
    out = np.zeros(16, dtype=np.int32)
    cast_kernel[(1,)](x, out, pl.int32, True, target=target)
    np.testing.assert_array_equal(out, x.view(np.int32))


@jit
def scalar_promotion_kernel(x_ptr, out_ptr, scale):
    offs = pl.arange(0, 16)
    x = pl.load(x_ptr + offs)
    pl.store(out_ptr + offs, x * 2 + 1 - scale)   # int8 stays int8 with Python ints; `scale` (i32) promotes


def test_weak_scalar_promotion(target):
    x = np.arange(16, dtype=np.int8)
    out = np.zeros(16, dtype=np.int32)
    scalar_promotion_kernel[(1,)](x, out, 3, target=target)
    np.testing.assert_array_equal(out, x.astype(np.int32) * 2 + 1 - 3)


@jit
def loops_kernel(out_ptr, n, KIND: pl.constexpr):
    acc = 0
    if KIND == "range":
        for i in range(n):
            acc += i
    elif KIND == "pl.range":
        for i in pl.range(0, n, 2, num_stages=2):
            acc = acc + i
    elif KIND == "static":
        for i in pl.static_range(5):
            acc += i * 10
    else:
        i = 0
        while i < n:
            acc += i
            i += 1
    pl.store(out_ptr, acc)


@pytest.mark.parametrize("kind,expected", [("range", sum(range(10))), ("pl.range", sum(range(0, 10, 2))),
                                           ("static", 100), ("while", sum(range(10)))])
def test_loops(target, kind, expected):
    out = np.zeros(1, dtype=np.int32)
    loops_kernel[(1,)](out, 10, KIND=kind, target=target)
    assert out[0] == expected


@jit
def grid_kernel(out_ptr):
    pid = pl.program_id(0) + pl.program_id(1) * pl.num_programs(0)
    pl.store(out_ptr + pid, pid * 2)


def test_program_id_and_num_programs(target):
    out = np.zeros(12, dtype=np.int32)
    grid_kernel[(3, 4)](out, target=target)
    np.testing.assert_array_equal(out, np.arange(12) * 2)


@jit
def hints_kernel(x_ptr, out_ptr, n, BLOCK: pl.constexpr):
    pl.static_assert(BLOCK % 16 == 0, "BLOCK must be a multiple of 16")
    offs = pl.max_contiguous(pl.multiple_of(pl.program_id(0) * BLOCK + pl.arange(0, BLOCK), BLOCK), BLOCK)
    mask = offs < n
    pl.store(out_ptr + offs, pl.clamp(pl.load(x_ptr + offs, mask=mask), -1.0, 1.0), mask=mask)


def test_hints_and_clamp(target):
    x = np.linspace(-3, 3, 40).astype(np.float32)
    out = np.zeros_like(x)
    hints_kernel[(pl.cdiv(40, 16) if False else 3,)](x, out, 40, BLOCK=16, target=target)
    np.testing.assert_array_equal(out, np.clip(x, -1, 1))


@jit
def propagate_nan_kernel(a_ptr, b_ptr, out_ptr, PROPAGATE: pl.constexpr):
    a, b = pl.load(a_ptr + pl.arange(0, 4)), pl.load(b_ptr + pl.arange(0, 4))
    how = pl.PropagateNan.ALL if PROPAGATE else pl.PropagateNan.NONE
    pl.store(out_ptr + pl.arange(0, 4), pl.maximum(a, b, propagate_nan=how))
    pl.store(out_ptr + 4 + pl.arange(0, 4), pl.minimum(a, b))  # the default: NONE
    pl.store(out_ptr + 8 + pl.arange(0, 4), pl.clamp(a, -1.0, 1.0, propagate_nan=how))


@pytest.mark.parametrize("propagate", [False, True])
def test_propagate_nan_follows_triton(target, propagate):
    # NONE (the default): a NaN operand gives the other one (IEEE maxNum); ALL: NaN.
    nan = np.nan
    a = np.array([nan, 2.0, nan, 0.5], np.float32)
    b = np.array([3.0, nan, nan, -0.5], np.float32)
    out = np.zeros(12, np.float32)
    propagate_nan_kernel[(1,)](a, b, out, PROPAGATE=propagate, target=target)
    maximum = [nan, nan, nan, 0.5] if propagate else [3.0, 2.0, nan, 0.5]
    np.testing.assert_array_equal(out[:4], maximum)
    np.testing.assert_array_equal(out[4:8], [3.0, 2.0, nan, -0.5])
    np.testing.assert_array_equal(out[8:], [nan, 1.0, nan, 0.5] if propagate else [-1.0, 1.0, -1.0, 0.5])
