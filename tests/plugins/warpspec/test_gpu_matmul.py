"""Warp-specialised matmuls on a Hopper GPU against torch, at and past the edges of the
arrays, with one and two consumer warp groups, host and device descriptors, and the
persistent form (the hint on the loop over tiles)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the GPU matmul tests hold their arrays in torch tensors")

from polytile.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

from tests.backends.nvidia.fake_cuda import nvidia_gpu  # noqa: E402, F401  (a fixture)
from tests.plugins.tma.test_gpu_bulk import hopper  # noqa: E402, F401  (a fixture)

from .kernels import matmul_descriptors, matmul_device_descriptors, matmul_persistent, matmul_pointers  # noqa: E402

pytestmark = pytest.mark.gpu


def _assert_split(compiled):
    """The launch ran the loop warp-specialised (not merely right, unspecialised)."""
    entries = compiled.metadata["warp_specialize"]
    assert [entry["specialised"] for entry in entries] == [True], entries


def _cdiv(a, b):
    return (a + b - 1) // b


SHAPES = [(256, 256, 512), (200, 136, 104), (128, 128, 64), (384, 256, 1000), (64, 96, 16)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("config", [(128, 128, 64, 4, 4), (128, 256, 64, 8, 3), (64, 128, 32, 4, 2)],
                         ids=["128x128x64-w4-s4", "128x256x64-w8-s3", "64x128x32-w4-s2"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_specialised_matmul_matches_torch(hopper, shape, config, dtype):
    m, n, k = shape
    bm, bn, bk, warps, stages = config
    torch.manual_seed(0)
    dt = getattr(torch, dtype)
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(n, k, device="cuda", dtype=dt)
    c = torch.full((m, n), 7.0, device="cuda", dtype=dt)
    grid = (_cdiv(m, bm) * _cdiv(n, bn),)
    descriptors = (TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bn, bk]),
                   TensorDescriptor.from_tensor(c, [bm, bn]))
    compiled = matmul_descriptors[grid](*descriptors, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, WS=True,
                             num_warps=warps, num_stages=stages)
    torch.cuda.synchronize()
    _assert_split(compiled)
    torch.testing.assert_close(c.float(), a.float() @ b.float().T, atol=0.15, rtol=0.02)


@pytest.mark.parametrize("shape", [(256, 192, 320), (144, 80, 48)])  # sizes divisible by 16: real maps
def test_specialised_matmul_with_device_descriptors_matches_torch(hopper, shape):
    import polytile

    m, n, k = shape
    polytile.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    torch.manual_seed(1)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16)
    c = torch.zeros((m, n), device="cuda", dtype=torch.float16)
    grid = (_cdiv(m, 128), _cdiv(n, 128))
    compiled = matmul_device_descriptors[grid](a, b, c, m, n, k, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, WS=True,
                                               num_warps=4, num_stages=3)
    torch.cuda.synchronize()
    _assert_split(compiled)
    torch.testing.assert_close(c.float(), a.float() @ b.float().T, atol=0.15, rtol=0.02)


def test_many_launches_in_a_row_agree(hopper):
    # A lost phase or a slot released too early shows up as a difference between runs.
    m = n = k = 1024
    torch.manual_seed(2)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16)
    expected = (a.float() @ b.float().T)
    for _ in range(20):
        c = torch.empty((m, n), device="cuda", dtype=torch.float16)
        descriptors = (TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(b, [128, 64]),
                       TensorDescriptor.from_tensor(c, [128, 128]))
        compiled = matmul_descriptors[(64,)](*descriptors, m, n, k, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8,
                                             WS=True, num_warps=4, num_stages=4)
        torch.cuda.synchronize()
        _assert_split(compiled)
        torch.testing.assert_close(c.float(), expected, atol=0.15, rtol=0.02)


# Partial tiles with rows of a multiple of 16 elements: cp.async pipelines only copies of
# 4 bytes or more, which narrower strides do not prove (the loop then is not split).
@pytest.mark.parametrize("shape", [(256, 256, 512), (200, 144, 112), (64, 96, 16), (384, 256, 1008)])
@pytest.mark.parametrize("stages", [2, 3, 4])
def test_specialised_pointer_matmul_matches_torch(hopper, shape, stages):
    # cp.async copies: the producer group's four warps copy with the consumers' layouts.
    m, n, k = shape
    torch.manual_seed(4)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), 7.0, device="cuda", dtype=torch.float16)
    grid = (_cdiv(m, 128), _cdiv(n, 128))
    compiled = matmul_pointers[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0), BLOCK_M=128,
                                     BLOCK_N=128, BLOCK_K=64, WS=True, num_warps=4, num_stages=stages)
    torch.cuda.synchronize()
    _assert_split(compiled)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.15, rtol=0.02)


# The persistent form: few programs, so that each walks several tiles and the ring's slot
# and phase run on from one tile's K loop into the next (K loops shorter and longer than
# the ring; a last tile some programs do not get).
@pytest.mark.parametrize("shape", [(512, 512, 512), (200, 144, 112), (384, 256, 1008), (640, 384, 64)])
@pytest.mark.parametrize("config", [(128, 128, 64, 4, 4), (128, 256, 64, 8, 3), (64, 64, 32, 4, 2)],
                         ids=["128x128x64-w4-s4", "128x256x64-w8-s3", "64x64x32-w4-s2"])
@pytest.mark.parametrize("flatten", [False, True])
@pytest.mark.parametrize("host", [False, True], ids=["device-descriptors", "host-descriptors"])
def test_specialised_persistent_matmul_matches_torch(hopper, shape, config, flatten, host):
    import polytile

    m, n, k = shape
    bm, bn, bk, warps, stages = config
    polytile.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    torch.manual_seed(5)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), 7.0, device="cuda", dtype=torch.float16)
    programs = 3
    arrays = ((TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bn, bk]),
               TensorDescriptor.from_tensor(c, [bm, bn])) if host else (a, b, c))
    compiled = matmul_persistent[(programs,)](*arrays, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                              NUM_PROGRAMS=programs, WS=True, FLATTEN=flatten, HOST=host,
                                              num_warps=warps, num_stages=stages)
    torch.cuda.synchronize()
    _assert_split(compiled)
    torch.testing.assert_close(c.float(), a.float() @ b.float().T, atol=0.15, rtol=0.02)


def test_persistent_launches_in_a_row_agree(hopper):
    # One program per SM, as tutorial 09 launches it; 20 launches, each against the first.
    m = n = k = 2048
    torch.manual_seed(6)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16)
    programs = torch.cuda.get_device_properties(0).multi_processor_count
    expected = a.float() @ b.float().T
    for _ in range(20):
        c = torch.empty((m, n), device="cuda", dtype=torch.float16)
        arrays = (TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(b, [256, 64]),
                  TensorDescriptor.from_tensor(c, [128, 256]))
        compiled = matmul_persistent[(programs,)](*arrays, m, n, k, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64,
                                                  NUM_PROGRAMS=programs, WS=True, FLATTEN=False, HOST=True,
                                                  num_warps=8, num_stages=3)
        torch.cuda.synchronize()
        _assert_split(compiled)
        torch.testing.assert_close(c.float(), expected, atol=0.15, rtol=0.02)
