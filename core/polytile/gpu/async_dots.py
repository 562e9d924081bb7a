"""``async-dots``: keep a loop's matrix multiply in flight while the next iteration starts.

A matrix unit whose instruction issues asynchronously (NVIDIA's wgmma: the tensor cores
run while the warps go on) says so per dot (``MatrixInstruction.overlaps``).  In a loop
that accumulates into a carried value (``acc = pl.dot(a, b, acc)``, the operands read
from the ring slots ``pipeline-loops`` fills) the pass

- marks the dot ``gpu.async``: its lowering issues it and returns;
- follows it with ``gpu.dot_wait {pending = N}`` on its result and the rings it reads:
  the dots of all but the last ``N`` iterations are done there, so the slots they read
  may be written again; the loop carries the wait's output into the next dot, which
  accumulates into the same registers behind the one still in flight;
- moves the iteration's copies into the ring (``gpu.async_copy``, issued ahead into the
  slot the previous iteration read) and their commit or barrier arrival (every op with
  the ``IssuesIntoRing`` trait) after that wait: that slot is free
  only once the previous iteration's dot is done (``insert-barriers`` puts the barrier
  between the wait and the copies, for every warp group's dot);
- waits for everything (``pending = 0``) after the loop, before the result is read.

So with ``N = 1`` the copies, the address arithmetic and the loop's control of the next
iteration overlap the tensor cores' work on this one (Triton and CUTLASS do the same).
A dot is left alone where its result has another use in the loop, it does not
accumulate into the carried value, or the unit cannot read its operands in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..dialects import scf, tile
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
            dots = [(op, index) for op in loop.body.block if isinstance(op, tile.DotOp)
                    for index in [_carried_accumulator(loop, op)]
                    if index is not None and _overlaps(op, select_instruction(op, target, num_warps))]
            if dots:
                _make_async(loop, dots, self.pending)
                context.count("async-dots.loops")
                changed = True
        return PreservedAnalyses.none() if changed else PreservedAnalyses.all()


def _overlaps(dot: Any, instruction: Any) -> bool:
    if instruction is None or instruction.lower is None or instruction.overlaps is None:
        return False
    if instruction.result_layout(dot.result.type.shape, dot.result.type.layout.num_warps) != dot.result.type.layout:
        return False
    return instruction.overlaps(dot)


def _carried_accumulator(loop: Any, dot: Any) -> int | None:
    """The position of the loop-carried value ``dot`` accumulates into and yields, where
    the yield is the only use of its result; else None."""
    args = list(loop.region_iter_args)
    if dot.acc not in args or len(dot.result.uses) != 1:
        return None
    (use,) = dot.result.uses
    index = args.index(dot.acc)
    if use.owner is not loop.body.block.last_op or use.index != index:
        return None
    if len(dot.acc.uses) != 1:  # the carried value is read elsewhere in the body
        return None
    return index


def _rings(dot: Any) -> list:
    """The buffers the dot reads in place: ring slots, and buffers hoist-dot-operands stored."""
    rings = []
    for operand in (dot.a, dot.b):
        read = operand.defining_op
        buffer = read.ring if isinstance(read, LocalLoadSlotOp) else \
            read.buffer if isinstance(read, LocalLoadOp) else None
        if buffer is not None and buffer not in rings:
            rings.append(buffer)
    return rings


def _make_async(loop: Any, dots: list, pending: int) -> None:
    body = loop.body.block
    terminator = body.last_op
    rings: list = []
    last_wait = None
    for dot, index in dots:
        dot.set_attr(ASYNC_DOT_ATTR, True)
        dot_rings = _rings(dot)
        rings += [r for r in dot_rings if r not in rings]
        wait = Builder.after(dot, dot.location).create(DotWaitOp, [dot.result], dot_rings, pending=pending,
                                                       result_types=[dot.result.type])
        terminator.set_operand(index, wait.results[0])
        last_wait = wait
    # The copies into the rings (issued ahead, into the slot the previous iteration's
    # dot read) go after the wait that retires that dot.
    ops = list(body)
    issues = [op for op in ops[:ops.index(last_wait)] if op.has_trait(IssuesIntoRing)]
    anchor = last_wait
    for op in issues:
        op.move_after(anchor)
        anchor = op
    # After the loop, everything retires before the results are read.
    results = [loop.results[index] for _, index in dots]
    after = Builder.after(loop, loop.location)
    final = after.create(DotWaitOp, results, rings, pending=0, result_types=[r.type for r in results])
    for result, waited in zip(results, final.results):
        for use in list(result.uses):
            if use.owner is not final:
                use.owner.set_operand(use.index, waited)


__all__ = ["AsyncDots"]
