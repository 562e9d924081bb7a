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

Bulk copies (polytile-tma's) are issued by one producer thread, the prologue's too;
per-thread ``cp.async`` copies by the four producer warps with the consumers' layouts
(``num_warps = 4``), the prologue's staying with the consumers.  Only a loop at the
kernel's top level is split.  Everything else the pass
leaves alone, saying why in the compile metadata (``warp_specialize``: one entry per
hinted loop, see :mod:`.report`).  Every choice depends on the IR alone (program order),
so the same kernel gives the same code in every process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from polytile.dialects import arith, scf
from polytile.dialects.gpu import (IssuesIntoRing, LocalAllocOp, MBarrierInitOp, MBarrierInvalOp,
                                   MBarrierWaitOp)
from polytile.errors import ConfigError
from polytile.ir import types as t
from polytile.ir.builder import Builder
from polytile.ir.opdef import Pure
from polytile.passes.pass_base import Pass, PassContext, PreservedAnalyses
from polytile.passes.rewrite import constant_value
from polytile.warp_specialize import hinted_loops

from .channels import touches_tiles
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
    #: in a loop with work between its dots (attention's softmax); see :func:`.channels.take_turns`.
    #: Off by default: on an H100 (2026-11-28) attention with d = 128 measured 444 TFLOP/s
    #: with it against 449 without (causal 364 against 376): each group's dots wait for
    #: its own softmax, so taking turns only lines the groups up.
    #: "setting": the setting ``warpspec_pingpong``.
    pingpong: Literal["setting", "on", "off"] = field(default="setting", metadata={
        "doc": "on | off: consumer warp groups take turns issuing dots where the loop has work between them; "
               "setting: the setting warpspec_pingpong"})

    def __post_init__(self) -> None:
        for name in ("producer_registers", "consumer_registers"):
            value = getattr(self, name)
            if value and (not 24 <= value <= 256 or value % 8):
                raise ConfigError(f"warp-specialize: {name} = {value}; registers per thread of a warp group are a "
                                  "multiple of 8 from 24 to 256 (0: the setting)")

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        from polytile import config
        from polytile.gpu.lowering.target import gpu_target_of, num_warps_of

        from .persistent import pipelined_inner_loops, split_persistent
        from .report import unsupported_reason

        target = gpu_target_of(context)
        num_warps = num_warps_of(context)
        missing = unsupported_reason(target)
        pingpong = self.pingpong == "on" or (self.pingpong == "setting" and bool(config.get("warpspec_pingpong")))
        changed = False
        seen: dict = {}
        for function in [op for op in module.walk() if op.name == "func.func" and op.attributes.get("kernel")]:
            split = False
            for loop in hinted_loops(function):
                if missing is not None:
                    why = missing
                elif split:
                    why = "another loop of this kernel is split already: one loop per kernel is specialised"
                else:
                    # The loop's own options (pl.WarpSpecialize) win over this pass's, which
                    # win over the settings.
                    options = loop_options(loop)
                    plan = plan_registers(target, num_warps, PRODUCER_WARPS,
                                          options.get("producer_registers") or self.producer_registers,
                                          options.get("consumer_registers") or self.consumer_registers,
                                          getattr(context.options, "maxnreg", None))
                    if isinstance(plan, str):
                        why = plan
                    elif pipelined_inner_loops(loop):  # a persistent kernel's loop over tiles
                        why = split_persistent(function, loop, num_warps, plan)
                    else:
                        why = split_loop(function, loop, num_warps, plan, options.get("pingpong", pingpong))
                record_outcome(context.artifacts, loop, why, seen,
                               {"producer_registers": plan.producer, "consumer_registers": plan.consumer}
                               if why is None else None)
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
    #: The fills copy per thread (cp.async of pointer tiles) rather than in bulk.
    per_thread: bool = False
    #: Carried values the fills' addresses advance (per-thread copies: ``a_ptrs``).
    carried: list = field(default_factory=list)
    #: Tile ops before the loop that the producer needs (per-thread copies: the pointers
    #: and masks it starts from); it makes its own copies of them.
    producer_copies: list = field(default_factory=list)


def loop_options(loop: Any) -> dict[str, Any]:
    """The options ``pl.WarpSpecialize`` gave ``loop`` (``producer_registers``,
    ``consumer_registers``, ``pingpong``), by name; those not given are absent."""
    from polytile.language.loop_options import OPTION_PREFIX

    return {name[len(OPTION_PREFIX):]: value for name, value in loop.attributes.items()
            if name.startswith(OPTION_PREFIX)}


NOT_PIPELINED_WHY = ("into rings completed by mbarriers (num_stages < 2, or none of its loads feeds a dot through a "
                     "copy the pipeline can make)")
#: Why a loop that has no ring to split off is not split.
NOT_PIPELINED = f"the loop was not pipelined {NOT_PIPELINED_WHY}"
#: Why a loop that is not at the kernel's top level is not split.
NOT_TOP_LEVEL = "the loop is inside another loop or a branch; only a loop at the kernel's top level is split"


def whole_warp_groups(num_warps: int) -> str | None:
    """Why ``num_warps`` consumer warps cannot be split off, or None."""
    if num_warps % WARP_GROUP:
        return (f"num_warps = {num_warps}: the consumers are whole warp groups of {WARP_GROUP} warps (setmaxnreg "
                "moves a whole warp group's registers)")
    return None


def _examine(function: Any, loop: Any, num_warps: int) -> "_Loop | str":
    """The pieces of ``loop``, or why it cannot be split (the IR is unchanged)."""
    if loop.parent_op is not function:
        return NOT_TOP_LEVEL
    found = whole_warp_groups(num_warps) or examine_ring_loop(loop, num_warps)
    if found == NOT_PIPELINED and any(isinstance(op, scf.ForOp) for op in loop.body.block):
        return f"neither the loop nor the loop in its body was pipelined {NOT_PIPELINED_WHY}"
    return found


def examine_ring_loop(loop: Any, num_warps: int) -> "_Loop | str":
    """The pieces of a pipelined ``loop`` whose fills a producer can issue, or why not
    (the IR is unchanged); where the loop sits is the caller's to check."""
    body = loop.body.block
    wait = body.first_op
    fills = [op for op in body if op.has_trait(IssuesIntoRing)]
    if not isinstance(wait, MBarrierWaitOp) or not fills:
        return NOT_PIPELINED
    full = wait.barriers
    per_thread = any(isinstance(v.type, t.TileType) for op in fills for v in op.operands)
    if per_thread and num_warps != PRODUCER_WARPS:
        # Tried (2026-11-28): the producer's 4 warps copying 8 warps' tiles (laid out for
        # 4, each producer warp arriving for the consumer threads it stands for) ran the
        # 128x256x64 matmul at 0.82x the unspecialised loop on an H100: 4 warps cannot
        # issue 8 warps' cp.async copies fast enough (docs/warpspec.md).
        return (f"its loads are per-thread cp.async copies of pointer tiles laid out for {num_warps} warps; the "
                f"producer warp group ({PRODUCER_WARPS} warps) copies them with the same layouts only where "
                f"num_warps = {PRODUCER_WARPS} (with more, its {PRODUCER_WARPS} warps issue the copies slower than "
                f"the {num_warps} warps of the unspecialised loop)")
    for op in fills:
        if getattr(op, "barriers", full) is not full:
            return "its copies complete on barriers of another ring"
    carried = list(loop.region_iter_args)
    slice_ops, used = _slice(body, fills, carried)
    if any(not op.has_trait(Pure) for op in slice_ops):
        names = sorted({op.name for op in slice_ops if not op.has_trait(Pure)})
        return f"the copies' addresses need {', '.join(names)}, which the producer cannot run on its own"
    slots = [v for v in carried if v in used and not isinstance(v.type, t.TileType)]
    if len(slots) != 1:
        return ("the copies' addresses depend on scalars the loop carries (besides its index); the producer computes "
                "them from the index alone")
    write_slot = slots[0]
    advanced = [v for v in carried if v in used and v is not write_slot]
    if advanced and not per_thread:
        return "the copies' addresses depend on values the loop carries"
    stages = full.type.shape[0]
    init = loop.init_args[carried.index(write_slot)]
    if constant_value(init) != stages - 1:
        return "the loop's ring is not filled the number of slots minus one iterations ahead"
    return _Loop(loop, full, fills, slice_ops, write_slot, per_thread, advanced)


def _slice(body: Any, fills: list, carried: list) -> tuple[list, set]:
    """The body's ops the fills need (in body order), with the update of every carried
    value they read (its next value, yielded); and the block arguments read."""
    needed_ops: set = set()
    arguments: set = set()
    yielded = body.last_op.operands
    stack = [v for op in fills for v in op.operands]
    while stack:
        value = stack.pop()
        owner = value.defining_op
        if owner is None:
            if value in body.arguments and value not in arguments:
                arguments.add(value)
                if value in carried and isinstance(value.type, t.TileType):
                    stack.append(yielded[carried.index(value)])  # a_ptrs: its next value too
            continue
        if owner.parent is not body or owner in needed_ops or owner in fills:
            continue
        needed_ops.add(owner)
        stack.extend(owner.operands)
    return [op for op in body if op in needed_ops], arguments


# --------------------------------------------------------------------------------------
# The rewrite


def split_loop(function: Any, loop: Any, num_warps: int, registers: RegisterPlan,
               pingpong: bool = False) -> str | None:
    """Split ``loop`` (see the module docstring); None when done, else why not (then the
    IR is unchanged)."""
    from polytile.gpu.lowering.target import WORKER_WARPS_ATTR

    from .channels import build_producer, drop_unused_carried, release_instead_of_fills, take_turns
    from .ops import WarpSpecializeOp, YieldOp

    found = _examine(function, loop, num_warps)
    if isinstance(found, str):
        return found
    block = loop.parent
    prefix = _prefix(block, loop)
    full = found.full
    init = next((op for op in prefix if isinstance(op, MBarrierInitOp) and op.barriers is full), None)
    if not isinstance(full.defining_op, LocalAllocOp) or init is None:
        return "the ring's barriers are not made next to the loop"
    moved = moved_to_consumers(prefix, found, _ring_setup(prefix, init, full))
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
    working = registers.producer_warps if found.per_thread else 1
    ws = WarpSpecializeOp.create([], producer_warps=registers.producer_warps, producer_registers=registers.producer,
                                 consumer_registers=registers.consumer, kernel_registers=registers.kernel,
                                 producer_working_warps=working, location=loop.location)
    block.insert_before(ws, loop)
    build_producer(ws.producer.block, found, empty, loop.location)
    Builder.at_end(ws.producer.block, loop.location).create(YieldOp)

    consumer = ws.consumer.block
    for op in moved:
        op.detach()
        consumer.append(op)
    release_instead_of_fills(found, empty)
    loop.detach()
    consumer.append(loop)
    loop = drop_unused_carried(loop, found.carried)
    if pingpong and num_warps // WARP_GROUP >= 2:
        take_turns(loop)
    handed_on = [*loop.results, *escaping]
    Builder.at_end(consumer, loop.location).create(YieldOp, handed_on)
    ws = _with_results(ws, handed_on)

    # The producer issues every fill the loop reads past the prologue's (the bulk copies':
    # the prologue's too) and no other: those prologue fills and the drain's waits for the
    # fills past the end go.
    if not found.per_thread:
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
    if found.per_thread:
        _wait_for_unread_prologue(ws, found, loop)
    ending = Builder.after(inval, inval.location) if inval is not None else Builder.after(ws, loop.location)
    ending.create(MBarrierInvalOp, empty)
    function.set_attr(WORKER_WARPS_ATTR, registers.producer_warps)
    return None


def _with_results(ws: Any, handed_on: list) -> Any:
    """``ws`` rebuilt with a result per value of ``handed_on`` (what its consumer region
    yields), which replace those values after it."""
    new = type(ws)([], [v.type for v in handed_on], dict(ws.attributes), [], ws.location)
    new.regions = ws.regions
    for region in ws.regions:
        region.parent = new
    ws.regions = ()
    ws.parent.insert_before(new, ws)
    ws.erase()
    for old, fresh in zip(handed_on, new.results):
        old.replace_uses_if(fresh, lambda use: not new.is_ancestor_of(use.owner))
    return new


def _wait_for_unread_prologue(ws: Any, found: _Loop, loop: Any) -> None:
    """Per-thread copies: the consumers' prologue filled slots 0 .. S-2 for iterations
    0 .. S-2; where the loop runs fewer, the fills of the iterations it does not run
    (predicated off: zeros, and an arrival) are never waited for in it.  After the split,
    each such slot's first phase is waited for, so that no copy is still writing when the
    ring's bytes are reused or its barriers invalidated (``loop``: the consumers' loop)."""
    b = Builder.after(ws, loop.location)
    zero = arith.materialize_constant(b, 0, t.i32).result
    for slot in range(found.full.type.shape[0] - 1):
        count = arith.materialize_constant(b, slot, loop.induction_variable.type).result
        start = b.create(arith.BINARY_OPS["addi"], loop.lower,
                         b.create(arith.BINARY_OPS["muli"], loop.step, count).result).result
        unread = b.create(arith.CmpIOp, start, loop.upper, predicate="sge").result
        branch = b.insert(scf.IfOp.create(unread))
        inside = Builder.at_end(branch.then_region.block, loop.location)
        inside.create(MBarrierWaitOp, found.full, arith.materialize_constant(inside, slot, t.i32).result, zero)
        inside.create(scf.YieldOp, [])
        Builder.at_end(branch.else_region.block, loop.location).create(scf.YieldOp, [])


def _prefix(block: Any, loop: Any) -> list:
    ops = []
    for op in block:
        if op is loop:
            break
        ops.append(op)
    return ops


def _ring_setup(prefix: list, init: Any, full: Any) -> set:
    """The ops that set the ring up for its copies: from the initialization of its
    barriers to its first fill (the copy engine's fence of the initialization among
    them), tile ops aside.  Both groups rely on them: they stay before the split."""
    start = prefix.index(init)
    end = next((i for i in range(start, len(prefix)) if prefix[i].has_trait(IssuesIntoRing)), len(prefix))
    return {op for op in prefix[start:end] if not touches_tiles(op)}


def _fills_ring(op: Any, found: _Loop) -> bool:
    rings = {getattr(fill, "ring", None) for fill in found.fills} - {None}
    return getattr(op, "barriers", None) is found.full or getattr(op, "ring", None) in rings


def moved_to_consumers(prefix: list, found: _Loop, ring_setup: set, producer_inputs: tuple = ()) -> "list | str":
    """The ops before the loop that work on tiles (made for the consumers' warps, which
    the producer's are not): they move into the consumer region, in order, and so does
    every later op with an effect (a proxy fence after a store to shared memory must stay
    after it).  The producer needs none of them, and none may write global memory (the
    producer's copies would overtake the write).  ``producer_inputs``: values the
    producer reads besides the fills' and the loop's (a nested loop's bounds)."""
    from polytile.gpu.pipelining import writes_memory

    producer_needs: set = set()
    carried = list(found.loop.region_iter_args)
    stack = [v for op in (*found.fills, *found.slice) for v in op.operands]
    stack += [found.loop.init_args[carried.index(arg)] for arg in found.carried]
    stack += [found.loop.lower, found.loop.upper, found.loop.step, *producer_inputs]
    while stack:
        value = stack.pop()
        owner = value.defining_op
        if owner is None or owner in producer_needs or owner.parent is not found.loop.parent:
            continue
        producer_needs.add(owner)
        stack.extend(owner.operands)
    moved: list = []
    copies: list = []
    effects = False
    for op in prefix:
        if op in ring_setup:
            continue
        this_ring = op.has_trait(IssuesIntoRing) and _fills_ring(op, found)
        if this_ring and not found.per_thread:
            continue  # the bulk copies' prologue: the producer issues it (erased here)
        # This ring's per-thread prologue stays with the consumers that made its pointers.
        if not this_ring and not touches_tiles(op) and not (effects and not op.has_trait(Pure)
                                                            and op not in producer_needs):
            continue
        if op in producer_needs:
            if not found.per_thread or not op.has_trait(Pure):
                return f"the copies' addresses come from tiles ('{op.name}'); the producer computes them from scalars"
            copies.append(op)  # the producer's warps make their own (their layout's part)
        if writes_memory(op):
            return (f"the kernel writes memory before the loop ('{op.name}'); the producer's copies could overtake "
                    "that write")
        moved.append(op)
        effects = effects or not op.has_trait(Pure)
    # What stays before the split runs in every warp, before the groups part: it may not
    # need what moved.
    gone = set(moved) | {op for op in prefix if op.has_trait(IssuesIntoRing) and _fills_ring(op, found)
                         and not found.per_thread}
    made = {r for op in moved for inner in op.walk() for r in inner.results}
    for op in prefix:
        if op not in gone and any(v in made for inner in op.walk() for v in inner.operands):
            return (f"'{op.name}' before the loop needs a value the consumer warps make there (from tiles laid out "
                    "for them); the producer's warps cannot make it")
    found.producer_copies = copies
    return moved


__all__ = ["NOT_TOP_LEVEL", "PRODUCER_WARPS", "WarpSpecializeLoops", "examine_ring_loop", "loop_options", "moved_to_consumers",
           "split_loop", "whole_warp_groups"]
