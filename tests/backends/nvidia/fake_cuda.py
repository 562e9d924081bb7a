"""A stand-in for ``cuda.bindings.driver`` that runs without a GPU, and the GPU fixtures.

:class:`FakeDriver` keeps the binding's calling convention (``(CUresult, *values)``
tuples, enum attributes) and records what the backend asks of it: which contexts were
made current, which attributes set, and for every launch the grid, block, shared memory,
stream and the argument bytes read back through the ``kernelParams`` pointer array, as
the real driver reads them.
"""

from __future__ import annotations

import ctypes
import enum
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209
    CUDA_ERROR_NOT_FOUND = 500
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701
    CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720


class CUdevice_attribute(enum.IntEnum):
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8
    CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97


class CUfunction_attribute(enum.IntEnum):
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0
    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
    CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


class CUpointer_attribute(enum.IntEnum):
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9


class Handle:
    """An opaque driver handle: converts to int like CUcontext and CUfunction do."""

    def __init__(self, kind: str, value: int):
        self.kind = kind
        self.value = value

    def __int__(self) -> int:
        return self.value

    def __repr__(self) -> str:
        return f"<{self.kind} {self.value:#x}>"


@dataclass
class Kernel:
    """A kernel in a fake module: its parameter sizes (to read arguments back) and attributes."""

    param_sizes: tuple[int, ...]
    num_regs: int = 32
    static_shared: int = 0
    max_threads: int = 1024


@dataclass
class Launch:
    function: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    stream: int
    context: int
    arguments: list[bytes]
    cooperative: bool = False


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    capability: tuple[int, int] = (9, 0)
    sms: int = 132
    optin: int = 232448


@dataclass
class FakeDriver:
    gpus: list[FakeGpu] = field(default_factory=lambda: [FakeGpu()])
    #: Images the fake can load: image bytes -> {kernel name: Kernel}.
    images: dict[bytes, dict[str, Kernel]] = field(default_factory=dict)
    #: Pointer address ranges per device, for cuPointerGetAttribute: (start, end, device).
    allocations: list[tuple[int, int, int]] = field(default_factory=list)
    launch_result: CUresult = CUresult.CUDA_SUCCESS

    def __post_init__(self) -> None:
        self.CUresult = CUresult
        self.CUdevice_attribute = CUdevice_attribute
        self.CUfunction_attribute = CUfunction_attribute
        self.CUpointer_attribute = CUpointer_attribute
        self.calls: list[str] = []
        self.current = Handle("CUcontext", 0)
        self.retained: list[int] = []
        self.launches: list[Launch] = []
        self.set_attributes: list[tuple[str, str, int]] = []
        self.loaded: list[tuple[int, bytes]] = []
        self._functions: dict[int, tuple[str, Kernel]] = {}

    # -- devices and contexts --

    def cuInit(self, flags):
        self.calls.append("cuInit")
        return (CUresult.CUDA_SUCCESS,)

    def cuDeviceGetCount(self):
        return (CUresult.CUDA_SUCCESS, len(self.gpus))

    def cuDeviceGet(self, index):
        return (CUresult.CUDA_SUCCESS, index)

    def cuDeviceGetName(self, length, dev):
        return (CUresult.CUDA_SUCCESS, self.gpus[dev].name.encode() + b"\0" * 8)

    def cuDeviceGetAttribute(self, attribute, dev):
        gpu = self.gpus[dev]
        a = CUdevice_attribute
        values = {
            a.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: 1024,
            a.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: 49152,
            a.CU_DEVICE_ATTRIBUTE_WARP_SIZE: 32,
            a.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: gpu.sms,
            a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: gpu.capability[0],
            a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: gpu.capability[1],
            a.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: gpu.optin,
        }
        return (CUresult.CUDA_SUCCESS, values[attribute])

    def cuDevicePrimaryCtxRetain(self, dev):
        self.retained.append(dev)
        return (CUresult.CUDA_SUCCESS, Handle("CUcontext", 0x1000 + dev))

    def cuCtxGetCurrent(self):
        return (CUresult.CUDA_SUCCESS, self.current)

    def cuCtxSynchronize(self):
        self.calls.append("cuCtxSynchronize")
        return (CUresult.CUDA_SUCCESS,)

    def cuCtxSetCurrent(self, context):
        self.calls.append(f"cuCtxSetCurrent({int(context):#x})")
        self.current = context
        return (CUresult.CUDA_SUCCESS,)

    def cuCtxGetDevice(self):
        return (CUresult.CUDA_SUCCESS, int(self.current) - 0x1000)

    def cuGetErrorString(self, err):
        return (CUresult.CUDA_SUCCESS, f"fake description of {CUresult(err).name}".encode())

    def cuPointerGetAttribute(self, attribute, address):
        for start, end, device in self.allocations:
            if start <= address < end:
                return (CUresult.CUDA_SUCCESS, device)
        return (CUresult.CUDA_ERROR_INVALID_VALUE, None)

    # -- modules and functions --

    def cuModuleLoadData(self, image):
        kernels = self.images.get(bytes(image).rstrip(b"\0"))
        if kernels is None:
            return (CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU, None)
        self.loaded.append((int(self.current), bytes(image)))
        return (CUresult.CUDA_SUCCESS, Handle("CUmodule", len(self.loaded)) if kernels is not None else None)

    def cuModuleGetFunction(self, module, name):
        image = self.loaded[int(module) - 1][1].rstrip(b"\0")
        kernel = self.images[image].get(name.decode())
        if kernel is None:
            return (CUresult.CUDA_ERROR_NOT_FOUND, None)
        handle = Handle("CUfunction", 0x5000 + len(self._functions))
        self._functions[int(handle)] = (name.decode(), kernel)
        return (CUresult.CUDA_SUCCESS, handle)

    def cuFuncGetAttribute(self, attribute, function):
        _, kernel = self._functions[int(function)]
        a = CUfunction_attribute
        values = {a.CU_FUNC_ATTRIBUTE_NUM_REGS: kernel.num_regs, a.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: kernel.static_shared,
                  a.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: kernel.max_threads, a.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: 0}
        return (CUresult.CUDA_SUCCESS, values[attribute])

    def cuFuncSetAttribute(self, function, attribute, value):
        name, _ = self._functions[int(function)]
        self.set_attributes.append((name, CUfunction_attribute(attribute).name, value))
        return (CUresult.CUDA_SUCCESS,)

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        name, kernel = self._functions[int(f)]
        pointers = (ctypes.c_void_p * max(1, len(kernel.param_sizes))).from_address(params) if params else []
        arguments = [ctypes.string_at(pointers[i], size) for i, size in enumerate(kernel.param_sizes)]
        self.launches.append(Launch(name, (gx, gy, gz), (bx, by, bz), shared, int(stream), int(self.current), arguments))
        return (self.launch_result,)

    #: Programs a cooperative launch may have at most (the GPU's resident capacity).
    cooperative_limit: int = 132

    def cuLaunchCooperativeKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params):
        if gx * gy * gz > self.cooperative_limit:
            return (CUresult.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,)
        (result,) = self.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, 0)
        self.launches[-1].cooperative = True
        return (result,)


@pytest.fixture
def fake_driver(monkeypatch):
    """Install a :class:`FakeDriver` as polytile_nvidia.driver's bindings; returns it."""
    from polytile_nvidia import driver

    from polytile.runtime import args

    fake = FakeDriver()
    monkeypatch.setattr(driver, "_state", driver._State(fake))
    # The fake GPUs are not torch's: a real torch (imported by other tests on a GPU
    # machine, with fewer devices than the fakes) must not be asked for their streams.
    monkeypatch.setattr(args, "_current_raw_stream", lambda device: 0)
    return fake


# -- the native launcher against the fake driver -------------------------------------------

_LAUNCH_KERNEL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p,
                                  ctypes.c_void_p, ctypes.c_void_p)
_CTX_GET_CURRENT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))
_CTX_SET_CURRENT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
#: The C entry points handed to the native module stay alive for the whole session: the
#: module keeps their addresses until it is configured again.
_ENTRY_POINTS: list = []


@pytest.fixture(scope="session")
def native_module(tmp_path_factory):
    """A private copy of the native launch module, loaded once for the session: the one
    built at install (``polytile_nvidia._launch``), copied, so that pointing it at a fake
    driver never touches the module real launches use (GPU tests run in the same
    session); built from ``_launch.c`` where the install did not build it, and the test
    skipped where this machine cannot build it either (no C compiler or Python headers)."""
    import shutil

    from polytile.runtime.launcher import NativeBuildError, build_native_module, load_native_module
    from polytile_nvidia import driver

    directory = tmp_path_factory.mktemp("native")
    installed, _ = driver.installed_module()
    # Python enters a single-phase extension in sys.modules under its name when it loads
    # it: the copy must not stand in for the installed module in later tests.
    before = sys.modules.get(driver.NATIVE_MODULE)
    try:
        if installed is not None:
            copy = directory / Path(installed.__file__).name
            shutil.copyfile(installed.__file__, copy)
            return load_native_module(driver.NATIVE_MODULE, copy)
        try:
            return build_native_module(driver.NATIVE_MODULE, driver._NATIVE_SOURCE, directory,
                                       defines={"POLYTILE_LAUNCH_SOURCE_DIGEST": f'"{driver.source_digest()}"'})
        except NativeBuildError as exc:
            pytest.skip(f"the native launcher cannot be built here: {exc}")
    finally:
        if before is None:
            sys.modules.pop(driver.NATIVE_MODULE, None)
        else:
            sys.modules[driver.NATIVE_MODULE] = before


def use_native_launcher(fake: FakeDriver, module, monkeypatch) -> None:
    """Make the NVIDIA backend launch through ``module`` calling into ``fake`` (through C
    function pointers, as it calls libcuda)."""
    from polytile_nvidia import driver

    configure_native_launcher(fake, module)
    monkeypatch.setattr(driver._state, "native", module)
    monkeypatch.setattr(driver._state, "native_reason", "the test's")
    monkeypatch.setattr(driver._state, "native_chosen", True)


def configure_native_launcher(fake: FakeDriver, module) -> None:
    """Point ``module``'s driver calls at ``fake``."""
    from polytile.runtime.args import torch_current_stream

    def launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        return int(fake.cuLaunchKernel(function, gx, gy, gz, bx, by, bz, shared, stream or 0, params, extra)[0])

    def get_current(out):
        out[0] = int(fake.current) or None
        return 0

    def set_current(context):
        return int(fake.cuCtxSetCurrent(Handle("CUcontext", context or 0))[0])

    entry_points = (_LAUNCH_KERNEL(launch), _CTX_GET_CURRENT(get_current), _CTX_SET_CURRENT(set_current))
    _ENTRY_POINTS.append(entry_points)
    module.configure(*(ctypes.cast(entry, ctypes.c_void_p).value for entry in entry_points), torch_current_stream)


# -- real GPUs ---------------------------------------------------------------------------


def _nvidia_devices() -> list:
    from polytile.backend import BackendUnavailable
    from polytile_nvidia import NvidiaBackend

    try:
        return NvidiaBackend().active_devices()
    except BackendUnavailable:
        return []


@pytest.fixture(scope="session")
def nvidia_gpu():
    """The first NVIDIA device polytile supports; skips the test when there is none."""
    devices = _nvidia_devices()
    if not devices:
        pytest.skip("no supported NVIDIA GPU (NvidiaBackend().active_devices() found none)")
    return devices[0]


def torch_cuda():
    """torch, if it is installed and sees a GPU; else the test is skipped."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch cannot use the GPU")
    return torch


class DeviceBuffer:
    """GPU memory from cuMemAlloc, shown as a 1-D array through __cuda_array_interface__."""

    def __init__(self, nbytes: int, typestr: str = "<f4", itemsize: int = 4):
        from cuda.bindings import driver as cuda

        self._cuda = cuda
        err, self.pointer = cuda.cuMemAlloc(nbytes)
        assert not err, err
        self.nbytes = nbytes
        self.__cuda_array_interface__ = {"shape": (nbytes // itemsize,), "typestr": typestr,
                                         "data": (int(self.pointer), False), "version": 3, "strides": None}

    def upload(self, data: bytes) -> None:
        (err,) = self._cuda.cuMemcpyHtoD(self.pointer, data, len(data))
        assert not err, err

    def download(self) -> bytes:
        out = bytearray(self.nbytes)
        (err,) = self._cuda.cuMemcpyDtoH(out, self.pointer, self.nbytes)
        assert not err, err
        return bytes(out)

    def free(self) -> None:
        self._cuda.cuMemFree(self.pointer)
