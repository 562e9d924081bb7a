"""Loop-invariant code motion: compute once, before the loop, what every iteration
would compute alike.

Kernels recompute pointer offsets, splats and broadcasts of loop-independent values in
every iteration of their K loop; hoisting them saves real instructions and exposes them
to CSE with the code before the loop.

An op moves when it is ``Pure``, has no regions, and all its operands come from outside
the loop (or from ops already moved).  Loops are handled innermost first, so an
invariant can leave several levels of nesting in one run.  Ops that read memory never
move: a store in the loop may change what they would read.  Ops that may trap (integer
division and remainder) move only when that cannot add a trap: a divisor known to be
safe, or a loop region known to run at least once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..ir.opdef import ConstantLike, Pure, ReadsMemory, Terminator
from ..ir.operation import Block, Operation
from ..ir.types import IntType, element_type
from ..ir.values import BlockArgument, OpResult, Value
from .pass_base import Pass, PassContext, PreservedAnalyses

#: Integer division and remainder trap on a zero divisor (and the signed ones on
#: ``INT_MIN / -1``), so running one the original program never ran is not allowed.
_TRAPPING_DIVISIONS = {
    "arith.divsi": True,  # name -> signed
    "arith.remsi": True,
    "arith.divui": False,
    "arith.remui": False,
}


@dataclass
class LoopInvariantCodeMotion(Pass):
    """Hoist loop-invariant side-effect-free ops out of scf.for and scf.while."""

    name: ClassVar[str] = "licm"
    summary: ClassVar[str] = "hoist loop-invariant pure ops out of scf.for and scf.while loops"

    hoist_from_while: bool = field(default=True, metadata={"doc": "also hoist out of scf.while loops"})

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        loop_names = ("scf.for", "scf.while") if self.hoist_from_while else ("scf.for",)
        # Post-order lists inner loops first; hoisting never adds or removes a loop, so
        # the list stays valid while ops move.
        loops = [op for op in module.walk(post_order=True) if op.name in loop_names]
        hoisted = 0
        for loop in loops:
            hoisted += hoist_loop_invariants(loop)
        context.count("licm.hoisted", hoisted)
        if not hoisted:
            return PreservedAnalyses.all()
        # Calls never move (they are not Pure), so the call graph still holds.
        from ..analysis.call_graph import CallGraph

        return PreservedAnalyses.only(CallGraph)


def hoist_loop_invariants(loop: Operation) -> int:
    """Move the invariant ops of ``loop``'s regions to just before it; return how many."""
    if loop.name == "scf.for":
        return _hoist_from(loop.regions[0].block, loop, runs_at_least_once=_for_runs_at_least_once(loop))
    if loop.name == "scf.while":
        before, after = loop.regions[0].block, loop.regions[1].block
        # The before region runs at least once (it decides whether the body runs at
        # all), so whatever it computes may be computed up front; the body may run
        # zero times.  Before first: its hoisted values can make body ops invariant.
        count = _hoist_from(before, loop, runs_at_least_once=True)
        return count + _hoist_from(after, loop, runs_at_least_once=False)
    raise ValueError(f"'{loop.name}' is not a loop that LICM knows (scf.for, scf.while)")


def _hoist_from(block: Block, loop: Operation, runs_at_least_once: bool) -> int:
    count = 0
    for op in block:  # safe: iteration reads the next op before yielding this one
        if is_hoistable(op, loop, runs_at_least_once):
            op.move_before(loop)
            count += 1
    return count


def is_hoistable(op: Operation, loop: Operation, runs_at_least_once: bool = False) -> bool:
    """Whether ``op`` (directly in a region of ``loop``) may run once before the loop."""
    if op.regions or not op.has_trait(Pure) or op.has_trait(ReadsMemory) or op.has_trait(Terminator):
        return False
    if not all(_defined_outside(value, loop) for value in op.operands):
        return False
    signed = _TRAPPING_DIVISIONS.get(op.name)
    if signed is not None and not runs_at_least_once:
        return _is_safe_divisor(op.operands[1], signed)
    return True


def _defined_outside(value: Value, loop: Operation) -> bool:
    if isinstance(value, OpResult):
        block = value.op.parent
    elif isinstance(value, BlockArgument):
        block = value.block
    else:
        return False
    while block is not None:
        owner = block.parent_op
        if owner is loop:
            return False
        if owner is None:
            return True
        block = owner.parent
    return True


def _constant_value(value: Value) -> Any | None:
    op = value.defining_op
    if op is None or not op.has_trait(ConstantLike):
        return None
    return op.attributes.get("value")


def _is_safe_divisor(value: Value, signed: bool) -> bool:
    divisor = _constant_value(value)
    if not isinstance(divisor, int) or isinstance(divisor, bool) or divisor == 0:
        return False
    # ``INT_MIN / -1`` overflows, which traps like a zero divisor on some targets.
    return not signed or _as_signed(divisor, element_type(value.type)) != -1


def _as_signed(value: int, type_: Any) -> int:
    """Constants of a width-w integer type may be written in [-2**(w-1), 2**w); read
    the upper half as negative, the way a signed op sees the bits."""
    if isinstance(type_, IntType) and value >= 1 << (type_.width - 1):
        return value - (1 << type_.width)
    return value


def _for_runs_at_least_once(loop: Operation) -> bool:
    bounds = [_constant_value(v) for v in loop.operands[:3]]
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in bounds):
        return False
    iv_type = loop.operands[0].type
    if isinstance(iv_type, IntType) and iv_type.signed:
        bounds = [_as_signed(x, iv_type) for x in bounds]
    lower, upper, step = bounds
    return step > 0 and lower < upper
