"""The HIP runtime, as the AMD backend uses it: devices, modules, functions, launches.

``hip`` (hip-python) is imported on first use, never at import time: importing it needs
the ROCm runtime library (libamdhip64.so), and compiling for AMD must work without one.
Device properties are read once per device.  What every GPU driver does alike (errors,
the device checks, the module and function caches) is
:class:`polytile.device_driver.Driver`'s; :class:`HipDriver` gives it HIP's calls.

Every failing HIP call is a :class:`HipError` naming the call, the kernel when there is
one, and the runtime's explanation of the error code.
"""

from __future__ import annotations

import importlib
import types
from typing import Any, NamedTuple

from polytile import device_driver
from polytile.backend import BackendUnavailable, import_vendor_module
from polytile.device_driver import Driver, error_name  # noqa: F401  (error_name: this module's since always)
from polytile.errors import DriverError, DriverOutOfResourcesError

_INSTALL_HINT = "pip install 'polytile-amd[rocm]'"

_HINTS = {
    "hipErrorNoBinaryForGpu": "the code object was built for another architecture than this device's",
    "hipErrorInvalidImage": "the runtime could not load the code object",
    "hipErrorNotFound": "no kernel of that name in the code object",
    "hipErrorLaunchOutOfResources": "the workgroup asks for more registers, LDS or threads than the device has; "
    "lower num_warps",
    "hipErrorIllegalAddress": "the kernel accessed memory out of bounds; the process must restart",
}


class HipError(DriverError):
    """A HIP runtime call failed."""

    runtime = "HIP"
    hints = _HINTS


class LaunchOutOfResourcesHipError(HipError, DriverOutOfResourcesError):
    """hipModuleLaunchKernel failed with hipErrorLaunchOutOfResources: the workgroup asks
    for more registers, LDS or threads than the device has.  A :class:`HipError` and a
    :class:`polytile.errors.OutOfResourcesError` (``need`` and ``limit`` are 0: HIP does
    not say them), so the autotuner drops the configuration."""

    resource = "registers, LDS or threads"


class DeviceProperties(NamedTuple):
    index: int
    name: str
    #: "gfx942:sramecc+:xnack-"
    gcn_arch_name: str
    multiprocessor_count: int
    #: Lanes of a wavefront: 64 on CDNA, 32 on RDNA.
    warp_size: int
    max_threads_per_block: int
    #: LDS one workgroup may use, bytes.
    shared_memory_per_block: int
    #: LDS of one compute unit, bytes (what the workgroups resident on it share).
    shared_memory_per_multiprocessor: int


def import_bindings() -> Any:
    """hip-python's HIP bindings (``from hip import hip``); BackendUnavailable when they
    cannot be imported.

    hip-python up to 6.x ships them as the submodule ``hip.hip``.  From 10.x ``hip`` is a
    compatibility package that binds ``rocm.bindings.hip`` to its attribute ``hip`` and has
    no ``hip.hip`` submodule, so ``import hip.hip`` fails there although the bindings are
    installed: the attribute is looked at first.
    """
    package = import_vendor_module("hip", distribution="hip-python", install_hint=_INSTALL_HINT,
                                   runtime="ROCm runtime", missing_names=("hip",))
    module = getattr(package, "hip", None)
    if isinstance(module, types.ModuleType):
        return module
    try:
        return importlib.import_module("hip.hip")
    except ImportError as exc:
        raise BackendUnavailable(
            f"hip-python is installed ({getattr(package, '__file__', None) or 'package hip'}) but has no HIP bindings "
            f"module (neither the attribute hip.hip nor the submodule hip.hip: {exc}); reinstall it: "
            f"{_INSTALL_HINT}") from exc
    except (OSError, RuntimeError) as exc:
        raise BackendUnavailable(f"ROCm runtime not found: hip-python failed to import: {exc}") from exc


def _text(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).split(b"\0", 1)[0].decode(errors="replace")
    return str(value)


class Module(device_driver.Module):
    """An HSACO loaded on one device."""


class Function(device_driver.Function):
    """One kernel of a loaded module."""


class HipDriver(Driver):
    """The HIP runtime, and everything this module remembers about it (replaceable as one
    in tests: ``HipDriver(fake_hip)``)."""

    device_word = "AMD GPU"
    visible_devices = "HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES limit them"
    runtime_library = "ROCm runtime"
    without_runtime = "AMD kernels compile without it, but launching one needs ROCm and an AMD GPU"
    error_type = HipError
    #: HIP statuses that mean "this configuration does not fit the device", not "the
    #: device or the program is broken".
    out_of_resources = {"hipErrorLaunchOutOfResources": LaunchOutOfResourcesHipError}
    success = None  # hipSuccess, read from the bindings
    init_call = "hipInit"
    device_count_call = "hipGetDeviceCount"
    error_string_call = "hipGetErrorString"
    module_load_call = "hipModuleLoadData"
    get_function_call = "hipModuleGetFunction"
    pointer_call = "hipPointerGetAttributes"
    # Memory HIP does not know (a host array).
    unknown_pointer_status = "hipErrorInvalidValue"
    module_type = Module
    function_type = Function

    def import_bindings(self) -> Any:
        return import_bindings()

    def success_status(self, hip: Any) -> Any:
        return hip.hipError_t.hipSuccess

    def current_device(self) -> int:
        return int(self.check(self.initialize().hipGetDevice(), "hipGetDevice"))

    def make_current(self, device: int) -> None:
        hip = self.initialize()
        if self.current_device() != device:
            self.check_device_index(device)
            self.check(hip.hipSetDevice(device), "hipSetDevice", device=device)

    def query_pointer(self, hip: Any, address: int) -> tuple:
        return hip.hipPointerGetAttributes(address)

    def pointer_device(self, attributes: Any) -> int | None:
        memory_type = error_name(getattr(attributes, "type", None) or getattr(attributes, "memoryType", None))
        if memory_type in ("hipMemoryTypeHost", "hipMemoryTypeUnregistered"):
            return None
        return int(attributes.device)

    def read_properties(self, hip: Any, device: int) -> DeviceProperties:
        props = self.check(hip.hipGetDeviceProperties(device), "hipGetDeviceProperties", device=device)
        return DeviceProperties(
            index=device, name=_text(props.name), gcn_arch_name=_text(props.gcnArchName),
            multiprocessor_count=int(props.multiProcessorCount), warp_size=int(props.warpSize),
            max_threads_per_block=int(props.maxThreadsPerBlock), shared_memory_per_block=int(props.sharedMemPerBlock),
            shared_memory_per_multiprocessor=int(props.maxSharedMemoryPerMultiProcessor))


#: Everything this module remembers about the runtime; tests replace it whole.
_State = HipDriver
_state = HipDriver()


def bindings() -> Any:
    """``hip.hip``, imported on first use (BackendUnavailable when it cannot be)."""
    return _state.load_bindings()


def raise_error(err: Any, call: str, kernel: str | None = None, device: int | None = None) -> None:
    _state.raise_error(err, call, kernel, device)


def check(result: Any, call: str, kernel: str | None = None, device: int | None = None) -> Any:
    """The values of a HIP call's ``(hipError_t, *values)``, or :class:`HipError`."""
    return _state.check(result, call, kernel, device)


def initialize() -> Any:
    """hipInit once per process; returns the bindings."""
    return _state.initialize()


def device_count() -> int:
    return _state.device_count()


def current_device() -> int:
    return _state.current_device()


def synchronize() -> None:
    """Wait for everything launched on this thread's current device (compiled and tested
    against fake bindings only: no AMD GPU has run it)."""
    hip = _state.initialize()
    _state.check(hip.hipDeviceSynchronize(), "hipDeviceSynchronize")


def set_device(device: int) -> None:
    _state.make_current(device)


def device_of_pointer(address: int) -> int | None:
    """The device that holds ``address``, or None when it is not device memory."""
    return _state.device_of_pointer(address)


def device_properties(device: int) -> DeviceProperties:
    """What polytile needs to know about a device, read once per process."""
    return _state.device_properties(device)


def load_module(image: bytes, *, device: int | None = None, name: str = "") -> Module:
    """Load an HSACO on ``device`` (default: the current one); ``name`` is the kernel's,
    for error messages."""
    return _state.load_module(image, device=device, name=name)


__all__ = ["DeviceProperties", "Function", "HipDriver", "HipError", "Module", "bindings", "check", "current_device",
           "device_of_pointer", "device_properties", "load_module", "set_device"]
