"""A stand-in for ``hip.hip`` (hip-python) that runs without ROCm.

It keeps hip-python's calling convention (``(hipError_t, *values)`` tuples) and reads
launch arguments back exactly as the HIP runtime does with ``extra``: the
``HIP_LAUNCH_PARAM_BUFFER_POINTER`` / ``BUFFER_SIZE`` / ``END`` array, then each explicit
argument at the offset the loaded code object's metadata declares.
"""

from __future__ import annotations

import ctypes
import enum
import types
from dataclasses import dataclass, field

from polytile_amd import driver
from polytile_amd.codeobject import read_code_object


class hipError_t(enum.IntEnum):
    hipSuccess = 0
    hipErrorInvalidValue = 1
    hipErrorNoDevice = 100
    hipErrorInvalidImage = 200
    hipErrorNotFound = 500
    hipErrorLaunchOutOfResources = 701


class hipMemoryType(enum.IntEnum):
    hipMemoryTypeHost = 0
    hipMemoryTypeDevice = 1


@dataclass
class Launch:
    kernel: str
    device: int
    grid: tuple
    block: tuple
    shared: int
    stream: int
    #: Explicit argument bytes by argument name, read at the code object's offsets.
    arguments: dict
    buffer_size: int


@dataclass
class FakeHip:
    gpus: list = field(default_factory=lambda: [("AMD Instinct MI300X", "gfx942:sramecc+:xnack-", 64)])
    #: address range start -> device, for hipPointerGetAttributes.
    allocations: dict = field(default_factory=dict)
    launches: list = field(default_factory=list)
    synchronized: list = field(default_factory=list)  # the current device at each hipDeviceSynchronize
    loads: list = field(default_factory=list)
    current: int = 0
    fail: dict = field(default_factory=dict)

    def module(self) -> types.SimpleNamespace:
        ok = hipError_t.hipSuccess
        modules: dict[int, tuple] = {}

        def result(call, *values):
            return (self.fail.get(call, ok), *values)

        def hipModuleLoadData(image):
            code_object = read_code_object(image)  # the real runtime rejects what it cannot read too
            handle = len(modules) + 1
            modules[handle] = (code_object, self.current)
            self.loads.append((self.current, code_object.arch))
            return result("hipModuleLoadData", handle)

        def hipModuleGetFunction(module, name):
            code_object, device = modules[module]
            if name.decode() not in code_object.kernels:
                return (hipError_t.hipErrorNotFound, None)
            return result("hipModuleGetFunction", (code_object.kernel(name.decode()), device))

        def hipModuleLaunchKernel(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
            info, device = function
            assert params is None
            markers = (ctypes.c_void_p * 5).from_address(extra)
            assert (markers[0], markers[2], markers[4]) == (1, 2, 3)
            size = ctypes.c_size_t.from_address(markers[3]).value
            data = ctypes.string_at(markers[1], size)
            arguments = {a.name: data[a.offset:a.offset + a.size] for a in info.explicit_arguments}
            self.launches.append(Launch(info.name, self.current, (gx, gy, gz), (bx, by, bz), shared, stream,
                                        arguments, size))
            return result("hipModuleLaunchKernel")

        def hipPointerGetAttributes(address):
            for start, device in self.allocations.items():
                if start <= address < start + (1 << 20):
                    return (ok, types.SimpleNamespace(device=device, type=hipMemoryType.hipMemoryTypeDevice))
            return (hipError_t.hipErrorInvalidValue, None)

        def hipGetDeviceProperties(index):
            name, gcn, wave = self.gpus[index]
            return (ok, types.SimpleNamespace(name=name.encode(), gcnArchName=gcn.encode(), multiProcessorCount=304,
                                              warpSize=wave, maxThreadsPerBlock=1024, sharedMemPerBlock=65536,
                                              maxSharedMemoryPerMultiProcessor=65536))

        def hipSetDevice(device):
            self.current = device
            return (ok,)

        def hipDeviceSynchronize():
            self.synchronized.append(self.current)
            return (ok,)

        return types.SimpleNamespace(
            hipError_t=hipError_t, hipInit=lambda flags: (ok,), hipGetDeviceCount=lambda: (ok, len(self.gpus)),
            hipGetDevice=lambda: (ok, self.current), hipSetDevice=hipSetDevice,
            hipDeviceSynchronize=hipDeviceSynchronize,
            hipGetDeviceProperties=hipGetDeviceProperties, hipModuleLoadData=hipModuleLoadData,
            hipModuleGetFunction=hipModuleGetFunction, hipModuleLaunchKernel=hipModuleLaunchKernel,
            hipPointerGetAttributes=hipPointerGetAttributes,
            hipGetErrorString=lambda err: f"{hipError_t(err).name} explained".encode())


def install(monkeypatch, fake: FakeHip) -> FakeHip:
    """Make the AMD driver module use ``fake`` (a fresh driver state, restored afterwards)."""
    monkeypatch.setattr(driver, "_state", driver._State(fake.module()))
    return fake
