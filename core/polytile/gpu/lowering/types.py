"""IR scalar types as LLVM types, constants of them, and the bit-level float conversions
LLVM has no instruction for.

bf16 is LLVM's ``bfloat`` (llvmlite has no class for it: :class:`BFloatType`); LLVM
lowers its arithmetic and its conversions (``cvt.rn.bf16.f32``, round to nearest even)
itself.  The 8-bit floats have no LLVM type: a register holds their bits as an ``i8``,
and :func:`fp8_from_f32` / :func:`fp8_to_f16_bits` convert them with integer arithmetic
(used where the target has no conversion instruction).  The conversions go through a
small interface (:class:`BitOps`) with a Python twin (:class:`PyBitOps`), so that tests
check every input against an exact reference on plain ints.
"""

from __future__ import annotations

import math
import struct
from typing import Any

from llvmlite import ir

from ...dialects.emulated_floats import FP8_FORMATS, Fp8Format
from ...ir import types as t


class BFloatType(ir.Type):
    """LLVM's ``bfloat`` (bf16): 8 exponent bits as f32, 7 mantissa bits."""

    null = "0.0"
    intrinsic_name = "bf16"

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BFloatType)

    def __hash__(self) -> int:
        return hash(BFloatType)

    def format_constant(self, value: float) -> str:
        return "0xR%04X" % bf16_bits(float(value))


BFLOAT = BFloatType()
_FLOATS = {"f16": ir.HalfType(), "bf16": BFLOAT, "f32": ir.FloatType(), "f64": ir.DoubleType()}
_FLOAT_BITS = {ir.HalfType: 16, BFloatType: 16, ir.FloatType: 32, ir.DoubleType: 64}


class UnsupportedType(Exception):
    """A type this lowering has no LLVM form for."""


def fp8_format(type_: t.Type) -> Fp8Format | None:
    element = t.element_type(type_)
    return FP8_FORMATS.get(element.kind) if isinstance(element, t.FloatType) else None


def llvm_type(type_: t.Type) -> ir.Type:
    """The LLVM type of one element of ``type_`` (a scalar, pointer or tile); an 8-bit
    float is its bits, an ``i8``."""
    element = t.element_type(type_)
    if isinstance(element, t.IntType):
        return ir.IntType(element.width)
    if isinstance(element, t.FloatType):
        if element.kind in FP8_FORMATS:
            return ir.IntType(8)
        found = _FLOATS.get(element.kind)
        if found is None:
            raise UnsupportedType(f"{element} values")
        return found
    if isinstance(element, t.PointerType):
        return ir.PointerType(addrspace=element.address_space)
    raise UnsupportedType(f"values of type {element}")


def is_float(type_: ir.Type) -> bool:
    return type(type_) in _FLOAT_BITS


def bit_width(type_: ir.Type) -> int:
    """Bits of an LLVM scalar type (64 for pointers)."""
    if isinstance(type_, ir.IntType):
        return type_.width
    if isinstance(type_, ir.PointerType):
        return 64
    return _FLOAT_BITS[type(type_)]


def byte_width(type_: ir.Type) -> int:
    """Bytes of an LLVM scalar type in memory (i1 in a byte; 8 for pointers)."""
    return max(bit_width(type_) // 8, 1)


def constant(type_: t.Type, value: Any) -> ir.Constant:
    """An LLVM constant of the element type of ``type_``."""
    llvm = llvm_type(type_)
    fp8 = fp8_format(type_)
    if fp8 is not None:
        return ir.Constant(llvm, fp8_from_f64(fp8, float(value)))
    if isinstance(llvm, ir.IntType):
        value = int(value)
        return ir.Constant(llvm, value & ((1 << llvm.width) - 1))
    if is_float(llvm):
        value = float(value)
        if isinstance(llvm, ir.HalfType) and math.isfinite(value) and abs(value) > 65504:
            value = math.copysign(math.inf, value)
        return ir.Constant(llvm, value)
    raise UnsupportedType(f"constants of type {type_}")


def element_bits(type_: t.Type) -> int:
    element = t.element_type(type_)
    if isinstance(element, t.PointerType):
        return 64
    return max(element.width, 8)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------
# Exact roundings of Python floats (constants)


def _round_to_format(x: float, mantissa_bits: int, min_exponent: int) -> float:
    """``x`` rounded to nearest even with ``mantissa_bits`` stored bits and normal
    exponents down to ``min_exponent`` (subnormals below it); no overflow handling."""
    if x == 0 or not math.isfinite(x):
        return x
    _, e = math.frexp(abs(x))               # |x| = m * 2^e, m in [0.5, 1)
    quantum = math.ldexp(1.0, max(e - 1, min_exponent) - mantissa_bits)
    return math.copysign(round(abs(x) / quantum) * quantum, x)  # round(): ties to even


def bf16_bits(x: float) -> int:
    """The bf16 nearest ``x`` (ties to even), as 16 bits."""
    if math.isnan(x):
        return 0x7FC0
    rounded = _round_to_format(x, 7, -126)
    if math.isfinite(rounded) and abs(rounded) >= 2.0 ** 128:
        rounded = math.copysign(math.inf, x)
    return struct.unpack("<I", struct.pack("<f", rounded))[0] >> 16


def fp8_from_f64(fmt: Fp8Format, x: float) -> int:
    """The 8-bit float nearest ``x``, saturating to the largest finite value as PTX's
    ``cvt.rn.satfinite`` does (infinities too); NaN stays NaN."""
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    if math.isnan(x):
        return fmt.nan | sign
    min_exponent = 1 - fmt.bias
    rounded = abs(_round_to_format(x, fmt.mantissa_bits, min_exponent)) if math.isfinite(x) else math.inf
    if rounded >= fp8_to_f64(fmt, fmt.max_finite):
        return sign | fmt.max_finite
    if rounded == 0:
        return sign
    _, e = math.frexp(rounded)
    exponent = max(e - 1, min_exponent)
    mantissa = int(rounded / math.ldexp(1.0, exponent - fmt.mantissa_bits))
    biased = exponent + fmt.bias if mantissa >> fmt.mantissa_bits else 0
    return sign | (biased << fmt.mantissa_bits) | (mantissa & ((1 << fmt.mantissa_bits) - 1))


def fp8_to_f64(fmt: Fp8Format, bits: int) -> float:
    sign = -1.0 if bits & 0x80 else 1.0
    exponent = (bits >> fmt.mantissa_bits) & ((1 << fmt.exponent_bits) - 1)
    mantissa = bits & ((1 << fmt.mantissa_bits) - 1)
    top = (1 << fmt.exponent_bits) - 1
    if fmt.has_inf and exponent == top:
        return sign * math.inf if mantissa == 0 else math.nan
    if not fmt.has_inf and (bits & 0x7F) == 0x7F:
        return math.nan
    if exponent == 0:
        return sign * math.ldexp(mantissa, 1 - fmt.bias - fmt.mantissa_bits)
    return sign * math.ldexp((1 << fmt.mantissa_bits) | mantissa, exponent - fmt.bias - fmt.mantissa_bits)


# --------------------------------------------------------------------------------------
# Bit-level conversions on registers (and on Python ints, for tests)


class BitOps:
    """Integer operations on unsigned ``width``-bit values; comparisons give booleans
    that :meth:`select` takes."""

    def const(self, c: int, width: int) -> Any: raise NotImplementedError
    def add(self, x: Any, y: Any) -> Any: raise NotImplementedError
    def sub(self, x: Any, y: Any) -> Any: raise NotImplementedError
    def and_(self, x: Any, y: Any) -> Any: raise NotImplementedError
    def or_(self, x: Any, y: Any) -> Any: raise NotImplementedError
    def shl(self, x: Any, y: Any) -> Any: raise NotImplementedError
    def shr(self, x: Any, y: Any) -> Any: raise NotImplementedError
    def ult(self, x: Any, y: Any) -> Any: raise NotImplementedError
    def eq(self, x: Any, y: Any) -> Any: raise NotImplementedError
    def select(self, c: Any, x: Any, y: Any) -> Any: raise NotImplementedError
    def trunc(self, x: Any, width: int) -> Any: raise NotImplementedError
    def zext(self, x: Any, width: int) -> Any: raise NotImplementedError
    def umin(self, x: Any, y: Any) -> Any: return self.select(self.ult(x, y), x, y)


class PyBitOps(BitOps):
    """:class:`BitOps` on Python ints (32-bit unless a width is given)."""

    def const(self, c, width): return c
    def add(self, x, y): return (x + y) & 0xFFFFFFFF
    def sub(self, x, y): return (x - y) & 0xFFFFFFFF
    def and_(self, x, y): return x & y
    def or_(self, x, y): return x | y
    def shl(self, x, y): return (x << y) & 0xFFFFFFFF
    def shr(self, x, y): return x >> y
    def ult(self, x, y): return x < y
    def eq(self, x, y): return x == y
    def select(self, c, x, y): return x if c else y
    def trunc(self, x, width): return x & ((1 << width) - 1)
    def zext(self, x, width): return x


class LLVMBitOps(BitOps):
    def __init__(self, builder: ir.IRBuilder):
        self.b = builder

    def const(self, c, width): return ir.Constant(ir.IntType(width), c)
    def add(self, x, y): return self.b.add(x, y)
    def sub(self, x, y): return self.b.sub(x, y)
    def and_(self, x, y): return self.b.and_(x, y)
    def or_(self, x, y): return self.b.or_(x, y)
    def shl(self, x, y): return self.b.shl(x, y)
    def shr(self, x, y): return self.b.lshr(x, y)
    def ult(self, x, y): return self.b.icmp_unsigned("<", x, y)
    def eq(self, x, y): return self.b.icmp_unsigned("==", x, y)
    def select(self, c, x, y): return self.b.select(c, x, y)
    def trunc(self, x, width): return self.b.trunc(x, ir.IntType(width))
    def zext(self, x, width): return self.b.zext(x, ir.IntType(width))


def fp8_from_f32(ops: BitOps, fmt: Fp8Format, bits: Any) -> Any:
    """The 8-bit float nearest the f32 with ``bits`` (i32), ties to even, saturating to
    the largest finite value (``satfinite``); NaN stays NaN.  Returns an i8."""
    c = lambda v: ops.const(v, 32)  # noqa: E731
    m = fmt.mantissa_bits
    drop = 23 - m                                   # mantissa bits f32 has and fp8 lacks
    sign = ops.and_(ops.shr(bits, c(24)), c(0x80))
    magnitude = ops.and_(bits, c(0x7FFFFFFF))
    # Normal results: round the f32 (exponent | mantissa) to m bits, then rebias.
    lsb = ops.and_(ops.shr(magnitude, c(drop)), c(1))
    rounded = ops.shr(ops.add(magnitude, ops.add(c((1 << (drop - 1)) - 1), lsb)), c(drop))
    rebias = (127 - fmt.bias) << m
    normal = ops.sub(rounded, c(rebias))
    # Subnormal results (f32 exponent below the format's smallest normal one): the full
    # significand shifted right by how far below it is, rounded to nearest even.
    exponent = ops.shr(magnitude, c(23))
    smallest = 127 + 1 - fmt.bias                   # f32 biased exponent of the smallest normal
    significand = ops.or_(ops.and_(magnitude, c(0x7FFFFF)), c(0x800000))
    is_subnormal = ops.ult(exponent, c(smallest))
    # drop + smallest - exponent, at most 31; 1 where the result is normal (unused there).
    shift = ops.select(is_subnormal, ops.umin(ops.sub(c(drop + smallest), exponent), c(31)), c(1))
    kept = ops.shr(significand, shift)
    half = ops.shl(c(1), ops.sub(shift, c(1)))
    remainder = ops.and_(significand, ops.sub(ops.shl(half, c(1)), c(1)))
    round_up = ops.select(ops.ult(half, remainder), c(1),
                          ops.select(ops.eq(half, remainder), ops.and_(kept, c(1)), c(0)))
    subnormal = ops.add(kept, round_up)
    result = ops.select(is_subnormal, subnormal, normal)
    result = ops.umin(result, c(fmt.max_finite))    # satfinite: overflow and infinities
    result = ops.select(ops.ult(c(0x7F800000), magnitude), c(fmt.nan), result)
    return ops.trunc(ops.or_(result, sign), 8)


def fp8_to_f16_bits(ops: BitOps, fmt: Fp8Format, bits: Any) -> Any:
    """The f16 (as i16) equal to the 8-bit float ``bits`` (i8), exactly.

    An e5m2 value is the top byte of its f16.  An e4m3 value's exponent and mantissa,
    placed under an f16's, give the value times 2^(7 - 15): the caller multiplies by
    2^8 (:data:`E4M3_F16_SCALE`) in f16, which is exact, subnormals included."""
    wide = ops.zext(bits, 32)
    if fmt.exponent_bits == 5:
        return ops.trunc(ops.shl(wide, ops.const(8, 32)), 16)
    c = lambda v: ops.const(v, 32)  # noqa: E731
    sign = ops.shl(ops.and_(wide, c(0x80)), c(8))
    magnitude = ops.and_(wide, c(0x7F))
    placed = ops.or_(sign, ops.shl(magnitude, c(7)))
    nan = ops.or_(sign, c(0x7E00))
    return ops.trunc(ops.select(ops.eq(magnitude, c(0x7F)), nan, placed), 16)


#: What an e4m3 value placed in an f16 (:func:`fp8_to_f16_bits`) is multiplied by.
E4M3_F16_SCALE = 256.0
