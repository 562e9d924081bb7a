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


MATH_DIALECT = Dialect("math", ops=(*UNARY_OPS.values(), FmaOp, DivRnOp), doc="Elementwise math functions.",
                       constant_materializer=materialize_constant)


