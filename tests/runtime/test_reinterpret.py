"""``polytile.reinterpret``: a tensor's memory passed to kernels as another element type
(Triton's ``triton.reinterpret`` / ``TensorWrapper``), on the interpreter, through every
GPU backend's pipeline, and launched on an NVIDIA GPU."""

from __future__ import annotations

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.compiler import compile_module
from polytile.ir import print_ir


@pt.jit
def halve(x_ptr, y_ptr, n, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    x = pl.load(x_ptr + offs, mask=offs < n)
    pl.store(y_ptr + offs, x >> 1, mask=offs < n)  # logical for unsigned, arithmetic for signed


def test_signed_memory_seen_as_unsigned_on_the_interpreter():
    x = np.array([-2, -1, 4, 5, -(2**31)], np.int32)
    y = np.zeros(5, np.int32)
    wrapped = halve.warmup(pt.reinterpret(x, pl.uint32), pt.reinterpret(y, pl.uint32), 5, BLOCK=8, target="interp")
    plain = halve.warmup(x, y, 5, BLOCK=8, target="interp")
    assert wrapped is not plain and "ptr<u32>" in str(wrapped.module) and "ptr<u32>" not in str(plain.module)
    halve[(1,)](pt.reinterpret(x, pl.uint32), pt.reinterpret(y, pl.uint32), 5, BLOCK=8, target="interp")
    np.testing.assert_array_equal(y.view(np.uint32), x.view(np.uint32) >> 1)
    halve[(1,)](x, y, 5, BLOCK=8, target="interp")  # the plain arrays: their own specialization
    np.testing.assert_array_equal(y, x >> 1)


def test_float_bits_as_integers():
    @pt.jit
    def sign_bits(x_ptr, out_ptr, BLOCK: pl.constexpr):
        offs = pl.arange(0, BLOCK)
        pl.store(out_ptr + offs, (pl.load(x_ptr + offs) >> 31) & 1)

    x = np.array([1.5, -2.0, -0.0, 3.0], np.float32)
    out = np.zeros(4, np.int32)
    sign_bits[(1,)](pt.reinterpret(x, pl.int32), out, BLOCK=4, target="interp")
    assert out.tolist() == [0, 1, 1, 0]


def test_the_wrapper_is_tritons():
    x = np.zeros((2, 6), np.int16)
    wrapped = pt.reinterpret(x, pl.uint8)
    assert isinstance(wrapped, pt.TensorWrapper) and wrapped.base is x and wrapped.dtype == pl.uint8
    assert wrapped.shape == (2, 12) and wrapped.stride() == (12, 1) and wrapped.numel() == 24
    assert wrapped.element_size() == 1 and wrapped.data_ptr() == x.__array_interface__["data"][0]
    assert pt.reinterpret(wrapped, pl.int16) is x  # back to its own type: the array itself, as Triton's
    again = pt.reinterpret(wrapped, pl.uint16)  # re-wrapped around the same base
    assert again.base is x and again.dtype == pl.uint16 and again.shape == (2, 6)
    copy = wrapped.clone()
    assert copy.base is not x and copy.dtype == pl.uint8
    # The same size keeps a strided base's shape and strides.
    strided = np.zeros((4, 4), np.int32)[:, ::2]
    assert pt.reinterpret(strided, pl.uint32).stride() == (4, 2)
    assert np.asarray(pt.reinterpret(strided, pl.uint32)).strides == strided.strides
    with pytest.raises(TypeError, match="reinterpret needs a polytile.language dtype such as pl.uint32"):
        pt.reinterpret(x, np.uint8)
    with pytest.raises(TypeError, match="cannot reinterpret a list"):
        pt.reinterpret([1, 2], pl.int32)
    with pytest.raises(ValueError, match="of elements of 4 bytes needs a contiguous tensor"):
        pt.reinterpret(strided, pl.uint8)
    with pytest.raises(ValueError, match="is not a whole number of 8-byte elements"):
        pt.reinterpret(np.array(5, np.int8), pl.int64)  # 0-d: nothing to widen into
    with pytest.raises(ValueError, match=r"shape \[2, 3\] is not a whole number of 4-byte elements"):
        pt.reinterpret(np.zeros((2, 3), np.int8), pl.int32)


@pytest.mark.parametrize("target", ["nvidia:sm_80", "nvidia:sm_90a", "amd:gfx942"])
def test_the_kernel_takes_the_new_element_type_on_every_backend(target):
    pytest.importorskip("polytile_amd" if target.startswith("amd") else "polytile_nvidia")
    x = np.zeros(8, np.int32)
    module = halve.lower(pt.reinterpret(x, pl.uint32), pt.reinterpret(x, pl.uint32), 8, BLOCK=8)
    assert "(%x_ptr: ptr<u32>, %y_ptr: ptr<u32>, %n: i32)" in print_ir(module)
    result = compile_module(module, target)
    if target.startswith("nvidia"):
        assert "shr.u32" in result.artifacts["ptx"]


@pytest.mark.gpu
def test_signed_torch_tensors_seen_as_unsigned_on_the_gpu(cuda_torch):
    torch = cuda_torch
    x = torch.tensor([-2, -1, 4, 5, -(2**31)], dtype=torch.int32, device="cuda")
    y = torch.zeros(5, dtype=torch.int32, device="cuda")
    for _ in range(3):  # the native dispatcher plans the later calls
        halve[(1,)](pt.reinterpret(x, pl.uint32), pt.reinterpret(y, pl.uint32), 5, BLOCK=8)
    torch.cuda.synchronize()
    expected = x.cpu().numpy().view(np.uint32) >> 1
    np.testing.assert_array_equal(y.cpu().numpy().view(np.uint32), expected)
