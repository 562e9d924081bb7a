"""Arguments from other array libraries are written in place (views, never copies)."""

import importlib.util

import numpy as np
import pytest

import polytile.language as pl
from polytile import PolytileError
from polytile.runtime import LaunchError, jit

HAS_TORCH = importlib.util.find_spec("torch") is not None


@jit
def add_one(ptr, n, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(ptr + offs, pl.load(ptr + offs, mask=offs < n) + 1, mask=offs < n)


class ArrayInterface:
    """Exposes a buffer only through __array_interface__."""

    def __init__(self, array):
        self._array = array
        self.__array_interface__ = array.__array_interface__


class DLPackOnly:
    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


class FakeTorchTensor:
    """The parts of torch.Tensor the runtime uses, without torch (its module says 'torch')."""

    def __init__(self, array, contiguous=True, device="cpu"):
        self._array, self._contiguous = array, contiguous
        self.device = type("device", (), {"type": device, "__str__": lambda self: device})()
        self.requires_grad = False

    def data_ptr(self):
        return self._array.ctypes.data

    def is_contiguous(self):
        return self._contiguous

    def numpy(self):
        return self._array


FakeTorchTensor.__module__ = "torch.fake"


@pytest.mark.parametrize("wrap", [ArrayInterface, DLPackOnly, FakeTorchTensor], ids=["array_interface", "dlpack",
                                                                                 "torch-protocol"])
def test_wrapped_arrays_are_written_in_place(wrap):
    data = np.arange(8, dtype=np.int32)
    add_one[(1,)](wrap(data), 8, BLOCK=8)
    np.testing.assert_array_equal(data, np.arange(8) + 1)


def test_unwritable_arguments_are_clear_errors():
    with pytest.raises(LaunchError, match="torch tensor on 'cuda'.*CPU"):
        add_one[(1,)](FakeTorchTensor(np.zeros(8, np.int32), device="cuda"), 8, BLOCK=8)
    frozen = np.zeros(8, np.int32)
    frozen.flags.writeable = False
    with pytest.raises(PolytileError, match="'ptr'.*read-only"):  # reading it would be fine
        add_one[(1,)](frozen, 8, BLOCK=8)
    with pytest.raises(LaunchError, match="argument 'ptr' is list"):
        add_one[(1,)]([1, 2, 3], 8, BLOCK=8)


def test_torch_is_not_imported_by_the_runtime():
    import subprocess
    import sys

    code = "import sys, polytile.runtime, polytile.runtime.args; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_real_torch_cpu_tensor():
    import torch

    tensor = torch.arange(8, dtype=torch.int32)
    add_one[(1,)](tensor, 8, BLOCK=8)
    assert tensor.tolist() == list(range(1, 9))


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_non_contiguous_torch_tensors_pass_their_first_element_and_are_written_in_place():
    """As on a GPU, the kernel gets the address of the view's first element and walks the
    memory with the offsets it computes (here 0..5, ignoring the view's strides)."""
    import torch

    whole = torch.zeros(4, 3, dtype=torch.int32)
    add_one[(1,)](whole.t(), 6, BLOCK=8)  # a transposed view: the same memory, from its start
    assert whole.reshape(-1).tolist() == [1] * 6 + [0] * 6
    add_one[(1,)](whole[:, 1:], 2, BLOCK=2)  # starts at element 1
    assert whole.reshape(-1).tolist() == [1, 2, 2] + [1] * 3 + [0] * 6


def test_non_contiguous_wrapped_tensors_are_viewed_in_place():
    data = np.zeros((4, 2), np.int32)
    add_one[(1,)](FakeTorchTensor(data[:, 1], contiguous=False), 3, BLOCK=4)
    # Elements 1, 2, 3 of memory from data[0, 1]: data[0, 1], data[1, 0], data[1, 1].
    assert data.reshape(-1).tolist() == [0, 1, 1, 1, 0, 0, 0, 0]


@pytest.mark.parametrize("value, bits", [(1.0, 0x3F80), (-2.5, 0xC020), (0.0, 0x0000), (-0.0, 0x8000),
                                         (1.00390625, 0x3F80),  # a tie: rounds to even
                                         (1.01171875, 0x3F82),  # a tie: rounds to even (up)
                                         (float("inf"), 0x7F80), (float("nan"), 0x7FC0)])
def test_bf16_bits_round_to_nearest_even_and_keep_nan_a_nan(value, bits):
    from polytile.runtime.args import bf16_bits

    assert bf16_bits(value) == bits
