"""The ``math`` dialect: elementwise transcendental and rounding functions on floats."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable

import numpy as np

from ..ir.constraints import FloatLike, IntLike
from ..ir.opdef import Elementwise, Operand, Pure, Result, SameOperandsAndResultType, define_op
from ..ir.operation import Operation
from ..ir.registry import Dialect
from .arith import _fold_elementwise, materialize_constant


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[x.dtype])(x)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return (1 / np.sqrt(x)).astype(x.dtype)


def _scalar(fn: Callable) -> Callable:
    """A ``math`` module function of one float, elementwise (NaN where it raises: a pole)."""
    def safe(v: float) -> float:
        try:
            return fn(v)
        except (ValueError, OverflowError):
            return math.inf if fn in (math.lgamma,) else math.nan

    def elementwise(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        if not x.size:
            return x.copy()
        with np.errstate(all="ignore"):  # a result past the type's range is inf, as on the GPU
            return np.vectorize(safe, otypes=[np.float64])(x).astype(x.dtype)
    return elementwise


def _quietly(fn: Callable) -> Callable:
    """``fn`` without NumPy's warnings: domain errors give NaN or inf, as on the GPU."""
    def quiet(*args: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return fn(*args)
    return quiet


def _round_half_away(x: np.ndarray) -> np.ndarray:
    """C's ``round``: halfway cases away from zero (NumPy's ``round`` goes to even).  The
    fraction ``x - trunc(x)`` is exact, so 0.49999997 stays 0 (adding 0.5 would round up)."""
    whole = np.trunc(x)
    rounded = (whole + np.sign(x) * (np.abs(x - whole) >= 0.5)).astype(x.dtype)
    return np.copysign(rounded, x).astype(x.dtype)  # -0.3 rounds to -0.0, as C's round


def _gamma(v: float) -> float:
    if v == math.inf:
        return math.inf
    if v <= 0 and v == math.floor(v):
        return math.nan if v < 0 else math.copysign(math.inf, v)
    try:
        return math.gamma(v)
    except OverflowError:  # beyond about 171.6 the result is past every float's range
        return math.inf


# name, NumPy semantics, summary
UNARY_FLOAT_OPS: list[tuple[str, Callable, str]] = [
    ("exp", np.exp, "e to the x."),
    ("exp2", np.exp2, "2 to the x."),
    ("log", np.log, "Natural logarithm."),
    ("log2", np.log2, "Base-2 logarithm."),
    ("sqrt", np.sqrt, "Square root (may be approximate on GPUs; see sqrt_rn)."),
    ("sqrt_rn", np.sqrt, "Square root, correctly rounded."),
    ("rsqrt", _rsqrt, "1 / sqrt(x)."),
    ("sin", np.sin, "Sine."),
    ("cos", np.cos, "Cosine."),
    ("erf", _erf, "The error function."),
    ("floor", np.floor, "Round down."),
    ("ceil", np.ceil, "Round up."),
    ("absf", np.abs, "Float absolute value."),
    # The C math library's (libdevice's, ocml's) functions of one float:
    # pl.extra.libdevice, as Triton's tl.extra.cuda.libdevice.
    ("acos", _quietly(np.arccos), "Arc cosine."),
    ("acosh", _quietly(np.arccosh), "Inverse hyperbolic cosine."),
    ("asin", _quietly(np.arcsin), "Arc sine."),
    ("asinh", np.arcsinh, "Inverse hyperbolic sine."),
    ("atan", np.arctan, "Arc tangent."),
    ("atanh", _quietly(np.arctanh), "Inverse hyperbolic tangent."),
    ("cbrt", np.cbrt, "Cube root."),
    ("cosh", _quietly(np.cosh), "Hyperbolic cosine."),
    ("sinh", _quietly(np.sinh), "Hyperbolic sine."),
    ("tan", np.tan, "Tangent."),
    ("tanh", np.tanh, "Hyperbolic tangent."),
    ("erfc", _scalar(math.erfc), "The complementary error function, 1 - erf(x)."),
    ("exp10", _quietly(lambda x: np.power(x.dtype.type(10), x)), "10 to the x."),
    ("expm1", _quietly(np.expm1), "e to the x, minus 1 (exact near 0)."),
    ("log10", _quietly(np.log10), "Base-10 logarithm."),
    ("log1p", _quietly(np.log1p), "log(1 + x) (exact near 0)."),
    ("lgamma", _scalar(math.lgamma), "Logarithm of the absolute value of the gamma function."),
    ("tgamma", _scalar(_gamma), "The gamma function."),
    ("trunc", np.trunc, "Round toward zero."),
    ("rint", np.rint, "Round to the nearest integer, halfway cases to even."),
    ("round", _round_half_away, "Round to the nearest integer, halfway cases away from zero (C's round)."),
]


def _make_unary(short: str, fn: Callable, summary: str, constraint) -> type[Operation]:
    namespace = {
        "__doc__": summary,
        "name": f"math.{short}",
        "operand": Operand(constraint),
        "result": Result(constraint),
        "traits": (Pure, SameOperandsAndResultType, Elementwise),
        "semantics": staticmethod(fn),
        "fold": _fold_elementwise,
        "infer_result_types": staticmethod(lambda operands, attributes: [operands["operand"].type]),
    }
    return define_op(type(short.capitalize().replace("_", "") + "Op", (Operation,), namespace))


UNARY_OPS: dict[str, type[Operation]] = {name: _make_unary(name, fn, doc, FloatLike) for name, fn, doc in UNARY_FLOAT_OPS}
UNARY_OPS["absi"] = _make_unary("absi", np.abs, "Integer absolute value (wrapping for the minimum).", IntLike)


def _bits_of(x: np.ndarray) -> tuple[np.ndarray, int]:
    """``x``'s bits as unsigned integers of its width, and the width."""
    x = np.asarray(x)
    width = x.dtype.itemsize * 8
    return x.view(np.dtype(f"u{x.dtype.itemsize}")), width


def _count_leading_zeros(x: np.ndarray) -> np.ndarray:
    bits, width = _bits_of(x)
    out = np.full(bits.shape, width, np.int64)
    for shift in range(width - 1, -1, -1):  # the highest set bit decides
        found = ((bits >> np.uint64(shift) if width == 64 else bits >> shift) & 1).astype(bool) & (out == width)
        out[found] = width - 1 - shift
    return out.astype(np.asarray(x).dtype)


def _population_count(x: np.ndarray) -> np.ndarray:
    bits, width = _bits_of(x)
    count = np.zeros(bits.shape, np.int64)
    for shift in range(width):
        count += ((bits >> np.uint64(shift) if width == 64 else bits >> shift) & 1).astype(np.int64)
    return count.astype(np.asarray(x).dtype)


def _reverse_bits(x: np.ndarray) -> np.ndarray:
    bits, width = _bits_of(x)
    out = np.zeros_like(bits)
    for shift in range(width):
        bit = (bits >> np.uint64(shift) if width == 64 else bits >> shift) & 1
        out |= bit << (np.uint64(width - 1 - shift) if width == 64 else (width - 1 - shift))
    return out.view(np.asarray(x).dtype)


# Bit counts and reversal of integers (LLVM's ctlz with zero defined, ctpop, bitreverse):
# libdevice's clz, popc and brev.
for _name, _fn, _doc in (("ctlz", _count_leading_zeros, "Leading zero bits (the width for 0)."),
                         ("ctpop", _population_count, "Set bits."),
                         ("bitreverse", _reverse_bits, "The bits in reverse order.")):
    UNARY_OPS[_name] = _make_unary(_name, _fn, _doc, IntLike)


def _make_binary(short: str, fn: Callable, summary: str) -> type[Operation]:
    namespace = {
        "__doc__": summary,
        "name": f"math.{short}",
        "lhs": Operand(FloatLike),
        "rhs": Operand(FloatLike),
        "result": Result(FloatLike),
        "traits": (Pure, SameOperandsAndResultType, Elementwise),
        "semantics": staticmethod(fn),
        "fold": _fold_elementwise,
        "infer_result_types": staticmethod(lambda operands, attributes: [operands["lhs"].type]),
    }
    return define_op(type(short.capitalize() + "Op", (Operation,), namespace))


# name, NumPy semantics, summary: the C math library's functions of two floats.
BINARY_FLOAT_OPS: list[tuple[str, Callable, str]] = [
    ("atan2", np.arctan2, "Arc tangent of y / x (lhs = y), in the quadrant of (x, y)."),
    ("hypot", np.hypot, "sqrt(x*x + y*y) without overflow or underflow on the way."),
    ("copysign", np.copysign, "The magnitude of lhs with the sign of rhs."),
    ("nextafter", np.nextafter, "The next representable value after lhs toward rhs."),
    ("fdim", _quietly(lambda x, y: np.where(x > y, x - y, np.where(np.isnan(x) | np.isnan(y), x + y, 0)).astype(x.dtype)),
     "lhs - rhs where lhs > rhs, else +0 (NaN if either is)."),
]
BINARY_OPS: dict[str, type[Operation]] = {name: _make_binary(name, fn, doc) for name, fn, doc in BINARY_FLOAT_OPS}


def _fma_f64(a: float, b: float, c: float) -> float:
    """``a * b + c`` on Python floats (IEEE doubles), rounded once."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return a * b + c  # the product is exactly inf or NaN: IEEE arithmetic on it is exact
    if not math.isfinite(c):
        return c  # a finite product cannot change an infinite or NaN addend
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        # An exact zero sum is +0.0 in round-to-nearest, unless both addends are zeros of
        # negative sign (IEEE 754, 6.3); the product's sign is the xor of a's and b's.
        negative_product = math.copysign(1.0, a) * math.copysign(1.0, b) < 0
        both_negative_zeros = (a == 0 or b == 0) and negative_product and math.copysign(1.0, c) < 0
        return -0.0 if both_negative_zeros else 0.0
    try:
        return float(exact)  # int / int in Python is correctly rounded (subnormals too)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Fused multiply-add, rounded once to the operands' type, as hardware FMA does.

    f16 and f32: the product of two such values is exact in f64 (at most 48 bits), so
    only the f64 sum rounds.  Rounding that sum to nearest and then to f32 could round
    twice the wrong way; rounding it *to odd* instead (keep the inexact sum's last bit
    set) is known to make the second rounding correct whenever the intermediate has at
    least two more bits than the target, as f64 has.  f64: exact rational arithmetic.
    """
    a, b, c = np.broadcast_arrays(np.asarray(a), np.asarray(b), np.asarray(c))
    dtype = a.dtype
    with np.errstate(all="ignore"):  # inf * 0 and the like are NaN by design, not a warning
        if dtype == np.float64:
            return np.vectorize(_fma_f64, otypes=[np.float64])(a, b, c) if a.size else a.copy()
        a64, b64, c64 = a.astype(np.float64), b.astype(np.float64), c.astype(np.float64)
        product = a64 * b64  # exact
        total = product + c64
        # TwoSum (Knuth): product + c64 == total + error exactly.
        back = total - product
        error = (product - (total - back)) + (c64 - back)
        odd = (total.view(np.int64) & 1) == 1
        toward = np.nextafter(total, np.where(error > 0, np.inf, -np.inf))
        fix = np.isfinite(total) & (error != 0) & ~odd
        rounded_to_odd = np.where(fix, toward, total)
        return rounded_to_odd.astype(dtype)


@define_op
class FmaOp(Operation):
    """Fused multiply-add: a * b + c with one rounding."""

    name = "math.fma"
    a = Operand(FloatLike)
    b = Operand(FloatLike)
    c = Operand(FloatLike)
    result = Result(FloatLike)
    traits = (Pure, SameOperandsAndResultType, Elementwise)
    semantics = staticmethod(_fma)
    fold = _fold_elementwise
    infer_result_types = staticmethod(lambda operands, attributes: [operands["a"].type])


def _div_rn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):  # x / 0 is inf or NaN, as on the GPU
        return np.true_divide(a, b)


@define_op
class DivRnOp(Operation):
    """Float division, correctly rounded (IEEE) on every target.

    ``arith.divf`` (the ``/`` operator) may be approximate for f32 on GPUs, within 2 ulp
    (NVIDIA: ``div.full.f32``, as Triton's ``/``); this op never is (``pl.div_rn``)."""

    name = "math.div_rn"
    lhs = Operand(FloatLike)
    rhs = Operand(FloatLike)
    result = Result(FloatLike)
    traits = (Pure, SameOperandsAndResultType, Elementwise)
    semantics = staticmethod(_div_rn)
    fold = _fold_elementwise
    infer_result_types = staticmethod(lambda operands, attributes: [operands["lhs"].type])


MATH_DIALECT = Dialect("math", ops=(*UNARY_OPS.values(), *BINARY_OPS.values(), FmaOp, DivRnOp), doc="Elementwise math functions.",
                       constant_materializer=materialize_constant)


