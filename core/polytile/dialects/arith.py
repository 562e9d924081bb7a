"""The ``arith`` dialect: constants, integer and float arithmetic, comparisons, casts.

Ops apply to scalars and, elementwise, to tiles of one shape.  Integer ops do not care
about signedness except where the name says (``divsi`` / ``divui``); the frontend picks
the op from the operand types.  Semantics, for folding and the interpreter, are NumPy
functions in the tables below.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from ..ir import types as t
from ..ir.constraints import AnyType, BoolLike, FloatLike, IntLike, Numeric, NumericOrPointer, PointerLike
from ..ir.opdef import (
    Attr,
    Commutative,
    ConstantLike,
    Elementwise,
    Operand,
    Pure,
    Result,
    SameOperandsAndResultType,
    SameOperandsShape,
    SameOperandsType,
    define_op,
    op_error,
)
from ..ir.operation import Operation
from ..ir.registry import Dialect
from . import semantics as sem


@define_op
class ConstantOp(Operation):
    """A constant scalar, or a tile with every element equal to ``value``."""

    name = "arith.constant"
    value = Attr((bool, int, float))
    result = Result(AnyType)
    traits = (Pure, ConstantLike)

    def verify_op(self) -> None:
        element = t.element_type(self.result.type)
        value = self.value
        if isinstance(element, t.FloatType):
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise op_error(self, f"a float constant needs a number, got {value!r}")
        elif element == t.i1:
            if not isinstance(value, bool) and value not in (0, 1):
                raise op_error(self, f"an i1 constant is true or false, got {value!r}")
        elif isinstance(element, t.IntType):
            if not isinstance(value, int) or isinstance(value, bool):
                raise op_error(self, f"an integer constant needs an integer, got {value!r}")
            lo = -(1 << (element.width - 1)) if element.signed else 0
            hi = (1 << element.width) - 1
            if not lo <= value <= hi:
                raise op_error(self, f"{value} does not fit in {element}")
        else:
            raise op_error(self, f"cannot make a constant of type {self.result.type}")

    def fold(self, constants: list[Any]) -> list[Any]:
        return [self.value]


def materialize_constant(builder: Any, value: Any, type_: t.Type, location: Any = None) -> Operation:
    """Make an ``arith.constant`` of ``type_`` holding ``value`` (used by folding)."""
    element = t.element_type(type_)
    if element == t.i1:
        value = bool(value)
    elif isinstance(element, t.IntType):
        value = int(value)
    else:
        value = float(value)
    return builder.create(ConstantOp, value=value, result_types=[type_], location=location)


# --------------------------------------------------------------------------------------
# Folding through NumPy


def _scalar_array(value: Any, type_: t.Type):
    dtype = sem.numpy_dtype(type_)
    if dtype is None or value is None:
        return None
    try:
        return np.array(value, dtype=dtype)
    except (OverflowError, ValueError):
        return None


def _python_value(array: np.ndarray, type_: t.Type) -> Any:
    element = t.element_type(type_)
    item = array.item()
    if element == t.i1:
        return bool(item)
    if isinstance(element, t.IntType):
        return int(item)
    return float(item)


def _fold_with(fn: Callable[..., np.ndarray], operands: list, result_type: t.Type, operand_types: list[t.Type]):
    arrays = [_scalar_array(v, ty) for v, ty in zip(operands, operand_types)]
    if any(a is None for a in arrays):
        return None
    with np.errstate(all="ignore"):
        result = fn(*arrays)
    if result is None:
        return None
    dtype = sem.numpy_dtype(result_type)
    if dtype is None:
        return None
    return _python_value(np.asarray(result).astype(dtype), result_type)


def _fold_elementwise(self: Operation, constants: list[Any]) -> list[Any] | None:
    if any(c is None for c in constants):
        return None
    value = _fold_with(type(self).semantics, constants, self.results[0].type, [v.type for v in self.operands])
    return None if value is None else [value]


# --------------------------------------------------------------------------------------
# Binary arithmetic, from tables


def _guard_divisor(fn):
    def guarded(a, b):
        if np.any(b == 0):
            return None  # division by zero is undefined: leave it to run time
        return fn(a, b)

    return guarded


def _signed(fn):
    return lambda a, b: fn(sem.as_signed(a), sem.as_signed(b))


def _no_signed_overflow(fn):
    def guarded(a, b):
        if sem.signed_division_overflows(sem.as_signed(a), sem.as_signed(b)):
            return None
        return fn(a, b)

    return guarded


def _unsigned(fn):
    return lambda a, b: fn(sem.as_unsigned(a), sem.as_unsigned(b))


def _shift(fn):
    def shifted(a, b):
        if not sem.shift_amount_ok(b, a.dtype.itemsize * 8):
            return None  # an out-of-range shift is poison in LLVM: don't fold it
        return fn(a, b)

    return shifted


def _mulhi(a: np.ndarray, b: np.ndarray, signed: bool) -> np.ndarray:
    """The high half of the double-width product, computed exactly in Python integers."""
    width = a.dtype.itemsize * 8
    mask = (1 << width) - 1
    src = sem.as_signed if signed else sem.as_unsigned
    xs, ys = np.broadcast_arrays(src(a), src(b))
    high = [((int(x) * int(y)) >> width) & mask for x, y in zip(xs.ravel(), ys.ravel())]
    unsigned = np.array(high, dtype=sem.as_unsigned(a).dtype).reshape(xs.shape)
    return unsigned.view(a.dtype)


def _ieee_maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # IEEE maximum: NaN wins, and +0.0 is greater than -0.0 (np.maximum ignores the sign).
    zeros = (a == 0) & (b == 0)
    return np.where(zeros, np.where(np.signbit(a), b, a), np.maximum(a, b))


def _ieee_minimum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    zeros = (a == 0) & (b == 0)
    return np.where(zeros, np.where(np.signbit(a), a, b), np.minimum(a, b))


# name, NumPy semantics, commutative, summary
INTEGER_BINARY_OPS: list[tuple[str, Callable, bool, str]] = [
    ("addi", operator.add, True, "Integer addition (wrapping)."),
    ("subi", operator.sub, False, "Integer subtraction (wrapping)."),
    ("muli", operator.mul, True, "Integer multiplication (wrapping)."),
    ("divsi", _guard_divisor(_no_signed_overflow(_signed(sem.trunc_div))), False, "Signed division, rounding toward zero."),
    ("divui", _guard_divisor(_unsigned(np.floor_divide)), False, "Unsigned division."),
    ("remsi", _guard_divisor(_no_signed_overflow(_signed(sem.trunc_rem))), False, "Signed remainder; the sign follows the dividend."),
    ("remui", _guard_divisor(_unsigned(np.remainder)), False, "Unsigned remainder."),
    ("andi", np.bitwise_and, True, "Bitwise and."),
    ("ori", np.bitwise_or, True, "Bitwise or."),
    ("xori", np.bitwise_xor, True, "Bitwise exclusive or."),
    ("shli", _shift(lambda a, b: np.left_shift(a, b.astype(a.dtype))), False, "Shift left."),
    ("shrsi", _shift(lambda a, b: np.right_shift(sem.as_signed(a), b.astype(sem.as_signed(a).dtype))), False,
     "Arithmetic shift right."),
    ("shrui", _shift(lambda a, b: np.right_shift(sem.as_unsigned(a), b.astype(sem.as_unsigned(a).dtype))), False,
     "Logical shift right."),
    ("maxsi", _signed(np.maximum), True, "Signed maximum."),
    ("minsi", _signed(np.minimum), True, "Signed minimum."),
    ("maxui", _unsigned(np.maximum), True, "Unsigned maximum."),
    ("minui", _unsigned(np.minimum), True, "Unsigned minimum."),
    ("mulhisi", lambda a, b: _mulhi(a, b, True), True, "High half of the signed product."),
    ("mulhiui", lambda a, b: _mulhi(a, b, False), True, "High half of the unsigned product."),
]

FLOAT_BINARY_OPS: list[tuple[str, Callable, bool, str]] = [
    ("addf", operator.add, True, "Float addition."),
    ("subf", operator.sub, False, "Float subtraction."),
    ("mulf", operator.mul, True, "Float multiplication."),
    ("divf", operator.truediv, False, "Float division: the `/` operator. f32 may be approximate on GPUs, within 2 ulp "
     "(NVIDIA div.full.f32, as Triton); math.div_rn is correctly rounded everywhere."),
    ("remf", np.fmod, False, "Float remainder with the sign of the dividend (C fmod)."),
    ("maximumf", _ieee_maximum, True, "Float maximum; NaN if either is NaN; +0.0 > -0.0."),
    ("minimumf", _ieee_minimum, True, "Float minimum; NaN if either is NaN; -0.0 < +0.0."),
    ("maxnumf", np.fmax, True, "Float maximum ignoring a NaN."),
    ("minnumf", np.fmin, True, "Float minimum ignoring a NaN."),
    ("powf", np.power, False, "Float power."),
]


def widen_i1(x: np.ndarray, signed: bool) -> np.ndarray:
    """An i1 (a NumPy bool) as an int8 holding its value: true is -1 read as signed (a
    1-bit two's complement number), 1 read as unsigned.  Other integers pass through."""
    x = np.asarray(x)
    if x.dtype != np.bool_:
        return x
    return -x.astype(np.int8) if signed else x.astype(np.int8)


def _i1_aware(short: str, fn: Callable) -> Callable:
    """i1 values are NumPy bools; compute on them as 1-bit integers.

    Signed ops (``*si``) read true as -1, the rest as 1; the result keeps the low bit,
    as a 1-bit register would.  A shift of an i1 by anything but 0 is out of range, and
    so is signed division of the minimum, -1 (true), by -1: its quotient +1 does not fit."""
    signed = short.endswith("si")

    def on_bits(a: np.ndarray, b: np.ndarray):
        if a.dtype != np.bool_:
            return fn(a, b)
        if short.startswith("sh") and np.any(b):
            return None
        wide_a, wide_b = widen_i1(a, signed), widen_i1(b, signed)
        # Widened to int8, -1 is no longer the minimum, so fn's own overflow check misses it.
        if short in ("divsi", "remsi") and np.any((wide_a == -1) & (wide_b == -1)):
            return None
        result = fn(wide_a, wide_b)
        return None if result is None else (np.asarray(result) & 1).astype(np.bool_)

    return on_bits


#: Each generated op's class name (MLIR's Python names), bound below as a module attribute.
CLASS_NAMES = {
    "addi": "AddIOp", "subi": "SubIOp", "muli": "MulIOp", "divsi": "DivSIOp", "divui": "DivUIOp",
    "remsi": "RemSIOp", "remui": "RemUIOp", "andi": "AndIOp", "ori": "OrIOp", "xori": "XOrIOp", "shli": "ShLIOp",
    "shrsi": "ShRSIOp", "shrui": "ShRUIOp", "maxsi": "MaxSIOp", "minsi": "MinSIOp", "maxui": "MaxUIOp",
    "minui": "MinUIOp", "mulhisi": "MulHiSIOp", "mulhiui": "MulHiUIOp", "addf": "AddFOp", "subf": "SubFOp",
    "mulf": "MulFOp", "divf": "DivFOp", "remf": "RemFOp", "maximumf": "MaximumFOp", "minimumf": "MinimumFOp",
    "maxnumf": "MaxNumFOp", "minnumf": "MinNumFOp", "powf": "PowFOp", "extsi": "ExtSIOp", "extui": "ExtUIOp",
    "trunci": "TruncIOp", "sitofp": "SIToFPOp", "uitofp": "UIToFPOp", "fptosi": "FPToSIOp", "fptoui": "FPToUIOp",
    "extf": "ExtFOp", "truncf": "TruncFOp", "bitcast": "BitcastOp", "ptrtoint": "PtrToIntOp",
    "inttoptr": "IntToPtrOp",
}


def _make_binary(short: str, fn: Callable, commutative: bool, summary: str, constraint) -> type[Operation]:
    traits = [Pure, SameOperandsAndResultType, Elementwise] + ([Commutative] if commutative else [])
    namespace = {
        "__doc__": summary,
        "name": f"arith.{short}",
        "lhs": Operand(constraint),
        "rhs": Operand(constraint),
        "result": Result(constraint),
        "traits": tuple(traits),
        "semantics": staticmethod(fn),
        "fold": _fold_elementwise,
        "infer_result_types": staticmethod(lambda operands, attributes: [operands["lhs"].type]),
    }
    return define_op(type(CLASS_NAMES[short], (Operation,), namespace))


BINARY_OPS: dict[str, type[Operation]] = {}
for _name, _fn, _comm, _doc in INTEGER_BINARY_OPS:
    BINARY_OPS[_name] = _make_binary(_name, _i1_aware(_name, _fn), _comm, _doc, IntLike)
for _name, _fn, _comm, _doc in FLOAT_BINARY_OPS:
    BINARY_OPS[_name] = _make_binary(_name, _fn, _comm, _doc, FloatLike)


@define_op
class NegFOp(Operation):
    """Float negation."""

    name = "arith.negf"
    operand = Operand(FloatLike)
    result = Result(FloatLike)
    traits = (Pure, SameOperandsAndResultType, Elementwise)
    semantics = staticmethod(np.negative)
    fold = _fold_elementwise
    infer_result_types = staticmethod(lambda operands, attributes: [operands["operand"].type])


# --------------------------------------------------------------------------------------
# Comparisons and select

def _signed_compare(fn):
    # i1 true is -1 as a signed number, so "slt true, false" holds (as_signed keeps bools).
    return lambda a, b: fn(sem.as_signed(widen_i1(a, True)), sem.as_signed(widen_i1(b, True)))


INTEGER_PREDICATES: dict[str, Callable] = {
    "eq": np.equal, "ne": np.not_equal,
    "slt": _signed_compare(np.less), "sle": _signed_compare(np.less_equal),
    "sgt": _signed_compare(np.greater), "sge": _signed_compare(np.greater_equal),
    "ult": _unsigned(np.less), "ule": _unsigned(np.less_equal), "ugt": _unsigned(np.greater), "uge": _unsigned(np.greater_equal),
}


def _unordered(fn):
    return lambda a, b: fn(a, b) | np.isnan(a) | np.isnan(b)


FLOAT_PREDICATES: dict[str, Callable] = {
    "oeq": np.equal, "one": lambda a, b: np.not_equal(a, b) & ~np.isnan(a) & ~np.isnan(b),
    "olt": np.less, "ole": np.less_equal, "ogt": np.greater, "oge": np.greater_equal,
    "ueq": _unordered(np.equal), "une": np.not_equal,
    "ult": _unordered(np.less), "ule": _unordered(np.less_equal),
    "ugt": _unordered(np.greater), "uge": _unordered(np.greater_equal),
    "ord": lambda a, b: ~np.isnan(a) & ~np.isnan(b), "uno": lambda a, b: np.isnan(a) | np.isnan(b),
}


def _compare_result(operands: dict, attributes: dict) -> list[t.Type]:
    return [t.like(operands["lhs"].type, t.i1)]


class _CompareBase(Operation):
    predicates: dict[str, Callable] = {}

    def verify_op(self) -> None:
        if self.predicate not in self.predicates:  # type: ignore[attr-defined]
            raise op_error(self, f"unknown predicate '{self.predicate}'; use one of {', '.join(self.predicates)}")  # type: ignore[attr-defined]
        if self.result.type != t.like(self.lhs.type, t.i1):  # type: ignore[attr-defined]
            raise op_error(self, f"result must be {t.like(self.lhs.type, t.i1)}, got {self.result.type}")  # type: ignore[attr-defined]

    def fold(self, constants: list[Any]) -> list[Any] | None:
        if any(c is None for c in constants):
            return None
        fn = self.predicates[self.predicate]  # type: ignore[attr-defined]
        value = _fold_with(fn, constants, self.result.type, [v.type for v in self.operands])
        return None if value is None else [value]


@define_op
class CmpIOp(_CompareBase):
    """Integer comparison; ``predicate`` is eq, ne, slt, sle, sgt, sge, ult, ule, ugt or uge."""

    name = "arith.cmpi"
    predicate = Attr(str)
    lhs = Operand(IntLike | PointerLike)  # pointers compare as addresses
    rhs = Operand(IntLike | PointerLike)
    result = Result(BoolLike)
    traits = (Pure, SameOperandsType, SameOperandsShape, Elementwise)
    predicates = INTEGER_PREDICATES
    infer_result_types = staticmethod(_compare_result)


@define_op
class CmpFOp(_CompareBase):
    """Float comparison; ordered (o*) predicates are false on NaN, unordered (u*) true."""

    name = "arith.cmpf"
    predicate = Attr(str)
    lhs = Operand(FloatLike)
    rhs = Operand(FloatLike)
    result = Result(BoolLike)
    traits = (Pure, SameOperandsType, SameOperandsShape, Elementwise)
    predicates = FLOAT_PREDICATES
    infer_result_types = staticmethod(_compare_result)


@define_op
class SelectOp(Operation):
    """``condition ? true_value : false_value``, elementwise for tiles."""

    name = "arith.select"
    condition = Operand(BoolLike)
    true_value = Operand(AnyType)
    false_value = Operand(AnyType)
    result = Result(AnyType)
    traits = (Pure, Elementwise)
    infer_result_types = staticmethod(lambda operands, attributes: [operands["true_value"].type])

    def verify_op(self) -> None:
        if not (self.true_value.type == self.false_value.type == self.result.type):
            raise op_error(self, f"both choices and the result must have one type, got {self.true_value.type}, "
                                 f"{self.false_value.type} -> {self.result.type}")
        if isinstance(self.condition.type, t.TileType) and t.shape_of(self.condition.type) != t.shape_of(self.result.type):
            raise op_error(self, "a tile condition must have the result's shape")

    def fold(self, constants: list[Any]) -> list[Any] | None:
        condition = constants[0]
        if condition is True or condition == 1:
            return [constants[1] if constants[1] is not None else self.true_value]
        if condition is False or condition == 0 and condition is not None:
            return [constants[2] if constants[2] is not None else self.false_value]
        if self.true_value is self.false_value:
            return [self.true_value]
        return None


# --------------------------------------------------------------------------------------
# Casts

def _float_to_int(a: np.ndarray, dtype: np.dtype, signed: bool) -> np.ndarray | None:
    """fptosi / fptoui: truncate toward zero; None unless every value, truncated, fits.

    NaN, infinities and out-of-range values give poison in LLVM (and NumPy's cast gives
    platform-dependent garbage), so they never fold and the interpreter reports them.
    The op, not the result type, says whether the integer is read as signed."""
    width = 1 if dtype == np.bool_ else dtype.itemsize * 8
    with np.errstate(all="ignore"):
        whole = np.trunc(np.asarray(a).astype(np.float64))  # f16 / f32 / f64 widen exactly
        # Bounds are powers of two, exact as floats: lo <= whole < hi.
        lo, hi = (-float(2 ** (width - 1)), float(2 ** (width - 1))) if signed else (0.0, float(2 ** width))
        if not np.all(np.isfinite(whole) & (whole >= lo) & (whole < hi)):
            return None
        if dtype == np.bool_:
            return whole != 0  # the fitting values are 0 and -1 (signed) or 0 and 1
        as_int = np.dtype(f"int{width}") if signed else np.dtype(f"uint{width}")
        return whole.astype(as_int).view(dtype)


def _cast_semantics(kind: str):
    def apply(a: np.ndarray, dtype) -> np.ndarray | None:
        dtype = np.dtype(dtype)
        if kind == "bitcast":
            return a.view(dtype)  # the same bits, read as another type
        if kind in ("extsi", "sitofp"):
            # i1 is signed: true is -1 when sign-extended or converted as signed.
            a = -a.astype(np.int8) if a.dtype == np.bool_ else sem.as_signed(a)
        elif kind in ("extui", "uitofp"):
            a = sem.as_unsigned(a)
        elif kind == "trunci" and dtype == np.bool_:
            return (a & 1).astype(np.bool_)  # truncation keeps the lowest bit
        if kind in ("fptosi", "fptoui"):
            return _float_to_int(a, dtype, signed=kind == "fptosi")
        return a.astype(dtype)

    return apply


CAST_OPS: list[tuple[str, Any, Any, str]] = [
    ("extsi", IntLike, IntLike, "Sign-extend an integer to a wider one."),
    ("extui", IntLike, IntLike, "Zero-extend an integer to a wider one."),
    ("trunci", IntLike, IntLike, "Truncate an integer to a narrower one."),
    ("sitofp", IntLike, FloatLike, "Signed integer to float."),
    ("uitofp", IntLike, FloatLike, "Unsigned integer to float."),
    ("fptosi", FloatLike, IntLike, "Float to signed integer, rounding toward zero."),
    ("fptoui", FloatLike, IntLike, "Float to unsigned integer, rounding toward zero."),
    ("extf", FloatLike, FloatLike, "Widen a float."),
    ("truncf", FloatLike, FloatLike, "Narrow a float, rounding to nearest even."),
    ("bitcast", Numeric, Numeric, "Reinterpret the bits as another type of the same width."),
    ("ptrtoint", NumericOrPointer, IntLike, "A pointer's address as an integer."),
    ("inttoptr", IntLike, NumericOrPointer, "An integer address as a pointer."),
]


def _cast_fold(self: Operation, constants: list[Any]) -> list[Any] | None:
    if constants[0] is None or self.name in ("arith.bitcast", "arith.ptrtoint", "arith.inttoptr"):
        return None
    source = _scalar_array(constants[0], self.operands[0].type)
    dtype = sem.numpy_dtype(self.results[0].type)
    if source is None or dtype is None:
        return None
    with np.errstate(all="ignore"):
        result = type(self).semantics(source, dtype)
    return None if result is None else [_python_value(result, self.results[0].type)]


def _make_cast(short: str, source, target, summary: str) -> type[Operation]:
    namespace = {
        "__doc__": summary,
        "name": f"arith.{short}",
        "operand": Operand(source),
        "result": Result(target),
        "traits": (Pure, SameOperandsShape, Elementwise),
        "semantics": staticmethod(_cast_semantics(short)),
        "fold": _cast_fold,
    }
    return define_op(type(CLASS_NAMES[short], (Operation,), namespace))


CASTS: dict[str, type[Operation]] = {name: _make_cast(name, s, d, doc) for name, s, d, doc in CAST_OPS}


# One module attribute per op, as for the ops written as classes (BINARY_OPS and CASTS
# map the short names to the same classes, for code that picks an op from data).
AddIOp = BINARY_OPS["addi"]
SubIOp = BINARY_OPS["subi"]
MulIOp = BINARY_OPS["muli"]
DivSIOp = BINARY_OPS["divsi"]
DivUIOp = BINARY_OPS["divui"]
RemSIOp = BINARY_OPS["remsi"]
RemUIOp = BINARY_OPS["remui"]
AndIOp = BINARY_OPS["andi"]
OrIOp = BINARY_OPS["ori"]
XOrIOp = BINARY_OPS["xori"]
ShLIOp = BINARY_OPS["shli"]
ShRSIOp = BINARY_OPS["shrsi"]
ShRUIOp = BINARY_OPS["shrui"]
MaxSIOp = BINARY_OPS["maxsi"]
MinSIOp = BINARY_OPS["minsi"]
MaxUIOp = BINARY_OPS["maxui"]
MinUIOp = BINARY_OPS["minui"]
MulHiSIOp = BINARY_OPS["mulhisi"]
MulHiUIOp = BINARY_OPS["mulhiui"]
AddFOp = BINARY_OPS["addf"]
SubFOp = BINARY_OPS["subf"]
MulFOp = BINARY_OPS["mulf"]
DivFOp = BINARY_OPS["divf"]
RemFOp = BINARY_OPS["remf"]
MaximumFOp = BINARY_OPS["maximumf"]
MinimumFOp = BINARY_OPS["minimumf"]
MaxNumFOp = BINARY_OPS["maxnumf"]
MinNumFOp = BINARY_OPS["minnumf"]
PowFOp = BINARY_OPS["powf"]
ExtSIOp = CASTS["extsi"]
ExtUIOp = CASTS["extui"]
TruncIOp = CASTS["trunci"]
SIToFPOp = CASTS["sitofp"]
UIToFPOp = CASTS["uitofp"]
FPToSIOp = CASTS["fptosi"]
FPToUIOp = CASTS["fptoui"]
ExtFOp = CASTS["extf"]
TruncFOp = CASTS["truncf"]
BitcastOp = CASTS["bitcast"]
PtrToIntOp = CASTS["ptrtoint"]
IntToPtrOp = CASTS["inttoptr"]



def _verify_cast_widths(op: Operation) -> None:
    src = t.element_type(op.operands[0].type)
    dst = t.element_type(op.results[0].type)
    kind = op.name.split(".")[1]
    if kind in ("extsi", "extui", "extf") and not dst.width > src.width:  # type: ignore[attr-defined]
        raise op_error(op, f"must widen, but {src} -> {dst} does not")
    if kind in ("trunci", "truncf") and not dst.width < src.width:  # type: ignore[attr-defined]
        raise op_error(op, f"must narrow, but {src} -> {dst} does not")
    if kind == "bitcast" and getattr(src, "width", None) != getattr(dst, "width", None):
        raise op_error(op, f"must keep the bit width, but {src} -> {dst} does not")


for _cast in CASTS.values():
    _cast.verify_op = _verify_cast_widths  # type: ignore[attr-defined]


ARITH_DIALECT = Dialect(
    "arith",
    ops=(ConstantOp, NegFOp, CmpIOp, CmpFOp, SelectOp, *BINARY_OPS.values(), *CASTS.values()),
    doc="Constants, arithmetic, comparisons and casts on scalars and tiles.",
    constant_materializer=materialize_constant,
)
