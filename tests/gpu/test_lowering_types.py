"""bf16 and fp8 values on GPUs: the bit-level conversions checked on Python ints against
an exact reference, and kernels through the NVIDIA pipeline (ptxas runs in it)."""

from __future__ import annotations

import math
import random
import struct

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.compiler import compile_module
from polytile.gpu.lowering.types import (E4M3_F16_SCALE, FP8_FORMATS, PyBitOps, bf16_bits, fp8_from_f32,
                                         fp8_from_f64, fp8_to_f16_bits, fp8_to_f64)


def compile_ptx(kernel, *args, arch="sm_90a", **meta):
    return compile_module(kernel.lower(*args, **meta), f"nvidia:{arch}").context.artifacts["ptx"]


def _f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


@pytest.mark.parametrize("kind", sorted(FP8_FORMATS))
def test_fp8_rounding_matches_the_exact_reference(kind):
    fmt, ops = FP8_FORMATS[kind], PyBitOps()
    rng = random.Random(0)
    samples = [rng.getrandbits(32) for _ in range(4000)]
    for code in range(256):  # every representable value, its neighbours and the midpoints above it
        value = fp8_to_f64(fmt, code)
        if math.isfinite(value):
            bits = struct.unpack("<I", struct.pack("<f", value))[0]
            samples += [bits - 1, bits, bits + 1]
            upper = fp8_to_f64(fmt, code + 1) if (code & 0x7F) < fmt.max_finite else None
            if upper is not None and math.isfinite(upper):
                mid = struct.unpack("<I", struct.pack("<f", (value + upper) / 2))[0]
                samples += [mid - 1, mid, mid + 1]
    for bits in samples:
        bits &= 0xFFFFFFFF
        assert fp8_from_f32(ops, fmt, bits) == fp8_from_f64(fmt, _f32(bits)), hex(bits)


def test_fp8_reference_saturates_and_keeps_nan():
    e4m3, e5m2 = FP8_FORMATS["f8e4m3"], FP8_FORMATS["f8e5m2"]
    assert fp8_from_f64(e4m3, 1000.0) == 0x7E and fp8_to_f64(e4m3, 0x7E) == 448.0
    assert fp8_from_f64(e4m3, -math.inf) == 0xFE
    assert fp8_from_f64(e5m2, math.inf) == 0x7B and fp8_to_f64(e5m2, 0x7B) == 57344.0
    assert math.isnan(fp8_to_f64(e4m3, fp8_from_f64(e4m3, math.nan)))
    assert fp8_from_f64(e4m3, 2.0 ** -9) == 0x01 and fp8_from_f64(e4m3, 2.0 ** -10) == 0x00  # tie to even


@pytest.mark.parametrize("kind", sorted(FP8_FORMATS))
def test_fp8_to_f16_is_exact_for_every_code(kind):
    fmt, ops = FP8_FORMATS[kind], PyBitOps()
    for code in range(256):
        half = np.uint16(fp8_to_f16_bits(ops, fmt, code)).view(np.float16)
        if fmt.exponent_bits == 4:
            half = np.float16(half * np.float16(E4M3_F16_SCALE))
        expected = fp8_to_f64(fmt, code)
        assert (math.isnan(expected) and np.isnan(half)) or float(half) == expected, code


def test_bf16_constants_round_to_nearest_even():
    assert bf16_bits(1.0) == 0x3F80
    assert bf16_bits(1.0 + 2 ** -8) == 0x3F80          # a tie: stays even
    assert bf16_bits(1.0 + 3 * 2 ** -8) == 0x3F82      # a tie: rounds up to even
    assert bf16_bits(3.4e38) == 0x7F80 and bf16_bits(-0.0) == 0x8000 and bf16_bits(math.nan) == 0x7FC0


@pt.jit
def bf16_kernel(x, y, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    a = pl.load(x + offs).to(pl.bfloat16, bitcast=True)
    b = pl.load(y + offs).to(pl.bfloat16)
    c = a * b + a * 1.5
    pl.store(out + offs, c.to(pl.float32))


# sm_90a multiplies bf16 natively (a * b + a * 1.5 contracts to mul.bf16 and fma.rn.bf16).
@pytest.mark.parametrize("arch, arithmetic", [("sm_80", "fma.rn.bf16"), ("sm_90a", "mul.bf16")])
def test_bf16_values_convert_with_round_to_nearest_even(arch, arithmetic):
    ptx = compile_ptx(bf16_kernel, np.zeros(256, np.uint16), np.zeros(256, np.float32), np.zeros(256, np.float32),
                      BLOCK=256, arch=arch)
    assert "cvt.rn.bf16.f32" in ptx and "cvt.f32.bf16" in ptx and arithmetic in ptx


@pt.jit
def fp8_kernel(x, out8, out, BLOCK: pl.constexpr, E4: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    v = pl.load(x + offs)
    q = v.to(pl.float8e4nv) if E4 else v.to(pl.float8e5)
    pl.store(out8 + offs, q.to(pl.uint8, bitcast=True))
    pl.store(out + offs, q.to(pl.float32))


@pytest.mark.parametrize("e4", [True, False])
def test_fp8_casts_use_cvt_on_hopper_and_integer_code_on_ampere(e4):
    args = (np.zeros(256, np.float32), np.zeros(256, np.uint8), np.zeros(256, np.float32))
    name = "e4m3x2" if e4 else "e5m2x2"
    hopper = compile_ptx(fp8_kernel, *args, BLOCK=256, E4=e4, arch="sm_90a")
    assert f"cvt.rn.satfinite.{name}.f32" in hopper and f"cvt.rn.f16x2.{name}" in hopper
    ampere = compile_ptx(fp8_kernel, *args, BLOCK=256, E4=e4, arch="sm_80")
    assert "e4m3" not in ampere and "e5m2" not in ampere and "cvt.f32.f16" in ampere


@pt.jit
def fp8_add(x, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    q = pl.load(x + offs).to(pl.float8e4nv, bitcast=True)
    pl.store(out + offs, (q + q).to(pl.uint8, bitcast=True))


def test_fp8_arithmetic_computes_in_f32_and_rounds_once():
    # Each operand to f32 (through f16: cvt.rn.f16x2.e4m3x2), the sum in f32, back with
    # one satfinite rounding (tests/gpu/test_fp8_arithmetic_simulated.py runs it).
    ptx = compile_ptx(fp8_add, np.zeros(128, np.uint8), np.zeros(128, np.uint8), BLOCK=128)
    assert "cvt.rn.f16x2.e4m3x2" in ptx and "add.f32" in ptx and "cvt.rn.satfinite.e4m3x2.f32" in ptx
