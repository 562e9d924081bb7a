"""Bulk tensor copies on NVIDIA Hopper (sm_90 and later): how ``pipeline-loops`` fills
its rings from descriptor loads, the PTX of the copies, and ``stage-bulk-loads``.

Imported by the plugin's ``polytile_configure_pipeline`` for such a target only; what it
registers (the ring copies of ``tma.bulk_load``, the lowerings of the bulk ops, their
shared-memory accesses) is the plugin's and leaves with it.

- In a pipelined loop, one thread (thread 0, which also initializes the ring's barriers)
  issues each slot's copies and one ``mbarrier.arrive.expect_tx`` with their bytes; the
  readers wait for the slot's phase as for ``cp.async`` fills.  The copies write through
  the async proxy, so wgmma reads the slots with no proxy fence.
- Elsewhere (outside loops, loops that were not pipelined, loads that feed no dot),
  ``stage-bulk-loads`` copies the block into a one-slot buffer with its own barrier,
  waits for it, and reads it into the layout its users want.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

from llvmlite import ir

from polytile.dialects import arith
from polytile.dialects.gpu import BufferType, LocalAllocOp, LocalStoreOp, MBarrierInitOp, MBarrierInvalOp, MBarrierWaitOp
from polytile.gpu.layouts import SwizzledSharedLayout
from polytile.gpu.lowering.context import LoweringContext, register_lowering
from polytile.gpu.lowering.mbarrier import barrier_address
from polytile.gpu.lowering.shared import buffer_pointer
from polytile.gpu.membar import READ, register_buffer_access
from polytile.gpu.pipelining import read_slot_instead, ring_type, transposed_operand, transposed_slot_layout
from polytile.gpu.prefetch_next import GLOBAL_ACCESSES, register_global_access, register_pointer_path, root_argument
from polytile.gpu.ring_copies import BARRIERS, RingCopies, feeds_dot, register_ring_copies
from polytile.ir import types as t
from polytile.ir.builder import Builder
from polytile.ir.opdef import Pure

from .bulk import (ArriveExpectBytesOp, BoxPlan, BulkLoadOp, BulkStoreOp, CopyToRingOp, CreateMapOp,
                   FenceAsyncWritesOp, FenceBarrierInitOp, StoreFromSharedOp, box_plan, ring_block)
from .lowering import array_of

_I32, _I64 = ir.IntType(32), ir.IntType(64)


def plan_of(tile_type: Any) -> BoxPlan:
    plan = box_plan(t.element_type(tile_type).width, tuple(tile_type.shape))
    assert plan is not None, f"no bulk copy of {tile_type}"  # the ops' verifiers hold this
    return plan


# --------------------------------------------------------------------------------------
# Rings


class BulkCopies(RingCopies):
    """``tma.bulk_load`` into a ring: one thread's bulk copies, completing on the slot's
    barrier with one arrival that expects their bytes."""

    completions: ClassVar[frozenset] = frozenset({BARRIERS})
    transposable: ClassVar[bool] = True

    def accepts(self, load: Any, infos: Any, target: Any) -> bool:
        return True  # the op exists only where the target has bulk copies

    def addresses(self, load: Any) -> list:
        return list(load.offsets)

    def issue(self, builder: Builder, load: Any, lookup: Callable[[Any], Any], ring: Any, slot: Any,
              valid: Any, barriers: Any) -> None:
        builder.create(CopyToRingOp, lookup(load.map), [lookup(o) for o in load.offsets], ring, slot, barriers, valid)

    def prepare(self, builder: Builder, barriers: Any) -> None:
        builder.create(FenceBarrierInitOp)

    def signal(self, builder: Builder, barriers: Any, slot: Any, valid: Any, loads: list) -> None:
        builder.create(ArriveExpectBytesOp, barriers, slot, valid, bytes=sum(plan_of(x.result.type).bytes
                                                                            for x in loads))

    def slot_layout(self, load: Any) -> Any:
        return plan_of(load.result.type).slot

    def arrivals(self, num_threads: int) -> int:
        return 1


register_ring_copies(BulkLoadOp, BulkCopies())
# What persistent loops (flatten=True) need to move the next tile's copies into this
# tile's epilogue: the memory the copies read and the stores write is the array of their
# tensor map, named by the kernel argument the map comes from (a host descriptor's map
# parameter, or the base pointer a map made in the kernel was built from).
register_global_access(CopyToRingOp, BulkLoadOp)(lambda op: [(array_of(op, op.map), "r")])
# (And warp specialization's split of such a loop, after the store has become a copy from
# shared memory: the producer loads the next tile while this one's is stored.)
register_global_access(BulkStoreOp, StoreFromSharedOp)(lambda op: [(array_of(op, op.map), "w")])
register_pointer_path(CreateMapOp, "base")
# Thread 0 initializes the barriers and issues every copy and arrival: only the waits of
# the other threads must follow the initialization (and they read the barriers).
register_buffer_access(ArriveExpectBytesOp)(lambda op: [(op.barriers, READ)])


# --------------------------------------------------------------------------------------
# stage-bulk-loads (the pass is in .staging)


def stage_bulk_load(load: Any) -> None:
    """Copy ``load``'s block into a one-slot buffer, wait for it, read it from there."""
    b = Builder.before(load, load.location)
    plan = plan_of(load.result.type)
    # A transposed dot operand (b.T) reads the buffer transposed, in place.
    trans = transposed_operand(load) if not feeds_dot(load.result) else None
    if trans is None:
        ring = b.create(LocalAllocOp, result_types=[ring_type(load.result.type, 1, plan.slot)]).result
    else:
        slot = transposed_slot_layout(plan.slot, tuple(trans.order))
        ring = b.create(LocalAllocOp, result_types=[ring_type(trans.result.type, 1, slot)]).result
    barrier_type = BufferType((1,), t.i64, SwizzledSharedLayout(1, 1, 1, (0,)))
    barriers = b.create(LocalAllocOp, result_types=[barrier_type]).result
    zero = arith.materialize_constant(b, 0, t.i32).result
    true = arith.materialize_constant(b, 1, t.i1).result
    b.create(MBarrierInitOp, barriers, count=1)
    b.create(FenceBarrierInitOp)
    b.create(CopyToRingOp, load.map, list(load.offsets), ring, zero, barriers, true)
    b.create(ArriveExpectBytesOp, barriers, zero, true, bytes=plan.bytes)
    wait = b.create(MBarrierWaitOp, barriers, zero, zero)
    # The barrier's life ends once every thread is past its wait (insert-barriers puts
    # the barrier that says so); the slot's bytes stay until its last read.
    Builder.after(wait, load.location).create(MBarrierInvalOp, barriers)
    if trans is None:
        read_slot_instead(load, ring, zero)
    else:
        read_slot_instead(trans, ring, zero)
        load.erase()


def stage_bulk_store(store: Any) -> None:
    """Write ``store``'s block into a buffer in the copy's layout, fence it for the copy
    engine, and copy it out (insert-barriers puts the barrier between the writes and the
    copy, and after the copy before the bytes are used again)."""
    b = Builder.before(store, store.location)
    value = store.value.type
    plan = plan_of(value)
    buffer = b.create(LocalAllocOp, result_types=[BufferType(tuple(value.shape), t.element_type(value),
                                                             plan.slot)]).result
    b.create(LocalStoreOp, store.value, buffer)
    b.create(FenceAsyncWritesOp)
    b.create(StoreFromSharedOp, store.map, list(store.offsets), buffer, complete=_global_access_after(store),
             reduce=store.reduce)
    store.erase()


#: Ops that touch only shared memory, registers or synchronization: no global access.
_LOCAL_OPS = frozenset({"gpu.local_alloc", "gpu.local_store", "gpu.local_load", "gpu.local_load_slot",
                        "gpu.barrier", "gpu.mbarrier_init", "gpu.mbarrier_wait", "gpu.mbarrier_inval",
                        "gpu.fence_async_shared", "gpu.dot_wait", "gpu.convert_layout", "gpu.async_wait",
                        "tma.fence_async_writes", "tma.fence_barrier_init", "tma.arrive_expect_bytes",
                        "scf.yield", "scf.condition", "func.return"})


def _may_touch(op: Any, root: Any, store: Any) -> bool:
    """Whether ``op`` may access the memory ``store`` (a bulk store through a map of
    kernel argument ``root``, None: unknown) writes, or order this program's accesses
    against other programs' (an atomic that tells another program the tile is written)."""
    if op.name in _LOCAL_OPS or op.regions or op.has_trait(Pure):
        return False
    if isinstance(op, BulkStoreOp) and _other_box(store, op):
        return False
    if root is None:
        return True
    accesses = GLOBAL_ACCESSES.get(type(op))
    if accesses is not None:
        return any(root_argument(value) in (None, root) for value, _ in accesses(op))
    if op.name in ("tile.load", "tile.store") and not getattr(op, "volatile", False):
        found = root_argument(op.ptr)
        return found is None or found is root
    return True


def _other_box(store: Any, later: Any) -> bool:
    """Whether the bulk stores ``store`` and ``later`` (plain stores, one map) write
    boxes that provably do not overlap: in some dimension one's offset is the other's
    plus a constant at least the block's size there (a subtiled epilogue's two halves)."""
    if store.reduce or later.reduce or later.map is not store.map:
        return False
    block = store.value.type.shape
    for d, (first, second) in enumerate(zip(store.offsets, later.offsets)):
        for a, b in ((first, second), (second, first)):
            step = _constant_step(a, b)
            if step is not None and abs(step) >= block[d]:
                return True
    return False


def _constant(value: Any) -> int | None:
    op = value.defining_op
    if op is not None and op.name == "arith.constant" and isinstance(op.attributes.get("value"), int):
        return op.attributes["value"]
    return None


def _constant_step(start: Any, value: Any) -> int | None:
    """``c`` where ``value`` is ``start + c`` (``arith.addi`` with a constant, or both
    constants), else None."""
    if _constant(start) is not None and _constant(value) is not None:
        return _constant(value) - _constant(start)
    op = value.defining_op
    if op is None or op.name != "arith.addi":
        return None
    for x, y in ((op.operands[0], op.operands[1]), (op.operands[1], op.operands[0])):
        if x is start and _constant(y) is not None:
            return _constant(y)
    return None


def _global_access_after(op: Any) -> bool:
    """Whether the kernel may access the memory ``op`` stores to after it, later in its
    block and the blocks around it, or anywhere in a loop around it (the next iteration):
    then the store waits until its writes are done and fences them.  Accesses through
    other kernel arguments (the next tile's copies of A and B after a store of C) need
    only the wait until the copy has read shared memory: distinct arguments are taken not
    to overlap, as Triton takes them."""
    root = root_argument(array_of(op, op.map))
    current = op
    while current is not None and current.name != "func.func":
        block = current.parent
        if block is None:
            break
        ops = list(block)
        later = ops[ops.index(current) + 1:]
        if any(_may_touch(o, root, op) for later_op in later for o in later_op.walk()):
            return True
        parent = current.parent_op
        if parent is not None and parent.name in ("scf.for", "scf.while") and (
                any(_may_touch(o, root, op) for o in parent.walk() if o is not op)
                or (not op.reduce and not any(_varies_in(v, parent) for v in op.offsets))):
            # The next iteration touches the array again, or stores this very box again
            # (async bulk stores are unordered among themselves).
            return True
        current = parent
    return False


def _varies_in(value: Any, loop: Any, depth: int = 32) -> bool:
    """Whether ``value`` may differ between iterations of ``loop``: it is computed from a
    value of the loop's body (its induction variable, what it carries) or from memory."""
    op = value.defining_op
    if op is None:  # a block argument: of the loop's body or a region in it, or from outside
        block = getattr(value, "block", None)
        region = getattr(block, "parent", None)
        owner = getattr(region, "parent", None)
        return owner is not None and (owner is loop or loop.is_ancestor_of(owner))
    if not loop.is_ancestor_of(op):
        return False
    if depth == 0 or not op.has_trait(Pure):
        return True
    return any(_varies_in(v, loop, depth - 1) for v in op.operands)


# The copy out reads its buffer until its wait, inside the op: a later write of those
# bytes waits for every thread to be past it.
register_buffer_access(StoreFromSharedOp)(lambda op: [(op.buffer, READ)])


# --------------------------------------------------------------------------------------
# PTX

def copy_ptx(rank: int) -> str:
    """One box of ``rank`` dimensions into shared memory, completing on a barrier: $0 the
    destination, $1 the tensor map's generic address, then the coordinates innermost
    first, then the barrier, then non-zero where this thread copies."""
    coordinates = ", ".join(f"${2 + d}" for d in range(rank))
    return (f"{{ .reg .pred p; setp.ne.b32 p, ${3 + rank}, 0; @p cp.async.bulk.tensor.{rank}d.shared::cluster.global"
            f".tile.mbarrier::complete_tx::bytes [$0], [$1, {{{coordinates}}}], [${2 + rank}]; }}")


COPY_2D_PTX = copy_ptx(2)
#: One arrival on barrier $0 that also expects $1 bytes, where $2 is non-zero.
ARRIVE_EXPECT_PTX = ("{ .reg .pred p; .reg .b64 state; setp.ne.b32 p, $2, 0; "
                     "@p mbarrier.arrive.expect_tx.shared::cta.b64 state, [$0], $1; }")
#: The initialized barriers, seen by the copy engine (the async proxy).
FENCE_INIT_PTX = "fence.mbarrier_init.release.cluster; fence.proxy.async.shared::cta;"


def _asm(builder: ir.IRBuilder, text: str, inputs: list, constraints: str) -> None:
    function_type = ir.FunctionType(ir.VoidType(), [v.type for v in inputs])
    builder.asm(function_type, text, constraints + ",~{memory}" if constraints else "~{memory}", inputs,
                side_effect=True)


def _check_swizzle_alignment(ctx: LoweringContext, plan: BoxPlan) -> None:
    """A swizzled bulk copy swizzles by shared-memory address bits, the kernel's layouts
    from the buffer's start: they agree where shared memory starts on a 1024-byte
    boundary (buffers are placed at multiples of their pattern from there).  The driver
    puts it there for kernels without static shared memory, as polytile's; a kernel where
    it did not stops with a trap rather than move scrambled blocks."""
    if not plan.swizzle:
        return
    b = ctx.builder
    start = b.ptrtoint(ctx.shared_base(), _I32)
    misaligned = b.icmp_unsigned("!=", b.and_(start, ctx.i32(1023)), ctx.i32(0))
    with b.if_then(misaligned, likely=False):
        ctx.call("llvm.trap", ir.VoidType(), [])


def _thread_zero(ctx: LoweringContext) -> Any:
    b = ctx.builder
    return b.and_(b.icmp_unsigned("==", ctx.lane_id, ctx.i32(0)), b.icmp_unsigned("==", ctx.warp_id, ctx.i32(0)))


@register_lowering(CopyToRingOp)
def _copy_to_ring(op: Any, operands: list, ctx: LoweringContext) -> list:
    b = ctx.builder
    _, plan, _ = ring_block(op.ring.type)  # a transposed ring holds the same bytes
    _check_swizzle_alignment(ctx, plan)
    slot = ctx.get(op.slot)
    base = b.add(b.ptrtoint(buffer_pointer(ctx, op.ring), _I32), b.mul(slot, ctx.i32(plan.bytes)))
    barrier = barrier_address(ctx, op, op.barriers, slot)
    tensor_map = b.ptrtoint(ctx.get(op.map), _I64)
    offsets = [ctx.get(v) for v in op.offsets]
    copies = b.zext(b.and_(_thread_zero(ctx), ctx.get(op.valid)), _I32)
    rank = len(offsets)
    for byte_offset, position in plan.boxes:
        # Each box where the slot's layout has it (column blocks of one swizzle row each).
        destination = b.add(base, ctx.i32(byte_offset)) if byte_offset else base
        coordinates = _coordinates(ctx, offsets, position)
        _asm(b, copy_ptx(rank), [destination, tensor_map, *coordinates, barrier, copies],
             ",".join(["r", "l", *["r"] * rank, "r", "r"]))
    return []


def _coordinates(ctx: LoweringContext, offsets: list, position: tuple) -> list:
    """A box's coordinates, innermost first: the block's offsets plus the box's place in it."""
    b = ctx.builder
    return [b.add(offset, ctx.i32(at)) if at else offset for offset, at in zip(offsets, position)][::-1]


@register_lowering(ArriveExpectBytesOp)
def _arrive_expect(op: Any, operands: list, ctx: LoweringContext) -> list:
    b = ctx.builder
    barrier = barrier_address(ctx, op, op.barriers, ctx.get(op.index))
    expected = b.select(ctx.get(op.valid), ctx.i32(op.bytes), ctx.i32(0))
    _asm(b, ARRIVE_EXPECT_PTX, [barrier, expected, b.zext(_thread_zero(ctx), _I32)], "r,r,r")
    return []


def store_ptx(rank: int, reduce: str | None = None) -> str:
    """One box of ``rank`` dimensions from shared memory: $0 the tensor map's address,
    then the coordinates innermost first, then the source, then non-zero where this
    thread copies; with ``reduce`` (add, min, ...) combined into global memory."""
    coordinates = ", ".join(f"${1 + d}" for d in range(rank))
    operation = f"cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta.{reduce}" if reduce else \
        f"cp.async.bulk.tensor.{rank}d.global.shared::cta"
    return (f"{{ .reg .pred p; setp.ne.b32 p, ${2 + rank}, 0; @p {operation}.tile.bulk_group "
            f"[$0, {{{coordinates}}}], [${1 + rank}]; }}")


STORE_2D_PTX = store_ptx(2)
#: The copies out so far as one group, and the wait until they have read shared memory.
STORE_WAIT_PTX = ("{ .reg .pred p; setp.ne.b32 p, $0, 0; @p cp.async.bulk.commit_group; "
                  "@p cp.async.bulk.wait_group.read 0; }")
#: The same, waiting until the writes are done and ordering them before this thread's
#: later generic-proxy accesses of global memory (the kernel accesses it after the store).
STORE_COMPLETE_PTX = ("{ .reg .pred p; setp.ne.b32 p, $0, 0; @p cp.async.bulk.commit_group; "
                      "@p cp.async.bulk.wait_group 0; @p fence.proxy.async.global; }")


@register_lowering(StoreFromSharedOp)
def _store_from_shared(op: Any, operands: list, ctx: LoweringContext) -> list:
    b = ctx.builder
    buffer = op.buffer.type
    plan = plan_of(t.TileType(tuple(buffer.shape), buffer.element))
    _check_swizzle_alignment(ctx, plan)
    base = b.ptrtoint(buffer_pointer(ctx, op.buffer), _I32)
    tensor_map = b.ptrtoint(ctx.get(op.map), _I64)
    offsets = [ctx.get(v) for v in op.offsets]
    first = b.zext(_thread_zero(ctx), _I32)
    rank = len(offsets)
    text = store_ptx(rank, op.reduce or None)
    for byte_offset, position in plan.boxes:
        source = b.add(base, ctx.i32(byte_offset)) if byte_offset else base
        _asm(b, text, [tensor_map, *_coordinates(ctx, offsets, position), source, first],
             ",".join(["l", *["r"] * rank, "r", "r"]))
    _asm(b, STORE_COMPLETE_PTX if op.complete else STORE_WAIT_PTX, [first], "r")
    if op.complete:
        # Thread 0 waited for the writes and fenced them; the other threads' later
        # accesses of the array wait for thread 0 here.
        ctx.target.barrier(b)
    return []


@register_lowering(FenceAsyncWritesOp)
def _fence_async_writes(op: Any, operands: list, ctx: LoweringContext) -> list:
    _asm(ctx.builder, "fence.proxy.async.shared::cta;", [], "")
    return []


@register_lowering(FenceBarrierInitOp)
def _fence_init(op: Any, operands: list, ctx: LoweringContext) -> list:
    _asm(ctx.builder, FENCE_INIT_PTX, [], "")
    return []


__all__ = ["ARRIVE_EXPECT_PTX", "BulkCopies", "COPY_2D_PTX", "FENCE_INIT_PTX", "STORE_2D_PTX", "STORE_WAIT_PTX", "copy_ptx",
           "plan_of", "store_ptx",
           "stage_bulk_load", "stage_bulk_store"]
