"""Barriers in shared memory (mbarriers): the lowering of ``gpu.mbarrier_init``,
``gpu.mbarrier_wait``, ``gpu.mbarrier_arrive``, ``gpu.mbarrier_inval`` and
``gpu.async_copy_arrive``.

A backend supplies the instructions with a :class:`BarrierUnit` registered under its
``GpuTarget.backend_name`` (NVIDIA: ``mbarrier.*`` on sm_90 and later, see
``polytile_nvidia.mbarrier``).  ``pipeline-loops`` completes its rings on barriers only
where :func:`barrier_unit` finds one for the target.  Barrier ``i`` of a buffer of them
is the 8 bytes at ``8 * i``.  Initializing and invalidating are one thread's work
(thread 0); waiting is every thread's, ``gpu.mbarrier_arrive`` each warp's first lane's.
"""

from __future__ import annotations

from typing import Any, Protocol

from llvmlite import ir

from ...dialects.gpu import AsyncCopyArriveOp, MBarrierArriveOp, MBarrierInitOp, MBarrierInvalOp, MBarrierWaitOp
from ...plugins.tables import OwnedTable
from .context import LoweringContext, register_lowering
from .shared import buffer_pointer

#: Bytes of one mbarrier.
BARRIER_BYTES = 8


class BarrierUnit(Protocol):
    """A backend's instructions for barriers in shared memory.  ``address`` is the i32
    shared-memory address of one barrier."""

    def supports(self, target: Any) -> bool:
        """Whether ``target`` (a ``GpuTarget``) has these barriers."""

    def init(self, builder: ir.IRBuilder, address: Any, count: int, predicate: Any) -> None:
        """Expect ``count`` arrivals per phase, where the i1 ``predicate`` holds."""

    def wait(self, builder: ir.IRBuilder, address: Any, phase: Any) -> None:
        """Return once the phase of parity ``phase`` (i32, 0 or 1) has completed."""

    def invalidate(self, builder: ir.IRBuilder, address: Any, predicate: Any) -> None:
        """End the barrier's life where ``predicate`` holds."""

    def arrive(self, builder: ir.IRBuilder, address: Any, predicate: Any) -> None:
        """Arrive once (release: this thread's earlier writes are seen by the waiters whose
        phase it completes) where the i1 ``predicate`` holds."""


#: ``GpuTarget.backend_name`` -> its barrier unit (owned: a plugin's leaves with it).
BARRIER_UNITS: OwnedTable[BarrierUnit] = OwnedTable("mbarrier unit")


def register_barrier_unit(backend_name: str, unit: BarrierUnit) -> BarrierUnit:
    BARRIER_UNITS.add(backend_name, unit)
    return unit


def barrier_unit(target: Any) -> BarrierUnit | None:
    """The target's barrier unit, or None where it has none."""
    unit = BARRIER_UNITS.get(target.backend_name)
    return unit if unit is not None and unit.supports(target) else None


def _unit(ctx: LoweringContext, op: Any) -> BarrierUnit:
    unit = barrier_unit(ctx.target)
    if unit is None:
        raise ctx.unsupported(op, f"'{op.name}' (barriers in shared memory on {ctx.target.arch})")
    return unit


def barrier_address(ctx: LoweringContext, op: Any, barriers: Any, index: Any) -> Any:
    """The i32 shared address of barrier ``index`` (an i32) of the buffer ``barriers``."""
    b = ctx.builder
    base = b.ptrtoint(buffer_pointer(ctx, barriers), ir.IntType(32))
    return b.add(base, b.mul(index, ctx.i32(BARRIER_BYTES)))


def _first_thread(ctx: LoweringContext) -> Any:
    b = ctx.builder
    return b.and_(b.icmp_unsigned("==", ctx.lane_id, ctx.i32(0)), b.icmp_unsigned("==", ctx.warp_id, ctx.i32(0)))


def _each(ctx: LoweringContext, op: Any) -> list:
    """The i32 addresses of every barrier of ``op.barriers``."""
    return [barrier_address(ctx, op, op.barriers, ctx.i32(i)) for i in range(op.barriers.type.shape[0])]


@register_lowering(MBarrierInitOp)
def _init(op: Any, operands: list, ctx: LoweringContext) -> list:
    unit, first = _unit(ctx, op), _first_thread(ctx)
    for address in _each(ctx, op):
        unit.init(ctx.builder, address, op.count, first)
    return []


@register_lowering(MBarrierWaitOp)
def _wait(op: Any, operands: list, ctx: LoweringContext) -> list:
    _unit(ctx, op).wait(ctx.builder, barrier_address(ctx, op, op.barriers, operands[1]), operands[2])
    return []


@register_lowering(MBarrierArriveOp)
def _arrive(op: Any, operands: list, ctx: LoweringContext) -> list:
    b = ctx.builder
    first_lane = b.icmp_unsigned("==", ctx.lane_id, ctx.i32(0))
    _unit(ctx, op).arrive(b, barrier_address(ctx, op, op.barriers, operands[1]), b.and_(first_lane, operands[2]))
    return []


@register_lowering(MBarrierInvalOp)
def _invalidate(op: Any, operands: list, ctx: LoweringContext) -> list:
    unit, first = _unit(ctx, op), _first_thread(ctx)
    for address in _each(ctx, op):
        unit.invalidate(ctx.builder, address, first)
    return []


@register_lowering(AsyncCopyArriveOp)
def _copy_arrive(op: Any, operands: list, ctx: LoweringContext) -> list:
    from .async_copy import async_copy_unit

    unit = async_copy_unit(ctx.target)
    arrive = getattr(unit, "arrive", None)
    if arrive is None:
        raise ctx.unsupported(op, f"'{op.name}' (asynchronous copies that arrive on a barrier)")
    arrive(ctx.builder, barrier_address(ctx, op, op.barriers, operands[1]))
    return []


__all__ = ["BARRIER_BYTES", "BARRIER_UNITS", "BarrierUnit", "barrier_address", "barrier_unit",
           "register_barrier_unit"]
