"""Loads and stores through tiles of pointers, vectorized where it is proven safe.

A thread's registers go to memory in vectors of ``n`` elements when the layout puts ``n``
consecutive elements (from a multiple of ``n``) in consecutive registers, and axis info
proves that the pointers there are consecutive and aligned to the vector's size, and that
the mask, if any, is the same across the vector.  ``n`` is at most 16 bytes.  A masked
global access goes to the target's ``memory_access`` hook when it has one (NVIDIA: one
predicated ``@p ld.global.v4.b32``, straight-line code); otherwise it is
``llvm.masked.load`` / ``llvm.masked.store`` with the vector's one mask bit splatted,
which LLVM lowers to a branch around the vector access.  Stores skip the copies a layout
holds (threads or registers that repeat an element), so each element is written once.

Cache modifiers (``.cg``...), eviction policies and ``volatile`` go to the target's
``memory_access`` hook, vector by vector (NVIDIA: ``ld.global.cg.L1::evict_last.v4.b32``
in inline PTX); without the hook the hints are dropped and a volatile access is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from ...analysis.axis_info import AxisInfo
from ...dialects import tile
from ...ir import types as t
from .context import LoweringContext, linear_layout_of, register_lowering
from .elementwise import fastest_register_dim, suffix
from .indexing import contiguous_registers, duplicate_register_mask, duplicate_thread_masks
from .types import UnsupportedType, byte_width, element_bits, llvm_type


@dataclass(frozen=True)
class Qualifiers:
    """The cache modifier (".cg"...), eviction policy ("evict_last"...) and volatility of
    a load or store, as the op spells them ("" for none)."""

    cache: str = ""
    evict: str = ""
    volatile: bool = False

    def __bool__(self) -> bool:
        return bool(self.cache or self.evict or self.volatile)


def qualifiers_of(op: Any) -> Qualifiers:
    return Qualifiers(op.attributes.get("cache", ""), op.attributes.get("evict", ""),
                      bool(op.attributes.get("volatile", False)))


def _pow2_part(n: int) -> int:
    return n & -n


def vector_width(layout: Any, dim: int, bits: int, ptr_info: AxisInfo, mask_info: AxisInfo | None,
                 max_bits: int) -> int:
    """Elements per access along ``dim`` (see the module docstring)."""
    width = min(contiguous_registers(layout, dim), max(max_bits // bits, 1))
    width = min(width, _pow2_part(ptr_info.contiguity[dim]),
                _pow2_part(max(ptr_info.divisibility[dim] * 8 // bits, 1)))
    if mask_info is not None:
        width = min(width, _pow2_part(mask_info.constancy[dim]))
    return max(width, 1)


def _vector_name(kind: str, vector: ir.VectorType, address_space: int) -> str:
    element = vector.element
    spelled = "p" + str(element.addrspace) if isinstance(element, ir.PointerType) else suffix(element)
    return f"llvm.masked.{kind}.v{vector.count}{spelled}.p{address_space}"


def _splat_mask(ctx: LoweringContext, bit: Any, count: int) -> Any:
    vector = ir.VectorType(ir.IntType(1), count)
    value = ir.Constant(vector, None)
    for i in range(count):
        value = ctx.builder.insert_element(value, bit, ctx.i32(i))
    return value


def _pack(ctx: LoweringContext, values: list, vector: ir.VectorType) -> Any:
    packed = ir.Constant(vector, None)
    for i, v in enumerate(values):
        packed = ctx.builder.insert_element(packed, v, ctx.i32(i))
    return packed


def _plan(op: Any, ctx: LoweringContext) -> tuple[Any, int]:
    layout = linear_layout_of(op.ptr)
    dim = fastest_register_dim(layout)
    bits = element_bits(t.element_type(op.ptr.type).pointee)
    mask_info = ctx.axis_info[op.mask] if op.mask is not None else None
    width = vector_width(layout, dim, bits, ctx.axis_info[op.ptr], mask_info, ctx.target.max_vector_bits)
    return layout, width


def _element_type(op: Any, ctx: LoweringContext) -> ir.Type:
    try:
        return llvm_type(t.element_type(op.ptr.type).pointee)
    except UnsupportedType as exc:
        raise ctx.unsupported(op, f"'{op.name}' of {exc}") from None


def _qualifiers(op: Any, ctx: LoweringContext) -> Qualifiers:
    qualifiers = qualifiers_of(op)
    if qualifiers.volatile and ctx.target.memory_access is None:
        raise ctx.unsupported(op, "a volatile load")
    return qualifiers if ctx.target.memory_access is not None else Qualifiers()


@register_lowering(tile.LoadOp)
def _load(op: Any, operands: list, ctx: LoweringContext) -> list:
    qualifiers = _qualifiers(op, ctx)
    element = _element_type(op, ctx)
    ptrs, mask, other = operands[0], None, None
    if op.mask is not None:
        mask = operands[1]
        other = operands[2] if op.other is not None else None
    elif op.other is not None:
        other = operands[1]
    memory_element = _in_memory(element)
    if other is not None and memory_element is not element:
        other = _to_memory(ctx, other) if isinstance(other, list) else _to_memory(ctx, [other])[0]
    if not isinstance(op.ptr.type, t.TileType):
        vector = ir.VectorType(memory_element, 1)
        loaded = _load_vector(ctx, ptrs, vector, mask, [other] if other is not None else None, qualifiers)
        return [_from_memory(ctx, loaded, element)[0]]
    layout, width = _plan(op, ctx)
    duplicates = duplicate_register_mask(layout)
    registers: list[Any] = [None] * layout.num_registers
    vector = ir.VectorType(memory_element, width)
    for start in range(0, layout.num_registers, width):
        if start & duplicates:
            continue
        passthru = other[start:start + width] if other is not None else None
        values = _load_vector(ctx, ptrs[start], vector, mask[start] if mask is not None else None, passthru,
                              qualifiers)
        registers[start:start + width] = _from_memory(ctx, values, element)
    for r in range(layout.num_registers):
        if registers[r] is None:
            registers[r] = registers[r & ~duplicates]
    return [registers]


def _load_vector(ctx: LoweringContext, ptr: Any, vector: ir.VectorType, mask: Any, other: list | None,
                 qualifiers: Qualifiers) -> list:
    b = ctx.builder
    align = vector.count * byte_width(vector.element)
    if qualifiers or _predicated_by_target(ctx, ptr, mask):
        return ctx.target.memory_access(b, "load", ptr, vector, mask, other if mask is not None else None,
                                        qualifiers)
    if mask is None:
        loaded = b.load(ptr, typ=vector, align=align)
    else:
        passthru = _pack(ctx, other, vector) if other is not None else ir.Constant(vector, None)
        i32 = ir.IntType(32)
        name = _vector_name("load", vector, ptr.type.addrspace)
        mask_vector = _splat_mask(ctx, mask, vector.count)
        fn = ctx.declare(name, vector, [ptr.type, i32, mask_vector.type, vector])
        loaded = b.call(fn, [ptr, ir.Constant(i32, align), mask_vector, passthru])
    return [b.extract_element(loaded, ctx.i32(i)) for i in range(vector.count)]


#: The address space of global memory in the LLVM IR of every GPU target (core IR's default).
_GLOBAL_ADDRESS_SPACE = 1


def _predicated_by_target(ctx: LoweringContext, ptr: Any, mask: Any) -> bool:
    """Whether a masked global access goes to the target's ``memory_access`` hook.

    LLVM lowers ``llvm.masked.load`` to a branch around each vector, a basic block per
    access that ptxas schedules across only reluctantly; a predicated instruction
    (NVIDIA: ``@p ld.global.v4.b32``, as Triton writes it) keeps the kernel straight-line."""
    return mask is not None and ctx.target.memory_access is not None and \
        getattr(ptr.type, "addrspace", None) == _GLOBAL_ADDRESS_SPACE


def _in_memory(element: ir.Type) -> ir.Type:
    """How an element sits in memory: a bool is a byte (0 or 1), as NumPy and torch store it."""
    return ir.IntType(8) if element == ir.IntType(1) else element


def _to_memory(ctx: LoweringContext, values: list) -> list:
    return [ctx.builder.zext(v, ir.IntType(8)) if v.type == ir.IntType(1) else v for v in values]


def _from_memory(ctx: LoweringContext, values: list, element: ir.Type) -> list:
    if element != ir.IntType(1):
        return values
    zero = ir.Constant(ir.IntType(8), 0)
    return [ctx.builder.icmp_unsigned("!=", v, zero) for v in values]


def thread_owner(ctx: LoweringContext, layout: Any) -> Any | None:
    """i1: whether this thread holds the first copy of its elements (None: all do)."""
    lanes, warps = duplicate_thread_masks(layout)
    b = ctx.builder
    conditions = []
    for index, bits in ((ctx.lane_id, lanes), (ctx.warp_id, warps)):
        if bits:
            conditions.append(b.icmp_unsigned("==", b.and_(index, ctx.i32(bits)), ctx.i32(0)))
    if not conditions:
        return None
    return conditions[0] if len(conditions) == 1 else b.and_(*conditions)


@register_lowering(tile.StoreOp)
def _store(op: Any, operands: list, ctx: LoweringContext) -> list:
    b = ctx.builder
    qualifiers = _qualifiers(op, ctx)
    element = _element_type(op, ctx)
    ptrs, values = operands[0], operands[1]
    mask = operands[2] if op.mask is not None else None
    memory_element = _in_memory(element)
    if not isinstance(op.ptr.type, t.TileType):
        # Every thread holds the scalar; one stores it.  Were all to store, a warp storing
        # early could overwrite what a later warp of the same program has yet to load
        # (``x = load(p); store(p, x * 2)`` doubling twice: Triton's test_load_store_same_ptr).
        owner = b.icmp_unsigned("==", ctx.thread_id, ctx.i32(0))
        _store_vector(ctx, ptrs, _to_memory(ctx, [values]), ir.VectorType(memory_element, 1),
                      owner if mask is None else b.and_(mask, owner), qualifiers)
        if may_read_after(op):
            # A later load of the element by another warp must see it (store(p, 7);
            # x = load(p)): the barrier orders thread 0's store before everyone's reads.
            ctx.target.barrier(b)
        return []
    values = _to_memory(ctx, values)
    layout, width = _plan(op, ctx)
    owner = thread_owner(ctx, layout)
    duplicates = duplicate_register_mask(layout)
    vector = ir.VectorType(memory_element, width)
    for start in range(0, layout.num_registers, width):
        if start & duplicates:
            continue
        bit = mask[start] if mask is not None else None
        if owner is not None:
            bit = owner if bit is None else b.and_(bit, owner)
        _store_vector(ctx, ptrs[start], values[start:start + width], vector, bit, qualifiers)
    return []


def may_read_after(op: Any) -> bool:
    """Whether the program may read memory after ``op``: an op that reads (``ReadsMemory``)
    or whose effects are not known (not ``Pure``: atomics, calls, a plugin's op) among the
    ops after it to the function's end, and anywhere in a loop around it (the next
    iteration comes after it)."""
    from ...dialects import scf, tile_debug
    from ...ir.opdef import Pure, ReadsMemory, Terminator

    def reads(candidate: Any) -> bool:  # an op with regions is judged by what they hold
        if candidate.regions or candidate.has_trait(Terminator) or isinstance(
                candidate, (tile.StoreOp, tile_debug.PrintOp, tile_debug.AssertOp, tile_debug.AssumeOp,
                            tile_debug.BarrierOp)):
            return False
        return candidate.has_trait(ReadsMemory) or not candidate.has_trait(Pure)

    def any_reads(ops: Any) -> bool:
        return any(reads(inner) for top in ops for inner in top.walk())

    block = list(op.parent)
    for later in block[block.index(op) + 1:]:
        if any_reads([later]):
            return True
        if isinstance(later, tile.StoreOp) and not isinstance(later.ptr.type, t.TileType):
            return False  # the next scalar store's barrier orders this one too (mean, then rstd)
    node = op
    while node.parent is not None:
        block = list(node.parent)
        if any_reads(block[block.index(node) + 1:]):
            return True
        parent = node.parent_op
        if parent is None:
            return False
        if isinstance(parent, (scf.ForOp, scf.WhileOp)) and any_reads([parent]):
            return True
        node = parent
    return False


def _store_vector(ctx: LoweringContext, ptr: Any, values: list, vector: ir.VectorType, mask: Any,
                  qualifiers: Qualifiers) -> None:
    b = ctx.builder
    if qualifiers or _predicated_by_target(ctx, ptr, mask):
        ctx.target.memory_access(b, "store", ptr, vector, mask, values, qualifiers)
        return
    align = vector.count * byte_width(vector.element)
    packed = _pack(ctx, values, vector)
    if mask is None:
        b.store(packed, ptr, align=align)
        return
    i32 = ir.IntType(32)
    mask_vector = _splat_mask(ctx, mask, vector.count)
    fn = ctx.declare(_vector_name("store", vector, ptr.type.addrspace), ir.VoidType(),
                     [vector, ptr.type, i32, mask_vector.type])
    b.call(fn, [packed, ptr, ir.Constant(i32, align), mask_vector])


@register_lowering(tile.AddPtrOp)
def _addptr(op: Any, operands: list, ctx: LoweringContext) -> list:
    b = ctx.builder
    try:
        pointee = llvm_type(t.element_type(op.ptr.type).pointee)
    except UnsupportedType as exc:
        raise ctx.unsupported(op, f"pointers to {exc}") from None
    ptrs, offsets = operands
    if not isinstance(op.result.type, t.TileType):
        return [b.gep(ptrs, [offsets], source_etype=pointee)]
    count = len(ptrs) if isinstance(ptrs, list) else len(offsets)
    return [[b.gep(ptrs[r] if isinstance(ptrs, list) else ptrs, [offsets[r] if isinstance(offsets, list) else offsets],
                   source_etype=pointee) for r in range(count)]]
