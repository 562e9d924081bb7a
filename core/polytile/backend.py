"""The contract between the core and a backend distribution.

A backend is data plus a few hooks: its name, the architectures it compiles for, its
typed options, how it finds devices, and the stages it adds to the pass pipeline.  A
backend package provides an instance through the ``polytile_register_backends`` hook
(see :mod:`polytile.plugins.hookspecs`).  Vendor modules (``cuda.bindings``, ``hip``)
are imported inside :meth:`Backend.active_devices` and the driver, never at import time.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from .errors import ConfigError, TargetError, UnknownNameError
from .target import Target


@dataclass(frozen=True)
class Device:
    """One device a backend can run kernels on right now."""

    target: Target
    name: str
    index: int = 0
    properties: Mapping[str, Any] = field(default_factory=dict)


class BackendUnavailable(Exception):
    """Raised by :meth:`Backend.active_devices` when the vendor runtime is missing.

    The message says what is missing ("libcuda.so not found"); ``polytile info`` shows it
    as the reason the backend has no device.  It is not an error for the user.
    """


@dataclass(frozen=True)
class BackendOptions:
    """Options common to every backend; a backend subclasses this with its own fields."""

    num_warps: int = 4
    num_stages: int = 3
    debug: bool = False


class Backend:
    """Base class of every backend.  Subclasses set the class attributes and override
    the hooks they need."""

    #: Short name, the part of a target before ``:`` ("nvidia", "amd", "interp").
    name: ClassVar[str] = ""
    #: One line for ``polytile info``.
    description: ClassVar[str] = ""
    #: Architectures this backend compiles for; empty for a backend without architectures.
    architectures: ClassVar[tuple[str, ...]] = ()
    #: Architecture used for ``backend`` alone (``--target nvidia``), if any.
    default_architecture: ClassVar[str | None] = None
    #: The dataclass holding this backend's typed options.
    options_class: ClassVar[type[BackendOptions]] = BackendOptions

    def resolve_target(self, target: Target) -> Target:
        """Check ``target`` against this backend and fill in the default architecture."""
        if target.backend != self.name:
            raise TargetError(f"backend '{self.name}' cannot compile for target '{target}'")
        if not self.architectures:
            if target.arch is not None:
                raise TargetError(f"target '{target}': backend '{self.name}' takes no architecture; use '{self.name}'")
            return target
        arch = target.arch or self.default_architecture
        if arch is None:
            raise TargetError(
                f"target '{target}' names no architecture; use one of "
                + ", ".join(f"'{self.name}:{a}'" for a in self.architectures)
            )
        if arch not in self.architectures:
            from .errors import did_you_mean

            raise TargetError(f"target '{target}': backend '{self.name}' has no architecture '{arch}'"
                              f"{did_you_mean(arch, self.architectures)} (it has {', '.join(self.architectures)})")
        return Target(self.name, arch)

    def parse_options(self, options: Mapping[str, Any]) -> BackendOptions:
        """Turn user-given options (``num_warps=8``) into this backend's options object.

        Unknown names are an error listing close matches; values are checked against the
        field's type.
        """
        known = {f.name: f for f in dataclasses.fields(self.options_class)}
        values: dict[str, Any] = {}
        for key, value in options.items():
            if key not in known:
                raise UnknownNameError(f"option for backend '{self.name}'", key, known)
            expected = known[key].type
            expected_type = {"int": int, "bool": bool, "float": float, "str": str}.get(
                expected if isinstance(expected, str) else getattr(expected, "__name__", ""), None
            )
            if expected_type is int and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigError(f"option '{key}' of backend '{self.name}' must be an integer, got {value!r}")
            if expected_type is bool and not isinstance(value, bool):
                raise ConfigError(f"option '{key}' of backend '{self.name}' must be True or False, got {value!r}")
            values[key] = value
        parsed = self.options_class(**values)
        self.check_options(parsed)
        return parsed

    def check_options(self, options: BackendOptions) -> None:
        """Reject option values this backend cannot honour (raise ``ConfigError``)."""
        if options.num_warps < 1 or options.num_warps & (options.num_warps - 1):
            raise ConfigError(f"option 'num_warps' must be a power of two >= 1, got {options.num_warps}")
        if options.num_stages < 1:
            raise ConfigError(f"option 'num_stages' must be >= 1, got {options.num_stages}")

    def active_devices(self) -> list[Device]:
        """The devices present now.  Import vendor modules here, lazily.

        Return ``[]`` when the runtime is present but no device is; raise
        :class:`BackendUnavailable` with a short reason when the runtime itself is missing.
        """
        return []

    def configure_pipeline(self, *, pipeline: Any, target: Target, options: BackendOptions) -> None:
        """Append this backend's stages to ``pipeline`` (the core's tile stage is already there)."""

    def versions(self) -> Mapping[str, str]:
        """Toolchain versions that must enter the compile cache key (``{"llvmlite": "0.50"}``)."""
        return {}


# --------------------------------------------------------------------------------------
# Helpers for backends that talk to a vendor runtime through Python bindings whose calls
# return ``(error, *values)`` tuples (cuda-bindings, hip-python).


def import_vendor_module(module: str, *, distribution: str, install_hint: str, runtime: str,
                         missing_names: tuple[str, ...] = ()) -> Any:
    """Import ``module`` lazily; say what is missing as :class:`BackendUnavailable`.

    A missing package (``missing_names``: the module and its parents) reads "X is not
    installed (install hint)"; any other import failure means the bindings are there but
    the vendor runtime library is not: "<runtime> not found: ...".
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name in (None, *missing_names):
            raise BackendUnavailable(f"{distribution} is not installed ({install_hint})") from exc
        raise BackendUnavailable(f"{runtime} not found: {distribution} failed to import: {exc}") from exc
    except (ImportError, OSError, RuntimeError) as exc:
        raise BackendUnavailable(f"{runtime} not found: {distribution} failed to import: {exc}") from exc


def vendor_error_name(err: Any) -> str:
    return getattr(err, "name", None) or str(err)


def check_vendor_call(result: tuple, call: str, *, success: str, runtime: str) -> Any:
    """The values of a binding call's ``(error, *values)`` result, or BackendUnavailable."""
    err, *values = result
    if vendor_error_name(err) != success:
        raise BackendUnavailable(f"{runtime} call {call} failed with {vendor_error_name(err)}")
    return values[0] if len(values) == 1 else tuple(values)


def installed_versions(*distributions: str) -> dict[str, str]:
    """Versions of the installed distributions among ``distributions`` (for cache keys)."""
    from importlib import metadata  # costs ~20 ms; only the compile cache needs it

    versions = {}
    for dist in distributions:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return versions
