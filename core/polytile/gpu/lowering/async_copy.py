"""Asynchronous copies from global into shared memory, and reading ring slots.

``gpu.async_copy`` moves each thread's elements of a tile (in the pointers' coalesced
layout) into one slot of a ring buffer, in vectors as wide as axis info proves safe (as
``tile.load``) and at most the shared layout's swizzle vector, so that a vector lands
whole and aligned.  Masked-off vectors are zero-filled.  A backend supplies the
instructions with an :class:`AsyncCopyUnit` registered under its
``GpuTarget.backend_name`` (NVIDIA: ``cp.async``, see ``polytile_nvidia.async_copy``);
``pipeline-loops`` only runs where a unit is registered.

``gpu.local_load_slot`` reads a slot: a dot operand through the matrix unit's
``load_operand`` (``ldmatrix``) where it applies, else element-wise in the result layout.
"""

from __future__ import annotations

from typing import Any, Protocol

from llvmlite import ir

from ...dialects.gpu import AsyncCommitGroupOp, AsyncCopyOp, AsyncWaitOp, LocalLoadSlotOp
from ...plugins.tables import OwnedTable
from ..layouts import SwizzledSharedLayout
from ..linear_layout import log2
from .context import LoweringContext, linear_layout_of, register_lowering
from .indexing import duplicate_register_mask
from .memory import thread_owner, vector_width as global_vector_width
from .shared import (LLVMAddOps, access_plan, buffer_pointer, constant_offset_deltas, contiguous_run, load_registers,
                     register_offsets, storage_type, vector_width)
from .types import element_bits


class AsyncCopyUnit(Protocol):
    """A backend's instructions for asynchronous global -> shared copies."""

    def copy(self, builder: ir.IRBuilder, shared_address: Any, global_pointer: Any, size: int, fill: Any,
             predicate: Any) -> None:
        """Start copying ``size`` bytes (4, 8 or 16) from ``global_pointer`` to the i32
        ``shared_address``; ``fill`` (i1 or None) true: write zeros instead, reading
        nothing; ``predicate`` (i1 or None) false: do nothing."""

    def commit(self, builder: ir.IRBuilder) -> None:
        """Close this thread's group of copies."""

    def wait(self, builder: ir.IRBuilder, pending: int) -> None:
        """Wait until at most ``pending`` of this thread's groups are in flight."""

    # Optional, for rings that complete on barriers (:mod:`.mbarrier`):
    #
    # def arrive(self, builder, barrier_address) -> None:
    #     """Arrive once on the barrier at the i32 shared address once this thread's
    #     copies issued so far have landed (one arrival per thread)."""


#: ``GpuTarget.backend_name`` -> its async copy unit (owned: a plugin's leaves with it).
ASYNC_COPY_UNITS: OwnedTable[AsyncCopyUnit] = OwnedTable("async copy unit")


def register_async_copy_unit(backend_name: str, unit: AsyncCopyUnit) -> AsyncCopyUnit:
    ASYNC_COPY_UNITS.add(backend_name, unit)
    return unit


def async_copy_unit(target: Any) -> AsyncCopyUnit | None:
    return ASYNC_COPY_UNITS.get(target.backend_name)


def slot_layout(ring_type: Any) -> SwizzledSharedLayout:
    """The 2-D layout of one slot of a ring (whose slot dimension is the slowest)."""
    ring = ring_type.layout
    order = tuple(d - 1 for d in ring.order if d != 0)
    return SwizzledSharedLayout(ring.vector, ring.per_phase, ring.max_phase, order, ring.block)


def _fastest_dim(layout: Any) -> int:
    for basis in layout.register:
        for d, c in enumerate(basis):
            if c:
                return d
    return len(layout.shape) - 1


def copy_width(ptr: Any, mask: Any, infos: Any, target: Any, shared: SwizzledSharedLayout) -> int:
    """Elements one thread copies at once: what ``tile.load`` would access at once, within
    one swizzle vector of ``shared`` and along its contiguous dimension."""
    layout = ptr.type.layout.linear(ptr.type.shape)
    dim = _fastest_dim(layout)
    if dim != shared.order[0]:
        return 1
    bits = element_bits(ptr.type.element.pointee)
    mask_info = infos[mask] if mask is not None else None
    width = global_vector_width(layout, dim, bits, infos[ptr], mask_info, target.max_vector_bits)
    return min(width, shared.vector)


def _unit(ctx: LoweringContext, op: Any) -> AsyncCopyUnit:
    unit = async_copy_unit(ctx.target)
    if unit is None:
        raise ctx.unsupported(op, f"'{op.name}' (asynchronous copies; use num_stages=1)")
    return unit


def _ring_base(ctx: LoweringContext, op: Any, ring: Any, slot: Any) -> Any:
    """An i8 shared pointer to slot ``slot`` (an i32) of ``ring``."""
    slot_bytes = ring.type.numel // ring.type.shape[0] * element_bits(ring.type.element) // 8
    b = ctx.builder
    return b.gep(buffer_pointer(ctx, ring), [b.mul(slot, ctx.i32(slot_bytes))], source_etype=ir.IntType(8))


@register_lowering(AsyncCopyOp)
def _async_copy(op: Any, operands: list, ctx: LoweringContext) -> list:
    unit = _unit(ctx, op)
    b = ctx.builder
    ptrs, _, slot = operands[:3]
    mask = operands[3] if op.mask is not None else None
    shared = slot_layout(op.ring.type)
    shape = tuple(op.ring.type.shape[1:])
    bits = element_bits(op.ring.type.element)
    width = copy_width(op.ptr, op.mask, ctx.axis_info, ctx.target, shared)
    size = width * bits // 8
    if size not in (4, 8, 16):
        raise ctx.error(op, f"internal error: '{op.name}' would copy {size}-byte vectors; pipeline-loops must "
                            "leave such loads alone")
    layout = linear_layout_of(op.ptr)
    base = b.ptrtoint(_ring_base(ctx, op, op.ring, slot), ir.IntType(32))
    duplicates = duplicate_register_mask(layout)
    owner = thread_owner(ctx, layout)
    starts = [s for s in range(0, layout.num_registers, width) if not s & duplicates]
    for start, address in zip(starts, _slot_addresses(ctx, layout, shared, shape, bits, base, starts)):
        fill = b.not_(mask[start]) if mask is not None else None
        unit.copy(b, address, ptrs[start], size, fill, owner)
    return []


def _slot_addresses(ctx: LoweringContext, layout: Any, shared: SwizzledSharedLayout, shape: tuple, bits: int,
                    base: Any, starts: list) -> list:
    """The i32 shared address each of a thread's copies (``starts``) writes, in the slot at
    ``base``.  Where the copies' offsets differ by the same constants in every thread, the
    first address is ``base + offset`` and the others it plus a constant, in that order:
    built as ``base + (offset + constant)``, LLVM hoists each ``offset + constant`` out of
    the loop and the loop adds the slot's base to each (a register and an add per copy);
    this way the assembler folds the constants into the copies (``[r + 2048]``)."""
    b = ctx.builder
    shift = log2(bits // 8) if bits > 8 else 0
    deltas = constant_offset_deltas(layout, shared, tuple(starts), shape) if len(starts) > 1 else None
    if deltas is None:
        offsets = register_offsets(LLVMAddOps(b), layout, shared, starts, ctx.lane_id, ctx.warp_id, None, shape)
        return [b.add(base, b.shl(offset, ctx.i32(shift)) if shift else offset) for offset in offsets]
    first, = register_offsets(LLVMAddOps(b), layout, shared, starts[:1], ctx.lane_id, ctx.warp_id, None, shape)
    address = b.add(base, b.shl(first, ctx.i32(shift)) if shift else first)
    return [address if d == 0 else b.add(address, ctx.i32(d << shift)) for d in deltas]


@register_lowering(AsyncCommitGroupOp)
def _commit(op: Any, operands: list, ctx: LoweringContext) -> list:
    _unit(ctx, op).commit(ctx.builder)
    return []


@register_lowering(AsyncWaitOp)
def _wait(op: Any, operands: list, ctx: LoweringContext) -> list:
    _unit(ctx, op).wait(ctx.builder, op.pending)
    return []


@register_lowering(LocalLoadSlotOp)
def _load_slot(op: Any, operands: list, ctx: LoweringContext) -> list:
    from .dot import MATRIX_UNITS

    base = _ring_base(ctx, op, op.ring, operands[1])
    shared = slot_layout(op.ring.type)
    shape = tuple(op.ring.type.shape[1:])
    origin = tuple(op.offsets or (0,) * len(shape))
    loader = getattr(MATRIX_UNITS.get(ctx.target.backend_name), "load_operand", None)
    if loader is not None:
        # A part of the slot passes where it starts and the slot's shape (its row length).
        loaded = loader(ctx, base, shared, op, origin, shape) if op.offsets is not None else \
            loader(ctx, base, shared, op)
        if loaded is not None:
            return [loaded]
    layout = linear_layout_of(op.result)
    element = op.ring.type.element
    dim, run = contiguous_run(shared)
    width = vector_width(layout, dim, element_bits(element), run, ctx.target.max_vector_bits)
    if not any(origin):
        return [load_registers(ctx, base, layout, element, shared, width, shape)]
    return [_load_part(ctx, base, layout, element, shared, width, shape, origin)]


def _load_part(ctx: LoweringContext, base: Any, layout: Any, element: Any, shared: Any, width: int,
               shape: tuple, origin: tuple) -> list:
    """A thread's registers of a tile that starts at ``origin`` in the slot at ``base``."""
    b = ctx.builder
    stored = storage_type(element)
    size = element_bits(element) // 8
    vector = ir.VectorType(stored, width)
    shift = lambda ops, coords: [ops.add(c, ctx.i32(o)) if o else c for c, o in zip(coords, origin)]  # noqa: E731
    registers: list[Any] = [None] * layout.num_registers
    for start, offset in access_plan(LLVMAddOps(b), layout, shared, width, ctx.lane_id, ctx.warp_id, shift, shape):
        byte_offset = b.shl(offset, ctx.i32(log2(size))) if size > 1 else offset
        address = b.bitcast(b.gep(base, [byte_offset], source_etype=ir.IntType(8)),
                            ir.PointerType(vector, addrspace=ctx.target.shared_address_space))
        loaded = b.load(address, typ=vector, align=width * size)
        registers[start:start + width] = [b.extract_element(loaded, ctx.i32(i)) for i in range(width)]
    duplicates = duplicate_register_mask(layout)
    return [r if r is not None else registers[i & ~duplicates] for i, r in enumerate(registers)]


__all__ = ["ASYNC_COPY_UNITS", "AsyncCopyUnit", "async_copy_unit", "copy_width", "register_async_copy_unit",
           "slot_layout"]
