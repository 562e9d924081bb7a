"""The float types NumPy has no dtype for (bf16 and the 8-bit floats), in NumPy.

A value of one of these types is held in a float32 array that holds exactly a value of
the type: every result of that type is rounded to it (:meth:`EmulatedFloat.round`), so
arithmetic computes in f32 and rounds once, as the GPUs do for bf16 and as every
conversion to an 8-bit float does.  In memory the type is its bits (uint16, uint8):
:meth:`EmulatedFloat.decode` reads them as values, :meth:`EmulatedFloat.encode` writes
values as bits.

Rounding is to nearest, ties to even, with the GPUs' overflow rules (what the NVIDIA
backend emits, and the formats' data :data:`FP8_FORMATS` it converts with):

* bf16 as ``cvt.rn.bf16.f32``: beyond the largest finite value, infinity; NaN stays NaN;
* the 8-bit floats as ``cvt.rn.satfinite``: beyond the largest finite value (infinities
  included), the largest finite value of that sign; NaN stays NaN.  An f64 reaches an
  8-bit float through f32, as the GPU lowering converts it.

Folding leaves these types alone (:func:`polytile.dialects.semantics.numpy_dtype` has no
dtype for them); the interpreter emulates them through this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class Fp8Format:
    """An 8-bit float format: exponent and mantissa bits, bias, and whether the top
    exponent holds infinities (e5m2, IEEE-like) or finite values (e4m3fn)."""

    exponent_bits: int
    mantissa_bits: int
    bias: int
    has_inf: bool
    #: Largest finite value's bits (without sign): where ``satfinite`` saturates.
    max_finite: int
    nan: int


FP8_FORMATS = {
    "f8e4m3": Fp8Format(4, 3, 7, False, 0x7E, 0x7F),   # Triton's float8e4nv (e4m3fn): max 448
    "f8e5m2": Fp8Format(5, 2, 15, True, 0x7B, 0x7F),   # Triton's float8e5: max 57344
}


def round_to_precision(x: np.ndarray, mantissa_bits: int, min_exponent: int) -> np.ndarray:
    """``x`` (float64) rounded to nearest even with ``mantissa_bits`` stored bits and
    normal exponents down to ``min_exponent`` (subnormals below it); no overflow handling.
    Zeros, infinities and NaNs come back as they are."""
    _, e = np.frexp(x)  # |x| = m * 2**e, m in [0.5, 1)
    quantum = np.ldexp(1.0, np.maximum(e - 1, min_exponent) - mantissa_bits)
    with np.errstate(invalid="ignore"):
        return np.round(x / quantum) * quantum  # np.round: ties to even; x / quantum is exact


class EmulatedFloat:
    """One emulated type: ``storage`` is the dtype of its bits in memory."""

    name: str
    storage: np.dtype

    def round(self, values: np.ndarray) -> np.ndarray:
        """``values`` (any float or integer array) as the type's nearest values, float32."""
        raise NotImplementedError

    def encode(self, values: np.ndarray) -> np.ndarray:
        """The bits of ``values`` (values of the type, float32)."""
        raise NotImplementedError

    def decode(self, bits: np.ndarray) -> np.ndarray:
        """The values (float32) of ``bits``."""
        raise NotImplementedError


class BFloat16(EmulatedFloat):
    name = "bf16"
    storage = np.dtype(np.uint16)

    def round(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values)
        if values.dtype == np.float32:
            # f32 to bf16 on the bits: add half an ulp (less one, plus the kept lsb: ties
            # to even), cut the low half.  Overflow carries into the exponent: infinity.
            bits = values.view(np.uint32)
            rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
            out = rounded.view(np.float32)
            return np.where(np.isnan(values), values, out) if out.size else out
        wide = np.asarray(values, dtype=np.float64)
        rounded = round_to_precision(wide, 7, -126)
        with np.errstate(over="ignore"):
            return np.where(np.abs(rounded) >= 2.0 ** 128, np.copysign(np.inf, wide), rounded).astype(np.float32)

    def encode(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=np.float32)
        bits = (values.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
        # A NaN whose payload lay in the low half would read as infinity: the quiet NaN.
        return np.where(np.isnan(values), (bits & np.uint16(0x8000)) | np.uint16(0x7FC0), bits)

    def decode(self, bits: np.ndarray) -> np.ndarray:
        return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


class Float8(EmulatedFloat):
    storage = np.dtype(np.uint8)

    def __init__(self, name: str, fmt: Fp8Format):
        self.name, self.fmt = name, fmt
        self.min_exponent = 1 - fmt.bias

    @cached_property
    def table(self) -> np.ndarray:
        """The value of each of the 256 bit patterns, float32."""
        fmt, codes = self.fmt, np.arange(256)
        exponent = (codes >> fmt.mantissa_bits) & ((1 << fmt.exponent_bits) - 1)
        mantissa = (codes & ((1 << fmt.mantissa_bits) - 1)).astype(np.float64)
        normal = np.ldexp(1.0 + mantissa / (1 << fmt.mantissa_bits), exponent - fmt.bias)
        subnormal = np.ldexp(mantissa, self.min_exponent - fmt.mantissa_bits)
        values = np.where(exponent == 0, subnormal, normal)
        if fmt.has_inf:
            top = exponent == (1 << fmt.exponent_bits) - 1
            values = np.where(top, np.where(mantissa == 0, np.inf, np.nan), values)
        else:
            values = np.where((codes & 0x7F) == 0x7F, np.nan, values)
        return np.where(codes & 0x80, -values, values).astype(np.float32)

    @cached_property
    def max_finite(self) -> float:
        return float(self.table[self.fmt.max_finite])

    def round(self, values: np.ndarray) -> np.ndarray:
        # Through f32 first, as the GPU converts an f64 (double rounding, as there).
        wide = np.asarray(values).astype(np.float32).astype(np.float64)
        rounded = round_to_precision(wide, self.fmt.mantissa_bits, self.min_exponent)
        limit = self.max_finite
        return np.clip(rounded, -limit, limit).astype(np.float32)  # satfinite; NaN stays NaN

    def encode(self, values: np.ndarray) -> np.ndarray:
        fmt = self.fmt
        values = np.asarray(values, dtype=np.float64)
        nan = np.isnan(values)
        magnitude = np.where(nan, 0.0, np.abs(values))
        _, e = np.frexp(magnitude)
        exponent = np.maximum(e - 1, self.min_exponent)
        scaled = np.rint(np.ldexp(magnitude, fmt.mantissa_bits - exponent)).astype(np.int64)  # exact for exact values
        normal = scaled >> fmt.mantissa_bits != 0
        biased = np.where(normal, exponent + fmt.bias, 0)
        bits = (biased << fmt.mantissa_bits) | (scaled & ((1 << fmt.mantissa_bits) - 1))
        bits = np.where(np.signbit(values), bits | 0x80, bits)
        return np.where(nan, fmt.nan | (bits & 0x80), bits).astype(np.uint8)

    def decode(self, bits: np.ndarray) -> np.ndarray:
        return self.table[np.asarray(bits).astype(np.uint8)]


#: The emulated types, by the IR's float kind.
EMULATED_FLOATS: dict[str, EmulatedFloat] = {
    "bf16": BFloat16(),
    **{kind: Float8(kind, fmt) for kind, fmt in FP8_FORMATS.items()},
}
