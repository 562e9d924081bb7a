"""Moving a tile's registers through shared memory, and the ops on explicit buffers.

A thread stores its registers at the offsets a *placement* gives their elements, the
program synchronizes, and every thread loads the elements its result layout holds.  Two
kinds of placement:

- :class:`PaddedPlacement`, for conversions between distributed layouts: row-major with
  ``inner`` the contiguous dimension and ``pad`` unused elements after every row, so that
  threads walking down a column hit different banks (Triton's padded "repShape");
- a shared layout (``#gpu.shared``, ``#gpu.nvmma_shared``): its XOR swizzle, for buffers
  that an MMA instruction or TMA reads.

Offsets are computed by :func:`element_offset` from the coordinates that the linear
layout gives each register, through the :class:`~.indexing.IntOps` interface, so tests
run the very same math on Python integers (:class:`PyAddOps`) and check that every
element lands in the right register of the right thread.

A thread accesses ``width`` registers at once when they hold elements consecutive along
the placement's contiguous dimension (at most 16 bytes; within one swizzle vector).
``i1`` is stored as a byte and pointers as 64-bit integers.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from llvmlite import ir

from ...dialects.gpu import BarrierOp, LocalAllocOp, LocalLoadOp, LocalStoreOp
from ...ir import types as t
from ..allocation import BUFFER_OFFSET_ATTR
from ..layouts import NvmmaSharedLayout, SwizzledSharedLayout
from ..linear_layout import LinearLayout, log2
from .context import LoweringContext, linear_layout_of, register_lowering
from .indexing import LLVMOps, PyOps, contiguous_registers, coordinates, duplicate_register_mask
from .types import UnsupportedType, element_bits, llvm_type


class PyAddOps(PyOps):
    def add(self, x, y): return x + y


class LLVMAddOps(LLVMOps):
    def add(self, x, y): return self.b.add(x, y)


# --------------------------------------------------------------------------------------
# Placements: element coordinates -> element offset


@dataclass(frozen=True)
class PaddedPlacement:
    """Row-major over ``shape`` with ``inner`` the contiguous dimension (the others in
    ``outer``, slowest first), each row of ``shape[inner]`` elements followed by ``pad``
    unused ones."""

    shape: tuple[int, ...]
    inner: int
    outer: tuple[int, ...]
    pad: int = 0

    @property
    def row(self) -> int:
        return self.shape[self.inner] + self.pad

    @property
    def elements(self) -> int:
        rows = 1
        for d in self.outer:
            rows *= self.shape[d]
        return rows * self.row

    def offset(self, coords: Sequence[int]) -> int:
        return element_offset(PyAddOps(), self, list(coords))


def _padded_offset(ops: Any, placement: PaddedPlacement, coords: list) -> Any:
    # Sizes are powers of two, so the outer coordinates combine by shifts and XOR.
    row, shift = None, 0
    for d in reversed(placement.outer):
        if placement.shape[d] > 1:
            part = ops.shl(coords[d], shift) if shift else coords[d]
            row = part if row is None else ops.xor(row, part)
        shift += log2(placement.shape[d])
    column = coords[placement.inner]
    if row is None:
        return column
    if placement.pad == 0:
        return ops.xor(ops.shl(row, log2(placement.shape[placement.inner])), column)
    return ops.add(ops.mul(row, placement.row), column)


def _swizzled_offset(ops: Any, layout: SwizzledSharedLayout, coords: list, shape: Sequence[int]) -> Any:
    """``SwizzledSharedLayout.offset`` on run-time coordinates (every size a power of
    two: the parts of the offset are shifted into disjoint bits)."""
    column = coords[layout.order[0]]
    inner = shape[layout.order[0]]
    block = layout.block_of(shape)
    if block < inner:
        blocks = ops.shr(column, log2(block))
        column = ops.and_(column, block - 1)
    if len(layout.order) > 1 and layout.max_phase > 1:
        phase = ops.and_(ops.shr(coords[layout.order[1]], log2(layout.per_phase)), layout.max_phase - 1)
        # ((column // vector) ^ phase) * vector + column % vector
        column = ops.xor(column, ops.shl(phase, log2(layout.vector)))
    if block < inner:
        # Column blocks: [outer][block][row][column within the block].
        rows = shape[layout.order[1]] if len(layout.order) > 1 else 1
        offset = ops.add(ops.shl(blocks, log2(block * rows)), column)
        if len(layout.order) > 1 and rows > 1:
            offset = ops.add(offset, ops.shl(coords[layout.order[1]], log2(block)))
        shift = log2(inner * rows)
        for d in layout.order[2:]:
            if shape[d] > 1:
                offset = ops.add(offset, ops.shl(coords[d], shift) if shift else coords[d])
            shift += log2(shape[d])
        return offset
    rows, shift = None, 0
    for d in layout.order[1:]:
        if shape[d] > 1:
            part = ops.shl(coords[d], shift) if shift else coords[d]
            rows = part if rows is None else ops.xor(rows, part)
        shift += log2(shape[d])
    if rows is None:
        return column
    return ops.add(ops.shl(rows, log2(shape[layout.order[0]])), column)


#: Placement class -> ``fn(ops, placement, coords, shape) -> element offset``.
OFFSETS: dict[type, Callable[[Any, Any, list, Sequence[int]], Any]] = {
    PaddedPlacement: lambda ops, p, coords, shape: _padded_offset(ops, p, coords),
    SwizzledSharedLayout: _swizzled_offset,
    NvmmaSharedLayout: lambda ops, p, coords, shape: _swizzled_offset(ops, p.as_swizzled(), coords, shape),
}


def element_offset(ops: Any, placement: Any, coords: list, shape: Sequence[int] = ()) -> Any:
    """The element offset of ``coords`` (one value per dimension) in ``placement``."""
    return OFFSETS[type(placement)](ops, placement, coords, shape or placement.shape)


def contiguous_run(placement: Any) -> tuple[int, int]:
    """(dimension, elements): how far elements stay contiguous in memory along the
    placement's contiguous dimension (a swizzle permutes whole vectors only)."""
    if isinstance(placement, PaddedPlacement):
        return placement.inner, placement.shape[placement.inner]
    swizzled = placement.as_swizzled() if isinstance(placement, NvmmaSharedLayout) else placement
    run = swizzled.vector if swizzled.max_phase > 1 else swizzled.block or 1 << 30
    return swizzled.order[0], run


# --------------------------------------------------------------------------------------
# Access plans: which registers go where


def vector_width(layout: LinearLayout, dim: int, bits: int, limit: int, max_bits: int = 128) -> int:
    """Registers a thread accesses at once along ``dim``: consecutive elements, at most
    ``max_bits`` and at most ``limit`` elements."""
    width = min(contiguous_registers(layout, dim), max(max_bits // bits, 1), limit)
    return 1 << log2(max(width, 1))


def access_plan(ops: Any, layout: LinearLayout, placement: Any, width: int, lane: Any, warp: Any,
                to_placement: Callable[[Any, list], list] | None = None,
                shape: Sequence[int] = ()) -> list[tuple[int, Any]]:
    """``(first register, element offset)`` of each access of the thread (``lane``,
    ``warp``): ``width`` registers each, copies a thread holds twice skipped.
    ``to_placement(ops, coords)`` maps the layout's coordinates to the placement's (a
    transpose or reshape); by default they are the same."""
    duplicates = duplicate_register_mask(layout)
    starts = [s for s in range(0, layout.num_registers, width) if not s & duplicates]
    return list(zip(starts, register_offsets(ops, layout, placement, starts, lane, warp, to_placement, shape)))


def register_offsets(ops: Any, layout: LinearLayout, placement: Any, registers: Sequence[int], lane: Any, warp: Any,
                     to_placement: Callable[[Any, list], list] | None = None, shape: Sequence[int] = ()) -> list:
    """The element offset in ``placement`` of each of a thread's ``registers``.

    Where every thread's offsets differ from its first register's by the same constants
    (the register bits and the thread bits of the offset do not mix, as in a swizzle
    whose phase comes from thread bits only), the first offset is computed once and the
    others are it plus a constant, which the assembler folds into the address (``[r +
    2048]``): one address register for all the accesses, as Triton's linear layouts give."""
    deltas = None
    if to_placement is None and len(registers) > 1:
        deltas = constant_offset_deltas(layout, placement, tuple(registers), tuple(shape))
    coords = coordinates(ops, layout, lane, warp)
    if deltas is None:
        return [element_offset(ops, placement, coords[r] if to_placement is None else to_placement(ops, coords[r]),
                               shape) for r in registers]
    first = element_offset(ops, placement, coords[registers[0]], shape)
    return [first if d == 0 else ops.add(first, ops.const(d)) for d in deltas]


@functools.lru_cache(maxsize=4096)
def constant_offset_deltas(layout: LinearLayout, placement: Any, registers: tuple, shape: tuple) -> list[int] | None:
    """``offset(register) - offset(registers[0])`` for each register, when it is the same
    for every lane and warp (checked over all of them), else None."""
    import numpy as np

    ops = PyAddOps()
    lanes = np.arange(1 << len(layout.lane), dtype=np.int64)[:, None]
    warps = np.arange(1 << len(layout.warp), dtype=np.int64)[None, :]
    threads = (lanes.size, warps.size)
    try:
        coords = coordinates(ops, layout, lanes, warps)
        offsets = [np.broadcast_to(np.asarray(element_offset(ops, placement, coords[r], shape or ()), np.int64),
                                   threads) for r in registers]
    except (TypeError, ValueError, AttributeError, KeyError):
        return None  # a placement whose offsets are not plain integer arithmetic
    deltas = []
    for offset in offsets:
        delta = offset - offsets[0]
        if not (delta == delta.flat[0]).all():
            return None
        deltas.append(int(delta.flat[0]))
    return deltas


# --------------------------------------------------------------------------------------
# LLVM: storing and loading registers


def storage_type(element: t.Type) -> ir.Type:
    """The LLVM type an element has in shared memory (i1 as i8, pointers as i64)."""
    if isinstance(element, t.PointerType):
        return ir.IntType(64)
    stored = llvm_type(element)
    return ir.IntType(8) if isinstance(stored, ir.IntType) and stored.width == 1 else stored


def _to_storage(b: Any, value: Any, stored: ir.Type) -> Any:
    if value.type == stored:
        return value
    if isinstance(value.type, ir.PointerType):
        return b.ptrtoint(value, stored)
    return b.zext(value, stored)


def _from_storage(b: Any, value: Any, element: t.Type) -> Any:
    wanted = llvm_type(element)
    if wanted == value.type:
        return value
    if isinstance(wanted, ir.PointerType):
        return b.inttoptr(value, wanted)
    return b.icmp_unsigned("!=", value, ir.Constant(value.type, 0))


def _address(ctx: LoweringContext, base: Any, offset: Any, bytes_: int, accessed: ir.Type) -> Any:
    """A pointer to ``accessed`` at element ``offset`` past ``base``."""
    b = ctx.builder
    byte_offset = b.shl(offset, ctx.i32(log2(bytes_))) if bytes_ > 1 else offset
    address = b.gep(base, [byte_offset], source_etype=ir.IntType(8))
    return b.bitcast(address, ir.PointerType(accessed, addrspace=ctx.target.shared_address_space))


def element_bytes(element: t.Type) -> int:
    return element_bits(element) // 8


def store_registers(ctx: LoweringContext, base: Any, registers: list, layout: LinearLayout, element: t.Type,
                    placement: Any, width: int, to_placement: Callable | None = None,
                    shape: Sequence[int] = ()) -> None:
    """Store a thread's ``registers`` (of a tile in ``layout``) at ``base`` (an i8
    shared-memory pointer) as ``placement`` places the elements."""
    b = ctx.builder
    stored = storage_type(element)
    bytes_ = element_bytes(element)
    vector = ir.VectorType(stored, width)
    ops = LLVMAddOps(b)
    for start, offset in access_plan(ops, layout, placement, width, ctx.lane_id, ctx.warp_id, to_placement, shape):
        values = [_to_storage(b, v, stored) for v in registers[start:start + width]]
        address = _address(ctx, base, offset, bytes_, stored if width == 1 else vector)
        if width == 1:
            b.store(values[0], address, align=bytes_)
            continue
        packed = ir.Constant(vector, None)
        for i, v in enumerate(values):
            packed = b.insert_element(packed, v, ctx.i32(i))
        b.store(packed, address, align=width * bytes_)


def load_registers(ctx: LoweringContext, base: Any, layout: LinearLayout, element: t.Type, placement: Any,
                   width: int, shape: Sequence[int] = ()) -> list:
    """A thread's registers of a tile in ``layout``, loaded from ``base`` where
    ``placement`` put the elements."""
    b = ctx.builder
    stored = storage_type(element)
    bytes_ = element_bytes(element)
    vector = ir.VectorType(stored, width)
    registers: list[Any] = [None] * layout.num_registers
    for start, offset in access_plan(LLVMAddOps(b), layout, placement, width, ctx.lane_id, ctx.warp_id, None, shape):
        address = _address(ctx, base, offset, bytes_, stored if width == 1 else vector)
        if width == 1:
            values = [b.load(address, typ=stored, align=bytes_)]
        else:
            loaded = b.load(address, typ=vector, align=width * bytes_)
            values = [b.extract_element(loaded, ctx.i32(i)) for i in range(width)]
        registers[start:start + width] = [_from_storage(b, v, element) for v in values]
    duplicates = duplicate_register_mask(layout)
    return [registers[r] if registers[r] is not None else registers[r & ~duplicates]
            for r in range(layout.num_registers)]


def check_storable(ctx: LoweringContext, op: Any, element: t.Type) -> None:
    try:
        storage_type(element)
    except UnsupportedType as exc:
        raise ctx.unsupported(op, f"'{op.name}' of {exc}") from None


# --------------------------------------------------------------------------------------
# Buffers: gpu.local_alloc / local_store / local_load, and gpu.barrier


def _buffer_access(ctx: LoweringContext, buffer: Any) -> tuple[Any, Any]:
    """(i8 pointer, buffer type) of a ``!gpu.buffer`` value."""
    alloc = buffer.defining_op
    if not isinstance(alloc, LocalAllocOp):
        raise RuntimeError(f"shared-memory buffer {buffer!r} does not come from gpu.local_alloc")
    offset = alloc.attributes.get(BUFFER_OFFSET_ATTR)
    if offset is None:
        raise ctx.error(alloc, f"internal error: '{alloc.name}' has no {BUFFER_OFFSET_ATTR}; the memory stage "
                               "(allocate-shared) must run before lower-to-llvm")
    return shared_pointer(ctx, offset), buffer.type


def buffer_pointer(ctx: LoweringContext, buffer: Any) -> Any:
    """An i8 pointer to the start of the ``!gpu.buffer`` value ``buffer``."""
    return _buffer_access(ctx, buffer)[0]


def shared_pointer(ctx: LoweringContext, offset: int) -> Any:
    """An i8 pointer ``offset`` bytes into the function's shared memory: in a noinline
    function, past the base its caller passed (``ctx.scratch_base``)."""
    dynamic = getattr(ctx, "scratch_base", None)
    index = ctx.i32(offset) if dynamic is None else ctx.builder.add(dynamic, ctx.i32(offset))
    return ctx.builder.gep(ctx.shared_base(), [ctx.i32(0), index], inbounds=True,
                           source_etype=ir.ArrayType(ir.IntType(8), 0))


def _store_into_buffer(ctx: LoweringContext, op: Any, value: Any, registers: list, buffer: Any) -> None:
    base, buffer_type = _buffer_access(ctx, buffer)
    check_storable(ctx, op, buffer_type.element)
    layout = linear_layout_of(value)
    dim, run = contiguous_run(buffer_type.layout)
    width = vector_width(layout, dim, element_bits(buffer_type.element), run, ctx.target.max_vector_bits)
    store_registers(ctx, base, registers, layout, buffer_type.element, buffer_type.layout, width,
                    shape=buffer_type.shape)


@register_lowering(LocalAllocOp)
def _local_alloc(op: Any, operands: list, ctx: LoweringContext) -> list:
    if op.source is not None:
        _store_into_buffer(ctx, op, op.source, operands[0], op.result)
    return [None]  # the buffer is found through its alloc when used


@register_lowering(LocalStoreOp)
def _local_store(op: Any, operands: list, ctx: LoweringContext) -> list:
    _store_into_buffer(ctx, op, op.value, operands[0], op.buffer)
    return []


@register_lowering(LocalLoadOp)
def _local_load(op: Any, operands: list, ctx: LoweringContext) -> list:
    base, buffer_type = _buffer_access(ctx, op.buffer)
    check_storable(ctx, op, buffer_type.element)
    layout = linear_layout_of(op.result)
    dim, run = contiguous_run(buffer_type.layout)
    width = vector_width(layout, dim, element_bits(buffer_type.element), run, ctx.target.max_vector_bits)
    return [load_registers(ctx, base, layout, buffer_type.element, buffer_type.layout, width, buffer_type.shape)]


@register_lowering(BarrierOp)
def _barrier(op: Any, operands: list, ctx: LoweringContext) -> list:
    ctx.target.barrier(ctx.builder)
    return []


__all__ = ["LLVMAddOps", "OFFSETS", "PaddedPlacement", "PyAddOps", "access_plan", "constant_offset_deltas",
           "contiguous_run", "register_offsets",
           "element_offset", "load_registers", "shared_pointer", "storage_type", "store_registers", "vector_width"]
