"""Conversions into ``#gpu.dot_operand`` layouts, through shared memory.

A dot operand's lane holds a few K-consecutive elements of rows (A) or columns (B) that
other lanes loaded, so the tile goes through shared memory: every thread stores its
registers (vectorized along the source layout's contiguous dimension), the program
synchronizes, and every thread reads what its operand registers hold.  The shared tile
keeps the source's contiguous dimension contiguous and XOR-swizzles 16-byte vectors by
row (:func:`operand_shared_layout`), so that the eight rows one read instruction touches
fall in different banks.

The read is the matrix unit's where it has one (NVIDIA: ``ldmatrix``, see
``polytile_nvidia.mma``): a unit may define ``load_operand(ctx, base, shared, op)`` and
return the registers, or None to leave it to the element-wise read here.  A conversion
from a layout that already keeps each element in its thread (an accumulator feeding the
next dot with the same warps) never gets here: ``gpu.convert_layout`` does it in
registers.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from ..layouts import BlockedLayout, DotOperandLayout, MmaLayout, SwizzledSharedLayout
from ..linear_layout import log2
from .context import LoweringContext, layout_of, linear_layout_of
from .convert import register_conversion
from .indexing import IntOps, LLVMOps, contiguous_registers, coordinates, duplicate_register_mask
from .shared import element_offset
from .types import element_bits, llvm_type

#: Bytes one thread reads or writes at once, and the swizzle's unit.
VECTOR_BYTES = 16
#: Bytes of one row of shared memory banks.
BANK_ROW_BYTES = 128


def operand_shared_layout(source_layout: Any, shape: tuple[int, ...], bits: int) -> SwizzledSharedLayout:
    """Where the tile sits in shared memory: the source's contiguous dimension contiguous,
    16-byte vectors XOR-swizzled by ``row // per_phase`` so that 8 consecutive rows read at
    the same column hit 8 different 16-byte bank groups.  Rows wider than 128 bytes go in
    column blocks of 128 bytes: the swizzle is the same, and the slots of a ring are then
    the NVMMA layouts wgmma reads in place."""
    order = tuple(source_layout.order) if isinstance(source_layout, BlockedLayout) else (1, 0)
    inner = shape[order[0]]
    row = min(inner, max(BANK_ROW_BYTES * 8 // bits, 1))
    block = row if row < inner else 0
    vector = max(min(VECTOR_BYTES * 8 // bits, row), 1)
    chunks = max(row // vector, 1)
    per_phase = max(BANK_ROW_BYTES // (row * bits // 8), 1)
    max_phase = max(min(chunks, BANK_ROW_BYTES // VECTOR_BYTES // per_phase), 1)
    return SwizzledSharedLayout(vector, per_phase, max_phase, order, block)


def shared_offset(ops: IntOps, shared: SwizzledSharedLayout, coords: list, shape: tuple[int, ...]) -> Any:
    """``shared.offset(coords, shape)`` on run-time coordinates."""
    return element_offset(_DisjointAdd(ops), shared, coords, shape)


class _DisjointAdd:
    """``ops`` whose ``add`` is an XOR: every sum in a swizzled offset is of disjoint bit
    ranges (sizes are powers of two), so ops without an ``add`` do."""

    def __init__(self, ops: IntOps):
        self._ops = ops

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ops, name)

    def add(self, x: Any, y: Any) -> Any:
        return self._ops.xor(x, y)


def _scratch_bytes(op: Any, target: Any, num_warps: int) -> int:
    count = 1
    for n in op.source.type.shape:
        count *= n
    return count * element_bits(op.source.type) // 8


def _address(b: ir.IRBuilder, base: Any, offset: Any, bits: int) -> Any:
    """The shared-memory address of element ``offset`` of the tile at ``base`` (an i8 pointer)."""
    shift = log2(max(bits // 8, 1))
    byte_offset = b.shl(offset, ir.Constant(ir.IntType(32), shift)) if shift else offset
    return b.gep(base, [byte_offset], source_etype=ir.IntType(8))


def opaque_scratch(ctx: LoweringContext, op: Any) -> Any:
    """``ctx.scratch(op)`` as an untyped pointer: llvmlite types it as a pointer to the
    shared array and then refuses vector stores through it; LLVM folds the round trip."""
    b = ctx.builder
    base = ctx.scratch(op)
    as_int = b.ptrtoint(base, ir.IntType(32))
    return b.inttoptr(as_int, ir.PointerType(addrspace=ctx.target.shared_address_space))


def _access_width(layout: Any, shared: SwizzledSharedLayout, bits: int) -> int:
    width = contiguous_registers(layout, shared.order[0])
    return max(min(width, shared.vector, VECTOR_BYTES * 8 // bits), 1)


def store_tile(ctx: LoweringContext, base: Any, element: ir.Type, shared: SwizzledSharedLayout, value: Any,
               registers: list) -> None:
    """Every thread writes its registers of ``value`` into the shared tile at ``base``."""
    b = ctx.builder
    layout = linear_layout_of(value)
    shape = tuple(value.type.shape)
    bits = element_bits(value.type)
    width = _access_width(layout, shared, bits)
    coords = coordinates(LLVMOps(b), layout, ctx.lane_id, ctx.warp_id)
    duplicates = duplicate_register_mask(layout)
    vector = ir.VectorType(element, width)
    for start in range(0, layout.num_registers, width):
        if start & duplicates:
            continue
        ptr = _address(b, base, shared_offset(LLVMOps(b), shared, coords[start], shape), bits)
        packed = ir.Constant(vector, None)
        for i in range(width):
            packed = b.insert_element(packed, registers[start + i], ctx.i32(i))
        b.store(packed, ptr, align=width * max(bits // 8, 1))


def load_tile(ctx: LoweringContext, base: Any, element: ir.Type, shared: SwizzledSharedLayout, value: Any) -> list:
    """Every thread reads the registers of ``value``'s layout from the shared tile."""
    b = ctx.builder
    layout = linear_layout_of(value)
    shape = tuple(value.type.shape)
    bits = element_bits(value.type)
    width = _access_width(layout, shared, bits)
    coords = coordinates(LLVMOps(b), layout, ctx.lane_id, ctx.warp_id)
    duplicates = duplicate_register_mask(layout)
    vector = ir.VectorType(element, width)
    registers: list[Any] = [None] * layout.num_registers
    for start in range(0, layout.num_registers, width):
        if start & duplicates:
            continue
        ptr = _address(b, base, shared_offset(LLVMOps(b), shared, coords[start], shape), bits)
        loaded = b.load(ptr, typ=vector, align=width * max(bits // 8, 1))
        for i in range(width):
            registers[start + i] = b.extract_element(loaded, ctx.i32(i))
    for r in range(layout.num_registers):
        if registers[r] is None:
            registers[r] = registers[r & ~duplicates]
    return registers


def _to_dot_operand(op: Any, registers: list, ctx: LoweringContext) -> list:
    from .dot import MATRIX_UNITS

    element = llvm_type(op.source.type)
    shape = tuple(op.source.type.shape)
    shared = operand_shared_layout(layout_of(op.source), shape, element_bits(op.source.type))
    base = opaque_scratch(ctx, op)
    store_tile(ctx, base, element, shared, op.source, registers)
    ctx.target.barrier(ctx.builder)
    unit = MATRIX_UNITS.get(ctx.target.backend_name)
    loader = getattr(unit, "load_operand", None)
    loaded = loader(ctx, base, shared, op) if loader is not None else None
    if loaded is None:
        loaded = load_tile(ctx, base, element, shared, op.result)
    # No trailing barrier: the conversion registers sync="inside", so insert-barriers puts
    # one before the next writer of these bytes, and only where there is one.
    return loaded


for _source in (BlockedLayout, MmaLayout, None):
    register_conversion(_source, DotOperandLayout, scratch=_scratch_bytes)(_to_dot_operand)


__all__ = ["load_tile", "operand_shared_layout", "shared_offset", "store_tile"]
