"""``async-dots``: keep a loop's matrix multiplies in flight while the next iteration starts.

A matrix unit whose instruction issues asynchronously (NVIDIA's wgmma: the tensor cores
run while the warps go on) says so per dot (``MatrixInstruction.overlaps``).  In a loop
whose dot's result the loop carries on (``acc = pl.dot(a, b, acc)``; attention's
``acc = pl.dot(p, v, acc * alpha)``), the pass marks the loop's dots ``gpu.async``
(their lowering issues them and returns) and retires them with ``gpu.dot_wait``:

- after the iteration's first dot, ``gpu.dot_wait {pending = N}`` (N = 1) retires
  everything the previous iteration left in flight (the carried results read after it
  come out of it; a first dot accumulating into its own carried value chains on the
  in-flight registers instead, and its result goes through the wait to the next
  iteration);
- a dot whose result the body reads (attention's scores) is retired right before the
  first reader, behind only the dots issued since;
- the iteration's copies into the rings (every op with the ``IssuesIntoRing`` trait:
  issued ahead, into the slots the previous iteration's dots read) move after the first
  wait: those slots are free once it returns (``insert-barriers`` puts the barrier
  between, for every warp group's dots);
- after the loop, ``pending = 0`` retires everything before the results are read.

So the copies, the address arithmetic, the loop's control and the next iteration's first
dot overlap the tensor cores' work on this iteration's last one (Triton and CUTLASS do
the same).  A dot with A in registers (``p @ v``) stays in flight only where A is
computed from a dot retired in the same iteration: its registers are written again only
after the next iteration's first wait.

A loop where no dot's result crosses iterations still overlaps where a dot the body
reads has another dot issued between it and its first reader (FlashAttention-3's order,
which polytile-warpspec's ``overlap-dots`` makes: ``qk = q @ k_j``, then
``acc = p_prev @ v_prev``): each is retired right before its first reader, the scores
behind the second dot, so the work between them runs beside it; nothing is left in
flight at the end of an iteration.  The pass leaves a loop alone where neither holds, a
carried result is read before the first dot, or the unit cannot read the operands in
place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..dialects import arith, scf, tile
from ..dialects.gpu import ASYNC_DOT_ATTR, DotWaitOp, IssuesIntoRing, LocalLoadOp, LocalLoadSlotOp
from ..errors import ConfigError
from ..ir.builder import Builder
from ..passes.pass_base import Pass, PassContext, PreservedAnalyses


@dataclass
class AsyncDots(Pass):
    """Leave the accumulating dots of loops in flight across iterations, ``pending``
    groups deep (see the module docstring)."""

    name: ClassVar[str] = "async-dots"
    summary: ClassVar[str] = "asynchronous matrix multiplies: a loop's dot overlaps the next iteration's work"

    #: Dots left in flight at the end of an iteration: 1, or 0 (the pass changes nothing).
    #: More would let a copy overwrite a slot an in-flight dot reads.
    pending: int = field(default=1, metadata={"doc": "dot groups left in flight per iteration: 1, or 0 (off)"})

    def __post_init__(self) -> None:
        if self.pending not in (0, 1):
            raise ConfigError(f"async-dots: pending = {self.pending}; it is 1 (one dot left in flight) or 0 (off): "
                              "pipeline-loops copies each iteration's tiles into the slot the previous iteration's "
                              "dot read, so that dot must be done by then")

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        from .lowering.dot import select_instruction
        from .lowering.target import gpu_target_of, num_warps_of

        if self.pending <= 0:
            return PreservedAnalyses.all()

        target = gpu_target_of(context)
        num_warps = num_warps_of(context)
        changed = False
        for loop in [op for op in module.walk() if isinstance(op, scf.ForOp)]:
            # A dot reading a buffer made in the body cannot stay in flight: the next
            # iteration fills that buffer again.
            candidates = [op for op in loop.body.block if isinstance(op, tile.DotOp)
                          and _overlaps(op, select_instruction(op, target, num_warps))
                          and not any(_made_in(r, loop.body.block) for r in dot_buffers(op))]
            plan = _plan(loop, candidates)
            if plan is not None:
                _make_async(loop, plan, self.pending)
                context.count("async-dots.loops")
                changed = True
        return PreservedAnalyses.none() if changed else PreservedAnalyses.all()


def _overlaps(dot: Any, instruction: Any) -> bool:
    if instruction is None or instruction.lower is None or instruction.overlaps is None:
        return False
    if instruction.result_layout(dot.result.type.shape, dot.result.type.layout.num_warps) != dot.result.type.layout:
        return False
    return instruction.overlaps(dot)


@dataclass
class _Plan:
    #: The dots left in flight, in body order; the first is issued before the wait that
    #: retires the previous iteration's.
    dots: list
    #: Dots whose result crosses into the next iteration in flight: position in the
    #: loop's carried values (after the induction variable).
    carried: dict
    #: Dots whose result the body reads: retired right before the first reader.
    read: list


def _body_uses(dot: Any) -> list:
    terminator = dot.parent.last_op
    return [use for use in dot.result.uses if use.owner is not terminator]


def _plan(loop: Any, candidates: list) -> _Plan | None:
    """Which dots stay in flight, and how each is retired (see :func:`_make_async`):

    - a dot whose result only the loop carries on (``acc = pl.dot(a, b, acc)``,
      attention's ``acc = pl.dot(p, v, acc * alpha)``) stays in flight into the next
      iteration, where the wait after that iteration's first dot retires it; so every
      read of its carried value there must come after that first dot, except the first
      dot accumulating into it (the tensor cores chain those);
    - a dot the body reads (attention's ``qk``) is retired right before the first read;
    - a dot with A in registers (``p @ v``) stays in flight only where A is computed from
      a dot retired in the same iteration: its registers are then written again only
      after the next iteration's first wait (which retired this dot);
    - none of this without a dot that crosses iterations in flight: there would be
      nothing to overlap."""
    if not candidates:
        return None
    body = loop.body.block
    order = {op: i for i, op in enumerate(body)}
    terminator = body.last_op
    args = list(loop.region_iter_args)
    first = candidates[0]
    carried: dict = {}
    read: list = []
    for dot in candidates:
        if _body_uses(dot):
            read.append(dot)
            continue
        yielded = [use.index for use in dot.result.uses if use.owner is terminator]
        if len(yielded) != 1:
            continue
        index = yielded[0]
        arg = args[index]
        if dot is first and first.acc is arg:
            # Chained: the next iteration's dot accumulates into the registers this one
            # is still writing, so nothing else may read the carried value.
            uses_ok = len(arg.uses) == 1
        else:
            uses_ok = all(order[_top(use.owner, body)] > order[first] for use in arg.uses)
        if uses_ok:
            carried[dot] = index
    retired_in_body = set(read)
    carried = {d: i for d, i in carried.items()
               if not _a_in_registers(d) or _from_retired(d.a, retired_in_body, body)}
    if carried and first not in carried and first not in read:
        carried = {}
    dots = [d for d in candidates if d in carried or d in read]
    if carried:
        return _Plan(dots, carried, read)
    # No dot crosses iterations in flight; the loop still overlaps where a dot the body
    # reads has another issued between it and its first reader (FlashAttention-3's
    # order: ``qk = q @ k_j`` and ``acc = p_prev @ v_prev`` issued together, the softmax
    # of ``qk`` running while the second one does).
    if any(_issued_before_read(dot, dots, order) for dot in read):
        return _Plan(dots, {}, read)
    return None


def _first_reader(dot: Any, order: dict) -> Any:
    body = dot.parent
    return min((_top(use.owner, body) for use in dot.result.uses), key=order.__getitem__)


def _issued_before_read(dot: Any, dots: list, order: dict) -> bool:
    """Whether another of ``dots`` is issued between ``dot`` and its first reader."""
    reader = _first_reader(dot, order)
    return any(order[dot] < order[other] < order[reader] for other in dots)


def _top(op: Any, body: Any) -> Any:
    """``op``, or the op of ``body`` it is nested in."""
    while op.parent is not body:
        op = op.parent_op
    return op


def _a_in_registers(dot: Any) -> bool:
    from .layouts import DotOperandLayout

    return isinstance(dot.a.type.layout, DotOperandLayout)


def _from_retired(value: Any, retired: set, body: Any) -> bool:
    """Whether ``value`` is computed in ``body`` from the result of a dot in ``retired``."""
    seen: set = set()
    work = [value]
    while work:
        v = work.pop()
        op = v.defining_op
        if op is None or op in seen or op.parent is not body:
            continue
        if op in retired:
            return True
        seen.add(op)
        work.extend(op.operands)
    return False


def dot_buffers(dot: Any) -> list:
    """The buffers the dot reads in place: ring slots, and buffers hoist-dot-operands stored."""
    rings = []
    for operand in (dot.a, dot.b):
        read = operand.defining_op
        buffer = read.ring if isinstance(read, LocalLoadSlotOp) else \
            read.buffer if isinstance(read, LocalLoadOp) else None
        if buffer is not None and buffer not in rings:
            rings.append(buffer)
    return rings


def _made_in(buffer: Any, body: Any) -> bool:
    return buffer.defining_op is not None and buffer.defining_op.parent is body


def _fills_body_buffer(op: Any, body: Any) -> bool:
    """Whether ``op`` fills (or signals the barriers of) a buffer allocated in ``body``."""
    return any(_made_in(buffer, body) for buffer in (getattr(op, "ring", None), getattr(op, "barriers", None))
               if buffer is not None)


def _make_async(loop: Any, plan: _Plan, pending: int) -> None:
    body = loop.body.block
    rings: list = []
    for dot in plan.dots:
        dot.set_attr(ASYNC_DOT_ATTR, True)
        rings += [r for r in dot_buffers(dot) if r not in rings]
    order = {op: i for i, op in enumerate(body)}
    if plan.carried:
        _retire_previous_iteration(loop, plan, pending, rings)
    # A dot the body reads: retired right before the first reader, behind the dots
    # issued since (they may stay in flight).
    for dot in plan.read:
        reader = _first_reader(dot, order)
        behind = sum(1 for d in plan.dots if order[dot] < order[d] < order[reader])
        retire = Builder.before(reader, reader.location).create(DotWaitOp, [dot.result], dot_buffers(dot),
                                                                pending=behind, result_types=[dot.result.type])
        for use in list(dot.result.uses):
            if use.owner is not retire:
                use.owner.set_operand(use.index, retire.results[0])


def _retire_previous_iteration(loop: Any, plan: _Plan, pending: int, rings: list) -> None:
    """The wait after the iteration's first dot that retires the dots the previous
    iteration left in flight, the ring copies moved after it, and the waits before and
    after the loop for the carried results."""
    body = loop.body.block
    terminator = body.last_op
    args = list(loop.region_iter_args)
    first = plan.dots[0]

    # After the first dot: the previous iteration's dots are retired (only this one may
    # still run), so their slots may be refilled and their carried results read.
    carried_in = [args[index] for dot, index in plan.carried.items()
                  if not (dot is first and first.acc is args[index])]
    through = [first.result] if first in plan.carried else []
    values = carried_in + through
    wait = Builder.after(first, first.location).create(DotWaitOp, values, rings, pending=pending,
                                                       result_types=[v.type for v in values])
    for arg, waited in zip(carried_in, wait.results):
        for use in list(arg.uses):
            if use.owner is not wait:
                use.owner.set_operand(use.index, waited)
    if through:
        terminator.set_operand(plan.carried[first], wait.results[-1])

    # The copies into the rings (issued ahead, into the slots the previous iteration's
    # dots read) go after the wait that retires those dots.
    # Only fills of rings made before the loop (pipeline-loops' rings, filled for a later
    # iteration): a buffer made in the body is filled and read in the same iteration.
    ops = list(body)
    issues = [op for op in ops[:ops.index(wait)] if op.has_trait(IssuesIntoRing) and not _fills_body_buffer(op, body)]
    anchor = wait
    for op in issues:
        op.move_after(anchor)
        anchor = op
    # The carried values enter the loop through a wait too (nothing is in flight there):
    # a constant initial accumulator would otherwise be materialized again on the path
    # that skips the loop, by moves into the registers the final wait takes, which ptxas
    # counts as non-wgmma writes to in-flight accumulators (and serializes the wgmmas).
    before = Builder.before(loop, loop.location)
    for index in plan.carried.values():
        init = loop.init_args[index]
        if isinstance(init.defining_op, (arith.ConstantOp, tile.SplatOp)):
            entry = before.create(DotWaitOp, [init], [], pending=0, result_types=[init.type])
            loop.set_operand(3 + index, entry.results[0])
    # After the loop, everything retires before the results are read.
    results = [loop.results[index] for index in plan.carried.values()]
    after = Builder.after(loop, loop.location)
    final = after.create(DotWaitOp, results, rings, pending=0, result_types=[r.type for r in results])
    for result, waited in zip(results, final.results):
        for use in list(result.uses):
            if use.owner is not final:
                use.owner.set_operand(use.index, waited)


__all__ = ["AsyncDots", "dot_buffers"]
