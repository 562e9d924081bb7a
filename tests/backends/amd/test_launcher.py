"""The AMD driver and launcher against a fake hip-python: module loading, device choice,
and argument packing checked against the kernarg layout the code object declares."""

from __future__ import annotations

import struct
import types

import numpy as np
import pytest

from polytile.ir import types as t
from polytile.runtime.jit import LaunchError
from polytile_amd import driver
from polytile_amd.launcher import KernargPacker, Launcher

from . import fake_hip
from .kernels import add, compile_amd, f32, scalars

ADD_PARAMS = [("x", t.PointerType(t.f32, 1)), ("y", t.PointerType(t.f32, 1)), ("out", t.PointerType(t.f32, 1)),
              ("n", t.i32)]


class DeviceArray:
    """Device memory as CuPy on ROCm shows it: __cuda_array_interface__."""

    def __init__(self, address):
        self.__cuda_array_interface__ = {"data": (address, False), "shape": (1,), "typestr": "<f4", "version": 3}


@pytest.fixture(scope="module")
def add_hsaco():
    return compile_amd(add, f32(), f32(), f32(), 8192, BLOCK=1024)["hsaco"]


@pytest.fixture
def hip(monkeypatch):
    fake = fake_hip.FakeHip(gpus=[("MI300X", "gfx942:sramecc+:xnack-", 64)] * 2,
                            allocations={0x10000000: 0, 0x20000000: 1})
    return fake_hip.install(monkeypatch, fake)


def test_launch_packs_arguments_at_the_declared_offsets(hip, add_hsaco):
    launcher = Launcher(add_hsaco, "add", ADD_PARAMS, num_warps=4, warp_size=64)
    x, y, out = DeviceArray(0x10000000), DeviceArray(0x10000100), DeviceArray(0x10000200)
    launcher((8, 1, 1), [x, y, out, 8192])
    (launch,) = hip.launches
    assert (launch.kernel, launch.grid, launch.block, launch.shared, launch.device) == ("add", (8, 1, 1),
                                                                                        (256, 1, 1), 0, 0)
    assert launch.buffer_size == 28
    assert {name: int.from_bytes(raw, "little", signed=True) for name, raw in launch.arguments.items()} == {
        "x": 0x10000000, "y": 0x10000100, "out": 0x10000200, "n": 8192}
    launcher((1, 1, 1), [x, y, out, 1])
    assert len(hip.loads) == 1  # the module is loaded once per device


def test_scalars_of_every_width(hip):
    artifacts = compile_amd(scalars, f32(), np.int8(1), np.int64(2), np.float16(1), 2.0, BLOCK=64)
    params = [("out", t.PointerType(t.f32, 1)), ("a", t.i8), ("b", t.i64), ("c", t.f16), ("d", t.f32)]
    Launcher(artifacts["hsaco"], "scalars", params, num_warps=1, warp_size=64)((1, 1, 1), [None, -3, 2**40, 1.5, 0.25])
    args = hip.launches[0].arguments
    assert struct.unpack("<b", args["a"])[0] == -3 and struct.unpack("<q", args["b"])[0] == 2**40
    assert struct.unpack("<e", args["c"])[0] == 1.5 and struct.unpack("<f", args["d"])[0] == 0.25
    assert args["out"] == bytes(8)


def test_kernel_runs_on_the_device_of_its_arguments(hip, add_hsaco):
    launcher = Launcher(add_hsaco, "add", ADD_PARAMS, num_warps=4, warp_size=64)
    on1 = DeviceArray(0x20000000)
    launcher((1, 1, 1), [on1, on1, on1, 4])
    assert hip.launches[-1].device == 1 and hip.loads == [(1, "gfx942")]
    with pytest.raises(LaunchError, match="argument 'y' is on GPU 0, but argument 'x' is on GPU 1"):
        launcher((1, 1, 1), [on1, DeviceArray(0x10000000), on1, 4])


def test_argument_errors_name_the_kernel_and_argument(hip, add_hsaco):
    launcher = Launcher(add_hsaco, "add", ADD_PARAMS, num_warps=4, warp_size=64)
    array = DeviceArray(0x10000000)
    with pytest.raises(LaunchError, match="kernel 'add': argument 'y' points to 0x5000, which is not GPU memory"):
        launcher((1, 1, 1), [array, DeviceArray(0x5000), array, 4])
    with pytest.raises(LaunchError, match="argument 'out' is ndarray"):
        launcher((1, 1, 1), [array, array, np.zeros(4), 4])
    with pytest.raises(LaunchError, match="kernel 'add': the arguments could not be packed"):
        launcher((1, 1, 1), [array, array, array, 2**40])
    with pytest.raises(LaunchError, match="takes 4 run-time arguments"):
        launcher((1, 1, 1), [array])
    launcher((0, 1, 1), [array, array, array, 4])
    assert not hip.launches


def test_packer_refuses_a_layout_the_code_object_does_not_declare(add_hsaco):
    from polytile_amd.codeobject import read_code_object

    info = read_code_object(add_hsaco).kernel("add")
    with pytest.raises(LaunchError, match="declares 4 arguments but the kernel has 3"):
        KernargPacker("add", ADD_PARAMS[:3], info)
    wrong = ADD_PARAMS[:3] + [("n", t.i64)]
    with pytest.raises(LaunchError, match="parameter 'n' \\(i64\\) packs into 8 bytes .* declares 4 bytes at offset 24"):
        KernargPacker("add", wrong, info)


def test_hip_errors_name_the_call_and_kernel(hip, add_hsaco):
    hip.fail["hipModuleLaunchKernel"] = fake_hip.hipError_t.hipErrorInvalidValue
    launcher = Launcher(add_hsaco, "add", ADD_PARAMS, num_warps=4, warp_size=64)
    with pytest.raises(driver.HipError) as info:
        launcher((1, 1, 1), [None, None, None, 1])
    assert str(info.value) == ("kernel 'add': HIP call hipModuleLaunchKernel failed on device 0 with "
                               "hipErrorInvalidValue (hipErrorInvalidValue explained)")


def test_device_properties(hip):
    properties = driver.device_properties(1)
    assert (properties.gcn_arch_name, properties.warp_size, properties.shared_memory_per_block) == (
        "gfx942:sramecc+:xnack-", 64, 65536)
    with pytest.raises(LaunchError, match="there is no AMD GPU 5: this process sees 2"):
        driver.device_properties(5)


def test_backend_builds_the_launcher(hip, add_hsaco):
    from polytile.backend import LaunchParam
    from polytile.target import Target
    from polytile_amd import AmdBackend, AmdOptions

    compiled = types.SimpleNamespace(binaries={"hsaco": add_hsaco}, target=Target("amd", "gfx942"))
    launcher = AmdBackend().make_launcher(compiled=compiled, kernel_name="add",
                                          params=[LaunchParam(n, ty) for n, ty in ADD_PARAMS],
                                          options=AmdOptions(num_warps=2))
    assert AmdBackend().can_launch() and launcher.block == 128


class Tensor:
    """A torch tensor on an AMD GPU, as the launcher reads it (recognised by its module)."""

    is_cuda = True

    def __init__(self, address, device):
        self.address, self.device = address, device

    def data_ptr(self):
        return self.address

    def get_device(self):
        return self.device


Tensor.__module__ = "torch"


def test_torch_arguments_launch_on_torchs_current_stream(hip, add_hsaco, monkeypatch):
    import sys

    from polytile.runtime import args as polytile_args

    fake_torch = types.ModuleType("torch")
    fake_torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0xBEEF0 + device)
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(polytile_args, "_current_raw_stream", None)
    launcher = Launcher(add_hsaco, "add", ADD_PARAMS, num_warps=4, warp_size=64)
    launcher((1, 1, 1), [Tensor(0x20000000, 1), None, None, 1])
    assert hip.launches[-1].stream == 0xBEEF1
    launcher((1, 1, 1), [DeviceArray(0x10000000), None, None, 1])  # no torch tensor: the default stream
    assert hip.launches[-1].stream == 0
    launcher((1, 1, 1), [Tensor(0x20000000, 1), None, None, 1], stream=0x777)
    assert hip.launches[-1].stream == 0x777
