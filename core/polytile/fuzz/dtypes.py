"""The element types the fuzzer uses, and what it must know about each: its spelling in
the kernel language, in NumPy and in torch, its rounding unit and its range.

bf16 and the two fp8 formats have no NumPy dtype, so the interpreter cannot hold them:
kernels use them through :mod:`polytile.fuzz.lowp` (a bit-exact emulation on the
interpreter side, the native conversion on a GPU).
"""

from __future__ import annotations

from typing import NamedTuple


class DType(NamedTuple):
    tag: str  # short name used in generated identifiers
    language: str  # attribute of polytile.language
    numpy: str  # NumPy dtype name
    torch: str  # torch dtype name
    kind: str  # "f" float, "i" signed int, "u" unsigned int
    bits: int
    eps: float  # unit roundoff (2**-(mantissa bits + 1)); 0 for integers

    @property
    def is_float(self) -> bool:
        return self.kind == "f"


F16 = DType("f16", "float16", "float16", "float16", "f", 16, 2.0 ** -11)
F32 = DType("f32", "float32", "float32", "float32", "f", 32, 2.0 ** -24)
F64 = DType("f64", "float64", "float64", "float64", "f", 64, 2.0 ** -53)
I8 = DType("i8", "int8", "int8", "int8", "i", 8, 0.0)
I16 = DType("i16", "int16", "int16", "int16", "i", 16, 0.0)
I32 = DType("i32", "int32", "int32", "int32", "i", 32, 0.0)
I64 = DType("i64", "int64", "int64", "int64", "i", 64, 0.0)
U8 = DType("u8", "uint8", "uint8", "uint8", "u", 8, 0.0)
U32 = DType("u32", "uint32", "uint32", "uint32", "u", 32, 0.0)

FLOATS = (F16, F32, F64)
INTS = (I8, I16, I32, I64, U8, U32)
ALL = FLOATS + INTS
BY_TAG = {d.tag: d for d in ALL}

#: The largest magnitude a float value of each type may reach in a generated kernel:
#: far from overflow, so that no kernel produces an infinity whose sign depends on rounding.
MAX_MAGNITUDE = {"f16": 2.0e3, "f32": 1.0e6, "f64": 1.0e6}


def promote(a: DType, b: DType) -> DType:
    """The type of ``a op b`` for two tensors, as the language promotes them (floats win,
    the wider float wins; among integers the wider wins, unsigned at equal width)."""
    if a == b:
        return a
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            return a if a.bits >= b.bits else b
        return a if a.is_float else b
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    return a if a.kind == "u" else b
