"""Run-time debugging: ``pl.device_print``, ``pl.device_assert``, ``pl.debug_barrier``.

(``pl.static_print`` and ``pl.static_assert`` act at compile time: see ``standard``.)
"""

from __future__ import annotations

from typing import Any

from ..dialects import tile_debug
from . import semantic as sem
from .core import builtin, semantic_error, unwrap


@builtin
def device_print(prefix: Any, *args: Any, hex: Any = False) -> None:
    """Print ``prefix`` and the values at run time, one line per element with the
    program id (as Triton).  Tiles printed together must have one shape."""
    prefix = unwrap(prefix)
    if not isinstance(prefix, str):
        raise semantic_error(f"pl.device_print's first argument is a prefix string, got {sem._describe(prefix)}")
    if args and prefix and not prefix.endswith((" ", ":")):
        prefix += " "
    values = [sem.to_tensor(a) for a in args]
    shapes = {v.shape for v in values if v.shape}
    if len(shapes) > 1:
        raise semantic_error(f"pl.device_print prints tensors of one shape, got {', '.join(str(list(s)) for s in shapes)}")
    attrs = {}
    if prefix:
        attrs["prefix"] = prefix
    if unwrap(hex):
        attrs["hex"] = True
    sem.emit(tile_debug.PrintOp, [v.handle for v in values], **attrs)


@builtin
def device_assert(cond: Any, msg: Any = "", mask: Any = None) -> None:
    """Fail the launch where ``cond`` is false (lanes where ``mask`` is false pass).
    The interpreter reports the kernel, the program, the line and the first failing
    element."""
    msg = unwrap(msg)
    if not isinstance(msg, str):
        raise semantic_error(f"pl.device_assert's message must be a string, got {sem._describe(msg)}")
    cond = unwrap(cond)
    if not hasattr(cond, "handle"):
        if not cond:
            raise semantic_error(f"device assertion failed at compile time{': ' + msg if msg else ''}")
        return
    cond = sem.to_bool(cond)
    if unwrap(mask) is not None:
        # Where the mask is off the assertion holds: cond | ~mask.
        cond = sem.binary("or", cond, sem.invert(sem.to_bool(sem.to_tensor(mask))))
    attrs = {"message": msg} if msg else {}
    sem.emit(tile_debug.AssertOp, cond.handle, **attrs)


@builtin
def debug_barrier() -> None:
    """Synchronize the threads of a program (nothing on the interpreter)."""
    sem.emit(tile_debug.BarrierOp)


__all__ = ["device_print", "device_assert", "debug_barrier"]
