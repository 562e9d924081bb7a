"""The ``interp`` backend: the interpreter as a target, registered as a builtin plugin.

It has no architectures and no devices: it is the fallback at the end of the target
chain, chosen when no hardware backend has an active device (or asked for with
``target="interp"``).  The executor (and NumPy) are imported on first launch only.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..backend import Backend, Device
from ..plugins import hookimpl


class InterpreterBackend(Backend):
    """Runs kernels with NumPy on the host: see :mod:`polytile.interpreter.executor`."""

    name = "interp"
    description = "NumPy interpreter: runs kernels on any machine"
    architectures = ()

    def active_devices(self) -> list[Device]:
        return []

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


@hookimpl
def polytile_register_backends(registry: Any) -> None:
    registry.register(InterpreterBackend())
