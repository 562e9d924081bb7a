"""The registry of installed backends: target resolution and device discovery."""

from __future__ import annotations

from typing import Callable, NamedTuple

from ..backend import Backend, BackendUnavailable, Device
from ..errors import TargetError, UnknownNameError
from ..target import Target
from .registry import CORE_OWNER, PluginInfo, Registry


class DeviceProbe(NamedTuple):
    """What one backend's :meth:`~polytile.backend.Backend.active_devices` found."""

    backend: str
    devices: tuple[Device, ...] = ()
    #: Why there is no device ("libcuda.so not found"); empty when there are devices.
    reason: str = ""
    #: True when the probe raised something other than ``BackendUnavailable``: a bug in
    #: the backend or a broken driver, not merely a machine without the hardware.
    failed: bool = False


def describe_device(backend: Backend, device: Device) -> str:
    """One line naming a device, as ``polytile info`` and target choice show it."""
    return f"{device.name} (device {device.index}, {device.target})"


class BackendRegistry(Registry[Backend]):
    """Backends by name (``nvidia``, ``amd``, ``interp``), filled by
    ``polytile_register_backends``.

    ``explain_missing(name)`` returns the error of a plugin that was meant to provide
    backend ``name`` but failed or is disabled, so that asking for its target reports
    that instead of "unknown backend".  ``report_problem(owner, message)`` records a
    device probe that crashed against the plugin that owns the backend.
    """

    def __init__(
        self,
        *,
        explain_missing: Callable[[str], Exception | None] | None = None,
        report_problem: Callable[[PluginInfo, str], None] | None = None,
    ):
        super().__init__("backend")
        self._explain_missing = explain_missing
        self._report_problem = report_problem
        self._probes: dict[str, DeviceProbe] = {}

    def register(self, backend: Backend) -> Backend:
        """Add ``backend`` (an instance), keyed by ``backend.name``."""
        if isinstance(backend, type) and issubclass(backend, Backend):
            raise TypeError(
                f"registry.register() takes a backend instance, got the class {backend.__qualname__}; "
                f"write registry.register({backend.__qualname__}())"
            )
        if not isinstance(backend, Backend):
            raise TypeError(
                "registry.register() takes an instance of a polytile.backend.Backend subclass, "
                f"got {type(backend).__qualname__} {backend!r}"
            )
        name = backend.name
        if not name:
            raise ValueError(
                f"backend class {type(backend).__qualname__} has no name: set its class attribute 'name' "
                "to the part of a target before ':' (for example 'amd' for 'amd:gfx942')"
            )
        try:
            parsed = Target.parse(name)
        except TargetError:
            parsed = None
        if parsed is None or parsed.arch is not None:
            raise ValueError(
                f"backend name {name!r} of {type(backend).__qualname__} is not usable in a target: "
                "use lowercase letters, digits, '-' and '_', starting with a letter"
            )
        return self.add(name, backend)

    def remove_owned_by(self, owner: PluginInfo) -> list[str]:
        names = super().remove_owned_by(owner)
        for name in names:
            self._probes.pop(name, None)
        return names

    def resolve(self, target: "str | Target", where: str = "") -> tuple[Backend, Target]:
        """The backend for ``target`` and the target completed with its default architecture.

        Raises the plugin's :class:`~polytile.errors.PluginError` when the plugin that
        would provide the backend failed or is disabled, :class:`UnknownNameError` with
        close matches when no plugin provides it, and :class:`TargetError` (or
        :class:`UnknownNameError` for the architecture) when the backend rejects it.
        """
        parsed = Target.parse(target, where)
        backend = self.find(parsed.backend)
        if backend is None:
            error = self._explain_missing(parsed.backend) if self._explain_missing else None
            if error is not None:
                raise error
            location = f"in target '{parsed}'" if parsed.arch else ""
            if where:
                location = f"{location} (from {where})".strip()
            raise UnknownNameError("target backend", parsed.backend, self.names(), location)
        no_device = ""
        if parsed.arch is None and backend.architectures and backend.default_architecture is None:
            # "nvidia" alone means the architecture of this machine's device, when it has one.
            probe = self.probe(backend.name)
            if probe.devices:
                parsed = Target(parsed.backend, probe.devices[0].target.arch)
            else:
                no_device = (f"; '{parsed}' alone means the architecture of this machine's device, and backend "
                             f"'{backend.name}' found none ({probe.reason or 'no device found'})")
        try:
            return backend, backend.resolve_target(parsed)
        except (TargetError, UnknownNameError) as exc:
            if not where and not no_device:
                raise
            message = str(exc) + no_device
            if where:
                message += f" (the target came from {where})"
            raise TargetError(message) from None

    def ordered(self) -> list[Backend]:
        """Backends in the order targets are chosen from: the core's own backends
        (the interpreter) after every hardware backend, otherwise registration order."""
        items = self.items()
        return [b for _, b, owner in items if owner != CORE_OWNER] + [b for _, b, owner in items if owner == CORE_OWNER]

    def probe(self, name: str, refresh: bool = False) -> DeviceProbe:
        """Ask backend ``name`` for its devices; never raises for the backend's failures.

        The answer is remembered: asking a driver for devices can take long (CUDA
        initialises a context), and the devices of a machine do not come and go while a
        process runs.  ``refresh=True`` asks again.
        """
        if not refresh and name in self._probes:
            return self._probes[name]
        backend = self.get(name)
        try:
            devices = tuple(backend.active_devices())
            bad = [d for d in devices if not isinstance(d, Device)]
            if bad:
                raise TypeError(
                    f"active_devices() must return polytile.backend.Device objects, got {type(bad[0]).__qualname__}"
                )
            result = DeviceProbe(name, devices, "" if devices else "no device found")
        except BackendUnavailable as exc:
            result = DeviceProbe(name, (), str(exc) or type(exc).__name__)
        except Exception as exc:  # a broken driver must not take the other backends down
            message = f"looking for devices failed: {type(exc).__name__}: {exc}"
            result = DeviceProbe(name, (), message, failed=True)
            if self._report_problem is not None:
                self._report_problem(self.owner_of(name), f"backend '{name}': {message}")
        self._probes[name] = result
        return result

    def active_devices(self, refresh: bool = False) -> list[Device]:
        """Every device of every backend, hardware backends first (see :meth:`ordered`)."""
        devices: list[Device] = []
        for backend in self.ordered():
            devices.extend(self.probe(backend.name, refresh).devices)
        return devices

    def describe_devices(self, refresh: bool = False) -> list[tuple[Target, str]]:
        """``(target, description)`` for every active device, in :meth:`active_devices` order."""
        pairs: list[tuple[Target, str]] = []
        for backend in self.ordered():
            for device in self.probe(backend.name, refresh).devices:
                pairs.append((device.target, describe_device(backend, device)))
        return pairs
