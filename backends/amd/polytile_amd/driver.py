"""The HIP runtime, as the AMD backend uses it: devices, modules, functions, launches.

``hip`` (hip-python) is imported on first use, never at import time: importing it needs
the ROCm runtime library (libamdhip64.so), and compiling for AMD must work without one.
Device properties are read once per device.

Every failing HIP call is a :class:`HipError` naming the call, the kernel when there is
one, and the runtime's explanation of the error code.
"""

from __future__ import annotations

import importlib
import threading
import types
from typing import Any, NamedTuple

from polytile.backend import BackendUnavailable, import_vendor_module
from polytile.errors import LaunchError, LaunchOutOfResourcesError, PolytileError

_INSTALL_HINT = "pip install 'polytile-amd[rocm]'"

_HINTS = {
    "hipErrorNoBinaryForGpu": "the code object was built for another architecture than this device's",
    "hipErrorInvalidImage": "the runtime could not load the code object",
    "hipErrorNotFound": "no kernel of that name in the code object",
    "hipErrorLaunchOutOfResources": "the workgroup asks for more registers, LDS or threads than the device has; "
    "lower num_warps",
    "hipErrorIllegalAddress": "the kernel accessed memory out of bounds; the process must restart",
}


class HipError(PolytileError):
    """A HIP runtime call failed."""

    def __init__(self, call: str, error: str, description: str = "", kernel: str | None = None,
                 device: int | None = None):
        self.call = call
        self.error = error
        self.kernel = kernel
        self.device = device
        super().__init__(self.describe(call, error, description, kernel, device))

    @staticmethod
    def describe(call: str, error: str, description: str, kernel: str | None, device: int | None) -> str:
        where = f"kernel '{kernel}': " if kernel else ""
        on = f" on device {device}" if device is not None else ""
        text = f"{where}HIP call {call} failed{on} with {error}"
        if description and description != error:
            text += f" ({description})"
        hint = _HINTS.get(error)
        if hint:
            text += f": {hint}"
        return text


class LaunchOutOfResourcesHipError(HipError, LaunchOutOfResourcesError):
    """hipModuleLaunchKernel failed with hipErrorLaunchOutOfResources: the workgroup asks
    for more registers, LDS or threads than the device has.  A :class:`HipError` and a
    :class:`polytile.errors.OutOfResourcesError` (``need`` and ``limit`` are 0: HIP does
    not say them), so the autotuner drops the configuration."""

    def __init__(self, call: str, error: str, description: str = "", kernel: str | None = None,
                 device: int | None = None):
        self.call = call
        self.error = error
        self.device = device
        LaunchOutOfResourcesError.__init__(self, self.describe(call, error, description, kernel, device),
                                           kernel=kernel or "", resource="registers, LDS or threads")


#: HIP statuses that mean "this configuration does not fit the device", not "the device
#: or the program is broken".
_OUT_OF_RESOURCES = {"hipErrorLaunchOutOfResources": LaunchOutOfResourcesHipError}


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


class _State:
    """Everything this module remembers about the runtime, replaceable as one in tests."""

    def __init__(self, bindings: Any = None):
        self.bindings = bindings
        self.success: Any = None
        self.initialized = False
        self.properties: dict[int, DeviceProperties] = {}
        self.lock = threading.Lock()


_state = _State()


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


def bindings() -> Any:
    """``hip.hip``, imported on first use (BackendUnavailable when it cannot be)."""
    hip = _state.bindings
    if hip is None:
        hip = _state.bindings = import_bindings()
    if _state.success is None:
        _state.success = hip.hipError_t.hipSuccess
    return hip


def error_name(err: Any) -> str:
    return getattr(err, "name", None) or str(err)


def raise_error(err: Any, call: str, kernel: str | None = None, device: int | None = None) -> None:
    description = ""
    try:
        text = bindings().hipGetErrorString(err)
        if isinstance(text, tuple):  # some hip-python versions return (error, text)
            text = text[-1]
        description = text.decode(errors="replace") if isinstance(text, bytes) else str(text or "")
    except Exception:  # an explanation is a nicety; the error itself must still be raised
        pass
    name = error_name(err)
    raise _OUT_OF_RESOURCES.get(name, HipError)(call, name, description, kernel, device)


def check(result: Any, call: str, kernel: str | None = None, device: int | None = None) -> Any:
    """The values of a HIP call's ``(hipError_t, *values)``, or :class:`HipError`."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != _state.success:
        raise_error(err, call, kernel, device)
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def initialize() -> Any:
    """hipInit once per process; returns the bindings."""
    hip = bindings()
    if not _state.initialized:
        try:
            result = hip.hipInit(0)
        except (RuntimeError, OSError) as exc:
            # hip-python loads libamdhip64.so on its first call, not on import.
            raise BackendUnavailable(f"ROCm runtime not found: {exc}; AMD kernels compile without it, but "
                                     "launching one needs ROCm and an AMD GPU") from exc
        check(result, "hipInit")
        _state.initialized = True
    return hip


def device_count() -> int:
    return int(check(initialize().hipGetDeviceCount(), "hipGetDeviceCount"))


def current_device() -> int:
    return int(check(initialize().hipGetDevice(), "hipGetDevice"))


def set_device(device: int) -> None:
    hip = initialize()
    if current_device() != device:
        _check_device_index(device)
        check(hip.hipSetDevice(device), "hipSetDevice", device=device)


def device_of_pointer(address: int) -> int | None:
    """The device that holds ``address``, or None when it is not device memory."""
    hip = initialize()
    err, *values = hip.hipPointerGetAttributes(address)
    if err != _state.success:
        if error_name(err) == "hipErrorInvalidValue":  # memory HIP does not know (a host array)
            return None
        raise_error(err, "hipPointerGetAttributes")
    attributes = values[0]
    memory_type = error_name(getattr(attributes, "type", None) or getattr(attributes, "memoryType", None))
    if memory_type in ("hipMemoryTypeHost", "hipMemoryTypeUnregistered"):
        return None
    return int(attributes.device)


def _text(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).split(b"\0", 1)[0].decode(errors="replace")
    return str(value)


def device_properties(device: int) -> DeviceProperties:
    """What polytile needs to know about a device, read once per process."""
    properties = _state.properties.get(device)
    if properties is not None:
        return properties
    hip = initialize()
    _check_device_index(device)
    props = check(hip.hipGetDeviceProperties(device), "hipGetDeviceProperties", device=device)
    properties = DeviceProperties(
        index=device, name=_text(props.name), gcn_arch_name=_text(props.gcnArchName),
        multiprocessor_count=int(props.multiProcessorCount), warp_size=int(props.warpSize),
        max_threads_per_block=int(props.maxThreadsPerBlock), shared_memory_per_block=int(props.sharedMemPerBlock),
        shared_memory_per_multiprocessor=int(props.maxSharedMemoryPerMultiProcessor))
    _state.properties[device] = properties
    return properties


def _check_device_index(device: int) -> None:
    count = device_count()
    if not 0 <= device < count:
        raise LaunchError(f"there is no AMD GPU {device}: this process sees {count} "
                          f"(device{'s' if count != 1 else ''} {', '.join(map(str, range(count))) or 'none'}; "
                          "HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES limit them)")


class Module:
    """An HSACO loaded on one device."""

    def __init__(self, handle: Any, device: int, name: str):
        self.handle = handle
        self.device = device
        self.name = name
        self._functions: dict[str, Function] = {}

    def function(self, name: str) -> "Function":
        function = self._functions.get(name)
        if function is None:
            handle = check(_state.bindings.hipModuleGetFunction(self.handle, name.encode()),
                           f"hipModuleGetFunction('{name}')", kernel=name, device=self.device)
            function = self._functions[name] = Function(handle, name, self)
        return function

    def __repr__(self) -> str:
        return f"<polytile_amd.driver.Module {self.name!r} on device {self.device}>"


def load_module(image: bytes, *, device: int | None = None, name: str = "") -> Module:
    """Load an HSACO on ``device`` (default: the current one); ``name`` is the kernel's,
    for error messages."""
    if device is None:
        device = current_device()
    set_device(device)
    handle = check(_state.bindings.hipModuleLoadData(bytes(image)), "hipModuleLoadData", kernel=name or None,
                   device=device)
    return Module(handle, device, name)


class Function:
    """One kernel of a loaded module."""

    def __init__(self, handle: Any, name: str, module: Module):
        self.handle = handle
        self.name = name
        self.module = module
        self.device = module.device

    def __repr__(self) -> str:
        return f"<polytile_amd.driver.Function {self.name!r} on device {self.device}>"


__all__ = ["DeviceProperties", "Function", "HipError", "Module", "bindings", "check", "current_device",
           "device_of_pointer", "device_properties", "load_module", "set_device"]
