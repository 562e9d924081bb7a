"""bf16 and the 8-bit floats on the interpreter: values rounded after every op, memory
holding their bits, casts and bitcasts through them, in both execution modes."""

from __future__ import annotations

import numpy as np
import pytest

import polytile.language as pl
from polytile import config, reinterpret
from polytile.dialects.emulated_floats import EMULATED_FLOATS
from polytile.errors import InterpreterUnsupportedError
from polytile.runtime import jit

BF16, E4M3, E5M2 = EMULATED_FLOATS["bf16"], EMULATED_FLOATS["f8e4m3"], EMULATED_FLOATS["f8e5m2"]


def bf16_bits(values) -> np.ndarray:
    return BF16.encode(BF16.round(np.asarray(values, np.float32)))


@pytest.fixture(params=["per_program", "auto"])
def mode(request):
    with config.override(interpreter_mode=request.param):
        yield request.param


@jit
def bf16_arith_kernel(x_ptr, y_ptr, out_ptr, scale, N: pl.constexpr):
    i = pl.arange(0, N)
    x, y = pl.load(x_ptr + i), pl.load(y_ptr + i)
    pl.store(out_ptr + i, x * y + scale)


def test_bf16_arithmetic_rounds_every_result(mode):
    rng = np.random.default_rng(0)
    xs, ys = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    x, y, out = reinterpret(bf16_bits(xs), pl.bfloat16), reinterpret(bf16_bits(ys), pl.bfloat16), np.zeros(64, np.uint16)
    bf16_arith_kernel[(2,)](x, y, reinterpret(out, pl.bfloat16), 0.1, N=64)
    # The product is bf16 (computed in f32, rounded); adding the f32 scalar promotes to f32
    # (Triton's rule), and the store converts the f32 sum to bf16.
    product = BF16.round(BF16.decode(x.base) * BF16.decode(y.base))
    expected = BF16.encode(BF16.round(product + np.float32(0.1)))
    assert (expected != BF16.encode(BF16.round(product + BF16.round(np.float32(0.1))))).any()
    np.testing.assert_array_equal(out, expected)


@jit
def fp8_round_trip_kernel(x_ptr, e4_ptr, e5_ptr, back_ptr, N: pl.constexpr):
    i = pl.arange(0, N)
    x = pl.load(x_ptr + i)
    e4 = x.to(pl.float8e4nv)
    pl.store(e4_ptr + i, e4)
    pl.store(e5_ptr + i, x.to(pl.float8e5))
    pl.store(back_ptr + i, e4.to(pl.float32) + e4.to(pl.bfloat16).to(pl.float32))


def test_fp8_conversions_saturate_and_round_to_even_as_the_gpu(mode):
    x = np.array([0.0, -0.0, 1.0625, 1.1875, 500.0, -1e9, np.inf, np.nan, 2.0 ** -10, 3.0 * 2.0 ** -10,
                  57344.0, 61440.0, 100000.0, -3.3, 0.3, 448.0], np.float32)
    e4, e5, back = np.zeros(16, np.uint8), np.zeros(16, np.uint8), np.zeros(16, np.float32)
    fp8_round_trip_kernel[(1,)](x, reinterpret(e4, pl.float8e4nv), reinterpret(e5, pl.float8e5), back, N=16)
    np.testing.assert_array_equal(e4, E4M3.encode(E4M3.round(x)))
    np.testing.assert_array_equal(e5, E5M2.encode(E5M2.round(x)))
    assert E4M3.decode(e4)[4] == 448 and E4M3.decode(e4)[5] == -448 and E4M3.decode(e4)[6] == 448  # satfinite
    assert E5M2.decode(e5)[12] == 57344 and E5M2.decode(e5)[6] == 57344
    assert E4M3.decode(e4)[2] == 1.0 and E4M3.decode(e4)[3] == 1.25  # ties to even
    np.testing.assert_array_equal(back, 2 * E4M3.decode(e4))


@jit
def bitcast_kernel(bits_ptr, out_ptr, bytes_ptr, big_ptr, N: pl.constexpr):
    i = pl.arange(0, N)
    h = pl.load(bits_ptr + i).to(pl.bfloat16, bitcast=True)  # int16 bits seen as bf16
    pl.store(out_ptr + i, (h * 2).to(pl.int16, bitcast=True))
    b = pl.load(bytes_ptr + i).to(pl.float8e5, bitcast=True)
    pl.store(bytes_ptr + i, (b.to(pl.float32) * 4).to(pl.float8e5).to(pl.uint8, bitcast=True))
    # A wide integer reaches bf16 with one rounding (not through f32).
    pl.store(big_ptr + i, (pl.load(big_ptr + i).to(pl.bfloat16)).to(pl.int64))


def test_bitcasts_and_integer_conversions(mode):
    values = np.array([1.0, -2.5, 3.0e38, 0.0] * 2, np.float32)
    bits = bf16_bits(values).view(np.int16)
    out = np.zeros(8, np.int16)
    raw = np.array([0x3C, 0xBC, 0x7B, 0x00, 0x01, 0x7C, 0x80, 0x44], np.uint8)  # e5m2: 1, -1, max, 0, tiny, inf...
    big = np.array([(1 << 40) + (1 << 32) + 1, -(1 << 40) - (1 << 32), 255, 257, 7, -7, 1 << 62, 0], np.int64)
    expected_raw = E5M2.encode(E5M2.round(E5M2.decode(raw) * 4))
    bitcast_kernel[(1,)](bits, out, raw, big, N=8)
    with np.errstate(over="ignore"):
        doubled = BF16.round(BF16.decode(bits.view(np.uint16)) * 2)
    np.testing.assert_array_equal(out, BF16.encode(doubled).view(np.int16))
    assert BF16.decode(out.view(np.uint16))[2] == np.inf  # 3e38 * 2 overflows bf16
    np.testing.assert_array_equal(raw, expected_raw)
    # Above a tie: up; on ties (-(2**40 + 2**32), 257): to even.
    assert big.tolist() == [(1 << 40) + (1 << 33), -(1 << 40), 255, 256, 7, -7, 1 << 62, 0]


@jit
def bf16_dot_kernel(a_ptr, b_ptr, c_ptr, N: pl.constexpr):
    rows, cols = pl.arange(0, N)[:, None] * N, pl.arange(0, N)[None, :]
    c = pl.dot(pl.load(a_ptr + rows + cols), pl.load(b_ptr + rows + cols))
    pl.store(c_ptr + rows + cols, c)


def test_bf16_loads_feed_a_dot(mode):
    rng = np.random.default_rng(3)
    a, b = (bf16_bits(rng.standard_normal((16, 16))) for _ in range(2))
    c = np.zeros((16, 16), np.float32)
    bf16_dot_kernel[(1,)](reinterpret(a, pl.bfloat16), reinterpret(b, pl.bfloat16), c, N=16)
    np.testing.assert_allclose(c, BF16.decode(a).astype(np.float64) @ BF16.decode(b), rtol=1e-5, atol=1e-5)


@jit
def bf16_atomic_kernel(x_ptr):
    pl.atomic_add(x_ptr, pl.full((), 1.0, pl.bfloat16))


def test_atomics_on_bf16_are_refused_by_name():
    with pytest.raises(InterpreterUnsupportedError, match="atomics on bf16 are not supported"):
        bf16_atomic_kernel[(1,)](reinterpret(np.zeros(1, np.uint16), pl.bfloat16))


def test_torch_bf16_and_fp8_tensors_are_arguments():
    torch = pytest.importorskip("torch")
    x = torch.randn(64, dtype=torch.bfloat16)
    y = torch.randn(64).to(torch.float8_e4m3fn)
    out = torch.empty(64, dtype=torch.bfloat16)
    bf16_arith_kernel[(1,)](x, y.to(torch.bfloat16), out, 0.0, N=64)
    assert torch.equal(out, (x.float() * y.float()).bfloat16())
