"""The CUDA driver, as the NVIDIA backend uses it: contexts, modules, functions, devices.

``cuda.bindings.driver`` is imported on first use, never at import time.  Each device's
primary context (the one PyTorch and CuPy use too) is retained once per process and
made current when a module is loaded or a kernel launched on that device.  Device
properties are read once per device.  What every GPU driver does alike (errors, the
device checks, the module and function caches) is :class:`polytile.device_driver.Driver`'s;
:class:`CudaDriver` gives it the CUDA driver's calls and contexts.

Every failing driver call is a :class:`CudaDriverError` naming the call, the kernel when
there is one, and the driver's own explanation of the error code.

Launches go through the native launcher when it can be used (:func:`native_launcher`:
the C extension ``polytile_nvidia._launch``, built from ``_launch.c`` when polytile-nvidia
is installed, which packs the arguments and calls cuLaunchKernel, about 2 µs cheaper per
launch than cuda-bindings' wrapper, and whose dispatcher launches ``kernel[grid](...)``
in one C call); the setting ``nvidia_launch`` chooses, and :func:`launch_path` says
which is in use and why.  Only where the installed module is missing or older than its
source is the module built at run time, into the cache directory (a fallback).
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import logging
import re
import threading
from pathlib import Path
from typing import Any, NamedTuple

from polytile import device_driver
from polytile.device_driver import Driver, error_name  # noqa: F401  (error_name: this module's since always)
from polytile.errors import DriverError, DriverOutOfResourcesError, LaunchError, LaunchOutOfResourcesError

log = logging.getLogger("polytile.nvidia.driver")
_NATIVE_SOURCE = Path(__file__).with_name("_launch.c")
#: The launch module as installed (backends/nvidia/setup.py builds it), and the marker
#: setup.py leaves in its place when it could not build it (its text says why).
NATIVE_MODULE = "polytile_nvidia._launch"
_UNBUILT_MARKER = Path(__file__).with_name("_launch.unbuilt")
#: The driver entry points the native launcher calls, by their libcuda symbol names.
_NATIVE_ENTRY_POINTS = ("cuLaunchKernel", "cuCtxGetCurrent", "cuCtxSetCurrent")

#: Without opting in (cuFuncSetAttribute), a block gets at most this much shared memory.
DEFAULT_SHARED_MEMORY_LIMIT = 48 * 1024

_HINTS = {
    "CUDA_ERROR_NO_BINARY_FOR_GPU": "the cubin was built for another architecture than this device's",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "the PTX is newer than this driver supports: update the NVIDIA driver, "
    "or assemble it to a cubin first",
    "CUDA_ERROR_INVALID_PTX": "the driver could not compile the PTX",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": "the block asks for more registers or threads than the device has; "
    "lower num_warps or set maxnreg",
    "CUDA_ERROR_ILLEGAL_ADDRESS": "the kernel accessed memory out of bounds; the context is now unusable and the "
    "process must restart (run under compute-sanitizer to find the access)",
    "CUDA_ERROR_NOT_FOUND": "no kernel of that name in the module",
}


class CudaDriverError(DriverError):
    """A CUDA driver call failed."""

    runtime = "CUDA driver"
    hints = _HINTS


class OutOfResourcesError(LaunchOutOfResourcesError):
    """A kernel needs more of a per-block resource than the device gives.

    ``resource`` is ``"shared memory"`` or ``"threads"``; ``required`` and ``limit`` are
    in bytes or threads.  A :class:`polytile.errors.OutOfResourcesError` (the autotuner
    drops configurations that raise it) and a :class:`~polytile.errors.LaunchError`.
    """

    def __init__(self, message: str, *, kernel: str, resource: str, required: int, limit: int):
        super().__init__(message, kernel=kernel, resource=resource, need=required, limit=limit)


class LaunchOutOfResourcesDriverError(CudaDriverError, DriverOutOfResourcesError, OutOfResourcesError):
    """cuLaunchKernel failed with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: the block asks for
    more registers or threads than the device has.  A :class:`CudaDriverError` and an
    :class:`OutOfResourcesError` (``required`` and ``limit`` are 0: the driver does not
    say them), so the autotuner drops the configuration."""

    resource = "registers or threads"


class DeviceProperties(NamedTuple):
    index: int
    name: str
    compute_capability: tuple[int, int]
    multiprocessor_count: int
    warp_size: int
    max_threads_per_block: int
    #: Shared memory a block gets without opting in (48 KB on every supported GPU).
    shared_memory_per_block: int
    #: Shared memory a block may opt in to with cuFuncSetAttribute.
    shared_memory_per_block_optin: int


class Module(device_driver.Module):
    """A cubin or PTX image loaded into one device's primary context."""


class Function(device_driver.Function):
    """One kernel of a loaded module, with the attributes the driver reports for it."""

    def __init__(self, handle: Any, name: str, module: Module):
        super().__init__(handle, name, module)
        self._dynamic_shared_limit = 0

    def attribute(self, name: str) -> int:
        """A ``CU_FUNC_ATTRIBUTE_<name>`` value (``"NUM_REGS"``, ``"SHARED_SIZE_BYTES"``, ...)."""
        driver = self.driver
        cuda = driver.bindings
        attribute = getattr(cuda.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")
        return int(driver.check(cuda.cuFuncGetAttribute(attribute, self.handle),
                                f"cuFuncGetAttribute(CU_FUNC_ATTRIBUTE_{name})", kernel=self.name, device=self.device))

    @property
    def num_registers(self) -> int:
        return self.attribute("NUM_REGS")

    @property
    def static_shared_bytes(self) -> int:
        return self.attribute("SHARED_SIZE_BYTES")

    @property
    def local_bytes(self) -> int:
        """Local memory per thread: register spills and stack."""
        return self.attribute("LOCAL_SIZE_BYTES")

    @property
    def max_threads_per_block(self) -> int:
        """The most threads a block of this kernel can have, given its register use."""
        return self.attribute("MAX_THREADS_PER_BLOCK")

    def check_block_size(self, threads: int) -> None:
        limit = self.max_threads_per_block
        if threads > limit:
            raise OutOfResourcesError(
                f"kernel '{self.name}': a block of {threads} threads is too large on device {self.device}: the kernel "
                f"uses {self.num_registers} registers per thread, so a block holds at most {limit} threads; lower "
                "num_warps or cap the registers with maxnreg",
                kernel=self.name, resource="threads", required=threads, limit=limit)

    def set_dynamic_shared_memory(self, nbytes: int) -> None:
        """Let launches use ``nbytes`` of dynamic shared memory, opting in above 48 KB.

        The device's opt-in limit covers static and dynamic shared memory together;
        exceeding it is an :class:`OutOfResourcesError` with both numbers.
        """
        if nbytes <= self._dynamic_shared_limit:
            return
        driver = self.driver
        properties = driver.device_properties(self.device)
        static = self.static_shared_bytes
        limit = properties.shared_memory_per_block_optin
        if static + nbytes > limit:
            detail = f" ({static} static + {nbytes} dynamic)" if static else ""
            raise OutOfResourcesError(
                f"kernel '{self.name}' needs {static + nbytes} bytes of shared memory per block{detail}, but device "
                f"{self.device} ({properties.name}) allows at most {limit}; use smaller blocks or fewer pipeline "
                "stages (num_stages)",
                kernel=self.name, resource="shared memory", required=static + nbytes, limit=limit)
        if static + nbytes > properties.shared_memory_per_block:
            cuda = driver.bindings
            driver.check(cuda.cuFuncSetAttribute(
                self.handle, cuda.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes),
                "cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)", kernel=self.name,
                device=self.device)
        self._dynamic_shared_limit = nbytes


class CudaDriver(Driver):
    """The CUDA driver, and everything this module remembers about it (replaceable as one
    in tests: ``CudaDriver(fake_bindings)``).  Devices are made current through their
    primary contexts (the ones PyTorch and CuPy use too), each retained once."""

    device_word = "CUDA device"
    visible_devices = "CUDA_VISIBLE_DEVICES limits them"
    runtime_library = "CUDA driver"
    without_runtime = "NVIDIA kernels compile without it, but launching one needs the CUDA driver and an NVIDIA GPU"
    error_type = CudaDriverError
    #: Driver statuses that mean "this configuration does not fit the device", not "the
    #: device or the program is broken".
    out_of_resources = {"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": LaunchOutOfResourcesDriverError}
    success = 0  # CUDA_SUCCESS; CUresult is an int enum
    init_call = "cuInit"
    device_count_call = "cuDeviceGetCount"
    error_string_call = "cuGetErrorString"
    module_load_call = "cuModuleLoadData"
    get_function_call = "cuModuleGetFunction"
    pointer_call = "cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)"
    # INVALID_VALUE is the driver's answer for memory it does not know (a host array).
    unknown_pointer_status = "CUDA_ERROR_INVALID_VALUE"
    module_type = Module
    function_type = Function

    def __init__(self, bindings: Any = None):
        super().__init__(bindings)
        self.contexts: dict[int, Any] = {}
        #: The native launcher module once chosen (None: cuda-bindings launches), and why.
        self.native: Any = None
        self.native_reason = ""
        self.native_chosen = False
        #: The thread building the native launcher when it was not built yet (auto mode).
        self.native_builder: threading.Thread | None = None
        #: (the installed launch module, or None and why it cannot be used), once looked at.
        self.installed: tuple[Any, str] | None = None

    def import_bindings(self) -> Any:
        """The driver's calls in ``cuda.bindings.driver``'s convention: through
        cuda-bindings' C layer where it can (:mod:`.driver_calls`), else
        ``cuda.bindings.driver`` itself."""
        from .backend import import_python_api
        from .driver_calls import driver_calls

        return driver_calls(import_python_api)

    def primary_context(self, device: int) -> Any:
        """The device's primary context, retained on first use and kept for the process."""
        context = self.contexts.get(device)
        if context is not None:
            return context
        with self.lock:
            context = self.contexts.get(device)
            if context is None:
                cuda = self.initialize()
                self.check_device_index(device)
                handle = self.check(cuda.cuDeviceGet(device), "cuDeviceGet", device=device)
                context = self.check(cuda.cuDevicePrimaryCtxRetain(handle), "cuDevicePrimaryCtxRetain", device=device)
                self.contexts[device] = context
        return context

    def make_current(self, device: int) -> Any:
        """Make ``device``'s primary context current on this thread (if it is not); return it."""
        context = self.primary_context(device)
        cuda = self.bindings
        current = self.check(cuda.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if int(current) != int(context):
            self.check(cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent", device=device)
        return context

    def current_device(self) -> int:
        """The device of this thread's current context; 0 when no context is current."""
        cuda = self.initialize()
        current = self.check(cuda.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if not int(current):
            return 0
        return int(self.check(cuda.cuCtxGetDevice(), "cuCtxGetDevice"))

    def query_pointer(self, cuda: Any, address: int) -> tuple:
        return cuda.cuPointerGetAttribute(cuda.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address)

    def read_properties(self, cuda: Any, device: int) -> DeviceProperties:
        handle = self.check(cuda.cuDeviceGet(device), "cuDeviceGet", device=device)
        attr = cuda.CUdevice_attribute

        def get(name: str) -> int:
            return int(self.check(cuda.cuDeviceGetAttribute(getattr(attr, f"CU_DEVICE_ATTRIBUTE_{name}"), handle),
                                  f"cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_{name})", device=device))

        raw = self.check(cuda.cuDeviceGetName(256, handle), "cuDeviceGetName", device=device)
        name = raw.split(b"\0", 1)[0].decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        return DeviceProperties(
            index=device,
            name=name,
            compute_capability=(get("COMPUTE_CAPABILITY_MAJOR"), get("COMPUTE_CAPABILITY_MINOR")),
            multiprocessor_count=get("MULTIPROCESSOR_COUNT"),
            warp_size=get("WARP_SIZE"),
            max_threads_per_block=get("MAX_THREADS_PER_BLOCK"),
            shared_memory_per_block=get("MAX_SHARED_MEMORY_PER_BLOCK"),
            shared_memory_per_block_optin=get("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        )

    def prepare_image(self, image: bytes | str) -> bytes:
        """A cubin as it is; PTX (str, or bytes of PTX text) NUL-terminated, as the driver
        reads it."""
        data = image.encode() if isinstance(image, str) else bytes(image)
        if not data.startswith(b"\x7fELF") and not data.endswith(b"\0"):
            data += b"\0"
        return data


#: Everything this module remembers about the driver; tests replace it whole.
_State = CudaDriver
_state = CudaDriver()


def synchronize() -> None:
    """Wait for everything launched in this thread's current context (nothing when no
    context is current: nothing was launched from this thread)."""
    cuda = _state.initialize()
    if int(_state.check(cuda.cuCtxGetCurrent(), "cuCtxGetCurrent")):
        _state.check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")


def bindings() -> Any:
    """The driver's calls in ``cuda.bindings.driver``'s convention, made ready on first
    use (BackendUnavailable when cuda-bindings is missing): through cuda-bindings' C
    layer where it can (:mod:`.driver_calls`), else ``cuda.bindings.driver`` itself."""
    return _state.load_bindings()


def _is_cuda_bindings(cuda: Any) -> bool:
    """Whether ``cuda`` is cuda-bindings itself (not a test double): the native launcher
    then calls the same libcuda."""
    from .driver_calls import DriverCalls

    return isinstance(cuda, DriverCalls) or getattr(cuda, "__name__", None) == "cuda.bindings.driver"


def raise_error(err: Any, call: str, kernel: str | None = None, device: int | None = None) -> None:
    _state.raise_error(err, call, kernel, device)


def check(result: tuple, call: str, kernel: str | None = None, device: int | None = None) -> Any:
    """The values of a driver call's ``(CUresult, *values)``, or :class:`CudaDriverError`."""
    return _state.check(result, call, kernel, device)


def initialize() -> Any:
    """cuInit once per process; returns the bindings."""
    return _state.initialize()


def native_launcher(*, wait: bool = True) -> Any:
    """The native launch module, configured for the CUDA driver, or None when launches go
    through cuda-bindings (:func:`launch_path` says why).  Chosen once per process.

    The module is the one installed with polytile-nvidia (:func:`installed_module`).
    Only where that one is missing or stale is it built at run time, and then
    ``wait=False`` (a launcher's first load) under ``nvidia_launch = "auto"`` runs the C
    compiler on a background thread and returns None until it is ready
    (:func:`native_pending`), so that the first launch does not wait some 200 ms for the
    compiler: launches go through cuda-bindings meanwhile, each launcher takes the native
    path at its first launch after the build finished, and each ``@jit`` function its
    dispatcher at its next launch after that."""
    if _state.native_chosen:
        return _state.native
    builder = None
    with _state.lock:
        if _state.native_chosen:
            return _state.native
        builder = _state.native_builder
        if builder is None:
            if not wait and _build_in_background():
                # Not a daemon: exiting waits for the compiler rather than leave half a build.
                _state.native_builder = threading.Thread(target=_choose_in_background, name="polytile-native-build")
                _state.native_builder.start()
                return None
            _state.native, _state.native_reason = _choose_native()
            _state.native_chosen = True
            return _state.native
    if not wait:
        return None
    builder.join()
    return _state.native


def native_pending() -> bool:
    """Whether the native launcher is being built in the background (see :func:`native_launcher`)."""
    return not _state.native_chosen and _state.native_builder is not None


def _build_in_background() -> bool:
    """Whether choosing the native launcher now means running the C compiler, under the
    'auto' setting with the real driver bindings (so it is worth a thread): only when
    the installed module cannot be used and no run-time build of it is cached."""
    from polytile import config
    from polytile.runtime.cache import cache_directory
    from polytile.runtime.launcher import NativeBuildError, native_module_path

    if config.get("nvidia_launch") != "auto":
        return False
    if not _is_cuda_bindings(bindings()):
        return False
    if installed_module()[0] is not None:
        return False
    try:
        built = native_module_path(NATIVE_MODULE, _NATIVE_SOURCE, cache_directory() / "native", _run_time_defines())
    except (NativeBuildError, OSError):
        return False  # choosing is quick then: the reason why not is all there is to find
    return not built[2].is_file()


def _run_time_defines() -> dict[str, str]:
    """The C macros of a run-time build: the digest of its sources, as setup.py defines it."""
    return {"POLYTILE_LAUNCH_SOURCE_DIGEST": f'"{source_digest()}"'}


def source_digest(source: Path | None = None) -> str:
    """The SHA-256 of ``source`` and of each header it includes from its own directory,
    in order: what the launch module records as ``source_digest`` (setup.py computes the
    same)."""
    source = source or _NATIVE_SOURCE
    text = source.read_bytes()
    digest = hashlib.sha256(text)
    for name in re.findall(rb'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', text, re.MULTILINE):
        digest.update((source.parent / name.decode()).read_bytes())
    return digest.hexdigest()


def installed_module() -> tuple[Any, str]:
    """``(module, "")``: the launch module built when polytile-nvidia was installed; or
    ``(None, why)`` when there is none or it is older than the source next to it (an
    editable install whose ``_launch.c`` changed since).  Looked at once per process."""
    found = _state.installed
    if found is not None:
        return found
    try:
        module = importlib.import_module(NATIVE_MODULE)
    except ImportError as exc:
        why = f"it is not installed ({exc})"
        try:
            why = _UNBUILT_MARKER.read_text().strip() or why
        except OSError:
            pass
        found = None, f"polytile-nvidia was installed without its native launch module: {why}"
    else:
        built_from = getattr(module, "source_digest", "")
        try:
            stale = _NATIVE_SOURCE.is_file() and built_from != source_digest()
        except OSError:
            stale = False  # a source that cannot be read says nothing against the module
        if stale:
            found = None, (f"the installed native launch module ({Path(module.__file__).name}) was built from another "
                           f"{_NATIVE_SOURCE.name} than the one next to it: reinstall polytile-nvidia (pip install -e "
                           "backends/nvidia, or ./dev setup)")
        else:
            found = module, ""
    _state.installed = found
    return found


def _choose_in_background() -> None:
    try:
        native, reason = _choose_native()
    except Exception as exc:  # noqa: BLE001 - 'auto' falls back; the reason is kept for launch_path
        native, reason = None, f"the native launcher cannot be used: {exc}"
    with _state.lock:
        _state.native, _state.native_reason = native, reason
        _state.native_chosen = True


def launch_path() -> str:
    """How kernels are launched in this process, in words, with the reason, and how the
    other driver calls are made (see :mod:`.driver_calls`)."""
    from .driver_calls import describe

    native = native_launcher()
    calls = describe(bindings())
    calls = f"; {calls}" if calls else ""
    if native is not None:
        return f"native (C extension calling cuLaunchKernel): {_state.native_reason}{calls}"
    return f"cuda-bindings cuLaunchKernel: {_state.native_reason}{calls}"


def _choose_native() -> tuple[Any, str]:
    from polytile import config

    choice = config.get("nvidia_launch")
    if choice == "bindings":
        return None, "the setting nvidia_launch is 'bindings'"
    cuda = bindings()
    if not _is_cuda_bindings(cuda):
        return None, "the CUDA bindings in use are not cuda.bindings.driver (a test double?)"
    from polytile.runtime.args import torch_current_stream
    from polytile.runtime.launcher import NativeBuildError

    module, unusable = installed_module()
    try:
        if module is None:
            module = _build_at_run_time(unusable)
        module.configure(*driver_entry_points(), torch_current_stream)
    except (NativeBuildError, OSError, AttributeError, ValueError) as exc:
        if choice == "native":
            raise LaunchError(f"the setting nvidia_launch is 'native', but the native launcher cannot be used: {exc}; "
                              "set nvidia_launch to 'auto' or 'bindings' to launch through cuda-bindings") from None
        log.info("NVIDIA launches go through cuda-bindings: the native launcher cannot be used: %s", exc)
        return None, f"the native launcher cannot be used: {exc}"
    log.debug("NVIDIA launches go through the native launcher %s", module.__file__)
    if not unusable:
        return module, f"nvidia_launch is '{choice}'; {NATIVE_MODULE} built at install ({Path(module.__file__).name})"
    return module, f"nvidia_launch is '{choice}'; built at run time as {Path(module.__file__).name}, because {unusable}"


def _build_at_run_time(unusable: str) -> Any:
    """The launch module built by the C compiler into the cache directory (the fallback
    for an installed module that is missing or stale; ``unusable`` says which)."""
    from polytile.runtime.cache import cache_directory
    from polytile.runtime.launcher import NativeBuildError, build_native_module

    try:
        return build_native_module(NATIVE_MODULE, _NATIVE_SOURCE, cache_directory() / "native", _run_time_defines())
    except (NativeBuildError, OSError) as exc:
        raise NativeBuildError(f"{unusable}; and it cannot be built at run time: {exc}") from None


def driver_entry_points() -> tuple[int, ...]:
    """The addresses of the driver functions the native launcher calls (from libcuda,
    the library cuda-bindings itself loads)."""
    library = ctypes.CDLL("libcuda.so.1")
    return tuple(ctypes.cast(getattr(library, name), ctypes.c_void_p).value or 0 for name in _NATIVE_ENTRY_POINTS)


def device_count() -> int:
    return _state.device_count()


def primary_context(device: int) -> Any:
    """The device's primary context, retained on first use and kept for the process."""
    return _state.primary_context(device)


def activate(device: int) -> Any:
    """Make ``device``'s primary context current on this thread (if it is not); return it."""
    return _state.make_current(device)


def current_device() -> int:
    """The device of this thread's current context; 0 when no context is current."""
    return _state.current_device()


def device_of_pointer(address: int) -> int | None:
    """The device that holds ``address``, or None when it is not memory a GPU can address."""
    return _state.device_of_pointer(address)


def device_properties(device: int) -> DeviceProperties:
    """What polytile needs to know about a device, read once per process."""
    return _state.device_properties(device)


def load_module(image: bytes | str, *, device: int | None = None, name: str = "") -> Module:
    """Load a cubin (bytes) or PTX (str, or bytes starting with PTX text) on ``device``
    (default: the current device); ``name`` is the kernel's, for error messages."""
    return _state.load_module(image, device=device, name=name)
