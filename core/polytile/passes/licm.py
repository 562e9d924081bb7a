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

A loop of ``pl.range(..., disable_licm=True)`` keeps its ops (Triton's option).

Which ops are loops, and which of their regions repeat, is a table keyed by op class
(:data:`LOOP_BODIES`); ``scf.for`` and ``scf.while`` are registered below, and a plugin
makes its own loop op take part with :func:`register_loop`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Sequence

from ..dialects.scf import ForOp, WhileOp
from ..ir.opdef import ConstantLike, Pure, ReadsMemory, Terminator
from ..ir.operation import Block, Operation, Region
from ..ir.types import IntType, element_type
from ..ir.values import BlockArgument, OpResult, Value
from ..plugins.tables import OwnedTable
from .pass_base import Pass, PassContext, PreservedAnalyses

#: Integer division and remainder trap on a zero divisor (and the signed ones on
#: ``INT_MIN / -1``), so running one the original program never ran is not allowed.
_TRAPPING_DIVISIONS = {
    "arith.divsi": True,  # name -> signed
    "arith.remsi": True,
    "arith.divui": False,
    "arith.remui": False,
}


@dataclass(frozen=True)
class LoopRegion:
    """A region of a loop op whose ops LICM may hoist to just before the op.

    ``runs_at_least_once`` says the region's entry block runs whenever the op does (the
    condition region of a while loop; a counted loop whose bounds are constants with
    a nonzero trip count).  Only then may an op that can trap (integer division) move
    out: otherwise it would run in a program that never ran it.
    """

    region: Region
    runs_at_least_once: bool = False


#: Given a loop op, the regions to hoist from, in the order to process them (a region
#: whose hoisted values can make another's ops invariant goes first).
LoopBodies = Callable[[Operation], Sequence[LoopRegion]]

#: Op class -> its :data:`LoopBodies`.  Subclasses of a registered class use its entry.
#: Each entry owned by who registered it (a plugin's loops leave with it).
LOOP_BODIES: OwnedTable[LoopBodies] = OwnedTable("loop for licm")


def register_loop(op_class: type, bodies: LoopBodies | None = None) -> None:
    """Make ``licm`` hoist invariant ops out of ops of ``op_class``.

    ``bodies(op)`` returns the op's repeated regions, as :class:`LoopRegion` values.
    Without it, every region of the op counts and none is assumed to run at least once,
    which is always safe.  Call it next to the op's definition, so the entry exists whenever
    the op does.  Registering a class again replaces its entry (a reloaded plugin)::

        from polytile.passes.licm import LoopRegion, register_loop

        register_loop(RepeatOp)                                   # every region, may run 0 times
        register_loop(DoWhileOp, lambda op: [LoopRegion(op.body, runs_at_least_once=True)])

    Only register ops whose regions may run any number of times, each time with the
    same values from outside: hoisting computes those values once, before the op.
    """
    if not isinstance(op_class, type) or not issubclass(op_class, Operation):
        raise TypeError(f"register_loop needs an op class, got {op_class!r}")
    LOOP_BODIES.add(op_class, bodies if bodies is not None else _every_region)


def loop_bodies_of(op: Operation) -> LoopBodies | None:
    """The registered :data:`LoopBodies` of ``op``'s class (or a base class), or None."""
    for cls in type(op).__mro__:
        found = LOOP_BODIES.get(cls)
        if found is not None:
            return found
    return None


def _every_region(op: Operation) -> list[LoopRegion]:
    return [LoopRegion(region) for region in op.regions]


def _for_bodies(loop: Operation) -> list[LoopRegion]:
    return [LoopRegion(loop.regions[0], runs_at_least_once=_for_runs_at_least_once(loop))]


def _while_bodies(loop: Operation) -> list[LoopRegion]:
    # The before region runs at least once (it decides whether the body runs at all),
    # so whatever it computes may be computed up front; the body may run zero times.
    # Before first: its hoisted values can make body ops invariant.
    return [LoopRegion(loop.regions[0], runs_at_least_once=True), LoopRegion(loop.regions[1])]


#: The ``scf.for`` attribute of ``pl.range(..., disable_licm=True)`` (Triton's loop option):
#: nothing is hoisted out of that loop, here nor by LLVM (``llvm.licm.disable``).
DISABLE_LICM_HINT = "pt.disable_licm"

register_loop(ForOp, _for_bodies)
register_loop(WhileOp, _while_bodies)


@dataclass
class LoopInvariantCodeMotion(Pass):
    """Hoist loop-invariant side-effect-free ops out of loops (scf.for, scf.while, and
    the loop ops plugins register with :func:`register_loop`)."""

    name: ClassVar[str] = "licm"
    summary: ClassVar[str] = "hoist loop-invariant pure ops out of scf.for, scf.while and registered loop ops"

    hoist_from_while: bool = field(default=True, metadata={"doc": "also hoist out of scf.while loops"})

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        # Post-order lists inner loops first; hoisting never adds or removes a loop, so
        # the list stays valid while ops move.
        loops = [op for op in module.walk(post_order=True) if self._is_loop(op)]
        hoisted = 0
        for loop in loops:
            hoisted += hoist_loop_invariants(loop)
        context.count("licm.hoisted", hoisted)
        if not hoisted:
            return PreservedAnalyses.all()
        # Calls never move (they are not Pure), so the call graph still holds.
        from ..analysis.call_graph import CallGraph

        return PreservedAnalyses.only(CallGraph)

    def _is_loop(self, op: Operation) -> bool:
        if not self.hoist_from_while and isinstance(op, WhileOp):
            return False
        if op.attributes.get(DISABLE_LICM_HINT):
            return False  # pl.range(..., disable_licm=True): the user keeps its ops in the loop
        return loop_bodies_of(op) is not None


def hoist_loop_invariants(loop: Operation) -> int:
    """Move the invariant ops of ``loop``'s repeated regions to just before it; return
    how many moved.  ``loop``'s class must be registered with :func:`register_loop`."""
    bodies = loop_bodies_of(loop)
    if bodies is None:
        known = ", ".join(sorted(getattr(cls, "name", cls.__name__) for cls in LOOP_BODIES))
        raise ValueError(f"'{loop.name}' is not a loop that LICM knows ({known}); a plugin registers its "
                         "loop ops with polytile.passes.licm.register_loop")
    count = 0
    for body in bodies(loop):
        for index, block in enumerate(body.region.blocks):
            # Only the entry block is known to run when the region does.
            count += _hoist_from(block, loop, runs_at_least_once=body.runs_at_least_once and index == 0)
    return count


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
