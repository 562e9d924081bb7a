"""Split a persistent loop: ``warp_specialize=True`` on a loop over output tiles whose
body runs a pipelined K loop (Triton's tutorial 09: ``for tile_id in tl.range(start_pid,
num_tiles, NUM_SMS, warp_specialize=True)`` around ``for ki in range(k_tiles)``).

``pipeline-loops`` leaves the tile loop's body with the K loop's ring set up and filled
before it (its barriers initialized, the copies of its first ``S - 1`` iterations), the
K loop (wait, read, dots, the fill ``S - 1`` iterations ahead) and the drain after it
(waits for the fills past the end, the barriers invalidated); with ``flatten=True``
(:mod:`polytile.gpu.prefetch_next`) the first tile's prologue is before the tile loop and
each next tile's after this tile's K loop.  Here:

- the **producer** warp group runs the tile loop too, computing for each tile only what
  the K loop's copies need (scalars: the tile's offsets, the K loop's bounds), and issues
  every copy of every K loop into the ring as one stream: its slot and phase run on from
  tile to tile, each copy waiting for its slot's release;
- the **consumers** run the tile loop without the prologues, fills and drains; each K
  loop reads on from where the previous tile's stopped (its first slot and phase are
  carried by the tile loop), releases its slots as a split loop does (see
  :func:`.channels.release_instead_of_fills`) and, once the dots after it are retired,
  the slot of its last iteration; the tile's epilogue (its store) stays theirs, and
  while it runs the producer is already loading the next tile.

The ring's barriers are initialized once, before the split, and invalidated after it.
Because the producer loads the next tile while this one's results are stored, the split
is made only where every write of the tile loop's body goes through another kernel
argument than the copies read (:func:`polytile.gpu.prefetch_next.overtaken_write`;
distinct arguments are taken not to overlap, as Triton takes them).  Per-thread
``cp.async`` copies are not split in a nested loop (their prologue is the consumers',
made with their pointers); the loop then runs unspecialised, the metadata saying why.
"""

from __future__ import annotations

from typing import Any

from polytile.dialects import arith, scf
from polytile.dialects.gpu import (AsyncWaitOp, IssuesIntoRing, LocalAllocOp, MBarrierArriveOp, MBarrierInitOp,
                                   MBarrierInvalOp, MBarrierWaitOp)
from polytile.ir import types as t
from polytile.ir.builder import Builder
from polytile.ir.opdef import Pure
from polytile.passes.rewrite import constant_value

from .channels import touches_tiles
from .registers import RegisterPlan


#: Why a persistent loop whose K loop copies pointer tiles is not split.
PER_THREAD_COPIES = ("its inner loop's loads are per-thread cp.async copies of pointer tiles; in a loop nested in the "
                     "split one only bulk copies (tensor descriptors, polytile-tma) are issued by the producer")


def pipelined_inner_loops(outer: Any) -> list:
    """The loops directly in ``outer``'s body that ``pipeline-loops`` turned into ring
    readers: their body issues fills and waits for a slot, on a barrier (its first op)
    or, for cp.async rings, on commit groups."""
    return [op for op in outer.body.block if isinstance(op, scf.ForOp)
            and any(inner.has_trait(IssuesIntoRing) for inner in op.body.block)
            and (isinstance(op.body.block.first_op, MBarrierWaitOp)
                 or any(isinstance(inner, AsyncWaitOp) for inner in op.body.block))]


def split_persistent(function: Any, outer: Any, num_warps: int, registers: RegisterPlan) -> str | None:
    """Split the tile loop ``outer`` around the pipelined K loop in its body (see the
    module docstring); None when done, else why not (then the IR is unchanged)."""
    from polytile.gpu.lowering.target import WORKER_WARPS_ATTR

    from .channels import build_producer, release_instead_of_fills
    from .ops import WarpSpecializeOp, YieldOp
    from .partition import _with_results

    plan = _examine(function, outer, num_warps)
    if isinstance(plan, str):
        return plan
    found, inner, full = plan.found, plan.inner, plan.full
    location = outer.location
    block = outer.parent

    # One ring for every tile: its buffers and barriers made once, before the split.
    for alloc in plan.allocs:
        alloc.move_before(outer)
    at = Builder.before(outer, location)
    at.insert(plan.init.clone())
    empty = at.insert(full.defining_op.clone()).result
    empty.name_hint = "empty"
    at.create(MBarrierInitOp, empty, count=num_warps)
    for op in plan.setup:
        at.insert(op.clone())
    for op in plan.gone:
        op.erase()

    ws = WarpSpecializeOp.create([], producer_warps=registers.producer_warps, producer_registers=registers.producer,
                                 consumer_registers=registers.consumer, kernel_registers=registers.kernel,
                                 producer_working_warps=1, location=location)
    block.insert_before(ws, outer)
    _build_producer_tiles(ws.producer.block, plan, empty, build_producer)
    Builder.at_end(ws.producer.block, location).create(YieldOp)

    consumer = ws.consumer.block
    consumers_own = [*plan.moved, outer]

    def outside(user: Any) -> bool:
        return not any(user is op or op.is_ancestor_of(user) for op in consumers_own)

    escaping = [r for op in plan.moved for r in op.results if any(outside(use.owner) for use in r.uses)]
    for op in plan.moved:
        op.detach()
        consumer.append(op)
    outer.detach()
    consumer.append(outer)
    outer = _carry_ring_position(outer, inner, plan)
    releases_last = release_instead_of_fills(found, empty)
    if releases_last:
        _release_last_slot(inner, plan, empty)
    handed_on = [*outer.results[:plan.outer_results], *escaping]
    Builder.at_end(consumer, location).create(YieldOp, handed_on)
    ws = _with_results(ws, handed_on)
    after = Builder.after(ws, location)
    after.create(MBarrierInvalOp, full)
    after.create(MBarrierInvalOp, empty)
    function.set_attr(WORKER_WARPS_ATTR, registers.producer_warps)
    return None


class _Plan:
    """What :func:`split_persistent` moves, erases and builds, found before it changes anything."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def _examine(function: Any, outer: Any, num_warps: int) -> "_Plan | str":
    from polytile.gpu.prefetch_next import overtaken_write

    from .partition import NOT_TOP_LEVEL, _Loop, _prefix, examine_ring_loop, moved_to_consumers, whole_warp_groups

    if outer.parent_op is not function:
        return NOT_TOP_LEVEL
    why = whole_warp_groups(num_warps)
    if why is not None:
        return why
    inners = pipelined_inner_loops(outer)
    if len(inners) != 1:
        return (f"its body runs {len(inners)} pipelined loops; the producer is split off around one (the loop over "
                "K of a persistent kernel)")
    inner = inners[0]
    if not isinstance(inner.body.block.first_op, MBarrierWaitOp):  # commit groups: per-thread cp.async rings
        return PER_THREAD_COPIES
    found = examine_ring_loop(inner, num_warps)
    if isinstance(found, str):
        return f"its inner loop: {found}"
    if not isinstance(found.full.defining_op, LocalAllocOp):
        return "its inner loop's ring barriers are not made in shared memory where the split can see it"
    if found.per_thread:
        return PER_THREAD_COPIES
    full = found.full
    carried = list(inner.region_iter_args)
    wait = inner.body.block.first_op
    if wait.index not in carried or wait.phase not in carried:
        return "its inner loop's ring position is not carried by that loop"
    read_index, phase_index = carried.index(wait.index), carried.index(wait.phase)
    if constant_value(inner.init_args[read_index]) != 0 or constant_value(inner.init_args[phase_index]) != 0:
        return "its inner loop's ring does not start at its first slot"

    body = outer.body.block
    rings = {full, *(getattr(op, "ring", None) for op in found.fills)} - {None}
    allocs = [op for op in body if isinstance(op, LocalAllocOp) and op.result in rings]
    tile_scalars = _tile_scalars(outer, inner, found, set(allocs))
    if isinstance(tile_scalars, str):
        return tile_scalars
    gone, setup, init = _ring_ops(function, outer, inner, full)
    if isinstance(gone, str):
        return gone
    rest = [op for op in body if op is not inner and op not in gone and op is not body.last_op]
    why = overtaken_write(found.fills, rest)
    if why is not None:
        return f"its body writes memory the next tile's copies read ({why})"
    retire = _retiring_wait(outer, inner)
    if retire is None and _has_async_dots(inner):
        return "the dots its inner loop leaves in flight are not retired after it"

    # The ops before the loop that the consumers' warps make (tiles) move with them.
    prefix = [op for op in _prefix(function.body.block, outer) if op not in gone]
    outer_view = _Loop(outer, full, found.fills, [*found.slice, *tile_scalars], found.write_slot)
    moved = moved_to_consumers(prefix, outer_view, set(setup), (inner.lower, inner.upper, inner.step))
    if isinstance(moved, str):
        return moved
    return _Plan(found=found, inner=inner, full=full, init=init, setup=setup, gone=gone, allocs=allocs,
                 moved=moved, tile_scalars=tile_scalars, retire=retire, read_index=read_index,
                 phase_index=phase_index, outer_results=len(outer.results))


def _tile_scalars(outer: Any, inner: Any, found: Any, allocs: set) -> "list | str":
    """The ops of the tile loop's body (before the K loop) that the K loop's bounds and
    its fills read, in order: the producer computes them again for each tile, so they
    must be scalar arithmetic on the tile index and values from before the loop (or the
    ring's ``allocs``, which move before it)."""
    body = outer.body.block
    carried = set(body.arguments[1:])
    needed: set = set()
    stack = [inner.lower, inner.upper, inner.step,
             *(v for op in (*found.fills, *found.slice) for v in op.operands)]
    while stack:
        value = stack.pop()
        if value in carried:
            return "its inner loop's copies depend on values the loop carries; the producer computes them per tile"
        owner = value.defining_op
        if owner is None or owner in needed or owner.parent is not body or owner in allocs:
            continue
        if owner is inner:
            return "its inner loop's copies depend on that loop's results"
        if not owner.has_trait(Pure) or owner.regions or touches_tiles(owner):
            return (f"its inner loop's copies need '{owner.name}' of the loop's body, which the producer cannot run "
                    "on its own (it computes scalars only)")
        needed.add(owner)
        stack.extend(owner.operands)
    return [op for op in body if op in needed]


def _ring_ops(function: Any, outer: Any, inner: Any, full: Any) -> tuple:
    """The ops that fill, set up and drain the K loop's ring outside it, which the split
    replaces: the prologues (in the tile loop's body, or with ``flatten=True`` in a branch
    before the loop and after the K loop), the drain's waits and the invalidation;
    returned with the setup to do once (what follows the first initialization before the
    first fill: the copy engine's fence) and that initialization, to clone.
    ``(why, None, None)`` where something else is in the way."""
    from polytile.gpu.pipelining import writes_memory

    from .partition import _prefix

    gone: list = []
    setup: list = []
    first_init: list = []
    unhoistable: list = []

    def ring_op(op: Any) -> bool:
        return getattr(op, "barriers", None) is full and (
            op.has_trait(IssuesIntoRing) or isinstance(op, (MBarrierInitOp, MBarrierInvalOp, MBarrierWaitOp)))

    def scan(ops: list) -> None:
        run = None  # the ops after an initialization, before the next fill
        for op in ops:
            if isinstance(op, MBarrierInitOp) and op.barriers is full:
                run = setup if not first_init else []
                first_init.append(op)
            elif op.has_trait(IssuesIntoRing):
                run = None
            elif run is not None and not op.has_trait(Pure) and not touches_tiles(op):
                # The copy engine's fence of the initialization: made once, before the split,
                # so it may read nothing the tile loop makes, and give nothing.
                if op.results or any(not _defined_before(v, outer) for v in op.operands):
                    unhoistable.append(op)
                run.append(op)
                gone.append(op)
                continue
            if ring_op(op):
                gone.append(op)

    body = outer.body.block
    scan([op for op in body if op is not inner and not isinstance(op, scf.IfOp)])
    branches = [op for op in (*_prefix(function.body.block, outer), *body)
                if isinstance(op, scf.IfOp) and any(ring_op(nested) for nested in op.walk())]
    for branch in branches:
        # A prologue in a branch (prefetch-next's): the ring's ops and scalars alone.
        if branch.results:
            return ("a branch that fills its inner loop's ring also gives values", None, None)
        for region in branch.regions:
            for op in region.block:
                # The ring's ops, scalars, and the initialization's fence (no operands, no
                # results): anything else would be dropped with the branch.
                if not (ring_op(op) or op.has_trait(Pure) or isinstance(op, scf.YieldOp)
                        or not (op.operands or op.results or op.regions or touches_tiles(op)
                                or writes_memory(op))):
                    return (f"'{op.name}' runs beside its inner loop's prologue", None, None)
        kept = len(gone)
        for region in branch.regions:
            scan(list(region.block))
        del gone[kept:]  # the whole branch goes
        gone.append(branch)
    if not first_init:
        return ("its inner loop's ring barriers are not initialized where the split can see it", None, None)
    if unhoistable:
        return (f"'{unhoistable[0].name}' between its inner loop's ring setup and first copy reads what the loop "
                "makes; the split makes the setup once, before the loop", None, None)
    return gone, setup, first_init[0]


def _defined_before(value: Any, outer: Any) -> bool:
    """Whether ``value`` is defined outside ``outer`` (so, before it)."""
    owner = value.defining_op
    if owner is None:
        block = getattr(value, "block", None)
        return block is not None and not (block.parent_op is outer or outer.is_ancestor_of(block.parent_op))
    return not (owner is outer or outer.is_ancestor_of(owner))


def _retiring_wait(outer: Any, inner: Any) -> Any:
    """The first wait for all dots after the K loop that takes one of its results."""
    from polytile.dialects.gpu import DotWaitOp

    results = set(inner.results)
    op = inner.next_op
    while op is not None:
        if isinstance(op, DotWaitOp) and op.pending == 0 and any(v in results for v in op.operands):
            return op
        op = op.next_op
    return None


def _has_async_dots(loop: Any) -> bool:
    from polytile.dialects import tile
    from polytile.dialects.gpu import ASYNC_DOT_ATTR

    return any(isinstance(op, tile.DotOp) and op.attributes.get(ASYNC_DOT_ATTR) for op in loop.body.block)


def _build_producer_tiles(block: Any, plan: _Plan, empty: Any, build_producer: Any) -> None:
    """The producer's tile loop: per tile, the scalars the copies need, then the K loop's
    fills, its slot and phase running on from the previous tile's."""
    outer = plan.inner.parent_op
    location = outer.location
    b = Builder.at_end(block, location)
    zero = arith.materialize_constant(b, 0, t.i32).result
    tiles = b.insert(scf.ForOp.create(outer.lower, outer.upper, outer.step, [zero, zero], location=location,
                                      iv_name="tile"))
    slot, phase = tiles.region_iter_args
    slot.name_hint, phase.name_hint = "slot", "phase"
    mapping = {outer.induction_variable: tiles.induction_variable}
    inside = Builder.at_end(tiles.body.block, location)
    for op in plan.tile_scalars:
        inside.insert(op.clone(mapping))
    fills = build_producer(tiles.body.block, plan.found, empty, location, mapping, (slot, phase))
    Builder.at_end(tiles.body.block, location).create(scf.YieldOp, list(fills.results[:2]))


def _carry_ring_position(outer: Any, inner: Any, plan: _Plan) -> Any:
    """The consumers' tile loop carrying the ring's slot and phase from one K loop to
    the next: each K loop starts where the last stopped (its write slot, the one before
    its first read, is the slot it releases first)."""
    from polytile.gpu.pipelining import add_carried

    body = outer.body.block
    location = outer.location
    slot = body.add_argument(t.i32, "ring_slot")
    phase = body.add_argument(t.i32, "ring_phase")
    stages = plan.full.type.shape[0]
    b = Builder.before(inner, location)
    zero = arith.materialize_constant(b, 0, t.i32).result
    one = arith.materialize_constant(b, 1, t.i32).result
    last = arith.materialize_constant(b, stages - 1, t.i32).result
    at_first = b.create(arith.CmpIOp, slot, zero, predicate="eq").result
    before_first = b.create(arith.SelectOp, at_first, last,
                            b.create(arith.BINARY_OPS["subi"], slot, one).result).result
    carried = list(inner.region_iter_args)
    write_index = carried.index(plan.found.write_slot)
    offset = len(inner.operands) - len(carried)
    for index, value in ((plan.read_index, slot), (write_index, before_first), (plan.phase_index, phase)):
        inner.set_operand(offset + index, value)
    terminator = body.last_op
    terminator.set_operands([*terminator.operands, inner.results[plan.read_index], inner.results[plan.phase_index]])
    init = Builder.before(outer, location)
    start = arith.materialize_constant(init, 0, t.i32).result
    return add_carried(outer, [start, start])


def _release_last_slot(inner: Any, plan: _Plan, empty: Any) -> None:
    """After the K loop, once its last dots are retired, each consumer warp releases the
    slot of its last iteration (inside the loop each iteration releases the one before
    its own); nothing where the loop ran no iteration."""
    carried = list(inner.region_iter_args)
    last_slot = inner.results[carried.index(plan.found.write_slot)]
    at = Builder.after(plan.retire if plan.retire is not None else inner, inner.location)
    ran = at.create(arith.CmpIOp, inner.lower, inner.upper, predicate="slt").result
    at.create(MBarrierArriveOp, empty, last_slot, ran)


__all__ = ["pipelined_inner_loops", "split_persistent"]
