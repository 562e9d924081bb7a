"""``warp-specialize``: split a pipelined loop into a producer warp group and the consumers.

``pipeline-loops`` (and ``async-dots``) leave a loop with ``pl.range(...,
warp_specialize=True)`` in this shape, on a target with mbarriers::

    ring = gpu.local_alloc; full = gpu.local_alloc; gpu.mbarrier_init full
    <fills of iterations 0 .. S-2>                      (the prologue)
    scf.for %k ... (%acc, %read_slot, %write_slot, %phase) {
      gpu.mbarrier_wait full, %read_slot, %phase        (this iteration's slot is in)
      ... reads of slot %read_slot, the dots, gpu.dot_wait ...
      <fill of iteration k + S-1 into slot %write_slot>  (the slot the last iteration read)
      ...
    }
    gpu.mbarrier_wait full, ...                          (the fills past the last iteration)
    gpu.mbarrier_inval full

where a *fill* is the ops with the ``IssuesIntoRing`` trait and the arithmetic they need.
This pass rewrites it into a ``ws.warp_specialize`` op (the kernel's ``gpu.worker_warps``
more warps run its producer region):

- the **producer** runs the same iteration space and issues every fill itself, fill
  ``i`` into slot ``i % S`` after waiting on ``empty[i % S]`` for the consumers to have
  released the slot's previous tile (a fresh barrier counts as released: the wait is for
  the phase of the other parity);
- the **consumers** (the kernel's own warps) run the loop without its fills; where the
  fill was, each warp arrives on ``empty[%write_slot]`` (the slot the previous
  iteration's dots read, which the wait before it retired), from the second iteration
  on; the prologue fills and the drain's waits go (the producer issues exactly the fills
  the loop reads), and what follows the loop is the consumers' alone.

Only fills of scalars are moved (one thread issues them: polytile-tma's bulk tensor
copies), and only from a loop at the kernel's top level.  Everything else the pass
leaves alone, saying why in the compile metadata (``warp_specialize``: one entry per
hinted loop, see :mod:`.report`).  Every choice depends on the IR alone (program order),
so the same kernel gives the same code in every process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from polytile.dialects import arith, scf
from polytile.dialects.gpu import (IssuesIntoRing, LocalAllocOp, MBarrierArriveOp, MBarrierInitOp, MBarrierInvalOp,
                                   MBarrierWaitOp)
from polytile.errors import ConfigError
from polytile.ir import types as t
from polytile.ir.builder import Builder
from polytile.ir.opdef import Pure
from polytile.passes.pass_base import Pass, PassContext, PreservedAnalyses
from polytile.passes.rewrite import constant_value
from polytile.warp_specialize import HINT

from .registers import RegisterPlan, plan_registers
from .report import record_outcome

#: Warps of the producer: one warp group (setmaxnreg moves a whole warp group's registers).
PRODUCER_WARPS = 4
#: Warps of a warp group (the consumers' are counted in them for ping-pong).
WARP_GROUP = 4


@dataclass
class WarpSpecializeLoops(Pass):
    """Split each kernel's first pipelined loop with the ``warp_specialize`` hint into a
    producer warp group and the consumer warps (see the module docstring)."""

    name: ClassVar[str] = "warp-specialize"
    summary: ClassVar[str] = "warp specialization: a producer warp group issues a loop's ring copies"

    #: Registers per thread the producer keeps; 0: the setting ``warpspec_producer_registers``.
    producer_registers: int = field(default=0, metadata={"doc": "registers per producer thread (0: the setting)"})
    #: Registers per thread the consumers get; 0: the setting ``warpspec_consumer_registers``
    #: (0 there too: as many as the register file leaves).
    consumer_registers: int = field(default=0, metadata={"doc": "registers per consumer thread (0: the setting, "
                                                                "then what the register file leaves)"})
    #: Whether two or more consumer warp groups take turns issuing their dots (ping-pong)
    #: in a loop with work between its dots (attention's softmax); see :func:`_take_turns`.
    #: Off by default: on an H100 (2026-11-28) attention with d = 128 measured 444 TFLOP/s
    #: with it against 449 without (causal 364 against 376): each group's dots wait for
    #: its own softmax, so taking turns only lines the groups up.
    #: "setting": the setting ``warpspec_pingpong``.
    pingpong: Literal["setting", "on", "off"] = field(default="setting", metadata={
        "doc": "on | off: consumer warp groups take turns issuing dots where the loop has work between them; "
               "setting: the setting warpspec_pingpong"})
    #: Whether the consumers keep a dot that reads A from registers in flight into the
    #: next iteration (see :func:`_release_instead_of_fills`).
    registers_a_in_flight: bool = field(default=False, metadata={"doc": "keep dots with A in registers in flight "
                                                                         "across iterations"})

    def __post_init__(self) -> None:
        for name in ("producer_registers", "consumer_registers"):
            value = getattr(self, name)
            if value and (not 24 <= value <= 256 or value % 8):
                raise ConfigError(f"warp-specialize: {name} = {value}; registers per thread of a warp group are a "
                                  "multiple of 8 from 24 to 256 (0: the setting)")

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        from polytile import config
        from polytile.gpu.lowering.target import gpu_target_of, num_warps_of

        from .report import unsupported_reason

        target = gpu_target_of(context)
        num_warps = num_warps_of(context)
        missing = unsupported_reason(target)
        pingpong = self.pingpong == "on" or (self.pingpong == "setting" and bool(config.get("warpspec_pingpong")))
        changed = False
        seen: dict = {}
        for function in [op for op in module.walk() if op.name == "func.func" and op.attributes.get("kernel")]:
            split = False
            for loop in [op for op in function.walk() if isinstance(op, scf.ForOp) and op.attributes.get(HINT)]:
                if missing is not None:
                    why = missing
                elif split:
                    why = "another loop of this kernel is split already: one loop per kernel is specialised"
                else:
                    plan = plan_registers(target, num_warps, PRODUCER_WARPS, self.producer_registers,
                                          self.consumer_registers, getattr(context.options, "maxnreg", None))
                    why = plan if isinstance(plan, str) else split_loop(function, loop, num_warps, plan,
                                                                        self.registers_a_in_flight, pingpong)
                record_outcome(context.artifacts, loop, why, seen)
                if why is None:
                    split = changed = True
                    context.count("warp-specialize.loops")
        return PreservedAnalyses.none() if changed else PreservedAnalyses.all()


# --------------------------------------------------------------------------------------
# What the loop must look like


@dataclass
class _Loop:
    """A loop this pass can split, and the pieces it moves."""

    loop: Any
    full: Any                 # the ring's full barriers
    fills: list               # the body's ops with IssuesIntoRing, in order
    slice: list               # the body's ops the fills need, in order
    write_slot: Any           # the carried slot the fills write


def _examine(function: Any, loop: Any) -> "_Loop | str":
    """The pieces of ``loop``, or why it cannot be split (the IR is unchanged)."""
    if loop.parent_op is not function:
        return "the loop is inside another loop or a branch; only a loop at the kernel's top level is split"
    body = loop.body.block
    wait = body.first_op
    fills = [op for op in body if op.has_trait(IssuesIntoRing)]
    if not isinstance(wait, MBarrierWaitOp) or not fills:
        return ("the loop was not pipelined into rings completed by mbarriers (num_stages < 2, or none of its loads "
                "feeds a dot through a copy the pipeline can make)")
    full = wait.barriers
    for op in fills:
        if any(isinstance(v.type, t.TileType) for v in op.operands):
            return ("its loads are per-thread cp.async copies of pointer tiles; the producer issues bulk copies "
                    "(polytile-tma's tensor descriptors: desc.load) only, for now")
        if getattr(op, "barriers", full) is not full:
            return "its copies complete on barriers of another ring"
    carried = list(loop.region_iter_args)
    needed, slice_ops, used = _slice(body, fills)
    if any(not op.has_trait(Pure) for op in slice_ops):
        names = sorted({op.name for op in slice_ops if not op.has_trait(Pure)})
        return f"the copies' addresses need {', '.join(names)}, which the producer cannot run on its own"
    slots = [v for v in carried if v in used]
    if len(slots) != 1:
        return ("the copies' addresses depend on values the loop carries (besides its index); the producer computes "
                "them from the index alone")
    write_slot = slots[0]
    stages = full.type.shape[0]
    init = loop.init_args[carried.index(write_slot)]
    if constant_value(init) != stages - 1:
        return "the loop's ring is not filled the number of slots minus one iterations ahead"
    return _Loop(loop, full, fills, slice_ops, write_slot)


def _slice(body: Any, fills: list) -> tuple[set, list, set]:
    """The values the fills need from the body: (ops' results, the ops in body order,
    the block arguments read)."""
    needed_ops: set = set()
    arguments: set = set()
    stack = [v for op in fills for v in op.operands]
    while stack:
        value = stack.pop()
        owner = value.defining_op
        if owner is None:
            if getattr(value, "owner_block", None) is body or value in body.arguments:
                arguments.add(value)
            continue
        if owner.parent is not body or owner in needed_ops or owner in fills:
            continue
        needed_ops.add(owner)
        stack.extend(owner.operands)
    ordered = [op for op in body if op in needed_ops]
    return needed_ops, ordered, arguments


# --------------------------------------------------------------------------------------
# The rewrite


def split_loop(function: Any, loop: Any, num_warps: int, registers: RegisterPlan,
               registers_a_in_flight: bool = False, pingpong: bool = True) -> str | None:
    """Split ``loop`` (see the module docstring); None when done, else why not (then the
    IR is unchanged)."""
    from polytile.gpu.lowering.target import WORKER_WARPS_ATTR

    from .ops import WarpSpecializeOp, YieldOp

    found = _examine(function, loop)
    if isinstance(found, str):
        return found
    block = loop.parent
    prefix = _prefix(block, loop)
    full = found.full
    init = next((op for op in prefix if isinstance(op, MBarrierInitOp) and op.barriers is full), None)
    if not isinstance(full.defining_op, LocalAllocOp) or init is None:
        return "the ring's barriers are not made next to the loop"
    moved = _moved_to_consumers(prefix, found, _ring_setup(prefix, init, full))
    if isinstance(moved, str):
        return moved

    # The empty barriers: every consumer warp releases a slot once per use.
    at = Builder.after(init, init.location)
    empty = at.insert(full.defining_op.clone()).result
    empty.name_hint = "empty"
    at.create(MBarrierInitOp, empty, count=num_warps)

    # What the consumers hand on: the loop's results, and what the moved ops make that the
    # code after the loop reads (a tile staged in shared memory before it, say).
    consumers_own = [*moved, loop]

    def outside(user: Any) -> bool:
        return not any(user is op or op.is_ancestor_of(user) for op in consumers_own)

    escaping = [r for op in moved for r in op.results if any(outside(use.owner) for use in r.uses)]
    handed_on = [*loop.results, *escaping]
    ws = WarpSpecializeOp.create([r.type for r in handed_on], producer_warps=registers.producer_warps,
                                 producer_registers=registers.producer, consumer_registers=registers.consumer,
                                 kernel_registers=registers.kernel, location=loop.location)
    block.insert_before(ws, loop)
    for old, new in zip(handed_on, ws.results):
        old.replace_uses_if(new, lambda use: outside(use.owner) and use.owner is not ws)

    _build_producer(ws.producer.block, found, empty, loop.location)
    Builder.at_end(ws.producer.block, loop.location).create(YieldOp)

    consumer = ws.consumer.block
    for op in moved:
        op.detach()
        consumer.append(op)
    _release_instead_of_fills(found, empty, registers_a_in_flight)
    loop.detach()
    consumer.append(loop)
    if pingpong and num_warps // WARP_GROUP >= 2:
        _take_turns(loop)
    Builder.at_end(consumer, loop.location).create(YieldOp, handed_on)

    # The producer issues every fill the loop reads and no other: the prologue's fills
    # and the drain's waits for the fills past the end go.
    for op in reversed(prefix):
        if op.has_trait(IssuesIntoRing) and getattr(op, "barriers", None) is full:
            op.erase()
    after = ws.next_op
    inval = None
    while after is not None:
        following = after.next_op
        if isinstance(after, MBarrierWaitOp) and after.barriers is full:
            after.erase()
        elif isinstance(after, MBarrierInvalOp) and after.barriers is full:
            inval = after
        after = following
    ending = Builder.after(inval, inval.location) if inval is not None else Builder.after(ws, loop.location)
    ending.create(MBarrierInvalOp, empty)
    function.set_attr(WORKER_WARPS_ATTR, registers.producer_warps)
    return None


def _prefix(block: Any, loop: Any) -> list:
    ops = []
    for op in block:
        if op is loop:
            break
        ops.append(op)
    return ops


def _touches_tiles(op: Any) -> bool:
    return any(isinstance(v.type, t.TileType) for inner in op.walk() for v in (*inner.operands, *inner.results))


def _ring_setup(prefix: list, init: Any, full: Any) -> set:
    """The ops that set the ring up for its copies: from the initialization of its
    barriers to its first fill (the copy engine's fence of the initialization among
    them).  Both groups rely on them: they stay before the split."""
    start = prefix.index(init)
    end = next((i for i in range(start, len(prefix)) if prefix[i].has_trait(IssuesIntoRing)
                and getattr(prefix[i], "barriers", None) is full), len(prefix))
    return set(prefix[start:end])


def _moved_to_consumers(prefix: list, found: _Loop, ring_setup: set) -> "list | str":
    """The ops before the loop that work on tiles (made for the consumers' warps, which
    the producer's are not): they move into the consumer region, in order, and so does
    every later op with an effect (a proxy fence after a store to shared memory must stay
    after it).  The producer needs none of them, and none may write global memory (the
    producer's copies would overtake the write)."""
    from polytile.gpu.pipelining import writes_memory

    producer_needs: set = set()
    stack = [v for op in (*found.fills, *found.slice) for v in op.operands]
    while stack:
        value = stack.pop()
        owner = value.defining_op
        if owner is None or owner in producer_needs or owner.parent is not found.loop.parent:
            continue
        producer_needs.add(owner)
        stack.extend(owner.operands)
    moved: list = []
    effects = False
    for op in prefix:
        if op.has_trait(IssuesIntoRing) or op in ring_setup:
            continue
        if not _touches_tiles(op) and not (effects and not op.has_trait(Pure) and op not in producer_needs):
            continue
        if op in producer_needs:
            return f"the copies' addresses come from tiles ('{op.name}'); the producer computes them from scalars"
        if writes_memory(op):
            return (f"the kernel writes memory before the loop ('{op.name}'); the producer's copies could overtake "
                    "that write")
        moved.append(op)
        effects = effects or not op.has_trait(Pure)
    return moved


def _build_producer(block: Any, found: _Loop, empty: Any, location: Any) -> None:
    """The producer's loop: for each iteration of ``found.loop``, wait until its slot is
    free, then issue its fill (the body's fill, as issued S - 1 iterations earlier)."""
    loop = found.loop
    b = Builder.at_end(block, location)
    i32 = t.i32
    zero = arith.materialize_constant(b, 0, i32).result
    one = arith.materialize_constant(b, 1, i32).result
    stages = arith.materialize_constant(b, found.full.type.shape[0], i32).result
    iv_type = loop.induction_variable.type
    ahead_count = arith.materialize_constant(b, found.full.type.shape[0] - 1, iv_type).result
    ahead = b.create(arith.BINARY_OPS["muli"], loop.step, ahead_count).result
    producer = b.insert(scf.ForOp.create(loop.lower, loop.upper, loop.step, [zero, zero], location=location,
                                         iv_name="fill"))
    i = producer.induction_variable
    slot, phase = producer.region_iter_args
    slot.name_hint, phase.name_hint = "slot", "phase"
    inner = Builder.at_end(producer.body.block, location)
    free_phase = inner.create(arith.BINARY_OPS["xori"], phase, one).result
    inner.create(MBarrierWaitOp, empty, slot, free_phase)
    # The body issues iteration k + (S - 1)'s fill: iteration i's is the body's at i - (S - 1).
    k = inner.create(arith.BINARY_OPS["subi"], i, ahead).result
    mapping = {loop.induction_variable: k, found.write_slot: slot}
    fills = set(found.fills)
    for op in loop.body.block:
        if op in fills or op in found.slice:
            inner.insert(op.clone(mapping))
    bumped = inner.create(arith.BINARY_OPS["addi"], slot, one).result
    wraps = inner.create(arith.CmpIOp, bumped, stages, predicate="eq").result
    next_slot = inner.create(arith.SelectOp, wraps, zero, bumped).result
    flipped = inner.create(arith.BINARY_OPS["xori"], phase, one).result
    next_phase = inner.create(arith.SelectOp, wraps, flipped, phase).result
    inner.create(scf.YieldOp, [next_slot, next_phase])


def _release_instead_of_fills(found: _Loop, empty: Any, registers_a_in_flight: bool) -> None:
    """Release each slot to the producer where the consumers are done with it.

    Dots that read A from registers (attention's ``p @ v``) are retired in their own
    iteration unless ``registers_a_in_flight``: left in flight across the back edge, ptxas
    may give their A registers to the next iteration's dot and then serialize every
    wgmma of the kernel (C7514); measured on an H100, the in-iteration wait is faster in
    the specialised loop.  Where then nothing is in flight at the end of an iteration,
    each warp releases the iteration's own slot there, one iteration earlier; otherwise
    it releases the previous iteration's slot where the body issued its fill (the wait
    before it retired that iteration's dots), from the second iteration on."""
    loop = found.loop
    body = loop.body.block
    if not registers_a_in_flight:
        _retire_register_dots(body)
    wait = body.first_op
    if _nothing_in_flight_at_end(body):
        at = Builder.before(body.last_op, loop.location)
        always = arith.materialize_constant(at, True, t.i1).result
        at.create(MBarrierArriveOp, empty, wait.index, always)
    else:
        first = found.fills[0]
        at = Builder.before(first, first.location)
        later = at.create(arith.CmpIOp, loop.induction_variable, loop.lower, predicate="ne").result
        at.create(MBarrierArriveOp, empty, found.write_slot, later)
    for op in reversed(found.fills):
        op.erase()


def _take_turns(loop: Any) -> None:
    """Where the body has work between its dots (two dots or more, and an op with an
    effect between them: attention's softmax waits for the first), the consumer warp
    groups take turns issuing each run of dots (``ws.turn``): one group's dots run on
    the tensor cores while the others compute, instead of all issuing at once and then
    all computing (FlashAttention-3's ping-pong)."""
    from polytile.dialects import tile
    from polytile.dialects.gpu import ASYNC_DOT_ATTR

    from .ops import TurnOp

    body = loop.body.block
    ops = list(body)
    dots = [i for i, op in enumerate(ops) if isinstance(op, tile.DotOp) and op.attributes.get(ASYNC_DOT_ATTR)]
    if len(dots) < 2:
        return
    runs: list = [[dots[0]]]
    for i in dots[1:]:
        between = ops[runs[-1][-1] + 1:i]
        if all(op.has_trait(Pure) or op.name.startswith("gpu.local_load") for op in between):
            runs[-1].append(i)
        else:
            runs.append([i])
    if len(runs) < 2:
        return
    for run in runs:
        first, last = ops[run[0]], ops[run[-1]]
        Builder.before(first, first.location).create(TurnOp, step="wait")
        Builder.after(last, last.location).create(TurnOp, step="pass")
    Builder.before(loop, loop.location).create(TurnOp, step="start")
    Builder.after(loop, loop.location).create(TurnOp, step="end")


def _dot_buffers(dot: Any) -> list:
    """The shared buffers ``dot`` reads in place (ring slots, stored operands)."""
    from polytile.dialects.gpu import LocalLoadOp, LocalLoadSlotOp

    buffers = []
    for operand in (dot.a, dot.b):
        read = operand.defining_op
        buffer = read.ring if isinstance(read, LocalLoadSlotOp) else \
            read.buffer if isinstance(read, LocalLoadOp) else None
        if buffer is not None and buffer not in buffers:
            buffers.append(buffer)
    return buffers


def _retire_register_dots(body: Any) -> None:
    """A wait right after each asynchronous dot of ``body`` that reads A from registers."""
    from polytile.dialects import tile
    from polytile.dialects.gpu import ASYNC_DOT_ATTR, DotWaitOp
    from polytile.gpu.layouts import DotOperandLayout

    for dot in [op for op in body if isinstance(op, tile.DotOp) and op.attributes.get(ASYNC_DOT_ATTR)
                and isinstance(getattr(op.a.type, "layout", None), DotOperandLayout)]:
        retire = Builder.after(dot, dot.location).create(DotWaitOp, [dot.result], _dot_buffers(dot), pending=0,
                                                         result_types=[dot.result.type])
        dot.result.replace_uses_if(retire.results[0], lambda use: use.owner is not retire)


def _nothing_in_flight_at_end(body: Any) -> bool:
    """Whether every asynchronous dot of ``body`` is retired by a later wait for all."""
    from polytile.dialects import tile
    from polytile.dialects.gpu import ASYNC_DOT_ATTR, DotWaitOp

    ops = list(body)
    issued = [i for i, op in enumerate(ops) if isinstance(op, tile.DotOp) and op.attributes.get(ASYNC_DOT_ATTR)]
    if not issued:
        return True
    return any(isinstance(op, DotWaitOp) and op.pending == 0 for op in ops[issued[-1] + 1:])


__all__ = ["PRODUCER_WARPS", "WarpSpecializeLoops", "split_loop"]
