"""The ``math`` dialect: elementwise transcendental and rounding functions on floats."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..ir.constraints import FloatLike, IntLike
from ..ir.opdef import Elementwise, Operand, Pure, Result, SameOperandsAndResultType, define_op
from ..ir.operation import Operation
from ..ir.registry import Dialect
from .arith import _fold_elementwise, materialize_constant


def _erf(x: np.ndarray) -> np.ndarray:
    import math

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


@define_op
class FmaOp(Operation):
    """Fused multiply-add: a * b + c with one rounding."""

    name = "math.fma"
    a = Operand(FloatLike)
    b = Operand(FloatLike)
    c = Operand(FloatLike)
    result = Result(FloatLike)
    traits = (Pure, SameOperandsAndResultType, Elementwise)
    semantics = staticmethod(lambda a, b, c: (a.astype(np.float64) * b + c).astype(a.dtype))
    fold = _fold_elementwise
    infer_result_types = staticmethod(lambda operands, attributes: [operands["a"].type])


MATH_DIALECT = Dialect("math", ops=(*UNARY_OPS.values(), FmaOp), doc="Elementwise math functions.",
                       constant_materializer=materialize_constant)


