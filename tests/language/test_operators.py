"""Every Python operator on tiles, scalar tensors and Python numbers, against NumPy, with
Triton's type promotion and Triton's semantics (C truncation for integer ``//`` and
``%``; C's ``fmod`` for float ``%``, the dividend's sign, as Triton's ``frem``).

Expected values come from a NumPy model of Triton's rules (``triton_type`` below, from
``computation_type_impl`` in Triton's semantic.py), never from what polytile emits.
"""

import re

import numpy as np
import pytest

import polytile.language as pl
from polytile import next_power_of_2
from polytile.errors import CompilationError
from polytile.runtime import jit

SIGNED = [np.int8, np.int16, np.int32, np.int64]
UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float16, np.float32, np.float64]
ALL = SIGNED + UNSIGNED + FLOATS
PL_DTYPE = {np.dtype(np.bool_): pl.int1, **{np.dtype(d): getattr(pl, np.dtype(d).name) for d in ALL}}

GROUPS = {
    "arith": ("add", "sub", "mul", "floordiv", "mod"),
    "bitwise": ("and", "or", "xor"),
    "shift": ("lshift", "rshift"),
    "compare": ("lt", "le", "gt", "ge", "eq", "ne"),
    "truediv": ("truediv",),
}
#: tile op tile, tile op scalar tensor, scalar tensor op tile, tile op Python number, number op tile.
FORMS = ("tile-tile", "tile-scalar", "scalar-tile", "tile-literal", "literal-tile")
SHAPES = [(1, 37), (6, 20)]  # neither a power of two: the masks matter


@jit
def apply(x, y, OP: pl.constexpr):
    if OP == "add":
        r = x + y
    elif OP == "sub":
        r = x - y
    elif OP == "mul":
        r = x * y
    elif OP == "truediv":
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
    elif OP == "lshift":
        r = x << y
    elif OP == "rshift":
        r = x >> y
    elif OP == "lt":
        r = x < y
    elif OP == "le":
        r = x <= y
    elif OP == "gt":
        r = x > y
    elif OP == "ge":
        r = x >= y
    elif OP == "eq":
        r = x == y
    else:
        r = x != y
    return r


@jit
def operators_kernel(x_ptr, y_ptr, out_ptr, M, N, OPS: pl.constexpr, FORM: pl.constexpr, LIT: pl.constexpr,
                     BM: pl.constexpr, BN: pl.constexpr):
    rows = pl.arange(0, BM)[:, None]
    cols = pl.arange(0, BN)[None, :]
    offs = rows * N + cols
    mask = (rows < M) & (cols < N)
    x = pl.load(x_ptr + offs, mask=mask, other=1)
    y = pl.load(y_ptr + offs, mask=mask, other=1)
    for i in pl.static_range(len(OPS)):
        if FORM == "tile-tile":
            r = apply(x, y, OPS[i])
        elif FORM == "tile-scalar":
            r = apply(x, pl.load(y_ptr), OPS[i])
        elif FORM == "scalar-tile":
            r = apply(pl.load(x_ptr), y, OPS[i])
        elif FORM == "tile-literal":
            r = apply(x, LIT, OPS[i])
        else:
            r = apply(LIT, y, OPS[i])
        pl.store(out_ptr + i * M * N + offs, r, mask=mask)


# -- the NumPy model of Triton's semantics ----------------------------------------------

def _kind(dt):
    return 0 if dt == np.bool_ else (2 if dt.kind == "f" else 1)  # bool < integer < float, as Triton


def _literal_dtype(value):
    if isinstance(value, bool):
        return np.dtype(np.bool_)
    if isinstance(value, int):
        return np.dtype(np.int32 if -2**31 <= value < 2**31 else np.int64)
    return np.dtype(np.float32)


def triton_type(a, b, op):
    """The dtype Triton computes ``a op b`` in; ``a``/``b`` are NumPy dtypes of tensors or
    Python numbers (weak).  Raises TypeError where Triton does."""
    div_or_mod = op in ("truediv", "floordiv", "mod")
    a_weak, b_weak = not isinstance(a, np.dtype), not isinstance(b, np.dtype)
    a_t = _literal_dtype(a) if a_weak else a
    b_t = _literal_dtype(b) if b_weak else b
    if a_weak != b_weak:
        scalar, tensor_t = (a_t, b_t) if a_weak else (b_t, a_t)
        if _kind(scalar) <= _kind(tensor_t):
            if div_or_mod and tensor_t == np.float16:
                return np.dtype(np.float32)
            return tensor_t
    types = (a_t, b_t)
    if np.float64 in types:
        return np.dtype(np.float64)
    if np.float32 in types:
        return np.dtype(np.float32)
    if np.float16 in types:
        return np.dtype(np.float32 if div_or_mod else np.float16)
    if div_or_mod and (a_t.kind == "u") != (b_t.kind == "u") and np.bool_ not in types:
        raise TypeError("different signedness")
    if a_t.itemsize != b_t.itemsize:
        return a_t if a_t.itemsize > b_t.itemsize else b_t
    return a_t if a_t.kind == "u" else b_t  # same width: unsigned wins (C's usual conversions)


def reference(op, x, y):
    """``x op y`` with Triton's semantics; x, y are NumPy arrays/scalars of the computation
    type."""
    dt = np.result_type(x, y)
    with np.errstate(all="ignore"):
        if op == "truediv":
            if dt.kind in "iu":
                return x.astype(np.float32) / y.astype(np.float32)
            return x / y
        if op in ("floordiv", "mod") and dt.kind == "i":
            q = (np.abs(x.astype(np.int64)) // np.abs(y.astype(np.int64))) * np.sign(x) * np.sign(y)
            return q.astype(dt) if op == "floordiv" else (x - q.astype(dt) * y).astype(dt)
        if op == "mod" and dt.kind == "f":
            return np.fmod(x, y).astype(dt)  # Triton: frem, C's fmod (exact)
        fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "floordiv": np.floor_divide, "mod": np.mod,
              "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor, "lshift": np.left_shift,
              "rshift": np.right_shift, "lt": np.less, "le": np.less_equal, "gt": np.greater,
              "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal}[op]
        return np.asarray(fn(x, y)).astype(dt if op not in GROUPS["compare"] else np.bool_)


def operand_values(dtype, shape, group, rng, *, right):
    """Data for one operand: small enough that nothing overflows a narrow type; the right
    operand is never zero (it divides) and, for shifts, below the bit width."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        x = rng.uniform(-4, 4, shape).round(2)
        if right:
            x = np.where(np.abs(x) < 0.25, 1.5, x)
        return x.astype(dt)
    if group == "shift" and right:
        return rng.integers(0, 8, shape).astype(dt)
    lo = 0 if dt.kind == "u" else -60
    x = rng.integers(lo, 60, shape)
    if right:
        x = np.where(x == 0, 7, x)
    return x.astype(dt)


#: The forms with a scalar or a number run on a dtype of each kind and width class (each
#: dtype's promotion with numbers is checked by test_promotion); tile op tile on every dtype.
SCALAR_FORM_DTYPES = (np.int8, np.int32, np.uint16, np.uint64, np.float16, np.float64)


def _cases():
    for dtype in ALL:
        for group in GROUPS:
            if np.dtype(dtype).kind == "f" and group in ("bitwise", "shift"):
                continue
            for form in FORMS if dtype in SCALAR_FORM_DTYPES else FORMS[:1]:
                for shape in (SHAPES if form == "tile-tile" else SHAPES[:1]):
                    yield pytest.param(dtype, group, form, shape, id=f"{np.dtype(dtype).name}-{group}-{form}-"
                                                                      f"{shape[0]}x{shape[1]}")


@pytest.mark.parametrize("dtype, group, form, shape", list(_cases()))
def test_operators(target, dtype, group, form, shape):
    rng = np.random.default_rng(abs(hash((np.dtype(dtype).name, group, form))) % 2**32)
    dt = np.dtype(dtype)
    ops = tuple(op for op in GROUPS[group] if not (op == "floordiv" and dt.kind == "f"))
    x = operand_values(dtype, shape, group, rng, right=form == "literal-tile" and group == "shift")
    y = operand_values(dtype, shape, group, rng, right=True)
    lit = (3 if group == "shift" else 7) if dt.kind in "iu" else 1.5
    left = {"scalar-tile": x.flat[0], "literal-tile": lit}.get(form, x)
    right = {"tile-scalar": y.flat[0], "tile-literal": lit}.get(form, y)
    if form == "literal-tile" and group == "shift":
        left = 3  # 3 << y: y holds the shift amounts
    results = {}
    for op in ops:
        a = left if form == "literal-tile" else dt
        b = right if form == "tile-literal" else dt
        ct = triton_type(a, b, op)
        value = reference(op, np.asarray(left).astype(ct), np.asarray(right).astype(ct))
        results[op] = np.broadcast_to(value, shape)
    out_dtype = results[ops[0]].dtype
    out = np.zeros((len(ops),) + shape, dtype=out_dtype)
    bm, bn = next_power_of_2(shape[0]), next_power_of_2(shape[1])
    operators_kernel[(1,)](x, y, out, *shape, OPS=ops, FORM=form, LIT=lit, BM=bm, BN=bn, target=target)
    for i, op in enumerate(ops):
        expected = results[op].astype(out_dtype)
        if op == "truediv" and target == "nvidia" and out_dtype == np.float32:
            # '/' on f32 is div.full.f32 there, as Triton's: within 2 ulp (pl.div_rn is exact).
            np.testing.assert_array_max_ulp(out[i], expected, maxulp=2)
            continue
        np.testing.assert_array_equal(out[i], expected, err_msg=f"operator {op}, {form}, {dt.name}")


# -- type promotion -----------------------------------------------------------------------

@jit
def promotion_kernel(x_ptr, y_ptr, OP: pl.constexpr, FORM: pl.constexpr, LIT: pl.constexpr, EXPECT: pl.constexpr):
    x = pl.load(x_ptr + pl.arange(0, 4))
    if FORM == "tile-tile":
        r = apply(x, pl.load(y_ptr + pl.arange(0, 4)), OP)
    elif FORM == "tile-literal":
        r = apply(x, LIT, OP)
    else:
        r = apply(LIT, x, OP)
    pl.static_assert(r.dtype == EXPECT, "wrong result dtype")


# (x dtype, y dtype or Python number, operator, Triton's result dtype), hand-written from
# Triton's computation_type_impl and integer_promote_impl.
PROMOTIONS = [
    (np.int8, 1, "add", pl.int8),                # a Python int does not widen an int tile
    (np.uint8, 200, "mul", pl.uint8),
    (np.int16, True, "add", pl.int16),           # bool < int: the tile's type
    (np.int8, 1.5, "add", pl.float32),           # a float literal makes an int tile fp32
    (np.float16, 2, "mul", pl.float16),
    (np.float16, 0.5, "add", pl.float16),        # a Python float does not widen a float16 tile
    (np.float16, 2.0, "truediv", pl.float32),    # 16-bit division computes in fp32
    (np.float16, 3, "mod", pl.float32),
    (np.float64, 1, "sub", pl.float64),
    (np.int32, 3, "truediv", pl.float32),        # int / int is fp32
    (np.int32, np.float16, "add", pl.float16),   # i32 + f16 -> f16
    (np.int64, np.float16, "mul", pl.float16),
    (np.int32, np.float16, "truediv", pl.float32),
    (np.float16, np.float16, "truediv", pl.float32),
    (np.float16, np.float32, "add", pl.float32),
    (np.float32, np.float64, "mul", pl.float64),
    (np.uint32, np.int32, "add", pl.uint32),     # same width: unsigned wins
    (np.uint8, np.int8, "sub", pl.uint8),
    (np.int8, np.int32, "add", pl.int32),
    (np.uint8, np.int32, "add", pl.int32),       # the wider type wins whatever its sign
    (np.int64, np.uint32, "xor", pl.int64),
    (np.uint64, np.int64, "or", pl.uint64),
    (np.int16, np.int16, "truediv", pl.float32),
    (np.int8, np.int8, "lt", pl.int1),
]


#: Each promotion with the tile first; those with a Python number also with the number first
#: (a tile of the other dtype is only ever written second).
PROMOTION_CASES = [(*case, literal_first) for case in PROMOTIONS
                   for literal_first in ((False,) if isinstance(case[1], type) else (False, True))]


@pytest.mark.parametrize("xt, y, op, expected, literal_first", PROMOTION_CASES,
                         ids=[f"{np.dtype(x).name}-{op}-{getattr(y, '__name__', y)}-{first}"
                              for x, y, op, _, first in PROMOTION_CASES])
def test_promotion(target, xt, y, op, expected, literal_first):
    x = np.ones(4, xt)
    if isinstance(y, type):
        # The model agrees with the table (and so with the value tests above).
        assert PL_DTYPE[np.dtype(triton_type(np.dtype(xt), np.dtype(y), op) if op != "lt" else np.bool_)] == expected \
            or op == "truediv"
        promotion_kernel[(1,)](x, np.ones(4, y), OP=op, FORM="tile-tile", LIT=0, EXPECT=expected, target=target)
    else:
        form = "literal-tile" if literal_first else "tile-literal"
        promotion_kernel[(1,)](x, x, OP=op, FORM=form, LIT=y, EXPECT=expected, target=target)


@jit
def literal_in_source_kernel(x_ptr, out_ptr, i8_ptr, n, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    mask = offs < n
    x = pl.load(x_ptr + offs, mask=mask)
    small = pl.load(i8_ptr + offs, mask=mask)
    y = (2 * x + 1) % 5 - x // 3 + (small * 2 + 1 - n)  # int8 stays int8 with literals; `n` (i32) widens
    pl.static_assert((small * 2).dtype == pl.int8)
    pl.static_assert((small + n).dtype == pl.int32)
    pl.store(out_ptr + offs, y, mask=mask)


@pytest.mark.parametrize("n", [5, 64])
def test_python_literals_in_source(target, n):
    x = np.arange(n, dtype=np.int32) - n // 2
    small = (np.arange(n) % 100).astype(np.int8)
    out = np.zeros(n, np.int32)
    literal_in_source_kernel[(1,)](x, out, small, n, BLOCK=64, target=target)
    two_x_plus_1 = 2 * x + 1
    c_mod = np.sign(two_x_plus_1) * (np.abs(two_x_plus_1) % 5)   # C remainder: the dividend's sign
    c_div = np.sign(x) * (np.abs(x) // 3)                         # C division: toward zero
    narrow = (small.astype(np.int32) * 2 + 1).astype(np.int8).astype(np.int32)  # wraps in int8
    np.testing.assert_array_equal(out, c_mod - c_div + narrow - n)


# -- unary operators ----------------------------------------------------------------------

@jit
def unary_kernel(x_ptr, out_ptr, not_ptr, M, N, INT: pl.constexpr, BM: pl.constexpr, BN: pl.constexpr):
    rows = pl.arange(0, BM)[:, None]
    cols = pl.arange(0, BN)[None, :]
    mask = (rows < M) & (cols < N)
    offs = rows * N + cols
    x = pl.load(x_ptr + offs, mask=mask)
    pl.store(out_ptr + offs, -x, mask=mask)
    pl.store(out_ptr + M * N + offs, +x, mask=mask)
    if INT:
        pl.store(out_ptr + 2 * M * N + offs, ~x, mask=mask)
    pl.store(not_ptr + offs, ~(x > 0), mask=mask)  # `~` on a comparison: the elementwise logical not


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ALL)
def test_unary_operators(target, dtype, shape):
    dt = np.dtype(dtype)
    is_int = dt.kind in "iu"
    x = operand_values(dtype, shape, "arith", np.random.default_rng(7), right=False)
    out = np.zeros((3,) + shape, dt)
    not_out = np.zeros(shape, np.bool_)
    unary_kernel[(1,)](x, out, not_out, *shape, INT=is_int, BM=next_power_of_2(shape[0]),
                       BN=next_power_of_2(shape[1]), target=target)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(out[0], -x)  # unsigned values wrap, as in C
    np.testing.assert_array_equal(out[1], x)
    if is_int:
        np.testing.assert_array_equal(out[2], ~x)
    np.testing.assert_array_equal(not_out, ~(x > 0))


@jit
def not_scalar_kernel(x_ptr, out_ptr):
    x = pl.load(x_ptr)
    pl.store(out_ptr, not x)
    pl.store(out_ptr + 1, not (x > 2))
    if not x:
        pl.store(out_ptr + 2, True)


@pytest.mark.parametrize("value", [0, 3])
def test_not_on_scalars(target, value):
    out = np.zeros(3, np.bool_)
    not_scalar_kernel[(1,)](np.array([value], np.int32), out, target=target)
    assert out.tolist() == [value == 0, not value > 2, value == 0]


@jit
def not_tile_kernel(x_ptr, out_ptr):
    offs = pl.arange(0, 4)
    pl.store(out_ptr + offs, not (pl.load(x_ptr + offs) > 0))


def test_not_on_tiles(target):
    x = np.array([-1, 0, 1, 2], np.int32)
    out = np.zeros(4, np.bool_)
    not_tile_kernel[(1,)](x, out, target=target)
    np.testing.assert_array_equal(out, ~(x > 0))


# -- what Triton refuses, refused in the user's words ---------------------------------------

@jit
def error_kernel(x_ptr, u_ptr, f_ptr, WHAT: pl.constexpr):
    x = pl.load(x_ptr + pl.arange(0, 4))
    u = pl.load(u_ptr + pl.arange(0, 4))
    f = pl.load(f_ptr + pl.arange(0, 4))
    if WHAT == "negative-unsigned":
        u + -1
    elif WHAT == "out-of-range":
        x.to(pl.int8) + 300
    elif WHAT == "signedness-div":
        u // x
    elif WHAT == "signedness-mod":
        x % u
    elif WHAT == "float-floordiv":
        f // f
    elif WHAT == "float-and":
        f & x
    elif WHAT == "float-shift":
        f << 1
    elif WHAT == "float-invert":
        ~f
    elif WHAT == "pow":
        x ** 2
    elif WHAT == "matmul":
        x @ x


@pytest.mark.parametrize("what, message", [
    ("negative-unsigned", "the number -1 does not fit in uint32"),
    ("out-of-range", "the number 300 does not fit in int8"),
    ("signedness-div", "Cannot use // because they have different signedness: uint32[4] and int32[4]"),
    ("signedness-mod", "Cannot use % because they have different signedness: int32[4] and uint32[4]"),
    ("float-floordiv", "'//' needs integer operands; for floats use pl.floor(a / b)"),
    ("float-and", "invalid operands of type fp32 and int32 for '&': it needs integer operands"),
    ("float-shift", "invalid operands of type fp32 and int32 for '<<': it needs integer operands"),
    ("float-invert", "'~' needs an integer operand"),
    ("pow", "'**' is not supported on tensors"),
    ("matmul", "is not supported on tensors; use pl.dot"),
])
def test_operator_errors(target, what, message):
    arrays = np.zeros(4, np.int32), np.zeros(4, np.uint32), np.zeros(4, np.float32)
    with pytest.raises(CompilationError, match=re.escape(message)) as info:
        error_kernel[(1,)](*arrays, WHAT=what, target=target)
    assert "test_operators.py" in str(info.value)  # the kernel line at fault


@jit
def mixed_shift_kernel(x_ptr, y_ptr, out_ptr):
    offs = pl.arange(0, 8)
    pl.store(out_ptr + offs, pl.load(x_ptr + offs) >> pl.load(y_ptr + offs))


def test_a_signed_value_shifts_arithmetically_whatever_the_promotion(target):
    # int16 >> uint16 computes in uint16 (C's promotion, as Triton) but, as in Triton,
    # shifts in the sign bit: the shifted value decides.
    x = np.array([-86, -1, -32768, 5, 1000, -7, 0, 32767], np.int16)
    y = np.array([1, 3, 15, 1, 2, 8, 4, 14], np.uint16)
    out = np.zeros(8, np.uint16)
    mixed_shift_kernel[(1,)](x, y, out, target=target)
    np.testing.assert_array_equal(out.view(np.int16), x >> y.astype(np.int16))
