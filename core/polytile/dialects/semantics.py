"""NumPy semantics of scalar arithmetic, shared by constant folding and the interpreter.

Folding and interpreting through the same functions means a folded constant always
equals what the program would have computed.
"""

from __future__ import annotations

import numpy as np

from ..ir import types as t

_NUMPY_DTYPES = {
    t.i1: np.bool_, t.i8: np.int8, t.i16: np.int16, t.i32: np.int32, t.i64: np.int64,
    t.u8: np.uint8, t.u16: np.uint16, t.u32: np.uint32, t.u64: np.uint64,
    t.f16: np.float16, t.f32: np.float32, t.f64: np.float64,
}


def numpy_dtype(type_: t.Type):
    """The NumPy dtype holding values of ``type_``'s elements, or None (bf16, fp8:
    NumPy has no such dtype; the interpreter emulates them, folding leaves them alone)."""
    element = t.element_type(type_)
    if isinstance(element, t.PointerType):
        return np.int64
    return _NUMPY_DTYPES.get(element)


def as_unsigned(values: np.ndarray) -> np.ndarray:
    return values.view(np.dtype(f"uint{values.dtype.itemsize * 8}")) if values.dtype.kind == "i" else values


def as_signed(values: np.ndarray) -> np.ndarray:
    return values.view(np.dtype(f"int{values.dtype.itemsize * 8}")) if values.dtype.kind == "u" else values


def trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C-style division, rounding toward zero (NumPy's // floors)."""
    q = np.floor_divide(a, b)
    r = a - q * b
    # Flooring went one too far down exactly when the division is inexact and the
    # true quotient is negative (operands of opposite signs).
    adjust = (r != 0) & ((a < 0) != (b < 0))
    return np.where(adjust, q + 1, q).astype(a.dtype)


def trunc_rem(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C-style remainder: the sign follows the dividend."""
    return (a - trunc_div(a, b) * b).astype(a.dtype)


def signed_division_overflows(a: np.ndarray, b: np.ndarray) -> bool:
    """INT_MIN / -1 does not fit: undefined in LLVM, so never folded."""
    if a.dtype.kind != "i":
        return False
    return bool(np.any((a == np.iinfo(a.dtype).min) & (b == -1)))


def shift_amount_ok(b: np.ndarray, width: int) -> bool:
    return bool(np.all((b >= 0) & (b < width)))
