"""IR scalar types as LLVM types, and constants of them."""

from __future__ import annotations

import math
from typing import Any

from llvmlite import ir

from ...ir import types as t

_FLOATS = {"f16": ir.HalfType(), "f32": ir.FloatType(), "f64": ir.DoubleType()}


class UnsupportedType(Exception):
    """A type this lowering has no LLVM form for yet (bf16 and fp8 arithmetic)."""


def llvm_type(type_: t.Type) -> ir.Type:
    """The LLVM type of one element of ``type_`` (a scalar, pointer or tile)."""
    element = t.element_type(type_)
    if isinstance(element, t.IntType):
        return ir.IntType(element.width)
    if isinstance(element, t.FloatType):
        found = _FLOATS.get(element.kind)
        if found is None:
            raise UnsupportedType(f"{element} values")
        return found
    if isinstance(element, t.PointerType):
        return ir.PointerType(addrspace=element.address_space)
    raise UnsupportedType(f"values of type {element}")


def constant(type_: t.Type, value: Any) -> ir.Constant:
    """An LLVM constant of the element type of ``type_``."""
    llvm = llvm_type(type_)
    if isinstance(llvm, ir.IntType):
        value = int(value)
        return ir.Constant(llvm, value & ((1 << llvm.width) - 1))
    if isinstance(llvm, (ir.HalfType, ir.FloatType, ir.DoubleType)):
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
