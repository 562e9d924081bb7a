"""Atomics: ``pl.atomic_add/max/min/and/or/xor/xchg/cas``.

Each one reads, combines and writes memory at every active lane as one indivisible step
and returns the values memory held before (Triton's semantics).  They lower to
``tile.atomic_rmw`` (with a ``kind``) and ``tile.atomic_cas``.  The pointer, the value
and the mask broadcast to one shape; the value converts to the pointee type.
"""

from __future__ import annotations

from typing import Any

from ..dialects import tile
from ..ir import types as t
from . import semantic as sem
from .core import builtin, semantic_error, tensor, unwrap

_SEMS = {None: None, "acq_rel": "acq_rel", "acquire": "acquire", "release": "release", "relaxed": "relaxed"}
_SCOPES = {None: None, "gpu": "gpu", "cta": "cta", "sys": "sys"}


def _order(name: str, sem_: Any, scope: Any) -> dict:
    """The ``sem``/``scope`` attributes; left out when the user did not pick one (the
    op's defaults, ``acq_rel`` and ``gpu``, are Triton's)."""
    sem_, scope = unwrap(sem_), unwrap(scope)
    if sem_ not in _SEMS:
        raise semantic_error(f"pl.{name}: unknown sem {sem_!r}; use 'acq_rel', 'acquire', 'release' or 'relaxed'")
    if scope not in _SCOPES:
        raise semantic_error(f"pl.{name}: unknown scope {scope!r}; use 'gpu', 'cta' or 'sys'")
    attrs = {}
    if sem_ is not None and sem_ != "acq_rel":
        attrs["sem"] = sem_
    if scope is not None and scope != "gpu":
        attrs["scope"] = scope
    return attrs


def _prepare(name: str, pointer: Any, values: list[Any], mask: Any) -> tuple[tensor, list[tensor], Any]:
    """The pointer, the values (converted to the pointee type) and the mask, all broadcast
    to one shape."""
    pointer = unwrap(pointer)
    if not isinstance(pointer, tensor) or not t.is_pointer(pointer.type):
        raise semantic_error(f"pl.{name} needs a pointer (a kernel argument bound to an array, plus offsets), "
                             f"got {sem._describe(pointer)}")
    sem.check_writable(pointer, f"pl.{name}")
    pointee = t.element_type(pointer.type).pointee
    if isinstance(pointee, t.PointerType) or pointee == t.i1:
        raise semantic_error(f"pl.{name} works on integers and floats, not on {sem.type_name(pointee)}")
    converted = []
    for value in values:
        value = unwrap(value)
        value = sem.to_tensor(value, pointee) if not isinstance(value, tensor) else value
        if t.is_pointer(value.type):
            raise semantic_error(f"pl.{name}: the value must be a number, got {sem._describe(value)}")
        converted.append(value)
    shape = pointer.shape
    for value in converted:
        shape = sem.broadcast_shapes(shape, value.shape)
    mask = unwrap(mask)
    if mask is not None:
        mask = sem.to_bool(sem.to_tensor(mask))
        shape = sem.broadcast_shapes(shape, mask.shape)
        mask = sem.broadcast_to_shape(mask, shape).handle
    pointer = sem.broadcast_to_shape(pointer, shape)
    converted = [sem.broadcast_to_shape(sem.cast_type(v, pointee), shape) for v in converted]
    return pointer, converted, mask


def _rmw(name: str, kind: str, pointer: Any, val: Any, mask: Any, sem_: Any, scope: Any) -> tensor:
    attrs = _order(name, sem_, scope)
    pointer, (value,), mask = _prepare(name, pointer, [val], mask)
    element = t.element_type(value.type)
    if kind in ("and", "or", "xor") and not isinstance(element, t.IntType):
        raise semantic_error(f"pl.{name} needs integers, got {sem.type_name(element)}")
    if kind == "add" and isinstance(element, t.FloatType):
        kind = "fadd"
    elif kind in ("max", "min") and isinstance(element, t.IntType) and not element.signed:
        kind = "u" + kind
    return tensor(sem.emit(tile.AtomicRMWOp, pointer.handle, value.handle, mask=mask, kind=kind, **attrs).result)


@builtin
def atomic_add(pointer: Any, val: Any, mask: Any = None, sem: Any = None, scope: Any = None) -> tensor:
    """``*pointer += val`` atomically; returns the old values."""
    return _rmw("atomic_add", "add", pointer, val, mask, sem, scope)


@builtin
def atomic_max(pointer: Any, val: Any, mask: Any = None, sem: Any = None, scope: Any = None) -> tensor:
    """``*pointer = max(*pointer, val)`` atomically (unsigned for unsigned pointees)."""
    return _rmw("atomic_max", "max", pointer, val, mask, sem, scope)


@builtin
def atomic_min(pointer: Any, val: Any, mask: Any = None, sem: Any = None, scope: Any = None) -> tensor:
    """``*pointer = min(*pointer, val)`` atomically (unsigned for unsigned pointees)."""
    return _rmw("atomic_min", "min", pointer, val, mask, sem, scope)


@builtin
def atomic_and(pointer: Any, val: Any, mask: Any = None, sem: Any = None, scope: Any = None) -> tensor:
    return _rmw("atomic_and", "and", pointer, val, mask, sem, scope)


@builtin
def atomic_or(pointer: Any, val: Any, mask: Any = None, sem: Any = None, scope: Any = None) -> tensor:
    return _rmw("atomic_or", "or", pointer, val, mask, sem, scope)


@builtin
def atomic_xor(pointer: Any, val: Any, mask: Any = None, sem: Any = None, scope: Any = None) -> tensor:
    return _rmw("atomic_xor", "xor", pointer, val, mask, sem, scope)


@builtin
def atomic_xchg(pointer: Any, val: Any, mask: Any = None, sem: Any = None, scope: Any = None) -> tensor:
    """Write ``val`` atomically; returns the old values."""
    return _rmw("atomic_xchg", "xchg", pointer, val, mask, sem, scope)


@builtin
def atomic_cas(pointer: Any, cmp: Any, val: Any, sem: Any = None, scope: Any = None) -> tensor:
    """Where ``*pointer == cmp`` (bitwise for floats) write ``val``; returns the old values."""
    attrs = _order("atomic_cas", sem, scope)
    pointer, (cmp, val), _ = _prepare("atomic_cas", pointer, [cmp, val], None)
    return tensor(sem_emit(tile.AtomicCASOp, pointer.handle, cmp.handle, val.handle, **attrs).result)


sem_emit = sem.emit  # `sem` is a parameter name above (Triton's spelling)

__all__ = ["atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor", "atomic_xchg",
           "atomic_cas"]
