"""The vendor-neutral half of a GPU backend's driver: :class:`Driver`, :class:`Module`
and :class:`Function`.

A GPU backend talks to its runtime (the CUDA driver through cuda-bindings, HIP through
hip-python) through Python bindings whose calls return ``(status, *values)`` tuples.
What every such driver does the same way is here: importing the bindings on first use,
turning a failed call into a :class:`~polytile.errors.DriverError` that names the call,
the kernel and the device (or the backend's out-of-resources error, which the autotuner
drops), initialising the runtime once, checking a device index, reading each device's
properties once, loading a module and keeping each of its functions.

A backend's driver is a subclass that sets data (the names of the calls, its error
types, how its messages name a device) and overrides a few hooks: how to import the
bindings, which device is current and how to make another one current, how to read a
device's properties, which device holds an address.  One instance holds everything the
driver remembers in a process, so that tests replace it whole (with one made around a
fake of the bindings).  The calls a launch makes per kernel run stay in the backend's
launcher; nothing here is on that path but :meth:`Driver.check` and
:meth:`Driver.raise_error` when a call fails.

Nothing here imports a vendor module: the bindings come from
:meth:`Driver.import_bindings`, called on the first call that needs them.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar, Mapping

from .backend import BackendUnavailable
from .errors import DriverError, LaunchError


def error_name(err: Any) -> str:
    """The name of a runtime status (``"CUDA_ERROR_INVALID_VALUE"``), for an enum member or
    a plain value alike."""
    return getattr(err, "name", None) or str(err)


class Driver:
    """One GPU runtime as a backend uses it, and everything remembered about it in this
    process.  Subclasses set the class data and implement the hooks below."""

    # -- data --------------------------------------------------------------------------------

    #: How messages name a device: "there is no {device_word} 3".
    device_word: ClassVar[str] = "GPU"
    #: What limits the devices a process sees ("CUDA_VISIBLE_DEVICES limits them").
    visible_devices: ClassVar[str] = ""
    #: The runtime library whose absence makes the backend unavailable, and what still
    #: works without it: "ROCm runtime", "AMD kernels compile without it, ...".
    runtime_library: ClassVar[str] = "GPU runtime"
    without_runtime: ClassVar[str] = "kernels compile without it, but launching one needs it and a GPU"
    #: The error of a failed call; and, by status name, the subclass of
    #: :class:`~polytile.errors.DriverOutOfResourcesError` for the statuses that mean
    #: "this configuration does not fit the device", not "the device is broken".
    error_type: ClassVar[type[DriverError]] = DriverError
    out_of_resources: ClassVar[Mapping[str, type[DriverError]]] = {}
    #: The status of a successful call; None: :meth:`success_status` reads it from the
    #: bindings when they are loaded.
    success: Any = 0
    #: The calls made here, by their names in the bindings; each takes the arguments its
    #: CUDA driver counterpart takes (``cuInit(0)``, ``cuModuleGetFunction(module, name)``).
    init_call: ClassVar[str] = ""
    device_count_call: ClassVar[str] = ""
    error_string_call: ClassVar[str] = ""
    module_load_call: ClassVar[str] = ""
    get_function_call: ClassVar[str] = ""
    #: The name :meth:`device_of_pointer` gives its call in errors, and the status that
    #: means "memory the runtime does not know" (a host array): no device, not an error.
    pointer_call: ClassVar[str] = ""
    unknown_pointer_status: ClassVar[str] = ""

    def __init__(self, bindings: Any = None):
        #: The bindings (``cuda.bindings.driver``, ``hip.hip``, or a test's fake); None
        #: until first needed.
        self.bindings = bindings
        self.initialized = False
        #: device -> what :meth:`read_properties` returned for it.
        self.properties: dict[int, Any] = {}
        self.lock = threading.Lock()

    # -- hooks -------------------------------------------------------------------------------

    def import_bindings(self) -> Any:
        """The vendor's bindings, imported now; BackendUnavailable saying what is missing."""
        raise NotImplementedError

    def success_status(self, bindings: Any) -> Any:
        """The status of a successful call, for a driver whose ``success`` is None."""
        raise NotImplementedError

    def current_device(self) -> int:
        """The device this thread's calls go to now."""
        raise NotImplementedError

    def make_current(self, device: int) -> Any:
        """Make ``device`` the one this thread's calls go to (and check its index)."""
        raise NotImplementedError

    def read_properties(self, bindings: Any, device: int) -> Any:
        """What the backend needs to know about ``device`` (an index already checked)."""
        raise NotImplementedError

    def query_pointer(self, bindings: Any, address: int) -> tuple:
        """The ``(status, value)`` of the call asking which device holds ``address``."""
        raise NotImplementedError

    def pointer_device(self, value: Any) -> int | None:
        """The device in what :meth:`query_pointer` returned; None for host memory."""
        return int(value)

    def prepare_image(self, image: Any) -> bytes:
        """A compiled binary as the module-load call takes it."""
        return bytes(image)

    #: The types of what :meth:`load_module` and :meth:`Module.function` make.
    module_type: ClassVar[type["Module"]]
    function_type: ClassVar[type["Function"]]

    # -- errors ------------------------------------------------------------------------------

    def load_bindings(self) -> Any:
        """The bindings, imported on first use (BackendUnavailable when they cannot be)."""
        bindings = self.bindings
        if bindings is None:
            bindings = self.bindings = self.import_bindings()
        if self.success is None:
            self.success = self.success_status(bindings)
        return bindings

    def describe_status(self, err: Any) -> str:
        """The runtime's own explanation of a status; "" when it has none to give."""
        try:
            text = getattr(self.load_bindings(), self.error_string_call)(err)
            if isinstance(text, tuple):  # (status, text)
                if text[0] != self.success:
                    return ""
                text = text[-1]
            return text.decode(errors="replace") if isinstance(text, bytes) else str(text or "")
        except Exception:  # an explanation is a nicety; the error itself must still be raised
            return ""

    def raise_error(self, err: Any, call: str, kernel: str | None = None, device: int | None = None) -> None:
        """Raise the error of ``call`` failing with status ``err``."""
        name = error_name(err)
        raise self.out_of_resources.get(name, self.error_type)(call, name, self.describe_status(err), kernel, device)

    def check(self, result: Any, call: str, kernel: str | None = None, device: int | None = None) -> Any:
        """The values of a call's ``(status, *values)`` result, or its error."""
        err, *values = result if isinstance(result, tuple) else (result,)
        if err != self.success:
            self.raise_error(err, call, kernel, device)
        if not values:
            return None
        return values[0] if len(values) == 1 else tuple(values)

    # -- devices -----------------------------------------------------------------------------

    def initialize(self) -> Any:
        """Initialise the runtime once per process; returns the bindings."""
        bindings = self.load_bindings()
        if not self.initialized:
            try:
                result = getattr(bindings, self.init_call)(0)
            except (RuntimeError, OSError) as exc:
                # Bindings may load the runtime library on their first call, not on import.
                raise BackendUnavailable(f"{self.runtime_library} not found: {exc}; {self.without_runtime}") from exc
            self.check(result, self.init_call)
            self.initialized = True
        return bindings

    def device_count(self) -> int:
        return int(self.check(getattr(self.initialize(), self.device_count_call)(), self.device_count_call))

    def check_device_index(self, device: int) -> None:
        """A LaunchError for a device this process does not see, saying which it sees."""
        count = self.device_count()
        if not 0 <= device < count:
            raise LaunchError(f"there is no {self.device_word} {device}: this process sees {count} "
                              f"(device{'s' if count != 1 else ''} {', '.join(map(str, range(count))) or 'none'}; "
                              f"{self.visible_devices})")

    def device_properties(self, device: int) -> Any:
        """What the backend needs to know about a device, read once per process."""
        properties = self.properties.get(device)
        if properties is not None:
            return properties
        bindings = self.initialize()
        self.check_device_index(device)
        properties = self.properties[device] = self.read_properties(bindings, device)
        return properties

    def device_of_pointer(self, address: int) -> int | None:
        """The device that holds ``address``, or None when it is not memory a GPU can address."""
        bindings = self.initialize()
        err, *values = self.query_pointer(bindings, address)
        if err != self.success:
            if error_name(err) == self.unknown_pointer_status:
                return None
            self.raise_error(err, self.pointer_call)
        return self.pointer_device(values[0])

    # -- modules -----------------------------------------------------------------------------

    def load_module(self, image: Any, *, device: int | None = None, name: str = "") -> "Module":
        """Load a compiled binary on ``device`` (default: the current one); ``name`` is the
        kernel's, for error messages."""
        if device is None:
            device = self.current_device()
        self.make_current(device)
        load = self.module_load_call
        handle = self.check(getattr(self.bindings, load)(self.prepare_image(image)), load, kernel=name or None,
                            device=device)
        return self.module_type(self, handle, device, name)


class Module:
    """A binary loaded on one device; :meth:`function` looks each kernel up once."""

    def __init__(self, driver: Driver, handle: Any, device: int, name: str):
        self.driver = driver
        self.handle = handle
        self.device = device
        self.name = name
        self._functions: dict[str, Function] = {}

    def function(self, name: str) -> "Function":
        function = self._functions.get(name)
        if function is None:
            driver = self.driver
            call = driver.get_function_call
            handle = driver.check(getattr(driver.bindings, call)(self.handle, name.encode()), f"{call}('{name}')",
                                  kernel=name, device=self.device)
            function = self._functions[name] = driver.function_type(handle, name, self)
        return function

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.{type(self).__qualname__} {self.name!r} on device {self.device}>"


class Function:
    """One kernel of a loaded module."""

    def __init__(self, handle: Any, name: str, module: Module):
        self.handle = handle
        self.name = name
        self.module = module
        self.driver = module.driver
        self.device = module.device

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.{type(self).__qualname__} {self.name!r} on device {self.device}>"


Driver.module_type = Module
Driver.function_type = Function

__all__ = ["Driver", "Function", "Module", "error_name"]
