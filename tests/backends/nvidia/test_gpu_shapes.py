"""On a GPU: join, split, cat, reshape and permute kernels against NumPy, through both
lowerings (registers, when the layouts keep each element in its thread, and shared
memory otherwise), over several shapes, dtypes and numbers of warps.  Skipped without a
supported NVIDIA GPU (and torch with CUDA for the arrays)."""

from __future__ import annotations

import numpy as np
import pytest

import polytile as pt
import polytile.gpu.lowering.shapes  # registers the lowerings (module.py imports it at integration)
import polytile.language as pl

from .fake_cuda import nvidia_gpu, torch_cuda  # noqa: F401  (nvidia_gpu is a fixture)

pytestmark = pytest.mark.gpu

DTYPES = [np.float32, np.float16, np.int8, np.int64, np.float64, np.bool_]


def cuda(array):
    torch = torch_cuda()
    return torch.from_numpy(np.ascontiguousarray(array)).cuda()


def data(shape, dtype, seed=0):
    values = np.random.default_rng(seed).integers(0, 100, size=shape)
    return (values % 2).astype(dtype) if dtype is np.bool_ else values.astype(dtype)


@pt.jit
def join_kernel(a_ptr, b_ptr, out_ptr, N: pl.constexpr):
    offs = pl.arange(0, N)
    j = pl.join(pl.load(a_ptr + offs), pl.load(b_ptr + offs))
    pl.store(out_ptr + offs[:, None] * 2 + pl.arange(0, 2)[None, :], j)


@pt.jit
def split_kernel(x_ptr, lo_ptr, hi_ptr, N: pl.constexpr):
    offs = pl.arange(0, N)
    lo, hi = pl.split(pl.load(x_ptr + offs[:, None] * 2 + pl.arange(0, 2)[None, :]))
    pl.store(lo_ptr + offs, lo)
    pl.store(hi_ptr + offs, hi)


@pt.jit
def split_other_layout_kernel(x_ptr, lo_ptr, hi_ptr, N: pl.constexpr):
    # The halves share a group with a 1-D load, so they are not the slice of the pairs.
    offs = pl.arange(0, N)
    lo, hi = pl.split(pl.load(x_ptr + offs[:, None] * 2 + pl.arange(0, 2)[None, :]))
    pl.store(lo_ptr + offs, lo + pl.load(lo_ptr + offs))
    pl.store(hi_ptr + offs, hi + pl.load(hi_ptr + offs))


@pt.jit
def join_3d_kernel(a_ptr, b_ptr, out_ptr, M: pl.constexpr, N: pl.constexpr):
    r = pl.arange(0, M)[:, None] * N + pl.arange(0, N)[None, :]
    j = pl.join(pl.load(a_ptr + r), pl.load(b_ptr + r))
    pl.store(out_ptr + r[:, :, None] * 2 + pl.arange(0, 2)[None, None, :], j)


@pt.jit
def split_3d_kernel(x_ptr, lo_ptr, hi_ptr, M: pl.constexpr, N: pl.constexpr):
    r = pl.arange(0, M)[:, None] * N + pl.arange(0, N)[None, :]
    lo, hi = pl.split(pl.load(x_ptr + r[:, :, None] * 2 + pl.arange(0, 2)[None, None, :]))
    pl.store(lo_ptr + r, lo)
    pl.store(hi_ptr + r, hi)


@pt.jit
def cat_kernel(a_ptr, b_ptr, out_ptr, N: pl.constexpr):
    offs = pl.arange(0, N)
    c = pl.cat(pl.load(a_ptr + offs), pl.load(b_ptr + offs), can_reorder=True)
    pl.store(out_ptr + pl.arange(0, 2 * N), c)


@pt.jit
def scalars_kernel(x_ptr, out_ptr):
    s = pl.join(pl.load(x_ptr), pl.load(x_ptr + 1))
    lo, hi = pl.split(s)
    pl.store(out_ptr + pl.arange(0, 2), s)
    pl.store(out_ptr + 2, hi)
    pl.store(out_ptr + 3, lo)


@pt.jit
def round_trip_kernel(x_ptr, out_ptr, M: pl.constexpr, N: pl.constexpr):
    # reshape to 3-D, permute, join with itself, split back, undo: every op, one kernel.
    r = pl.arange(0, M)[:, None] * N + pl.arange(0, N)[None, :]
    x = pl.load(x_ptr + r)
    p = pl.permute(pl.reshape(x, (M, 2, N // 2)), (2, 0, 1))   # [N/2, M, 2]
    lo, hi = pl.split(p)                                       # [N/2, M] each
    back = pl.reshape(pl.permute(pl.join(hi, lo), (1, 2, 0)), (M, N))
    pl.store(out_ptr + r, back)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, num_warps", [(16, 4), (128, 4), (1024, 4), (64, 1), (512, 8)])
def test_join(nvidia_gpu, n, num_warps, dtype):
    a, b = data(n, dtype, 1), data(n, dtype, 2)
    out = cuda(np.zeros((n, 2), dtype))
    join_kernel[(1,)](cuda(a), cuda(b), out, N=n, num_warps=num_warps, target="nvidia")
    np.testing.assert_array_equal(out.cpu().numpy(), np.stack([a, b], axis=-1))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", [split_kernel, split_other_layout_kernel], ids=["slice", "other"])
@pytest.mark.parametrize("n, num_warps", [(16, 4), (128, 4), (1024, 4), (64, 1), (512, 8)])
def test_split(nvidia_gpu, kernel, n, num_warps, dtype):
    x = data((n, 2), dtype)
    lo, hi = cuda(np.zeros(n, dtype)), cuda(np.zeros(n, dtype))
    kernel[(1,)](cuda(x), lo, hi, N=n, num_warps=num_warps, target="nvidia")
    np.testing.assert_array_equal(lo.cpu().numpy(), x[:, 0])
    np.testing.assert_array_equal(hi.cpu().numpy(), x[:, 1])


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8])
@pytest.mark.parametrize("shape, num_warps", [((4, 8), 4), ((32, 64), 4), ((64, 16), 8), ((8, 32), 1)])
def test_join_and_split_3d(nvidia_gpu, shape, num_warps, dtype):
    a, b = data(shape, dtype, 1), data(shape, dtype, 2)
    joined = cuda(np.zeros(shape + (2,), dtype))
    join_3d_kernel[(1,)](cuda(a), cuda(b), joined, M=shape[0], N=shape[1], num_warps=num_warps, target="nvidia")
    np.testing.assert_array_equal(joined.cpu().numpy(), np.stack([a, b], axis=-1))
    lo, hi = cuda(np.zeros(shape, dtype)), cuda(np.zeros(shape, dtype))
    split_3d_kernel[(1,)](joined, lo, hi, M=shape[0], N=shape[1], num_warps=num_warps, target="nvidia")
    np.testing.assert_array_equal(lo.cpu().numpy(), a)
    np.testing.assert_array_equal(hi.cpu().numpy(), b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, num_warps", [(8, 4), (64, 2), (256, 4), (1024, 8), (32, 1)])
def test_cat(nvidia_gpu, n, num_warps, dtype):
    a, b = data(n, dtype, 1), data(n, dtype, 2)
    out = cuda(np.zeros(2 * n, dtype))
    cat_kernel[(1,)](cuda(a), cuda(b), out, N=n, num_warps=num_warps, target="nvidia")
    # The language leaves the order unspecified; this lowering keeps lhs, then rhs.
    np.testing.assert_array_equal(out.cpu().numpy(), np.concatenate([a, b]))


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.float64])
@pytest.mark.parametrize("num_warps", [1, 4])
def test_scalars(nvidia_gpu, num_warps, dtype):
    x = np.array([3, 7], dtype)
    out = cuda(np.zeros(4, dtype))
    scalars_kernel[(1,)](cuda(x), out, num_warps=num_warps, target="nvidia")
    np.testing.assert_array_equal(out.cpu().numpy(), np.array([3, 7, 7, 3], dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
@pytest.mark.parametrize("shape, num_warps", [((4, 8), 4), ((16, 64), 4), ((64, 32), 8), ((8, 16), 1)])
def test_reshape_permute_join_split_round_trip(nvidia_gpu, shape, num_warps, dtype):
    m, n = shape
    x = data(shape, dtype)
    out = cuda(np.zeros(shape, dtype))
    round_trip_kernel[(1,)](cuda(x), out, M=m, N=n, num_warps=num_warps, target="nvidia")
    p = x.reshape(m, 2, n // 2).transpose(2, 0, 1)
    expected = np.stack([p[..., 1], p[..., 0]], axis=-1).transpose(1, 2, 0).reshape(m, n)
    np.testing.assert_array_equal(out.cpu().numpy(), expected)
