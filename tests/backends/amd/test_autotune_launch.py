"""@autotune drops an AMD config that HIP refuses at launch for a resource
(hipErrorLaunchOutOfResources) and picks another, against the fake hip-python (no GPU:
the kernels compile for real, gfx942)."""

from __future__ import annotations

import types

import pytest

import polytile as pt
import polytile.language as pl
from polytile.errors import LaunchError, NoConfigFitsError, OutOfResourcesError
from polytile_amd import driver

from . import fake_hip
from .test_launcher import ADD_PARAMS, Launcher

TARGET = "amd:gfx942"
CONFIGS = [pt.Config({"BLOCK": 256}, num_warps=8), pt.Config({"BLOCK": 128}, num_warps=2)]


class DType:
    """A torch dtype: one object per dtype, named as torch names it."""

    name = "float32"

    def __repr__(self) -> str:
        return "torch.float32"


FLOAT32 = DType()


class Tensor:
    """A torch tensor on an AMD GPU that the autotuner can save and put back between
    trials (``clone``/``copy_``, as it does with real tensors)."""

    is_cuda = True
    __module__ = "torch"  # recognised as a torch tensor by its module, as real tensors are

    def __init__(self, address):
        self.address = address
        self.device = types.SimpleNamespace(type="cuda", index=0)  # ROCm torch says "cuda" too
        self.dtype = FLOAT32

    def data_ptr(self):
        return self.address

    def get_device(self):
        return 0

    def clone(self):
        return ("copy of", self.address)

    def copy_(self, source):
        assert source == ("copy of", self.address)


@pytest.fixture
def hip(monkeypatch):
    fake = fake_hip.FakeHip(gpus=[("MI300X", "gfx942:sramecc+:xnack-", 64)],
                            allocations={0x10000000: 0})
    fake_hip.install(monkeypatch, fake)
    module = driver._state.bindings
    launch = module.hipModuleLaunchKernel

    def refuse_large_workgroups(function, gx, gy, gz, bx, by, bz, *rest):
        if bx > 128:  # too many registers for a workgroup this large, as HIP says
            return (fake_hip.hipError_t.hipErrorLaunchOutOfResources,)
        return launch(function, gx, gy, gz, bx, by, bz, *rest)

    module.hipModuleLaunchKernel = refuse_large_workgroups
    return fake


@pytest.fixture(scope="module")
def add_hsaco():
    from .kernels import add, compile_amd, f32

    return compile_amd(add, f32(), f32(), f32(), 8192, BLOCK=1024)["hsaco"]


def test_hip_out_of_resources_is_an_out_of_resources_error(hip, add_hsaco):
    launcher = Launcher(add_hsaco, "add", ADD_PARAMS, num_warps=4, warp_size=64)
    with pytest.raises(OutOfResourcesError) as info:
        launcher((1, 1, 1), [None, None, None, 1])
    error = info.value
    assert isinstance(error, driver.HipError) and isinstance(error, LaunchError)
    assert str(error).startswith("kernel 'add': HIP call hipModuleLaunchKernel failed on device 0 with "
                                 "hipErrorLaunchOutOfResources")
    assert error.message == str(error) and error.kernel == "add"


def make_kernel():
    """A fresh autotuned kernel per test: each test's fake runtime knows no earlier one."""

    @pt.autotune(configs=CONFIGS, key=["n"], warmup=0, rep=0)
    @pt.jit
    def twice(x, out, n, BLOCK: pl.constexpr):
        offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
        mask = offs < n
        pl.store(out + offs, 2 * pl.load(x + offs, mask=mask), mask=mask)

    return twice


def _launch(kernel, n=1000):
    x, out = Tensor(0x10000000), Tensor(0x10001000)
    kernel[lambda meta: (pt.cdiv(n, meta["BLOCK"]),)](x, out, n, target=TARGET)


def test_a_config_hip_refuses_for_resources_is_dropped(hip):
    twice = make_kernel()
    _launch(twice)
    assert twice.best_config is CONFIGS[1]
    [(dropped, error)] = twice.dropped_configs.items()
    assert dropped is CONFIGS[0] and isinstance(error, OutOfResourcesError)
    assert hip.launches and {launch.block for launch in hip.launches} == {(128, 1, 1)}
    assert hip.synchronized  # the trials were timed up to a wait for the device


def test_when_no_config_fits_the_error_lists_each(hip):
    hip.fail["hipModuleLaunchKernel"] = fake_hip.hipError_t.hipErrorLaunchOutOfResources
    with pytest.raises(NoConfigFitsError, match="none of its 2 autotuning configs fits"):
        _launch(make_kernel())
