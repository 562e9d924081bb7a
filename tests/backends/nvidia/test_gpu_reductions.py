"""On a GPU: reductions and scans (registers, warp shuffles, shared memory across warps)
against NumPy.  Skipped without a supported NVIDIA GPU (and torch with CUDA for the
arrays)."""

from __future__ import annotations

import numpy as np
import pytest

import polytile as pt
import polytile.gpu.lowering.reduce  # noqa: F401  (registers the lowerings until module.py imports them)
import polytile.gpu.lowering.scan  # noqa: F401
import polytile.language as pl

from .fake_cuda import nvidia_gpu, torch_cuda  # noqa: F401  (nvidia_gpu is a fixture)

pytestmark = pytest.mark.gpu


def cuda(array):
    torch = torch_cuda()
    return torch.from_numpy(np.ascontiguousarray(array)).cuda()


def host(tensor):
    return tensor.cpu().numpy()


@pt.jit
def reduce_1d(x, out, BLOCK: pl.constexpr, KIND: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    v = pl.load(x + pl.program_id(0) * BLOCK + offs)
    if KIND == "sum":
        r = pl.sum(v, axis=0)
    elif KIND == "max":
        r = pl.max(v, axis=0)
    elif KIND == "min":
        r = pl.min(v, axis=0)
    elif KIND == "argmax":
        r = pl.argmax(v, axis=0)
    else:
        r = pl.argmin(v, axis=0)
    pl.store(out + pl.program_id(0), r)


NUMPY = {"sum": np.sum, "max": np.max, "min": np.min, "argmax": np.argmax, "argmin": np.argmin}


@pytest.mark.parametrize("kind", list(NUMPY))
@pytest.mark.parametrize("block, num_warps", [(32, 1), (64, 8), (256, 4), (1024, 4), (4096, 8), (16, 4)])
def test_1d_reductions(nvidia_gpu, kind, block, num_warps):
    rng = np.random.default_rng(block + num_warps)
    x = rng.integers(-8, 8, size=(3, block)).astype(np.float32)  # ties: the first index wins
    out_dtype = np.int32 if kind.startswith("arg") else np.float32
    out = cuda(np.zeros(3, out_dtype))
    reduce_1d[(3,)](cuda(x), out, BLOCK=block, KIND=kind, num_warps=num_warps, target="nvidia")
    np.testing.assert_array_equal(host(out), NUMPY[kind](x, axis=1).astype(out_dtype))


@pt.jit
def reduce_2d(x, out, M: pl.constexpr, N: pl.constexpr, AXIS: pl.constexpr, KIND: pl.constexpr):
    v = pl.load(x + pl.arange(0, M)[:, None] * N + pl.arange(0, N)[None, :])
    if KIND == "sum":
        r = pl.sum(v, axis=AXIS)
    elif KIND == "max":
        r = pl.max(v, axis=AXIS)
    else:
        r = pl.argmax(v, axis=AXIS)
    if AXIS == 0:
        pl.store(out + pl.arange(0, N), r)
    else:
        pl.store(out + pl.arange(0, M), r)


@pytest.mark.parametrize("kind", ["sum", "max", "argmax"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("shape", [(64, 64), (16, 128), (128, 8), (4, 8)])
@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_2d_reductions(nvidia_gpu, kind, axis, shape, num_warps):
    m, n = shape
    x = np.random.default_rng(m + n).integers(-5, 5, size=shape).astype(np.float32)
    out_dtype = np.int32 if kind == "argmax" else np.float32
    out = cuda(np.zeros(shape[1 - axis], out_dtype))
    reduce_2d[(1,)](cuda(x), out, M=m, N=n, AXIS=axis, KIND=kind, num_warps=num_warps, target="nvidia")
    np.testing.assert_array_equal(host(out), NUMPY[kind](x, axis=axis).astype(out_dtype))


def test_max_propagates_nan(nvidia_gpu):
    x = np.arange(256, dtype=np.float32)
    x[77] = np.nan
    out = cuda(np.zeros(1, np.float32))
    reduce_1d[(1,)](cuda(x), out, BLOCK=256, KIND="max", target="nvidia")
    assert np.isnan(host(out)[0])


@pt.jit
def _mul(a, b):
    return a * b


@pt.jit
def reduce_3d(x, prod, keep, A: pl.constexpr, B: pl.constexpr, C: pl.constexpr):
    i = pl.arange(0, A)[:, None, None]
    j = pl.arange(0, B)[None, :, None]
    k = pl.arange(0, C)[None, None, :]
    v = pl.load(x + i * B * C + j * C + k)
    pl.store(prod + pl.arange(0, A)[:, None] * C + pl.arange(0, C)[None, :], pl.reduce(v, 1, _mul))
    pl.store(keep + i * B + j + k * 0, pl.sum(v, axis=2, keep_dims=True))


def test_3d_user_combine_and_keep_dims(nvidia_gpu):
    a, b, c = 4, 8, 32
    x = np.random.default_rng(3).choice([0.5, 1.0, 2.0], size=(a, b, c)).astype(np.float32)
    prod, keep = cuda(np.zeros(a * c, np.float32)), cuda(np.zeros(a * b, np.float32))
    reduce_3d[(1,)](cuda(x), prod, keep, A=a, B=b, C=c, target="nvidia")
    np.testing.assert_array_equal(host(prod).reshape(a, c), np.prod(x, axis=1))
    np.testing.assert_array_equal(host(keep).reshape(a, b), np.sum(x, axis=2))


@pt.jit
def scan_1d(x, out, BLOCK: pl.constexpr, REVERSE: pl.constexpr, KIND: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    v = pl.load(x + offs)
    if KIND == "sum":
        r = pl.cumsum(v, 0, reverse=REVERSE)
    else:
        r = pl.cumprod(v, 0, reverse=REVERSE)
    pl.store(out + offs, r)


def reference_scan(x, axis, reverse, op):
    flipped = np.flip(x, axis) if reverse else x
    done = op.accumulate(flipped, axis=axis)
    return np.flip(done, axis) if reverse else done


@pytest.mark.parametrize("kind", ["sum", "prod"])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("block, num_warps", [(32, 1), (128, 1), (256, 4), (1024, 4), (4096, 8), (64, 8)])
def test_1d_scans(nvidia_gpu, kind, reverse, block, num_warps):
    rng = np.random.default_rng(block)
    if kind == "sum":
        x = rng.integers(-100, 100, size=block).astype(np.int32)
    else:
        x = rng.choice([-1, 1, 1, 1], size=block).astype(np.int32)
    out = cuda(np.zeros(block, np.int32))
    scan_1d[(1,)](cuda(x), out, BLOCK=block, REVERSE=reverse, KIND=kind, num_warps=num_warps, target="nvidia")
    np.testing.assert_array_equal(host(out), reference_scan(x, 0, reverse, np.add if kind == "sum" else np.multiply))


@pt.jit
def scan_2d(x, out, M: pl.constexpr, N: pl.constexpr, AXIS: pl.constexpr, REVERSE: pl.constexpr):
    offs = pl.arange(0, M)[:, None] * N + pl.arange(0, N)[None, :]
    pl.store(out + offs, pl.cumsum(pl.load(x + offs), AXIS, reverse=REVERSE))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("shape", [(64, 64), (16, 128), (4, 8), (256, 4)])
@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_2d_scans(nvidia_gpu, reverse, axis, shape, num_warps):
    x = np.random.default_rng(sum(shape)).integers(-50, 50, size=shape).astype(np.int32)
    out = cuda(np.zeros(x.size, np.int32))
    scan_2d[(1,)](cuda(x), out, M=shape[0], N=shape[1], AXIS=axis, REVERSE=reverse, num_warps=num_warps,
                  target="nvidia")
    np.testing.assert_array_equal(host(out).reshape(shape), reference_scan(x, axis, reverse, np.add))


@pt.jit
def _first_max(v1, i1, v2, i2):
    take = v2 > v1
    return pl.where(take, v2, v1), pl.where(take, i2, i1)


@pt.jit
def running_argmax(x, values, indices, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    v, i = pl.associative_scan((pl.load(x + offs), offs), 0, _first_max)
    pl.store(values + offs, v)
    pl.store(indices + offs, i)


@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_a_non_commutative_two_operand_scan(nvidia_gpu, num_warps):
    x = np.random.default_rng(num_warps).integers(0, 20, size=2048).astype(np.float32)
    values, indices = cuda(np.zeros(2048, np.float32)), cuda(np.zeros(2048, np.int32))
    running_argmax[(1,)](cuda(x), values, indices, BLOCK=2048, num_warps=num_warps, target="nvidia")
    want_values = np.maximum.accumulate(x)
    want_indices = np.array([int(np.argmax(x[:i + 1])) for i in range(2048)], np.int32)
    np.testing.assert_array_equal(host(values), want_values)
    np.testing.assert_array_equal(host(indices), want_indices)


@pt.jit
def scan_then_sum(x, out, total, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    c = pl.cumsum(pl.load(x + offs), 0)
    pl.store(out + offs, c)
    pl.store(total, pl.sum(c, axis=0))


def test_a_scan_then_a_reduction_share_shared_memory(nvidia_gpu):
    x = np.arange(1024, dtype=np.int32) % 7
    out, total = cuda(np.zeros(1024, np.int32)), cuda(np.zeros(1, np.int32))
    scan_then_sum[(1,)](cuda(x), out, total, BLOCK=1024, num_warps=8, target="nvidia")
    np.testing.assert_array_equal(host(out), np.cumsum(x))
    assert host(total)[0] == np.cumsum(x).sum()
