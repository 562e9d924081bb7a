"""The ``interp`` backend: the interpreter as a target, registered as a builtin plugin.

It has no architectures and no devices: it is the fallback at the end of the target
chain, chosen when no hardware backend has an active device (or asked for with
``target="interp"``).  The executor (and NumPy) are imported on first launch only.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..backend import Backend, BackendOptions, Device, LaunchParam, Launcher
from ..errors import LaunchError
from ..plugins import hookimpl


class InterpreterBackend(Backend):
    """Runs kernels with NumPy on the host: see :mod:`polytile.interpreter.executor`."""

    name = "interp"
    description = "NumPy interpreter: runs kernels on any machine"
    architectures = ()

    def active_devices(self) -> list[Device]:
        return []

    def host_device(self) -> Device:
        import os

        from ..target import Target

        # A persistent kernel launches one program per "SM": on the interpreter, per core.
        return Device(Target("interp"), "polytile interpreter (CPU)", 0,
                      {"multiprocessor_count": os.cpu_count() or 1, "warp_size": 1, "shared_memory_per_block": 0})

    def launch(self, module: Any, kernel_name: str, grid: Any, args: Sequence[Any], *,
               bounds_check: bool | None = None) -> None:
        """Run ``kernel_name`` of ``module`` over ``grid`` with ``args`` (NumPy arrays for
        pointers, written in place; scalars otherwise).  ``bounds_check`` defaults to the
        setting ``interpreter_bounds_check``."""
        from .executor import run_kernel

        if bounds_check is None:
            from .. import config

            bounds_check = bool(config.get("interpreter_bounds_check"))
        run_kernel(module, kernel_name, grid, args, bounds_check=bounds_check)

    def make_launcher(self, *, compiled: Any, kernel_name: str, params: Sequence[LaunchParam],
                      options: BackendOptions) -> Launcher:
        """A launcher that calls :meth:`launch`, viewing each pointer argument as a NumPy
        array of the caller's memory first (a host-memory backend: a device array is a
        :class:`~polytile.errors.LaunchError` naming the argument)."""
        import numpy as np

        from ..ir import types as t
        from ..runtime.args import as_writable_array

        launch = self.launch
        module = compiled.module
        ndarray = np.ndarray

        def host_array(name: str) -> Any:
            def convert(value: Any) -> Any:
                if type(value) is ndarray or value is None:
                    return value
                array = as_writable_array(kernel_name, name, value, LaunchError)
                if array is None:
                    raise LaunchError(f"kernel '{kernel_name}': argument '{name}' ({type(value).__name__}) is not in "
                                      f"host memory; backend '{self.name}' reads arguments on the host")
                return array
            return convert

        converters = [(index, host_array(param.name)) for index, param in enumerate(params)
                      if isinstance(param.type, t.PointerType)]
        converters += [(index, bool) for index, param in enumerate(params) if param.type == t.i1]

        def launcher(grid: tuple[int, int, int], args: Sequence[Any]) -> None:
            # NumPy arrays and Python bools convert to themselves: such a launch passes
            # the caller's tuple through without copying it.
            converted = None
            for index, convert in converters:
                value = args[index]
                new = convert(value)
                if new is not value:
                    if converted is None:
                        converted = list(args)
                    converted[index] = new
            launch(module, kernel_name, grid, args if converted is None else converted)

        return launcher


@hookimpl
def polytile_register_backends(registry: Any) -> None:
    registry.register(InterpreterBackend())
