"""On a GPU: kernels whose layout conversions, transposes and reshapes go through shared
memory, and noinline calls, against NumPy.  Skipped without a supported NVIDIA GPU
(and torch with CUDA for the arrays)."""

from __future__ import annotations

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl

from .fake_cuda import nvidia_gpu, torch_cuda  # noqa: F401  (nvidia_gpu is a fixture)

pytestmark = pytest.mark.gpu


@pt.jit
def outer_sum(x_ptr, out_ptr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    x = pl.load(x_ptr + offs)
    pl.store(out_ptr + offs[:, None] * BLOCK + offs[None, :], x[:, None] + x[None, :])


@pt.jit
def transpose(x_ptr, out_ptr, M: pl.constexpr, N: pl.constexpr):
    rows = pl.arange(0, M)[:, None]
    cols = pl.arange(0, N)[None, :]
    x = pl.load(x_ptr + rows * N + cols)
    t_rows = pl.arange(0, N)[:, None]
    t_cols = pl.arange(0, M)[None, :]
    pl.store(out_ptr + t_rows * M + t_cols, pl.trans(x))


@pt.jit
def reshape(x_ptr, out_ptr, M: pl.constexpr, N: pl.constexpr):
    rows = pl.arange(0, M)[:, None]
    cols = pl.arange(0, N)[None, :]
    x = pl.load(x_ptr + rows * N + cols)
    pl.store(out_ptr + pl.arange(0, M * N), pl.reshape(x, (M * N,)))


@pt.jit(noinline=True)
def scaled(v, k):
    return v * k


@pt.jit
def calls(x_ptr, out_ptr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    x = pl.load(x_ptr + offs)
    y = x[:, None] + x[None, :]
    pl.store(out_ptr + offs[:, None] * BLOCK + offs[None, :], y * scaled(pl.load(x_ptr), 3.0))


def cuda(array):
    torch = torch_cuda()
    return torch.from_numpy(np.ascontiguousarray(array)).cuda()


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int64])
@pytest.mark.parametrize("block", [16, 64, 128])
@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_outer_sum(nvidia_gpu, dtype, block, num_warps):
    x = (np.arange(block) % 17).astype(dtype)
    out = cuda(np.zeros(block * block, dtype))
    outer_sum[(1,)](cuda(x), out, BLOCK=block, num_warps=num_warps, target="nvidia")
    np.testing.assert_array_equal(out.cpu().numpy().reshape(block, block), x[:, None] + x[None, :])


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.bool_])
@pytest.mark.parametrize("shape", [(4, 8), (32, 64), (64, 32), (128, 128)])
def test_transpose(nvidia_gpu, dtype, shape):
    m, n = shape
    x = (np.arange(m * n).reshape(m, n) % 5).astype(dtype)
    out = cuda(np.zeros(m * n, dtype))
    transpose[(1,)](cuda(x), out, M=m, N=n, target="nvidia")
    np.testing.assert_array_equal(out.cpu().numpy().reshape(n, m), x.T)


@pytest.mark.parametrize("shape", [(4, 8), (16, 64)])
def test_reshape(nvidia_gpu, shape):
    m, n = shape
    x = np.arange(m * n, dtype=np.int32).reshape(m, n)
    out = cuda(np.zeros(m * n, np.int32))
    reshape[(1,)](cuda(x), out, M=m, N=n, target="nvidia")
    np.testing.assert_array_equal(out.cpu().numpy(), x.reshape(-1))


def test_noinline_call_and_conversion(nvidia_gpu):
    x = np.arange(32, dtype=np.float32)
    out = cuda(np.zeros(32 * 32, np.float32))
    calls[(1,)](cuda(x), out, BLOCK=32, target="nvidia")
    np.testing.assert_allclose(out.cpu().numpy().reshape(32, 32), (x[:, None] + x[None, :]) * x[0] * 3.0)


@pt.jit
def strided_copy(x_ptr, out_ptr, stride_0, stride_1, M: pl.constexpr, N: pl.constexpr):
    rows = pl.arange(0, M)[:, None]
    cols = pl.arange(0, N)[None, :]
    pl.store(out_ptr + rows * N + cols, pl.load(x_ptr + rows * stride_0 + cols * stride_1) * 2)


@pytest.mark.parametrize("view", [lambda t: t.t(), lambda t: t[:, 1:5], lambda t: t.flip(0)[::2, 2:6]],
                         ids=["transposed", "sliced", "flipped-step"])
def test_strided_tensors_pass_their_first_element(nvidia_gpu, view):
    # As in Triton: a non-contiguous tensor is its first element's address, and the kernel
    # walks it with the strides it is given; the interpreter does the same (test_strided_arguments).
    torch = torch_cuda()
    whole = torch.arange(64, dtype=torch.float32, device="cuda").reshape(8, 8)
    x = view(whole)
    m, n = x.shape
    out = torch.zeros(m * n, dtype=torch.float32, device="cuda")
    strided_copy[(1,)](x, out, x.stride(0), x.stride(1), M=m, N=n, target="nvidia")
    np.testing.assert_array_equal(out.cpu().numpy().reshape(m, n), x.cpu().numpy() * 2)
