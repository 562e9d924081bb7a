"""Fuzz regression fuzz_2026_8010: crash in compile:nvidia:sm_90a.

Found by ``python -m polytile.fuzz --seed 2026 --start 8010 --count 1`` and shrunk
to this kernel.  What was seen: CompilationError: /tmp/fz/k/fuzz_2026_8010.py:77:6: error: in kernel 'fuzz_2026_8010': 'tile.scan' along axis 0 of tile<32xf32, #gpu.slice<dim = 1, parent = #gpu.mma<version = 2, warps_per_cta = [2, 2], instr_shape = [16, 8]>>> (registers step along the axis between lanes or warps) is not supported by the NVIDIA backend yet v8 = pl.cumsum(x6, axis=0, reverse=True)
"""

import pytest

import polytile as pt
import polytile.language as pl
from polytile.fuzz.regression import Case, run_case

@pt.jit
def round_bf16(x):
    # f32 -> bf16 -> f32: round the low 16 bits away, to nearest even.
    bits = x.to(pl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(pl.float32, bitcast=True)


@pt.jit
def round_fp8(x, MIN_EXPONENT: pl.constexpr, MANTISSA_BITS: pl.constexpr):
    # f32 -> fp8 -> f32 for finite values in range: scale by a power of two so that
    # the format's last bit is 1, round to an integer (nearest even) and scale back.
    bits = x.to(pl.uint32, bitcast=True)
    exponent = pl.maximum(((bits >> 23) & 0xFF).to(pl.int32) - 127, MIN_EXPONENT) - MANTISSA_BITS
    quantum = ((exponent + 127) << 23).to(pl.float32, bitcast=True)
    inverse = ((127 - exponent) << 23).to(pl.float32, bitcast=True)
    scaled = x * inverse
    rounded = (scaled + 12582912.0) - 12582912.0
    return rounded * quantum


@pt.jit
def bf16_bits_to_f32(bits):
    return (bits.to(pl.uint32) << 16).to(pl.float32, bitcast=True)


@pt.jit
def e5m2_bits_to_f32(bits):
    return (bits.to(pl.uint16) << 8).to(pl.float16, bitcast=True).to(pl.float32)


@pt.jit
def e4m3_bits_to_f32(bits):
    b = bits.to(pl.uint32)
    exponent = (b >> 3) & 0xF
    mantissa = b & 7
    normal = (((exponent + 120) << 23) | (mantissa << 20)).to(pl.float32, bitcast=True)
    subnormal = mantissa.to(pl.float32) * 0.001953125
    magnitude = pl.where(exponent == 0, subnormal, normal)
    return pl.where((b >> 7) == 1, -magnitude, magnitude)


@pt.jit
def f32_to_bf16_bits(x):
    return (round_bf16(x).to(pl.uint32, bitcast=True) >> 16).to(pl.uint16)


@pt.jit
def f32_to_e5m2_bits(x):
    return (round_fp8(x, -14, 2).to(pl.float16).to(pl.uint16, bitcast=True) >> 8).to(pl.uint8)


@pt.jit
def fuzz_2026_8010(d3a_ptr, d3b_ptr, a4_ptr, x6_ptr, out9_ptr, M, N, K, trips, EMULATE: pl.constexpr, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    pid = pl.program_id(0)
    rows = pid * BM + pl.arange(0, BM)
    cols = pl.arange(0, BN)
    rmask = rows < M
    cmask = cols < N
    mask = rmask[:, None] & cmask[None, :]
    d3 = pl.zeros((BM, BN), dtype=pl.int32)
    for d3_kb in range(0, pl.cdiv(K, BK)):
        d3_ks = d3_kb * BK + pl.arange(0, BK)
        d3_a = pl.load(d3a_ptr + rows[:, None] * K + d3_ks[None, :], mask=rmask[:, None] & (d3_ks[None, :] < K), other=0)
        d3_b = pl.load(d3b_ptr + d3_ks[:, None] * N + cols[None, :], mask=(d3_ks[:, None] < K) & cmask[None, :], other=0)
        d3 = pl.dot(d3_a, d3_b, d3)
    pl.atomic_add(a4_ptr + (rows[:, None] + cols[None, :]) % 4, d3, mask=mask)
    if EMULATE:
        x6 = e4m3_bits_to_f32(pl.load(x6_ptr + pid * N + cols, mask=cmask, other=0))
    else:
        x6 = pl.load(x6_ptr + pid * N + cols, mask=cmask, other=0).to(pl.float32)
    v8 = pl.cumsum(x6, axis=0, reverse=True)
    if EMULATE:
        pl.store(out9_ptr + pid * N + cols, f32_to_e5m2_bits(v8), mask=cmask)
    else:
        pl.store(out9_ptr + pid * N + cols, v8.to(pl.float8e5), mask=cmask)


CASE = Case(
    kernel=fuzz_2026_8010,
    family='2d',
    sizes={'M': 1, 'N': 1, 'K': 1, 'trips': 0},
    blocks={'BM': 32, 'BN': 32, 'BK': 32},
    num_warps=4,
    seed=2026,
    index=8010,
    arrays=[
    ('d3a', 'i8', 'in', 'A', 0.0, 'random', False),
    ('d3b', 'i8', 'in', 'B', 0.0, 'random', False),
    ('a4', 'i32', 'out', 'atomic', 0.0, 'zeros', True),
    ('x6', 'e4m3', 'in', 'C', 0.0, 'random', False),
    ('out9', 'e5m2', 'out', 'C', 32.00049591064453, 'zeros', False),
    ],
)


@pytest.mark.parametrize("target", ["interp", pytest.param("compile:nvidia:sm_90a"), pytest.param("nvidia", marks=[pytest.mark.gpu])])
def test_fuzz_2026_8010(target):
    run_case(CASE, target)
