"""On an NVIDIA GPU: atomics (a histogram, float max/min, compare-and-swap), device_print,
bf16 arithmetic, fp8 round trips and block-pointer kernels, against NumPy.  Skipped
without a device (and without torch, which moves the arrays)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.gpu.lowering import atomics, debug  # noqa: F401  (register the lowerings; see module.py)
from polytile.gpu.lowering.types import FP8_FORMATS, bf16_bits, fp8_from_f64, fp8_to_f64
from polytile.passes.lower_block_pointers import lower_block_pointers  # noqa: F401

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch():
    from polytile.plugins.manager import get_plugin_manager

    probe = get_plugin_manager().backends.probe("nvidia")
    if not probe.devices:
        pytest.skip(f"no NVIDIA device: {probe.reason}")
    return pytest.importorskip("torch")


def run(torch, kernel, grid, *arrays, **meta):
    """Launch with NumPy arrays copied to the device and back; returns the arrays."""
    tensors = [torch.from_numpy(np.ascontiguousarray(a)).cuda() if isinstance(a, np.ndarray) else a for a in arrays]
    kernel[grid](*tensors, target="nvidia", **meta)
    torch.cuda.synchronize()
    return [t.cpu().numpy() if hasattr(t, "cpu") else t for t in tensors]


@pt.jit
def histogram(x, bins, n, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    pl.atomic_add(bins + pl.load(x + offs, mask=mask, other=0), 1, mask=mask, sem="relaxed")


@pytest.mark.parametrize("block", [32, 1024])  # 32: warps hold copies, each value must count once
def test_histogram(torch, block):
    x = np.random.default_rng(0).integers(0, 64, 100_000).astype(np.int32)
    _, bins, _ = run(torch, histogram, (-(-x.size // block),), x, np.zeros(64, np.int32), x.size, BLOCK=block)
    np.testing.assert_array_equal(bins, np.bincount(x, minlength=64))


@pt.jit
def float_extremes(x, out, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    v = pl.load(x + offs)
    pl.atomic_max(out + offs % 4, v)
    pl.atomic_min(out + 4 + offs % 4, v)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_float_max_min_across_signs(torch, dtype):
    x = np.random.default_rng(1).standard_normal(4096).astype(dtype)
    out = np.array([-np.inf] * 4 + [np.inf] * 4, dtype)
    _, out = run(torch, float_extremes, (4096 // 256,), x, out, BLOCK=256)
    np.testing.assert_array_equal(out[:4], x.reshape(-1, 4).max(axis=0))
    np.testing.assert_array_equal(out[4:], x.reshape(-1, 4).min(axis=0))


@pt.jit
def take_tickets(counter, tickets, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    pl.store(tickets + offs, pl.atomic_add(counter + offs * 0, 1))
    # A spin-free lock: the first program to swap 0 -> 1 wins.
    won = pl.atomic_cas(counter + 1, 0, pl.program_id(0) + 1)
    pl.store(tickets + 4096 + pl.program_id(0), won)


def test_old_values_are_unique_tickets(torch):
    _, tickets = run(torch, take_tickets, (16,), np.zeros(2, np.int32), np.zeros(4096 + 16, np.int32), BLOCK=256)
    assert sorted(tickets[:4096]) == list(range(4096))
    assert (tickets[4096:] == 0).sum() == 1  # exactly one program saw 0


@pt.jit
def print_kernel(x_ptr, BLOCK: pl.constexpr):
    pl.device_print("x", pl.load(x_ptr + pl.arange(0, BLOCK)), pl.program_id(0))


def test_device_print(torch, capfd):
    run(torch, print_kernel, (2,), np.array([3, 4], np.int32), BLOCK=2)
    lines = sorted(line for line in capfd.readouterr().out.splitlines() if line.startswith("pid"))
    assert lines == ["pid (0, 0, 0) idx (0) x 3, 0", "pid (0, 0, 0) idx (1) x 4, 0",
                     "pid (1, 0, 0) idx (0) x 3, 1", "pid (1, 0, 0) idx (1) x 4, 1"]


def _bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pt.jit
def bf16_math(x, y, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    a = pl.load(x + offs).to(pl.bfloat16, bitcast=True)
    b = pl.load(y + offs).to(pl.bfloat16)  # f32 -> bf16, round to nearest even
    pl.store(out + offs, (a.to(pl.float32) * b.to(pl.float32)).to(pl.bfloat16).to(pl.uint16, bitcast=True))


def test_bf16_casts_round_to_nearest_even(torch):
    rng = np.random.default_rng(2)
    x = np.array([bf16_bits(float(v)) for v in rng.standard_normal(1024)], np.uint16)
    y = rng.standard_normal(1024).astype(np.float32)
    _, _, out = run(torch, bf16_math, (1,), x, y, np.zeros(1024, np.uint16), BLOCK=1024)
    yb = _bf16_value(np.array([bf16_bits(float(v)) for v in y], np.uint16))
    expected = np.array([bf16_bits(float(np.float32(a) * np.float32(b))) for a, b in zip(_bf16_value(x), yb)],
                        np.uint16)
    np.testing.assert_array_equal(out, expected)


@pt.jit
def fp8_round_trip(x, bits, back, BLOCK: pl.constexpr, E4: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    q = pl.load(x + offs).to(pl.float8e4nv) if E4 else pl.load(x + offs).to(pl.float8e5)
    pl.store(bits + offs, q.to(pl.uint8, bitcast=True))
    pl.store(back + offs, q.to(pl.float32))


@pytest.mark.parametrize("kind", sorted(FP8_FORMATS))
def test_fp8_conversions(torch, kind):
    fmt = FP8_FORMATS[kind]
    x = (np.random.default_rng(3).standard_normal(1024) * 100).astype(np.float32)
    x[:4] = [np.inf, -np.inf, 1e6, 0.0]
    _, bits, back = run(torch, fp8_round_trip, (1,), x, np.zeros(1024, np.uint8), np.zeros(1024, np.float32),
                        BLOCK=1024, E4=kind == "f8e4m3")
    np.testing.assert_array_equal(bits, [fp8_from_f64(fmt, float(v)) for v in x])
    np.testing.assert_array_equal(back, [fp8_to_f64(fmt, int(b)) for b in bits])
    assert not any(math.isinf(v) for v in back)  # satfinite


@pt.jit
def block_matmul(a, b, c, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    pm, pn = pl.program_id(0), pl.program_id(1)
    a_ptr = pl.make_block_ptr(a, (M, K), (K, 1), (pm * BM, 0), (BM, BK), (1, 0))
    b_ptr = pl.make_block_ptr(b, (K, N), (N, 1), (0, pn * BN), (BK, BN), (1, 0))
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for _ in range(0, pl.cdiv(K, BK)):
        acc += pl.dot(pl.load(a_ptr, boundary_check=(0, 1), padding_option="zero"),
                      pl.load(b_ptr, boundary_check=(0, 1), padding_option="zero"), input_precision="ieee")
        a_ptr = pl.advance(a_ptr, (0, BK))
        b_ptr = pl.advance(b_ptr, (BK, 0))
    pl.store(pl.make_block_ptr(c, (M, N), (N, 1), (pm * BM, pn * BN), (BM, BN), (1, 0)), acc, boundary_check=(0, 1))


def test_block_pointer_matmul(torch):
    m, n, k = 37, 29, 45
    rng = np.random.default_rng(4)
    a = rng.integers(-4, 4, (m, k)).astype(np.float32)
    b = rng.integers(-4, 4, (k, n)).astype(np.float32)
    _, _, c = run(torch, block_matmul, (3, 2), a, b, np.zeros((m, n), np.float32), m, n, k, BM=16, BN=16, BK=16)[:3]
    np.testing.assert_array_equal(c, a @ b)


@pt.jit
def clock_and_sm(times, sms, out, N: pl.constexpr):
    pid = pl.program_id(0)
    start = pl.extra.cuda.globaltimer()
    offs = pl.arange(0, N)
    x = pl.load(out + pid * N + offs)
    for _ in range(64):  # some work between the readings
        x = x * 1.0001 + 1.0
    pl.store(out + pid * N + offs, x)
    end = pl.extra.cuda.globaltimer()
    pl.store(times + 2 * pid, start)
    pl.store(times + 2 * pid + 1, end)
    pl.store(sms + pid, pl.extra.cuda.smid())
    n: pl.constexpr = pl.extra.cuda.num_threads()
    pl.store(sms + 1024 + pl.arange(0, n), pl.full((n,), pid, pl.int32), mask=pid == 0)


def test_globaltimer_smid_and_num_threads_on_the_gpu(torch):
    programs = 512
    times = np.zeros(2 * programs, np.int64)
    sms = np.full(1024 + 256, -1, np.int32)
    out = np.zeros(programs * 128, np.float32)
    times, sms, _ = run(torch, clock_and_sm, (programs,), times, sms, out, N=128, num_warps=8)
    start, end = times[0::2], times[1::2]
    assert (end >= start).all() and (start > 0).all()
    # Nanoseconds of one device clock: all readings within a few seconds of each other.
    assert end.max() - start.min() < 5_000_000_000
    count = torch.cuda.get_device_properties(0).multi_processor_count
    assert ((sms[:programs] >= 0) & (sms[:programs] < count)).all()
    assert len(set(sms[:programs].tolist())) > 1  # 512 programs ran on more than one SM
    assert (sms[1024:1024 + 256] == 0).all()  # num_threads() = 8 warps x 32
