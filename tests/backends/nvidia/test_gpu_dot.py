"""On a GPU: pl.dot on tensor cores (mma.sync) and as multiply-adds, against NumPy, for
every operand type the NVIDIA backend multiplies, every shape class and 1 to 8 warps;
and the matmul example.  Skipped without a supported NVIDIA GPU (and torch with CUDA
for the arrays)."""

from __future__ import annotations


import numpy as np
import pytest

import polytile as pt
import polytile.language as pl

from .fake_cuda import nvidia_gpu, torch_cuda  # noqa: F401  (nvidia_gpu is a fixture)

pytestmark = pytest.mark.gpu


@pt.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, acc_ptr, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr,
               ACC: pl.constexpr, PRECISION: pl.constexpr):
    rm, rn, rk = pl.arange(0, BM), pl.arange(0, BN), pl.arange(0, BK)
    a = pl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0)
    b = pl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0)
    c_mask = (rm[:, None] < M) & (rn[None, :] < N)
    if ACC:
        acc = pl.load(acc_ptr + rm[:, None] * N + rn[None, :], mask=c_mask, other=0)
        c = pl.dot(a, b, acc, input_precision=PRECISION)
    else:
        c = pl.dot(a, b, input_precision=PRECISION)
    pl.store(c_ptr + rm[:, None] * N + rn[None, :], c, mask=c_mask)


def cuda(array):
    torch = torch_cuda()
    return torch.from_numpy(np.ascontiguousarray(array)).cuda()


#: name -> (operand dtype, result dtype, input_precision)
TYPES = {
    "f16": (np.float16, np.float32, "tf32"), "tf32": (np.float32, np.float32, "tf32"),
    "tf32x3": (np.float32, np.float32, "tf32x3"), "ieee": (np.float32, np.float32, "ieee"),
    "i8": (np.int8, np.int32, "tf32"), "f64": (np.float64, np.float64, "ieee"),
}


def run_dot(name, m, n, k, blocks, num_warps, acc=False, seed=0):
    dtype, result, precision = TYPES[name]
    rng = np.random.default_rng(seed)
    # Small integers: every product and sum is exact in every type, tf32 included.
    a = rng.integers(-4, 5, (m, k)).astype(dtype)
    b = rng.integers(-4, 5, (k, n)).astype(dtype)
    c_init = rng.integers(-4, 5, (m, n)).astype(result)
    c = cuda(np.zeros((m, n), result))
    dot_kernel[(1,)](cuda(a), cuda(b), c, cuda(c_init), m, n, k, *blocks, ACC=acc, PRECISION=precision,
                     num_warps=num_warps, target="nvidia")
    expected = a.astype(np.int64) @ b.astype(np.int64) + (c_init if acc else 0)
    np.testing.assert_array_equal(c.cpu().numpy(), expected.astype(result))


@pytest.mark.parametrize("name", list(TYPES))
@pytest.mark.parametrize("acc", [False, True])
@pytest.mark.parametrize("mnk", [(16, 16, 16), (32, 32, 32), (20, 33, 45)])
def test_dot_types(nvidia_gpu, name, acc, mnk):
    blocks = [max(16, 1 << (d - 1).bit_length()) for d in mnk]
    if name == "i8":
        blocks[2] = max(blocks[2], 32)  # the int8 mma's K; a K of 16 multiplies and adds instead
    run_dot(name, *mnk, blocks, 4, acc)


@pytest.mark.parametrize("shape", [(16, 16, 16), (32, 32, 32), (64, 64, 32), (128, 128, 64), (64, 128, 32),
                                   (128, 32, 16), (16, 128, 64)])
@pytest.mark.parametrize("num_warps", [1, 2, 4, 8])
def test_f16_dot_shapes_and_warps(nvidia_gpu, shape, num_warps):
    run_dot("f16", *shape, shape, num_warps)


def test_int8_dot_with_a_short_k_multiplies_and_adds(nvidia_gpu):
    run_dot("i8", 32, 32, 16, (32, 32, 16), 4)


@pytest.mark.parametrize("precision, tolerance", [("tf32", 5e-3), ("tf32x3", 1e-5), ("ieee", 1e-5)])
def test_f32_precisions(nvidia_gpu, precision, tolerance):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((64, 64)).astype(np.float32), rng.standard_normal((64, 64)).astype(np.float32)
    c = cuda(np.zeros((64, 64), np.float32))
    dot_kernel[(1,)](cuda(a), cuda(b), c, c, 64, 64, 64, 64, 64, 64, ACC=False, PRECISION=precision,
                     target="nvidia")
    np.testing.assert_allclose(c.cpu().numpy(), a.astype(np.float64) @ b, rtol=tolerance, atol=tolerance * 8)


def _matmul_example():
    from tests.examples.loading import load_example

    return load_example("matmul", "matmul_example")


@pytest.mark.parametrize("mnk", [(100, 72, 130), (256, 256, 256), (33, 17, 64)])
def test_matmul_example(nvidia_gpu, mnk):
    example = _matmul_example()
    m, n, k = mnk
    rng = np.random.default_rng(2)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = cuda(np.zeros((m, n), np.float16))
    grid = (pt.cdiv(m, 32) * pt.cdiv(n, 32),)  # one program per block of C, in groups of block rows
    example.matmul_kernel[grid](cuda(a), cuda(b), c, m, n, k, k, 1, n, 1, n, 1, BLOCK_M=32, BLOCK_N=32,
                                BLOCK_K=32, target="nvidia")
    reference = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.cpu().numpy().astype(np.float32), reference, rtol=1e-2, atol=1e-2)
