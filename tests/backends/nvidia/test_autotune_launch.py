"""@autotune drops an NVIDIA config that the device refuses at launch for a resource, and
picks another, against the fake driver (no GPU: the kernels compile for real, sm_90a).

The launcher's errors for a resource (a block larger than the kernel's register use
allows, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES from cuLaunchKernel) are
:class:`polytile.errors.OutOfResourcesError`, which is what the autotuner drops; a
config that fails for another reason still fails the launch.
"""

from __future__ import annotations

import pytest

import polytile as pt
import polytile.language as pl
from polytile import config
from polytile.errors import LaunchError, OutOfResourcesError

from .fake_cuda import (  # noqa: F401
    CUresult, FakeGpu, Kernel, fake_driver, native_module, use_native_launcher)
from .test_dispatch import Tensor as DispatchTensor

TARGET = "nvidia:sm_90a"
CONFIGS = [pt.Config({"BLOCK": 256}, num_warps=8), pt.Config({"BLOCK": 128}, num_warps=4)]


def make_kernel():
    """A fresh autotuned kernel per test: each test's fake driver knows no earlier one."""

    @pt.autotune(configs=CONFIGS, key=["n"], warmup=0, rep=0)
    @pt.jit
    def twice(x, out, n, BLOCK: pl.constexpr):
        offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
        mask = offs < n
        pl.store(out + offs, 2 * pl.load(x + offs, mask=mask), mask=mask)

    return twice


class Tensor(DispatchTensor):
    """A torch tensor on a fake GPU that the autotuner can save and put back between
    trials (``clone``/``copy_``, as it does with real tensors)."""

    __module__ = "torch"  # recognised as a torch tensor by its module, as real tensors are

    def clone(self):
        return ("copy of", self.data_ptr())

    def copy_(self, source):
        assert source == ("copy of", self.data_ptr())


class _AnyImage(dict):
    """Every cubin holds ``twice`` (two pointers and an i32), with the kernel's attributes."""

    def __init__(self, kernel: Kernel):
        super().__init__()
        self.kernel = kernel

    def get(self, key, default=None):
        return {"twice": self.kernel}

    def __getitem__(self, key):
        return self.get(key)


@pytest.fixture(params=["bindings", "native"])
def gpu(request, fake_driver, monkeypatch, ptxas):
    if request.param == "native":
        use_native_launcher(fake_driver, request.getfixturevalue("native_module"), monkeypatch)
        yield fake_driver
    else:
        with config.override(nvidia_launch="bindings"):
            yield fake_driver


def _launch(kernel, n=1000):
    x, out = Tensor(0x10000, 0), Tensor(0x20000, 0)
    kernel[lambda meta: (pt.cdiv(n, meta["BLOCK"]),)](x, out, n, target=TARGET)


def test_a_config_the_driver_refuses_for_resources_is_dropped(gpu):
    gpu.images = _AnyImage(Kernel((8, 8, 4)))
    refuse_large_blocks = gpu.cuLaunchKernel

    def launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        if bx > 128:  # too many registers for a block this large, as the real driver says
            return (CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,)
        return refuse_large_blocks(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra)

    gpu.cuLaunchKernel = launch
    twice = make_kernel()
    _launch(twice)
    assert twice.best_config is CONFIGS[1]
    [(dropped, error)] = twice.dropped_configs.items()
    assert dropped is CONFIGS[0] and isinstance(error, OutOfResourcesError) and isinstance(error, LaunchError)
    # The trials that ran were timed up to a wait for the device, not just their launch.
    assert "cuCtxSynchronize" in gpu.calls
    assert "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" in str(error)
    assert gpu.launches and {launch.block for launch in gpu.launches} == {(128, 1, 1)}


def test_a_block_larger_than_the_kernel_allows_is_dropped_before_launching(gpu):
    gpu.images = _AnyImage(Kernel((8, 8, 4), num_regs=255, max_threads=128))
    twice = make_kernel()
    _launch(twice)
    assert twice.best_config is CONFIGS[1]
    [error] = twice.dropped_configs.values()
    assert isinstance(error, OutOfResourcesError) and error.resource == "threads"
    assert (error.need, error.limit) == (256, 128)
    assert {launch.block for launch in gpu.launches} == {(128, 1, 1)}


def test_another_driver_error_still_fails_the_launch(gpu):
    gpu.images = _AnyImage(Kernel((8, 8, 4)))
    gpu.launch_result = CUresult.CUDA_ERROR_INVALID_VALUE
    with pytest.raises(pt.PolytileError, match="CUDA_ERROR_INVALID_VALUE") as info:
        _launch(make_kernel())
    assert not isinstance(info.value, OutOfResourcesError)


def test_when_no_config_fits_the_error_lists_each(gpu):
    gpu.images = _AnyImage(Kernel((8, 8, 4)))
    gpu.launch_result = CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
    from polytile.errors import NoConfigFitsError

    with pytest.raises(NoConfigFitsError, match="none of its 2 autotuning configs fits"):
        _launch(make_kernel())
