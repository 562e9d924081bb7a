"""Bulk tensor copies (Hopper's tensor memory accelerator): the ops a descriptor load
becomes on a target with one, and how its block sits in shared memory.

A host descriptor passed to a Hopper kernel brings its tensor map (``!tma.map``, encoded
on the host by :mod:`.tensormap`).  ``lower-tensor-descriptors`` then turns each
``tma.load`` through it into ``tma.bulk_load``, which ``pipeline-loops`` copies into its
rings with :class:`~.hopper.BulkCopies` (loads in loops feeding dots), and
``stage-bulk-loads`` copies through a one-slot buffer where nothing pipelined it:

- ``tma.copy_to_ring``: one thread starts the copy of the block at ``offsets`` into a
  ring slot (``cp.async.bulk.tensor``), completing on the slot's mbarrier;
- ``tma.arrive_expect_bytes``: the same thread arrives on that barrier and tells it how
  many bytes the copies bring (``mbarrier.arrive.expect_tx``); the phase completes when
  they have landed;
- ``tma.fence_barrier_init``: after the barriers are initialized and before the first
  copy, so the copy engine (another memory proxy) sees them.

The block lands in the layout :func:`box_plan` gives: the NVMMA layout wgmma reads in
place (16-byte vectors, rows swizzled 128, 64 or 32 bytes wide, wider rows as column
blocks of one swizzle row each).  The host encodes the map with the same plan's box and
swizzle, so both sides agree by construction.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

from polytile.dialects.gpu import Barriers, Buffer, IssuesIntoRing, WritesThroughAsyncProxy
from polytile.ir import types as t
from polytile.ir.constraints import IntScalar, Tile, TypeConstraint
from polytile.ir.opdef import Attr, Operand, Pure, ReadsMemory, Result, WritesMemory, define_op, op_error
from polytile.ir.operation import Operation

from .ops import I32, I64, ScalarPointer, TensorMap
from .types import PADDINGS, TensorMapType

#: The widest box a tensor map copies in one dimension.
MAX_BOX = 256
I1 = TypeConstraint("an i1 scalar", lambda x: x == t.i1)


#: The most boxes one block is copied in (each is an instruction the copying thread issues).
MAX_BOXES = 32


class BoxPlan(NamedTuple):
    """How a block is copied: boxes of ``box`` elements (one per dimension, outermost
    first), swizzled ``swizzle`` bytes (0: none), into shared memory laid out as
    ``slot``; ``boxes`` says where each box goes: ``(byte offset in the block's buffer,
    offset of its first element in the block, per dimension)``."""

    box: tuple
    swizzle: int
    boxes: tuple
    slot: Any
    box_bytes: int

    @property
    def copies(self) -> int:
        return len(self.boxes)

    @property
    def bytes(self) -> int:
        return self.box_bytes * self.copies


@functools.lru_cache(maxsize=None)
def box_plan(element_bits: int, block: tuple) -> BoxPlan | None:
    """The copy of a ``block`` of ``element_bits``-bit elements (rank 1 to 5), or None
    where a bulk copy cannot place it as the rest of the kernel reads it.

    The last two dimensions (rows, columns) are laid out as a 2-D block is: the NVMMA
    layout wgmma reads in place, rows of whole 16-byte vectors, wider rows as column
    blocks of one swizzle row each.  The outer dimensions repeat that, row-major.  A
    block of one column block is one box of the whole block; otherwise each outer index
    and column block is a box of its own (leading dimensions 1), at most
    :data:`MAX_BOXES`.  A 1-D block is one run, in boxes of at most 256 elements."""
    if not 1 <= len(block) <= 5 or element_bits < 8 or element_bits % 8:
        return None
    size = element_bits // 8
    if len(block) == 1:
        return _run_plan(size, block[0])
    from polytile.gpu.layouts import SwizzledSharedLayout
    from polytile.gpu.lowering.dot_operands import operand_shared_layout

    *outer, rows, columns = block
    if columns * size % 16 or rows > MAX_BOX or any(n > MAX_BOX for n in outer):
        return None
    slot = operand_shared_layout(None, (rows, columns), element_bits)
    inner = slot.block_of((rows, columns))
    swizzle = 0
    if slot.max_phase > 1:
        swizzle = inner * size
        if swizzle not in (32, 64, 128) or slot.vector * size != 16 or slot.per_phase != 128 // swizzle \
                or slot.max_phase != swizzle // 16:
            return None
    elif inner != columns:
        return None
    if inner > MAX_BOX:
        return None
    box_bytes = rows * inner * size
    # A swizzled box repeats its pattern every 8 rows of the swizzle width; each box (and
    # each ring slot: whole boxes) must start at such a boundary.
    if swizzle and box_bytes % (8 * swizzle):
        return None
    blocks = columns // inner
    if outer:
        slot = SwizzledSharedLayout(slot.vector, slot.per_phase, slot.max_phase, tuple(range(len(block) - 1, -1, -1)),
                                    slot.block)
    if blocks == 1:  # the whole block in one box: its rows one after another, as the slot has them
        return BoxPlan(tuple(block), swizzle, ((0, (0,) * len(block)),), slot, box_bytes * _product(outer))
    count = _product(outer) * blocks
    if count > MAX_BOXES:
        return None
    boxes = []
    for index in range(count):
        place, column_block = divmod(index, blocks)
        # The slot holds each outer index's column blocks one after another (SwizzledSharedLayout.offset).
        position = []
        for n in reversed(outer):
            place, at = divmod(place, n)
            position.append(at)
        boxes.append((index * box_bytes, (*reversed(position), 0, column_block * inner)))
    return BoxPlan((*(1,) * len(outer), rows, inner), swizzle, tuple(boxes), slot, box_bytes)


def _run_plan(size: int, length: int) -> BoxPlan | None:
    """A 1-D block: boxes of up to 256 elements one after another, unswizzled."""
    from polytile.gpu.layouts import SwizzledSharedLayout

    inner = min(length, MAX_BOX)
    if inner * size % 16 or length // inner > MAX_BOXES:
        return None
    boxes = tuple((i * inner * size, (i * inner,)) for i in range(length // inner))
    return BoxPlan((inner,), 0, boxes, SwizzledSharedLayout(1, 1, 1, (0,)), inner * size)


def _product(values: Any) -> int:
    result = 1
    for v in values:
        result *= v
    return result


def ring_block(ring: Any) -> tuple[tuple, BoxPlan | None, bool]:
    """The block a bulk copy moves into a slot of ``ring`` (a ``!gpu.buffer`` of slots),
    its plan, and whether the slots hold it transposed (``pipeline-loops`` reads a
    ``b.T`` operand from such a ring: the same bytes, the slot's shape and layout order
    swapped).  The plan is None where the slots are in neither layout."""
    from polytile.gpu.lowering.async_copy import slot_layout
    from polytile.gpu.pipelining import transposed_slot_layout

    shape = tuple(ring.shape[1:])
    layout = slot_layout(ring)
    if len(shape) != 2:
        plan = box_plan(ring.element.width, shape)
        return shape, (plan if plan is not None and plan.slot == layout else None), False
    for block, transposed in ((shape, False), (shape[::-1], True)):
        plan = box_plan(ring.element.width, block)
        if plan is not None and layout == (transposed_slot_layout(plan.slot, (1, 0)) if transposed else plan.slot):
            return block, plan, transposed
    return shape, None, False


@define_op
class BulkLoadOp(Operation):
    """The block at ``offsets`` through the tensor map ``map`` (its shape and element
    type are the result's): ``tma.load`` of a host descriptor on Hopper."""

    name = "tma.bulk_load"
    map = Operand(TensorMap)
    offsets = Operand(I32, variadic=True)
    result = Result(Tile)
    traits = (ReadsMemory,)

    def verify_op(self) -> None:
        shape = tuple(self.result.type.shape)
        if len(self.offsets) != len(shape):
            raise op_error(self, f"has {len(self.offsets)} offsets for a block of rank {len(shape)}")
        if box_plan(t.element_type(self.result.type).width, shape) is None:
            raise op_error(self, f"a bulk copy cannot move blocks of {self.result.type.without_layout()}")


@define_op
class CopyToRingOp(Operation):
    """One thread starts copying the block at ``offsets`` through ``map`` into slot
    ``slot`` of ``ring``, completing on barrier ``slot`` of ``barriers``; nothing where
    ``valid`` is false."""

    name = "tma.copy_to_ring"
    map = Operand(TensorMap)
    offsets = Operand(I32, variadic=True)
    ring = Operand(Buffer)
    slot = Operand(IntScalar)
    barriers = Operand(Barriers)
    valid = Operand(I1)
    traits = (IssuesIntoRing, WritesThroughAsyncProxy)

    def verify_op(self) -> None:
        ring = self.ring.type
        block, plan, _ = ring_block(ring)
        if len(self.offsets) != len(block):
            raise op_error(self, f"has {len(self.offsets)} offsets for slots of rank {len(block)}")
        if plan is None:
            raise op_error(self, f"a bulk copy cannot fill slots of {ring}: they are not in the layout a bulk "
                                 "copy writes (or its transpose)")
        if ring.shape[0] != self.barriers.type.shape[0]:
            raise op_error(self, f"{ring.shape[0]} slots but {self.barriers.type.shape[0]} barriers")


@define_op
class ArriveExpectBytesOp(Operation):
    """One thread arrives on barrier ``index`` of ``barriers``, which then also waits for
    ``bytes`` bytes of bulk copies (none where ``valid`` is false)."""

    name = "tma.arrive_expect_bytes"
    barriers = Operand(Barriers)
    index = Operand(IntScalar)
    valid = Operand(I1)
    bytes = Attr(int)
    traits = (IssuesIntoRing,)

    def verify_op(self) -> None:
        if not 0 < self.bytes < 1 << 20:
            raise op_error(self, f"a barrier counts between 1 and 2^20 - 1 bytes per phase, not {self.bytes}")


@define_op
class FenceBarrierInitOp(Operation):
    """Makes the barriers this thread initialized visible to the copy engine."""

    name = "tma.fence_barrier_init"


#: What a bulk reduction (``cp.reduce.async.bulk.tensor``) combines, by kind: the element
#: types the copy engine takes for it (PTX ISA), min and max of f16 and bf16 among them
#: (as Triton 3.6 gives them to descriptors).  And, or and xor leave out i64:
#: the ISA lists .b64, but on an H100 (2026-11-27) they fault with an illegal instruction
#: through a map of signed 64-bit elements (u64 maps work), so i64 keeps the atomics.
BULK_REDUCTIONS = {
    "add": frozenset({"i32", "u32", "u64", "f32", "f16", "bf16"}),
    "min": frozenset({"i32", "u32", "i64", "u64", "f16", "bf16"}),
    "max": frozenset({"i32", "u32", "i64", "u64", "f16", "bf16"}),
    "and": frozenset({"i32", "u32", "u64"}),
    "or": frozenset({"i32", "u32", "u64"}),
    "xor": frozenset({"i32", "u32", "u64"}),
}


def bulk_reduction(kind: str, element: Any) -> bool:
    """Whether the copy engine can combine ``element`` values with ``kind``."""
    return str(element) in BULK_REDUCTIONS.get(kind, ())


def _check_reduce(op: Operation, element: Any) -> None:
    if op.reduce and not bulk_reduction(op.reduce, element):
        raise op_error(op, f"a bulk reduction cannot combine {element} with '{op.reduce}'")


@define_op
class BulkStoreOp(Operation):
    """Stores ``value`` at ``offsets`` through the tensor map ``map`` (elements outside
    the array are dropped): ``tma.store`` of a descriptor with a map on Hopper.  With
    ``reduce`` (a kind of :data:`BULK_REDUCTIONS`) it combines ``value`` into the block
    instead, each element atomically and unordered: ``desc.atomic_<kind>``."""

    name = "tma.bulk_store"
    map = Operand(TensorMap)
    offsets = Operand(I32, variadic=True)
    value = Operand(Tile)
    reduce = Attr(str, default="")
    traits = (WritesMemory,)

    def verify_op(self) -> None:
        shape = tuple(self.value.type.shape)
        if len(self.offsets) != len(shape):
            raise op_error(self, f"has {len(self.offsets)} offsets for a block of rank {len(shape)}")
        if box_plan(t.element_type(self.value.type).width, shape) is None:
            raise op_error(self, f"a bulk copy cannot move blocks of {self.value.type.without_layout()}")
        _check_reduce(self, t.element_type(self.value.type))


@define_op
class StoreFromSharedOp(Operation):
    """One thread copies ``buffer`` (a block in the layout of :func:`box_plan`) to
    ``offsets`` through ``map`` and waits until the copy has read it
    (``cp.async.bulk.tensor`` shared -> global, its group committed and waited for)."""

    name = "tma.store_from_shared"
    map = Operand(TensorMap)
    offsets = Operand(I32, variadic=True)
    buffer = Operand(Buffer)
    #: Whether the kernel may access global memory after it: the copy's writes are then
    #: waited for and fenced for the generic proxy, not only its reads of the buffer.
    complete = Attr(bool, default=False)
    #: A bulk reduction of this kind (``cp.reduce.async.bulk.tensor``) instead of a copy.
    reduce = Attr(str, default="")
    traits = (WritesMemory,)

    def verify_op(self) -> None:
        buffer = self.buffer.type
        shape = tuple(buffer.shape)
        if len(self.offsets) != len(shape):
            raise op_error(self, f"has {len(self.offsets)} offsets for a buffer of rank {len(shape)}")
        plan = box_plan(buffer.element.width, shape)
        if plan is None or buffer.layout != plan.slot:
            raise op_error(self, f"a bulk copy cannot read {buffer}: it is not in the layout a bulk copy reads")
        _check_reduce(self, buffer.element)


@define_op
class FenceAsyncWritesOp(Operation):
    """Makes this thread's shared-memory writes visible to the copy engine (the async
    proxy), which reads them after the next barrier."""

    name = "tma.fence_async_writes"


# Tensor maps built on the device (their lowering: .device_maps).
#: ``tensormap.replace``'s element type codes (PTX ISA, "Tensormap new_val validity";
#: not the driver's CUtensorMapDataType numbering).
_ELEMENT_CODES = {("u", 8): 0, ("i", 8): 0, ("f", 8): 0, ("u", 16): 1, ("i", 16): 1, ("u", 32): 2, ("i", 32): 3,
                  ("u", 64): 4, ("i", 64): 5, ("f16", 16): 6, ("f", 32): 7, ("f", 64): 9, ("bf16", 16): 10}


def element_code(element: Any) -> int | None:
    """The ``tensormap.replace`` element type of a polytile scalar type, or None."""
    if isinstance(element, t.FloatType):
        name = str(element)
        key = ("bf16", 16) if name == "bf16" else ("f16", 16) if name == "f16" else ("f", element.width)
    elif isinstance(element, t.IntType):
        key = ("i" if element.signed else "u", element.width)
    else:
        return None
    return _ELEMENT_CODES.get(key)


@define_op
class CreateMapOp(Operation):
    """Builds, in this program's global scratch, the tensor map of the array at ``base``
    (``shape`` i32 and ``strides`` i64 in elements, outermost first; the last stride 1)
    for bulk copies of ``block`` with out-of-bounds fill ``padding``, and gives its
    address (see the module docstring)."""

    name = "tma.create_map"
    base = Operand(ScalarPointer)
    shape = Operand(I32, variadic=True)
    strides = Operand(I64, variadic=True)
    result = Result(TensorMap)
    block = Attr(tuple)
    padding = Attr(str, default="zero")
    #: What the map is for, in the user's words (the launch names it without an allocator).
    purpose = Attr(str, default="the tensor map of pl.make_tensor_descriptor")
    traits = (WritesMemory,)

    @staticmethod
    def infer_result_types(operands: dict, attributes: dict) -> list[t.Type]:
        return [TensorMapType()]

    def verify_op(self) -> None:
        _verify_map(self)


def _verify_map(op: Any) -> None:
    rank = len(op.block)
    if len(op.shape) != rank or len(op.strides) != rank:
        raise op_error(op, f"has {len(op.shape)} shape and {len(op.strides)} strides for a block of rank {rank}")
    element = op.base.type.pointee
    if element_code(element) is None:
        raise op_error(op, f"a tensor map cannot hold {element}")
    if box_plan(element.width, tuple(op.block)) is None:
        raise op_error(op, f"a bulk copy cannot move blocks of {list(op.block)} {element}")
    if op.padding not in PADDINGS:
        raise op_error(op, f"unknown padding '{op.padding}'; use zero or nan")


# The workspace form on Hopper (.workspace): its maps are real tensor maps, written where
# the kernel says and read from there by the copies.
@define_op
class WriteMapOp(Operation):
    """Writes at ``destination`` (global memory, 128-byte aligned) the tensor map of the
    array at ``base``, as ``tma.create_map`` builds one in the global scratch:
    ``experimental_device_tensormap_create2d`` on Hopper."""

    name = "tma.write_map"
    destination = Operand(ScalarPointer)
    base = Operand(ScalarPointer)
    shape = Operand(I32, variadic=True)
    strides = Operand(I64, variadic=True)
    block = Attr(tuple)
    padding = Attr(str, default="zero")
    traits = (WritesMemory,)

    def verify_op(self) -> None:
        _verify_map(self)


@define_op
class MapAtOp(Operation):
    """The tensor map at ``address`` in global memory (one ``tma.write_map`` wrote there,
    in this program, another one or an earlier kernel), for bulk copies through it."""

    name = "tma.map_at"
    address = Operand(ScalarPointer)
    result = Result(TensorMap)
    traits = (Pure,)

    @staticmethod
    def infer_result_types(operands: dict, attributes: dict) -> list[t.Type]:
        return [TensorMapType()]


@define_op
class AcquireMapOp(Operation):
    """Orders this program's bulk copies through the map at ``address`` after the write
    of the map (by another program) that this program has seen: the tensor-map proxy's
    acquire, ``experimental_tensormap_fenceproxy_acquire`` on Hopper."""

    name = "tma.acquire_map"
    address = Operand(ScalarPointer)
    # A fence: taken as writing memory, so that nothing moves across it (pipeline-loops
    # leaves a loop that acquires alone rather than issue its copies ahead of it).  The
    # mutation analysis never sees it: it reads the IR before lower-tensor-descriptors.
    traits = (WritesMemory,)


BULK_OPS = (BulkLoadOp, CopyToRingOp, ArriveExpectBytesOp, FenceBarrierInitOp, BulkStoreOp, StoreFromSharedOp,
            FenceAsyncWritesOp, CreateMapOp, WriteMapOp, MapAtOp, AcquireMapOp)

__all__ = ["BULK_OPS", "AcquireMapOp", "ArriveExpectBytesOp", "BoxPlan", "BulkLoadOp", "BulkStoreOp", "CopyToRingOp",
           "CreateMapOp", "BULK_REDUCTIONS", "FenceAsyncWritesOp", "FenceBarrierInitOp", "MapAtOp", "StoreFromSharedOp",
           "WriteMapOp", "box_plan", "bulk_reduction", "element_code", "ring_block"]
