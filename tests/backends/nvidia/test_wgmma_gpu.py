"""On a Hopper GPU: pl.dot lowered to wgmma.mma_async (both operands in shared memory)
against NumPy, for f16 and bf16 with f32 and f16 accumulators, one dot and K loops of 1 to
4 pipeline stages, masked edges, row- and column-major operands (read K-major or
transposed, from ring slots in place or from the dot's own scratch).  Skipped without an
sm_90 GPU (and torch with CUDA for the arrays)."""

from __future__ import annotations

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl

from .fake_cuda import nvidia_gpu, torch_cuda  # noqa: F401  (nvidia_gpu is a fixture)

pytestmark = pytest.mark.gpu


@pytest.fixture
def hopper(nvidia_gpu):  # noqa: F811
    if nvidia_gpu.target.arch != "sm_90a":
        pytest.skip(f"wgmma needs an sm_90a device, the first GPU is {nvidia_gpu.target.arch}")
    return nvidia_gpu


@pt.jit
def loop_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am: pl.constexpr, stride_ak: pl.constexpr,
                stride_bk: pl.constexpr, stride_bn: pl.constexpr, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr, ACC16: pl.constexpr):
    pid_m, pid_n = pl.program_id(0), pl.program_id(1)
    offs_m = pid_m * BM + pl.arange(0, BM)
    offs_n = pid_n * BN + pl.arange(0, BN)
    offs_k = pl.arange(0, BK)
    a_ptrs = a_ptr + (offs_m[:, None] % M) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + (offs_n[None, :] % N) * stride_bn
    if ACC16:
        acc = pl.zeros((BM, BN), dtype=pl.float16)
    else:
        acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in range(pl.cdiv(K, BK)):
        a = pl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = pl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = pl.dot(a, b, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * N + offs_n[None, :]
    pl.store(c_ptrs, acc.to(pl.float32), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _cuda(array, dtype=None):
    torch = torch_cuda()
    tensor = torch.from_numpy(np.ascontiguousarray(array)).cuda()
    return tensor.to(dtype) if dtype is not None else tensor


def _run(m, n, k, blocks, num_warps, num_stages, dtype="f16", acc16=False, a_trans=False, b_trans=False,
         **options):
    torch = torch_cuda()
    rng = np.random.default_rng(m * 7 + n * 3 + k + num_stages)
    a = rng.integers(-4, 5, (m, k)).astype(np.float32)
    b = rng.integers(-4, 5, (k, n)).astype(np.float32)
    if acc16:  # keep every partial sum exact in f16
        a, b = np.clip(a, -1, 1), np.clip(b, -1, 1)
    torch_type = torch.float16 if dtype == "f16" else torch.bfloat16
    # A stored column-major (a_trans) or B row-major of its transpose (b_trans): the
    # operand's contiguous dimension is M or K, and wgmma reads it transposed (or not).
    a_dev = _cuda(a.T, torch_type).T if a_trans else _cuda(a, torch_type)
    b_dev = _cuda(b.T, torch_type).T if b_trans else _cuda(b, torch_type)
    c = _cuda(np.zeros((m, n), np.float32))
    grid = ((m + blocks[0] - 1) // blocks[0], (n + blocks[1] - 1) // blocks[1])
    loop_kernel[grid](a_dev, b_dev, c, m, n, k, a_dev.stride(0), a_dev.stride(1), b_dev.stride(0), b_dev.stride(1),
                      *blocks, ACC16=acc16, num_warps=num_warps, num_stages=num_stages, target="nvidia", **options)
    np.testing.assert_array_equal(c.cpu().numpy(), a.astype(np.float64) @ b.astype(np.float64))


#: (M, N, K, (BM, BN, BK), num_warps)
SHAPES = [
    (64, 64, 64, (64, 64, 64), 4),
    (128, 128, 64, (128, 128, 64), 4),
    (128, 256, 64, (128, 256, 64), 8),
    (256, 256, 512, (128, 128, 32), 8),
    (192, 160, 208, (64, 32, 16), 4),      # masked K tail, partial M and N tiles, 32-byte swizzle of A
    (200, 136, 100, (128, 64, 32), 4),     # M repeats per warpgroup, 64-byte swizzle
]


@pytest.mark.parametrize("num_stages", [1, 2, 3, 4])
@pytest.mark.parametrize("m, n, k, blocks, num_warps", SHAPES)
def test_wgmma_loop_matches_numpy(hopper, m, n, k, blocks, num_warps, num_stages):
    if blocks == (128, 256, 64) and num_stages == 4:
        pytest.skip("four stages of 128x256x64 do not fit Hopper's 227 KiB of shared memory")
    _run(m, n, k, blocks, num_warps, num_stages)


@pytest.mark.parametrize("dtype, acc16", [("bf16", False), ("f16", True)])
@pytest.mark.parametrize("num_stages", [1, 3])
def test_wgmma_types(hopper, dtype, acc16, num_stages):
    _run(256, 128, 192, (128, 128, 64), 4, num_stages, dtype=dtype, acc16=acc16)


@pytest.mark.parametrize("a_trans, b_trans", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("num_stages", [1, 3])
def test_wgmma_operand_orders(hopper, a_trans, b_trans, num_stages):
    _run(128, 128, 128, (128, 128, 64), 4, num_stages, a_trans=a_trans, b_trans=b_trans)




@pt.jit
def converted_loop_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr,
                          TYPE: pl.constexpr, ACC: pl.constexpr):
    pid_m, pid_n = pl.program_id(0), pl.program_id(1)
    offs_m = pid_m * BM + pl.arange(0, BM)
    offs_n = pid_n * BN + pl.arange(0, BN)
    offs_k = pl.arange(0, BK)
    a_ptrs = a_ptr + (offs_m[:, None] % M) * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * N + (offs_n[None, :] % N)
    acc = pl.zeros((BM, BN), dtype=ACC)
    for k in range(pl.cdiv(K, BK)):
        a = pl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0).to(TYPE)
        b = pl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0).to(TYPE)
        acc = pl.dot(a, b, acc, input_precision="tf32")
        a_ptrs += BK
        b_ptrs += BK * N
    pl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(pl.float32),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@pytest.mark.parametrize("dtype, acc, blocks, num_stages", [
    (pl.float32, pl.float32, (128, 128, 32), 1),
    (pl.float32, pl.float32, (128, 64, 32), 3),      # tf32 slots: A read in place
    (pl.float8e4nv, pl.float32, (128, 128, 64), 1),
    (pl.float8e5, pl.float32, (64, 64, 32), 2),
    (pl.float8e4nv, pl.float16, (128, 64, 64), 1),
])
def test_wgmma_tf32_and_fp8(hopper, dtype, acc, blocks, num_stages):
    m, n, k = 200, 160, 224
    rng = np.random.default_rng(k + num_stages)
    a = rng.integers(-4, 5, (m, k)).astype(np.float32)   # exact in tf32, e4m3 and e5m2
    b = rng.integers(-2, 3, (k, n)).astype(np.float32)
    c = _cuda(np.zeros((m, n), np.float32))
    grid = ((m + blocks[0] - 1) // blocks[0], (n + blocks[1] - 1) // blocks[1])
    converted_loop_kernel[grid](_cuda(a), _cuda(b), c, m, n, k, *blocks, TYPE=dtype, ACC=acc, num_warps=4,
                                num_stages=num_stages, target="nvidia")
    np.testing.assert_array_equal(c.cpu().numpy(), a.astype(np.float64) @ b.astype(np.float64))


@pt.jit
def chained_kernel(q_ptr, k_ptr, v_ptr, o_ptr, BM: pl.constexpr, BN: pl.constexpr, D: pl.constexpr):
    rm, rn, rd = pl.arange(0, BM), pl.arange(0, BN), pl.arange(0, D)
    q = pl.load(q_ptr + rm[:, None] * D + rd[None, :])
    k = pl.load(k_ptr + rd[:, None] * BN + rn[None, :])
    v = pl.load(v_ptr + rn[:, None] * D + rd[None, :])
    p = pl.dot(q, k).to(pl.float16)
    pl.store(o_ptr + rm[:, None] * D + rd[None, :], pl.dot(p, v))


@pytest.mark.parametrize("bm, bn, d, num_warps", [(64, 64, 64, 4), (128, 64, 128, 8), (128, 128, 64, 4)])
def test_wgmma_a_from_registers(hopper, bm, bn, d, num_warps):
    # p = q @ k stays in registers and is the A of p @ v (attention's second dot).
    rng = np.random.default_rng(bm + bn + d)
    q = rng.integers(-2, 3, (bm, d)).astype(np.float16)
    k = rng.integers(-2, 3, (d, bn)).astype(np.float16)
    v = rng.integers(-2, 3, (bn, d)).astype(np.float16)
    o = _cuda(np.zeros((bm, d), np.float32))
    chained_kernel[(1,)](_cuda(q), _cuda(k), _cuda(v), o, BM=bm, BN=bn, D=d, num_warps=num_warps, target="nvidia")
    p = q.astype(np.float64) @ k.astype(np.float64)
    np.testing.assert_array_equal(o.cpu().numpy(), p @ v.astype(np.float64))


@pt.jit
def invariant_q_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq_len, BM: pl.constexpr, BN: pl.constexpr, D: pl.constexpr):
    # Attention's shape without the softmax: q from before the loop (stored in shared
    # memory once, hoist-dot-operands), K and V pipelined under a mask the scores share.
    rm, rn, rd = pl.arange(0, BM), pl.arange(0, BN), pl.arange(0, D)
    q = pl.load(q_ptr + rm[:, None] * D + rd[None, :])
    acc = pl.zeros((BM, D), dtype=pl.float32)
    for start in range(0, seq_len, BN):
        cols = start + rn
        k = pl.load(k_ptr + cols[None, :] * D + rd[:, None], mask=cols[None, :] < seq_len, other=0.0)
        s = pl.where(cols[None, :] < seq_len, pl.dot(q, k), 0.0)
        v = pl.load(v_ptr + cols[:, None] * D + rd[None, :], mask=cols[:, None] < seq_len, other=0.0)
        acc = pl.dot(s.to(pl.float16), v, acc)
    pl.store(o_ptr + rm[:, None] * D + rd[None, :], acc)


def invariant_q_case(bm: int, d: int, seq_len: int) -> tuple:
    """q, k, v (values exact in f16 through both dots) and NumPy's result."""
    rng = np.random.default_rng(bm + d + seq_len)
    q = rng.integers(-1, 2, (bm, d)).astype(np.float16)
    k = rng.integers(-1, 2, (seq_len, d)).astype(np.float16)
    v = rng.integers(-1, 2, (seq_len, d)).astype(np.float16)
    scores = q.astype(np.float64) @ k.astype(np.float64).T
    return q, k, v, scores @ v.astype(np.float64)


@pytest.mark.parametrize("bm, bn, d, num_warps", [(64, 64, 64, 4), (128, 64, 128, 8)])
@pytest.mark.parametrize("num_stages", [1, 3])
def test_wgmma_loop_invariant_q(hopper, bm, bn, d, num_warps, num_stages):
    q, k, v, expected = invariant_q_case(bm, d, 200)
    o = _cuda(np.zeros((bm, d), np.float32))
    invariant_q_kernel[(1,)](_cuda(q), _cuda(k), _cuda(v), o, 200, BM=bm, BN=bn, D=d, num_warps=num_warps,
                             num_stages=num_stages, target="nvidia")
    np.testing.assert_array_equal(o.cpu().numpy(), expected)
