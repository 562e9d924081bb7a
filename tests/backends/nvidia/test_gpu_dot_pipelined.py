"""On a GPU: a K loop of pl.dot with its loads pipelined (cp.async into rings of
num_stages slots, pipeline-loops), against NumPy, for 1 to 4 stages, f16 and tf32,
masked K tails and loops shorter than the ring.  Skipped without a supported NVIDIA GPU
(and torch with CUDA for the arrays)."""

from __future__ import annotations

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl

from .fake_cuda import nvidia_gpu, torch_cuda  # noqa: F401  (nvidia_gpu is a fixture)

pytestmark = pytest.mark.gpu


@pt.jit
def matmul_loop_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    pid_m, pid_n = pl.program_id(0), pl.program_id(1)
    offs_m = pid_m * BM + pl.arange(0, BM)
    offs_n = pid_n * BN + pl.arange(0, BN)
    offs_k = pl.arange(0, BK)
    a_ptrs = a_ptr + (offs_m[:, None] % M) * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * N + (offs_n[None, :] % N)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in range(pl.cdiv(K, BK)):
        a = pl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = pl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = pl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * N
    c_ptrs = c_ptr + offs_m[:, None] * N + offs_n[None, :]
    pl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def cuda(array):
    torch = torch_cuda()
    return torch.from_numpy(np.ascontiguousarray(array)).cuda()


#: (M, N, K, blocks, num_warps, operand types)
SHAPES = [
    (256, 256, 512, (128, 128, 32), 4, (np.float16, np.float32)),
    (192, 160, 208, (64, 64, 32), 4, (np.float16, np.float32)),  # a masked K tail, partial M and N tiles
    (64, 64, 32, (64, 64, 32), 4, (np.float16, np.float32)),     # one iteration: fewer than the ring's slots
    (256, 256, 256, (128, 256, 64), 8, (np.float16,)),            # the bench configuration's blocks
]
CASES = [(m, n, k, blocks, warps, dtype) for m, n, k, blocks, warps, dtypes in SHAPES for dtype in dtypes]


@pytest.mark.parametrize("num_stages", [1, 2, 3, 4])
@pytest.mark.parametrize("m, n, k, blocks, num_warps, dtype", CASES)
def test_pipelined_matmul_matches_numpy(nvidia_gpu, dtype, num_stages, m, n, k, blocks, num_warps):
    rng = np.random.default_rng(m + k + num_stages)
    a = rng.integers(-4, 5, (m, k)).astype(dtype)
    b = rng.integers(-4, 5, (k, n)).astype(dtype)
    c = cuda(np.zeros((m, n), np.float32))
    grid = ((m + blocks[0] - 1) // blocks[0], (n + blocks[1] - 1) // blocks[1])
    matmul_loop_kernel[grid](cuda(a), cuda(b), c, m, n, k, *blocks, num_warps=num_warps, num_stages=num_stages,
                             target="nvidia")
    np.testing.assert_array_equal(c.cpu().numpy(), a.astype(np.float64) @ b.astype(np.float64))
