"""The vendor-neutral half of launching a compiled kernel, and native launch helpers.

:class:`LauncherBase` is what every GPU backend's launcher shares: the grid checks, the
argument-count check, the choice of device (the one holding the pointer arguments, else
the current one), the module loaded once per device, and the stream (PyTorch's current
stream when an argument is a torch tensor, else the default stream).  A backend supplies
data (its grid limits, the name of its runtime and of a block) and four hooks:

* ``_pack(args) -> (device, any_torch_tensor)`` writes the arguments into the launcher's
  argument buffer (``device`` < 0 when no argument says where it lives);
* ``_current_device() -> int``;
* ``_load(device) -> loaded``: loads the module there, whatever the launch needs of it;
* ``_launch(loaded, gx, gy, gz, stream, device)``: starts the kernel.

The argument buffer is shared by all launches of one kernel, so this generic path holds
the launcher's lock from packing to launching.  A backend may add a faster path in front
(NVIDIA packs and launches in one native call, with no shared buffer and so no lock) and
fall back here for everything unusual.

:func:`build_native_module` compiles a small C extension at run time, with the system C
compiler and this Python's headers, and keeps it in the cache directory under the hash of
its source and build; it reports why when it cannot, so callers can fall back.  It is a
fallback: a backend ships its native modules built at install (NVIDIA's launch module is
a C extension of polytile-nvidia) and builds one here only where that one is missing or
older than its source.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import re
import sys
import sysconfig
import threading
from pathlib import Path
from typing import Any, Sequence

from ..errors import LaunchError
from .args import torch_current_stream

log = logging.getLogger("polytile.runtime.launcher")


def argument_count_error(kernel: str, names: Sequence[str], got: int) -> LaunchError:
    """The error for a launch with the wrong number of run-time arguments."""
    listed = ", ".join(names) or "none"
    return LaunchError(f"kernel '{kernel}' takes {len(names)} run-time argument{'s' if len(names) != 1 else ''} "
                       f"({listed}), got {got}")


def mixed_devices_error(kernel: str, name: str, where: int, first: str, device: int, place: str) -> LaunchError:
    """The error for pointer arguments on two devices; ``place`` spells a device from
    its index as the user's array library does (``"cuda:{}"``)."""
    return LaunchError(f"kernel '{kernel}': argument '{name}' is on {place.format(where)}, but argument '{first}' is "
                       f"on {place.format(device)}; a kernel runs on one device: move the arrays to the same device")


class LauncherBase:
    """Launches one compiled kernel: ``launcher((gx, gy, gz), args, stream=None)``.

    Subclasses set the class data below and implement the hooks the module docstring
    lists.  Calls are thread-safe.
    """

    #: The runtime's name in messages ("CUDA", "HIP").
    runtime_name = "the GPU runtime"
    #: What the runtime calls one element of the grid ("blocks", "workgroups").
    block_word = "blocks"
    #: The largest grid on each axis.
    max_grid: tuple[int, int, int] = (2**31 - 1, 65535, 65535)

    def __init__(self, kernel_name: str, parameter_names: Sequence[str]):
        self.kernel_name = kernel_name
        self.parameter_names = tuple(parameter_names)
        #: device -> what ``_load`` returned there; filled on the first launch on a device.
        self._loaded: dict[int, Any] = {}
        self._lock = threading.Lock()

    def __call__(self, grid: tuple[int, int, int], args: Sequence[Any], stream: Any = None) -> None:
        gx, gy, gz = grid
        limit_x, limit_y, limit_z = self.max_grid
        if not (0 < gx <= limit_x and 0 < gy <= limit_y and 0 < gz <= limit_z):
            if self.grid_is_empty(grid):
                return
        with self._lock:
            device, torch = self._pack(args)
            if device < 0:
                device = self._current_device()
            loaded = self._loaded.get(device)
            if loaded is None:
                loaded = self._load_locked(device)
            if stream is None:
                stream = torch_current_stream(device) if torch else 0
            self._launch(loaded, gx, gy, gz, stream, device)

    def loaded(self, device: int) -> Any:
        """What ``_load`` returned on ``device``, loading the kernel there if needed."""
        with self._lock:
            loaded = self._loaded.get(device)
            return loaded if loaded is not None else self._load_locked(device)

    def _load_locked(self, device: int) -> Any:
        loaded = self._loaded[device] = self._load(device)
        self._loaded_changed()
        return loaded

    def _loaded_changed(self) -> None:
        """Called (under the lock) after the kernel is loaded on another device."""

    def check_argument_count(self, args: Sequence[Any]) -> None:
        if len(args) != len(self.parameter_names):
            raise argument_count_error(self.kernel_name, self.parameter_names, len(args))

    def grid_is_empty(self, grid: tuple[int, int, int]) -> bool:
        """True for a grid with a zero (nothing to launch); a LaunchError for a bad one."""
        for axis, (size, limit) in enumerate(zip(grid, self.max_grid)):
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise LaunchError(f"kernel '{self.kernel_name}': grid {tuple(grid)}: axis {axis} must be a "
                                  f"non-negative integer, got {size!r}")
            if size > limit:
                raise LaunchError(f"kernel '{self.kernel_name}': grid {tuple(grid)}: axis {axis} has {size} "
                                  f"{self.block_word}, more than the {limit} {self.runtime_name} allows; use bigger "
                                  "blocks or loop inside the kernel")
        return 0 in grid

    # -- the native dispatcher (optional; see polytile.runtime.dispatch) ---------------------

    def make_dispatcher(self, slow: Any) -> Any:
        """A native dispatcher for a ``@jit`` function launching this kernel, or None.

        It is called as ``dispatcher.bind(grid)(*args, **kwargs)`` for every
        ``kernel[grid](...)``; a call it launches nothing for goes to
        ``slow(grid, args, kwargs, grid_was_called, planned)``
        (:meth:`polytile.runtime.jit.JITFunction._dispatch_slow`), ``dispatcher.learn(plan)``
        takes what :meth:`dispatch_plan` returned and ``dispatcher.forget()`` drops every
        plan.  The default has none: launches go through the Python entry point."""
        return None

    def dispatcher_pending(self) -> bool:
        """Whether :meth:`make_dispatcher` may have one later (a native module being built)."""
        return False

    def dispatch_plan(self, plan: Any) -> Any:
        """``plan`` (a :class:`~polytile.runtime.dispatch.CallPlan`) in the dispatcher's
        own form, or None when this kernel's parameters are beyond it."""
        return None

    # -- hooks ---------------------------------------------------------------------------

    def _pack(self, args: Sequence[Any]) -> tuple[int, bool]:
        raise NotImplementedError(f"{type(self).__name__} must implement _pack")

    def _current_device(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must implement _current_device")

    def _load(self, device: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement _load")

    def _launch(self, loaded: Any, gx: int, gy: int, gz: int, stream: Any, device: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _launch")


# -- native helpers ------------------------------------------------------------------------


class NativeBuildError(Exception):
    """A native helper could not be built or loaded; the message says why."""


_build_lock = threading.Lock()


def _compiler_candidates() -> list[str]:
    return [c for c in (os.environ.get("CC", ""), (sysconfig.get_config_var("CC") or "").split(" ")[0], "cc", "gcc",
                        "clang") if c]


def c_compiler() -> str | None:
    """The C compiler: ``$CC``, else the one Python was built with, else cc, gcc, clang."""
    import shutil  # only when building: a process loading a built module needs none of it

    for candidate in _compiler_candidates():
        found = shutil.which(candidate)
        if found:
            return found
    return None


def native_module_path(name: str, source: Path, directory: Path,
                       defines: dict[str, str] | None = None) -> tuple[str, str, Path]:
    """(the compiler asked for, Python include directory, shared object) of the C
    extension ``name``: the object exists when it was built before.  The compiler is the
    first choice (``$CC``, Python's own, ``cc``), not looked up on PATH: loading a built
    module needs no compiler.  :class:`NativeBuildError` when it cannot be built here."""
    if not source.is_file():
        raise NativeBuildError(f"its source '{source}' is missing (the package was installed without it)")
    include = sysconfig.get_paths().get("include", "")
    if not include or not Path(include, "Python.h").is_file():
        raise NativeBuildError(f"the Python headers are not installed (no Python.h in '{include}'); install the "
                               "python3-dev package of this Python")
    compiler = _compiler_candidates()[0]
    code = source.read_bytes() + b"".join(header.read_bytes() for header in local_headers(source))
    macros = "".join(f"-D{key}={value}\n" for key, value in sorted((defines or {}).items())).encode()
    digest = hashlib.sha256(b"\0".join([code, compiler.encode(), include.encode(), sys.version.encode(),
                                        macros])).hexdigest()
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return compiler, include, directory / f"{name}-{digest[:20]}{suffix}"


def local_headers(source: Path) -> list[Path]:
    """The files ``source`` includes with ``#include "name"`` from its own directory: part
    of what the built module is named by, so that editing one rebuilds it."""
    names = re.findall(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', source.read_text(errors="replace"), re.MULTILINE)
    headers = [source.parent / name for name in names]
    missing = [str(header) for header in headers if not header.is_file()]
    if missing:
        raise NativeBuildError(f"'{source.name}' includes {', '.join(missing)}, which is missing (the package was "
                               "installed without it)")
    return headers


def build_native_module(name: str, source: Path, directory: Path, defines: dict[str, str] | None = None) -> Any:
    """Import the C extension ``name`` built from ``source``, building it first if needed.

    ``name`` may be dotted (``package.module``): the module's init function is named after
    its last part, and it is not entered in ``sys.modules``.  ``defines`` are C macros
    (``-DKEY=VALUE``).

    The shared object lives in ``directory`` under a name holding the hash of the source,
    the compiler and this Python's version and headers, so that any change rebuilds it;
    it is written to a temporary file and renamed, so a concurrent build or a crash never
    leaves a half-written one.  :class:`NativeBuildError` says why it could not be built.
    """
    _, include, target = native_module_path(name, source, directory, defines)
    with _build_lock:
        if not target.is_file():
            compiler = c_compiler()
            if compiler is None:
                raise NativeBuildError("no C compiler found (looked for $CC, cc, gcc and clang)")
            _compile(compiler, include, source, target, defines or {})
    return load_native_module(name, target)


def load_native_module(name: str, path: Path) -> Any:
    """Import the C extension ``name`` from the file ``path`` (not entering it in
    ``sys.modules``: each file is a module of its own); :class:`NativeBuildError` when it
    does not import."""
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    if spec is None:
        raise NativeBuildError(f"'{path}' cannot be imported")
    try:
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except ImportError as exc:
        raise NativeBuildError(f"'{path}' was built but does not import: {exc}") from None
    return module


def _compile(compiler: str, include: str, source: Path, target: Path, defines: dict[str, str]) -> None:
    import subprocess
    import tempfile

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(suffix=".so", dir=target.parent)
        os.close(handle)
    except OSError as exc:
        raise NativeBuildError(f"cannot write to '{target.parent}': {exc}") from None
    macros = [f"-D{key}={value}" for key, value in sorted(defines.items())]
    command = [compiler, "-O2", "-shared", "-fPIC", f"-I{include}", *macros, str(source), "-o", temporary]
    log.debug("building %s: %s", target.name, " ".join(command))
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        os.unlink(temporary)
        raise NativeBuildError(f"{compiler} could not run: {exc}") from None
    if result.returncode:
        os.unlink(temporary)
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise NativeBuildError(f"{compiler} failed on {source.name}: {' / '.join(tail)}")
    os.replace(temporary, target)


__all__ = ["LauncherBase", "NativeBuildError", "argument_count_error", "build_native_module", "c_compiler",
           "load_native_module", "local_headers", "mixed_devices_error", "native_module_path"]
