"""``pipeline-loops``: overlap a loop's tile loads with the math that uses them.

A ``scf.for`` whose body loads tiles that feed a ``tile.dot`` (directly or through a
``gpu.convert_layout`` into a dot operand layout) is rewritten so that the loads of
iteration ``i + num_stages - 1`` are in flight while iteration ``i`` computes (Triton's
software pipelining, with ``cp.async`` on NVIDIA):

- each such load gets a *ring*: one ``gpu.local_alloc`` of ``num_stages`` slots, each a
  tile in the shared layout its dot operand is read from (``ldmatrix``);
- a prologue before the loop issues the copies of the first ``num_stages - 1``
  iterations (``gpu.async_copy``, one ``gpu.async_commit_group`` per iteration);
- the body starts with ``gpu.async_wait {pending = num_stages - 2}`` (the oldest group is
  in), issues the copies of iteration ``i + num_stages - 1`` into the slot read in the
  previous iteration, and reads its operands from slot ``i % num_stages``
  (``gpu.local_load_slot``) where the loads were;
- a dot of two slot reads becomes a chain of dots over K slices of one instruction's K
  (``gpu.local_load_slot {offsets = ...}``), so that one slice of each operand is in
  registers at a time and the next one's read overlaps this one's math;
- after the loop, ``gpu.async_wait {pending = 0}`` drains what is still in flight (the
  copies past the last iteration, predicated off, write zeros) before the ring's bytes
  are reused.

Where the target has mbarriers and the loop needs them (``completion`` option; auto: a
loop to be warp-specialised, or with bulk copies, on NVIDIA sm_90), each slot completes
on its own barrier instead: the copies of a fill arrive on it, the body waits
for the read slot's phase (carried, flipping as the slots wrap), and after the loop the
fills past the last iteration are waited for before the barriers are invalidated.  What
a load becomes is up to the :class:`~.ring_copies.RingCopies` registered for its op class
(``tile.load``: ``gpu.async_copy``), so a plugin's copy engine fills the same rings.

The address computation of a load (the ops its pointer and mask come from, and the
updates of the loop-carried values they read: ``a_ptrs += BLOCK_K * stride_ak``) runs
``num_stages - 1`` iterations ahead: the loop-carried pointers now hold the pointers of
that later iteration.  A loop is left alone where that is not possible: the carried
values are used elsewhere, the loop writes memory (a store, an atomic, a call: a copy
issued ahead would not see it), a load's ``other`` is not zero (copies fill masked-off
elements with zeros), or its vectors are narrower than the 4 bytes ``cp.async`` copies.

The target must have an async copy unit (:mod:`.lowering.async_copy`); without one, or
with ``num_stages < 2``, the pass changes nothing.  The barriers come from
``insert-barriers``, which counts a copy as a write of its ring when it is issued (against
earlier reads) and when it lands (at ``gpu.async_wait``, against later reads).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from ..analysis.axis_info import AxisInfoAnalysis
from ..dialects import arith, func, scf, tile
from ..dialects.gpu import (AsyncWaitOp, BufferType, ConvertLayoutOp, LocalAllocOp, LocalLoadSlotOp, MBarrierInitOp,
                            MBarrierInvalOp, MBarrierWaitOp)
from ..errors import ConfigError
from ..ir import types as t
from ..ir.builder import Builder
from ..ir.opdef import Pure, WritesMemory
from ..passes.pass_base import Pass, PassContext, PreservedAnalyses
from .layouts import DotOperandLayout, SwizzledSharedLayout
from .prefetch_next import prefetch_next_iteration, wants_prefetch
from ..dialects.tile_debug import AssumeOp
from ..warp_specialize import HINT as WARP_SPECIALIZE_HINT
from .ring_copies import BARRIERS, GROUPS, MIN_COPY_BYTES, feeds_dot, ring_copies_for

#: Loop hint (``pl.range(..., num_stages=n)``) that overrides the option for one loop.
NUM_STAGES_HINT = "pt.num_stages"


@dataclass
class PipelineLoops(Pass):
    """Turn the dot-feeding loads of loops into asynchronous copies into rings of shared
    memory, ``num_stages - 1`` iterations ahead (see the module docstring)."""

    name: ClassVar[str] = "pipeline-loops"
    summary: ClassVar[str] = "software pipelining: dot operand loads as async copies into a ring of shared buffers"

    #: Slots per ring; 0: the kernel's ``num_stages`` launch option.  Below 2: no pipelining.
    num_stages: int = field(default=0, metadata={"doc": "ring slots (0: the num_stages launch option)"})
    #: How a slot's copies complete: "groups" (commit groups and a counted wait),
    #: "barriers" (one mbarrier per slot), "auto" (barriers where the loop needs them and
    #: the target has them, else groups: see ``_completion``).
    completion: Literal["auto", "groups", "barriers"] = field(
        default="auto", metadata={"doc": "groups | barriers (an mbarrier per slot) | auto: barriers for a loop to be "
                                         "warp-specialised or with bulk copies, where the target has them; else "
                                         "groups"})

    def __post_init__(self) -> None:
        if self.completion not in ("auto", GROUPS, BARRIERS):
            raise ConfigError(f"pipeline-loops: completion = {self.completion!r}; use auto, groups or barriers")

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        from .lowering.mbarrier import barrier_unit
        from .lowering.target import gpu_target_of, num_warps_of

        stages = self.num_stages or int(getattr(getattr(context, "options", None), "num_stages", 1) or 1)
        target = gpu_target_of(context)
        has_barriers = barrier_unit(target) is not None
        if self.completion == BARRIERS and not has_barriers:
            raise ConfigError(f"pipeline-loops: completion = barriers, but {target.arch} has no barriers in shared "
                              "memory (mbarriers); use groups or auto")
        infos = context.analyses.get(AxisInfoAnalysis, module)
        num_warps = num_warps_of(context)
        changed = False
        for loop in [op for op in module.walk() if isinstance(op, scf.ForOp)]:
            loop_stages = int(loop.attributes.get(NUM_STAGES_HINT) or stages)
            if loop_stages < 2:
                continue
            loads = [op for op in loop.body.block if _pipelinable(op, infos, target)]
            completion = self._completion(loop, loads, has_barriers)
            loads = [op for op in loads if completion in ring_copies_for(op).completions]
            plan = _plan(loop, loads) if loads else None
            if plan is not None:
                loop, setup, drain = _pipeline(loop, plan, loop_stages, lambda dot: _k_slice(dot, target, num_warps),
                                               completion, num_warps * target.warp_size)
                context.count("pipeline-loops.loops")
                changed = True
                outer = wants_prefetch(loop)
                if outer is not None and prefetch_next_iteration(outer, loop, setup, drain):
                    context.count("pipeline-loops.prefetched-across")
        return PreservedAnalyses.none() if changed else PreservedAnalyses.all()

    def _completion(self, loop: Any, loads: list, has_barriers: bool) -> str:
        """The completion of one loop's rings: the option, or for "auto" commit groups
        where every load can complete that way and the loop is not to be warp-specialised
        (the fewest instructions a copy's wait costs: ``cp.async.wait_group`` and the
        barrier before the read, Triton's choice on Hopper; measured 1.02x Triton's 4-warp
        matmul against 0.96x with a barrier per slot, bench/RESULTS.md), else barriers
        where the target has them (bulk copies complete only on barriers; a warp-specialised
        loop's producer signals its consumers through them), else groups (loads that
        cannot complete that way stay)."""
        if self.completion != "auto":
            return self.completion
        if not has_barriers:
            return GROUPS
        if loop.attributes.get(WARP_SPECIALIZE_HINT) or any(GROUPS not in ring_copies_for(op).completions
                                                            for op in loads):
            return BARRIERS
        return GROUPS


# --------------------------------------------------------------------------------------
# Which loads, and what their addresses depend on


def _pipelinable(op: Any, infos: Any, target: Any) -> bool:
    copies = ring_copies_for(op)
    if copies is None or not op.results:
        return False
    if not feeds_dot(op.results[0]) and not (copies.transposable and transposed_operand(op) is not None):
        return False
    return copies.accepts(op, infos, target)


def transposed_operand(load: Any) -> Any:
    """The ``tile.trans`` of ``load``'s 2-D tile that is a dot's operand (``b.T``), where
    that transpose is the load's only use; else None.  A ring of copies that can fill a
    slot read transposed (:attr:`~.ring_copies.RingCopies.transposable`) then holds the
    transposed view, which the dot reads in place."""
    uses = list(load.results[0].uses)
    if len(uses) != 1 or not isinstance(uses[0].owner, tile.TransOp):
        return None
    trans = uses[0].owner
    if tuple(trans.order) != (1, 0) or not feeds_dot(trans.result):
        return None
    return trans


def transposed_slot_layout(slot: SwizzledSharedLayout, order: tuple) -> SwizzledSharedLayout:
    """``slot`` (a 2-D slot's layout) seen through ``tile.trans {order}``: the same bytes."""
    permuted = tuple(order.index(d) for d in slot.order)
    return SwizzledSharedLayout(slot.vector, slot.per_phase, slot.max_phase, permuted, slot.block)


@dataclass
class _Plan:
    loads: list
    #: Ops of the body the loads' pointers and masks and the carried values' updates come
    #: from, in body order.
    address_ops: list
    #: Positions of the loop-carried values (after the induction variable) they read.
    carried: list


#: Ops that may write memory a load of a later iteration reads: copies issued ahead would
#: see the bytes before the write (and any op with the WritesMemory trait: a plugin's).
_WRITES_MEMORY = (tile.StoreOp, tile.AtomicRMWOp, tile.AtomicCASOp, func.CallOp)


def writes_memory(op: Any) -> bool:
    """Whether ``op`` or an op in its regions may write global memory (a store, an
    atomic, a call, a plugin's op with the WritesMemory trait)."""
    return any(isinstance(inner, _WRITES_MEMORY) or inner.has_trait(WritesMemory) for inner in op.walk())


def _plan(loop: Any, loads: list) -> _Plan | None:
    body = loop.body.block
    if writes_memory(loop):
        return None
    iv, carried_args = loop.induction_variable, list(loop.region_iter_args)
    yielded = body.last_op.operands
    ops: set = set()
    carried: set = set()
    work = [v for load in loads for v in ring_copies_for(load).addresses(load)]
    while work:
        value = work.pop()
        if value is iv:
            continue
        if value in carried_args:
            index = carried_args.index(value)
            if index not in carried:
                carried.add(index)
                work.append(yielded[index])
            continue
        op = value.defining_op
        if op is None or op.parent is not body or op in ops:
            continue  # defined outside the loop (or seen)
        if not op.has_trait(Pure) or op.regions:
            return None
        ops.add(op)
        work.extend(op.operands)
    # The carried values now run ahead: nothing else may see them, but for a promise
    # (pl.assume) about them, a hint that would then speak of a later iteration: those are
    # dropped with the loop pipelined rather than the loop kept for them.
    allowed = ops | set(loads)
    hints: list = []

    def only_promised(op: Any) -> bool:
        """``op`` is a promise, or pure and read only by promises (``kb < K`` of
        ``pl.assume(kb < K)``)."""
        if op.parent is not body:
            return False
        if isinstance(op, AssumeOp):
            return True
        return (op.has_trait(Pure) and not op.regions and op.results
                and all(only_promised(use.owner) for result in op.results for use in result.uses))

    def other_use(owner: Any) -> bool:
        if owner not in allowed and only_promised(owner):
            hints.append(owner)
            return False
        return owner not in allowed

    for index in carried:
        if loop.results[index].has_uses:
            return None
        for use in carried_args[index].uses:
            if other_use(use.owner):
                return None
    for op in ops:
        for result in op.results:
            for use in result.uses:
                if use.owner is body.last_op:
                    if use.index not in carried:
                        return None  # a value of the address computation is yielded for other use
                elif other_use(use.owner):
                    return None
    doomed: dict = {}
    work = list(hints)
    while work:  # the promises and the pure ops only they read, users first
        op = work.pop()
        if op in doomed:
            continue
        doomed[op] = None
        work.extend(use.owner for result in op.results for use in result.uses)
    for op in sorted(doomed, key=lambda o: -list(body).index(o)):
        op.erase()
    order = [op for op in body if op in ops]
    return _Plan(loads, order, sorted(carried))


def ring_slot_layout(tile_type: Any) -> SwizzledSharedLayout:
    """The shared layout of one slot: the layout a dot operand is read from (ldmatrix)."""
    from .lowering.dot_operands import operand_shared_layout

    return operand_shared_layout(tile_type.layout, tuple(tile_type.shape), t.element_type(tile_type).width)


def ring_type(tile_type: Any, stages: int, slot: SwizzledSharedLayout | None = None) -> BufferType:
    """``stages`` slots of ``tile_type`` one after another (the slot the slowest
    dimension), each in ``slot`` (default: :func:`ring_slot_layout`)."""
    slot = slot or ring_slot_layout(tile_type)
    order = tuple(d + 1 for d in slot.order) + (0,)
    layout = SwizzledSharedLayout(slot.vector, slot.per_phase, slot.max_phase, order, slot.block)
    return BufferType((stages, *tile_type.shape), t.element_type(tile_type), layout)


# --------------------------------------------------------------------------------------
# The rewrite


def _constant(builder: Builder, value: int, type_: t.Type) -> Any:
    return arith.materialize_constant(builder, value, type_).result


def _binary(builder: Builder, name: str, lhs: Any, rhs: Any) -> Any:
    return builder.create(arith.BINARY_OPS[name], lhs, rhs).result


def _issue(builder: Builder, plan: _Plan, rings: list, mapping: dict, slot: Any, valid: Any,
           barriers: Any) -> None:
    """The copies of one iteration (its address values in ``mapping``), then their
    commit (``barriers`` None) or their arrivals on barrier ``slot``."""
    lookup = lambda value: mapping.get(value, value)  # noqa: E731
    kinds: list = []  # (copies, its loads)
    for load, ring in zip(plan.loads, rings):
        copies = ring_copies_for(load)
        copies.issue(builder, load, lookup, ring, slot, valid, barriers)
        kind = next((k for k in kinds if k[0] is copies), None)
        if kind is None:
            kinds.append((copies, [load]))
        else:
            kind[1].append(load)
    for copies, loads in kinds:
        if barriers is None:
            copies.commit(builder)
        else:
            copies.signal(builder, barriers, slot, valid, loads)


def _barriers(builder: Builder, plan: _Plan, stages: int, num_threads: int) -> Any:
    """One mbarrier per slot, each expecting the arrivals of one fill."""
    layout = SwizzledSharedLayout(1, 1, 1, (0,))
    barriers = builder.create(LocalAllocOp, result_types=[BufferType((stages,), t.i64, layout)]).result
    kinds: list = []
    for load in plan.loads:
        copies = ring_copies_for(load)
        if not any(copies is k for k in kinds):
            kinds.append(copies)
    count = sum(copies.arrivals(num_threads) for copies in kinds)
    builder.create(MBarrierInitOp, barriers, count=count)
    for copies in kinds:
        copies.prepare(builder, barriers)
    return barriers


def _pipeline(loop: Any, plan: _Plan, stages: int, k_slice: Any, completion: str = GROUPS,
              num_threads: int = 0) -> tuple[Any, list, list]:
    """Pipeline ``loop``; returns the new loop, the ops put before it (the rings, the
    barriers and the prologue, in order) and those put after it (the drain)."""
    block = loop.parent
    existing = set(block)
    loop = _rewrite(loop, plan, stages, k_slice, completion, num_threads)
    ops = list(block)
    at = ops.index(loop)
    return loop, [op for op in ops[:at] if op not in existing], [op for op in ops[at + 1:] if op not in existing]


def _rewrite(loop: Any, plan: _Plan, stages: int, k_slice: Any, completion: str, num_threads: int) -> Any:
    body = loop.body.block
    iv = loop.induction_variable
    index_type = iv.type
    before = Builder.before(loop, loop.location)
    rings = [before.create(LocalAllocOp, result_types=[_ring_type_of(load, stages)]).result for load in plan.loads]
    barriers = _barriers(before, plan, stages, num_threads) if completion == BARRIERS else None

    # Prologue: iterations 0 .. stages-2, advancing the carried address values.
    carried_args = list(loop.region_iter_args)
    yielded = body.last_op.operands
    current = {i: loop.init_args[i] for i in plan.carried}
    for s in range(stages - 1):
        step_s = _binary(before, "muli", loop.step, _constant(before, s, index_type))
        iv_s = _binary(before, "addi", loop.lower, step_s)
        valid = before.create(arith.CmpIOp, iv_s, loop.upper, predicate="slt").result
        mapping = {iv: iv_s, **{carried_args[i]: v for i, v in current.items()}}
        for op in plan.address_ops:
            before.insert(op.clone(mapping))
        _issue(before, plan, rings, mapping, _constant(before, s, t.i32), valid, barriers)
        current = {i: mapping.get(yielded[i], yielded[i]) for i in plan.carried}
    for i, value in current.items():
        loop.set_operand(3 + i, value)

    # The body: wait for the oldest fill, issue the newest, read the slots.
    read_slot = body.add_argument(t.i32, "read_slot")
    write_slot = body.add_argument(t.i32, "write_slot")
    phase = body.add_argument(t.i32, "phase") if barriers is not None else None
    moved = set(plan.address_ops)
    anchor = next(op for op in body if op not in moved)
    top = Builder.before(body.ops[0], loop.location)
    if barriers is None:
        top.create(AsyncWaitOp, pending=stages - 2)
    else:
        top.create(MBarrierWaitOp, barriers, read_slot, phase)
    distance = _binary(before, "muli", loop.step, _constant(before, stages - 1, index_type))
    ahead = _binary(top, "addi", iv, distance)
    valid = top.create(arith.CmpIOp, ahead, loop.upper, predicate="slt").result
    for op in plan.address_ops:
        op.move_before(anchor)
        for index, operand in enumerate(op.operands):
            if operand is iv:
                op.set_operand(index, ahead)
    top = Builder.before(anchor, loop.location)
    # A load addressed by the induction variable itself (``desc.load([m, k])`` in
    # ``for k in range(0, K, BK)``) copies the iteration ahead too.
    _issue(top, plan, rings, {iv: ahead}, write_slot, valid, barriers)
    for load, ring in zip(plan.loads, rings):
        trans = transposed_operand(load) if not feeds_dot(load.results[0]) else None
        if trans is not None:  # the ring holds the transposed view: read it for the transpose
            read_slot_instead(trans, ring, read_slot)
            load.erase()
        else:
            read_slot_instead(load, ring, read_slot)
    for dot in [op for op in body if isinstance(op, tile.DotOp)]:
        _slice_along_k(dot, k_slice(dot))

    terminator = body.last_op
    at_end = Builder.before(terminator, loop.location)
    one, zero, count = (_constant(before, value, t.i32) for value in (1, 0, stages))
    next_read = _next_slot(at_end, read_slot, one, zero, count)
    yields = list(terminator.operands) + [next_read, _next_slot(at_end, write_slot, one, zero, count)]
    inits = [zero, _constant(before, stages - 1, t.i32)]
    if barriers is not None:
        yields.append(_next_phase(at_end, phase, next_read, one, zero))
        inits.append(zero)
    terminator.set_operands(yields)
    loop = add_carried(loop, inits)
    after = Builder.after(loop, loop.location)
    if barriers is None:
        after.create(AsyncWaitOp, pending=0)
        return loop
    # The fills of the iterations past the last (predicated off, they read nothing) are
    # still in flight: wait for them before the barriers end and the slots are reused.
    slot, slot_phase = loop.results[-3], loop.results[-1]
    for left in range(stages - 2, -1, -1):
        after.create(MBarrierWaitOp, barriers, slot, slot_phase)
        if left:
            slot = _next_slot(after, slot, one, zero, count)
            slot_phase = _next_phase(after, slot_phase, slot, one, zero)
    after.create(MBarrierInvalOp, barriers)
    return loop


def _ring_type_of(load: Any, stages: int) -> BufferType:
    """The ring of ``load``: slots of its tile in the layout its copies write, or of the
    transposed tile where the dot reads the load transposed (the same bytes)."""
    slot = ring_copies_for(load).slot_layout(load)
    trans = transposed_operand(load) if not feeds_dot(load.results[0]) else None
    if trans is None:
        return ring_type(load.results[0].type, stages, slot)
    return ring_type(trans.result.type, stages, transposed_slot_layout(slot, tuple(trans.order)))


def _next_phase(builder: Builder, phase: Any, next_slot: Any, one: Any, zero: Any) -> Any:
    """The phase of the barrier of ``next_slot``: it flips where the slots wrap around."""
    wrapped = builder.create(arith.CmpIOp, next_slot, zero, predicate="eq").result
    return builder.create(arith.SelectOp, wrapped, _binary(builder, "xori", phase, one), phase).result


def read_slot_instead(load: Any, ring: Any, slot: Any) -> None:
    """Read ``load``'s value (a load's, or a transpose's of one in a ring read transposed)
    from ``slot`` of ``ring`` instead: dot operands straight into their layout, other
    uses in the op's own layout; ``load`` is erased."""
    at = Builder.before(load, load.location)
    for use in list(load.result.uses):
        user = use.owner
        if isinstance(user, ConvertLayoutOp) and isinstance(user.result.type.layout, DotOperandLayout):
            read = Builder.before(user, user.location).create(LocalLoadSlotOp, ring, slot,
                                                              result_types=[user.result.type])
            user.result.replace_all_uses_with(read.result)
            user.erase()
    if load.result.has_uses:
        read = at.create(LocalLoadSlotOp, ring, slot, result_types=[load.result.type])
        load.result.replace_all_uses_with(read.result)
    load.erase()


def _k_slice(dot: Any, target: Any, num_warps: int) -> int:
    """K of one matrix instruction of ``dot`` (0: it has none)."""
    from .lowering.dot import select_instruction

    instruction = select_instruction(dot, target, num_warps)
    return instruction.k if instruction is not None else 0


def _slice_along_k(dot: Any, k: int) -> None:
    """A dot of two slot reads as a chain of dots over K slices of ``k``, each reading
    its slices of the slots: the operands of one slice are in registers at a time
    (instead of the whole of both), and reading the next slice overlaps the math of this
    one (Triton's prefetch).  The sums run in the same order."""
    a, b = dot.a.defining_op, dot.b.defining_op
    if not (isinstance(a, LocalLoadSlotOp) and isinstance(b, LocalLoadSlotOp)) or a.offsets is not None \
            or b.offsets is not None or len(a.result.uses) != 1 or len(b.result.uses) != 1:
        return
    (m, depth), n = a.result.type.shape, b.result.type.shape[1]
    if not k or depth <= k or depth % k:
        return
    at = Builder.before(dot, dot.location)
    acc = dot.acc
    for k0 in range(0, depth, k):
        a_type = t.TileType((m, k), a.result.type.element, a.result.type.layout)
        b_type = t.TileType((k, n), b.result.type.element, b.result.type.layout)
        a_part = at.create(LocalLoadSlotOp, a.ring, a.slot, offsets=(0, k0), result_types=[a_type]).result
        b_part = at.create(LocalLoadSlotOp, b.ring, b.slot, offsets=(k0, 0), result_types=[b_type]).result
        acc = at.insert(dot.clone({dot.a: a_part, dot.b: b_part, dot.acc: acc})).result
    dot.result.replace_all_uses_with(acc)
    dot.erase()
    a.erase()
    b.erase()


def _next_slot(builder: Builder, slot: Any, one: Any, zero: Any, count: Any) -> Any:
    """``(slot + 1) % count`` without a division."""
    bumped = _binary(builder, "addi", slot, one)
    wraps = builder.create(arith.CmpIOp, bumped, count, predicate="eq").result
    return builder.create(arith.SelectOp, wraps, zero, bumped).result


def add_carried(loop: Any, inits: list) -> Any:
    """Rebuild ``loop`` with ``inits`` as extra carried values (the body has already got
    their block arguments and yields); the old results keep their uses.  Returns the new
    loop (its last results are the new values')."""
    segments = loop.operand_segments
    if segments is not None:
        segments = (*segments[:-1], segments[-1] + len(inits))
    new = scf.ForOp([*loop.operands, *inits], [*(r.type for r in loop.results), *(v.type for v in inits)],
                    dict(loop.attributes), [], loop.location, segments)
    new.regions = (loop.body,)
    loop.body.parent = new
    loop.regions = ()
    loop.parent.insert_before(new, loop)
    for old, fresh in zip(loop.results, new.results):
        old.replace_all_uses_with(fresh)
    loop.erase()
    return new


__all__ = ["MIN_COPY_BYTES", "NUM_STAGES_HINT", "PipelineLoops", "add_carried", "read_slot_instead", "ring_slot_layout", "ring_type",
           "transposed_operand", "transposed_slot_layout", "writes_memory"]
