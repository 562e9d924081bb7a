"""The NumPy emulation of bf16 and the 8-bit floats (dialects/emulated_floats.py) against
the GPU lowering's exact references: every f16 value and a sample of every f32 bit
pattern round to the bits the NVIDIA lowering computes (``fp8_from_f32`` on plain ints,
the ``cvt.rn.satfinite`` rules) and torch computes (``bf16_bits``)."""

from __future__ import annotations

import numpy as np
import pytest

from polytile.dialects.emulated_floats import EMULATED_FLOATS, FP8_FORMATS
from polytile.gpu.lowering.types import PyBitOps, bf16_bits, fp8_from_f32, fp8_from_f64, fp8_to_f64


def _inputs() -> np.ndarray:
    every_f16 = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
    random_f32 = np.random.default_rng(0).integers(0, 1 << 32, 20_000, dtype=np.uint64).astype(np.uint32)
    edges = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 448, 464, 470, 480, 57344, 61440, 65536, 3.4e38,
                      np.finfo(np.float32).max, np.finfo(np.float32).tiny, 2.0 ** -149], np.float32)
    return np.concatenate([every_f16, random_f32.view(np.float32), edges])


def _same(bits: np.ndarray, expected: np.ndarray, emulated) -> np.ndarray:
    """Equal bits, or both NaN (any payload)."""
    return (bits == expected) | (np.isnan(emulated.decode(bits)) & np.isnan(emulated.decode(expected)))


@pytest.mark.parametrize("kind", sorted(FP8_FORMATS))
def test_fp8_rounding_is_the_gpu_lowering_bit_for_bit(kind):
    emulated, fmt = EMULATED_FLOATS[kind], FP8_FORMATS[kind]
    x = _inputs()
    with np.errstate(invalid="ignore"):
        bits = emulated.encode(emulated.round(x))
    ops = PyBitOps()
    expected = np.array([fp8_from_f32(ops, fmt, int(b)) for b in x.view(np.uint32)], np.uint8)
    assert _same(bits, expected, emulated).all()


@pytest.mark.parametrize("kind", sorted(FP8_FORMATS))
def test_fp8_values_of_every_bit_pattern(kind):
    emulated, fmt = EMULATED_FLOATS[kind], FP8_FORMATS[kind]
    expected = np.array([fp8_to_f64(fmt, code) for code in range(256)])
    values = emulated.decode(np.arange(256, dtype=np.uint8))
    assert ((values == expected) | (np.isnan(values) & np.isnan(expected))).all()
    # Every finite value encodes back to its own bits; saturation and NaN as the GPU.
    finite = np.isfinite(values)
    assert (emulated.encode(values[finite]) == np.arange(256)[finite]).all()
    assert emulated.round(np.array([np.inf, -np.inf, 1e30]))[0] == fp8_to_f64(fmt, fmt.max_finite)
    assert emulated.round(np.array([-np.inf]))[0] == -fp8_to_f64(fmt, fmt.max_finite)
    assert np.isnan(emulated.round(np.array([np.nan]))).all()


@pytest.mark.parametrize("kind", sorted(FP8_FORMATS))
def test_fp8_from_f64_goes_through_f32_as_the_gpu_converts(kind):
    # A value just above a tie in f64 that f32 rounds onto the tie: the GPU (f64 -> f32 ->
    # fp8) rounds the tie to even; one rounding from f64 would round up.
    emulated, fmt = EMULATED_FLOATS[kind], FP8_FORMATS[kind]
    tie = 1.0 + 2.0 ** -(fmt.mantissa_bits + 1)
    x = tie + 2.0 ** -40
    assert emulated.round(np.array([x]))[0] == 1.0
    assert fp8_to_f64(fmt, fp8_from_f64(fmt, x)) > 1.0  # what a constant folds to (one rounding)


def test_bf16_rounding_is_torchs_and_the_gpus_bit_for_bit():
    emulated = EMULATED_FLOATS["bf16"]
    x = _inputs()
    bits = emulated.encode(emulated.round(x))
    expected = np.array([bf16_bits(float(v)) for v in x], np.uint16)
    assert _same(bits, expected, emulated).all()
    # From f64 (an f64 or a wide integer converted): one rounding, overflow to infinity.
    wide = np.array([2.0 ** 60 + 2.0 ** 52 + 2.0 ** 40, -(2.0 ** 128), 3.0 * 2.0 ** -134, 1.0 + 2.0 ** -8 + 2.0 ** -30])
    got = emulated.round(wide)
    assert got[0] == 2.0 ** 60 + 2.0 ** 53 and got[1] == -np.inf and got[2] == 2.0 ** -132
    assert got[3] == 1.0 + 2.0 ** -7  # above the tie in f64: up (f32 would have made it the tie: even, 1.0)
    assert emulated.decode(emulated.encode(got)).tolist() == got.tolist()


def test_bf16_nan_bits_stay_nan():
    emulated = EMULATED_FLOATS["bf16"]
    # An f32 NaN whose payload lies in the low half only: its top half alone reads as infinity.
    nan = np.array([0x7F800001, 0xFF800001], np.uint32).view(np.float32)
    bits = emulated.encode(emulated.round(nan))
    assert np.isnan(emulated.decode(bits)).all() and bits[1] & 0x8000
