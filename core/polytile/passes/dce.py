"""The ``dce`` pass: dead code elimination.

Removes ops whose results nothing uses and whose removal nobody could observe (see
:func:`~.rewrite.is_side_effect_free`: pure ops, loads that are not volatile, and ops
with regions, such as ``scf.for``, ``scf.if`` or ``tile.reduce``, whose regions hold only
such ops), the unused results of ``scf.if`` and the loop-carried values of ``scf.for``
that only feed themselves, and functions that nothing live refers to (symbol DCE: any
``@name`` in any attribute is a reference, see :mod:`polytile.analysis.symbols`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from ..analysis.symbols import unreachable_functions
from ..ir.operation import Block, Operation
from .canonical_patterns import drop_if_results, drop_loop_carried
from .pass_base import Pass, PassContext, PreservedAnalyses
from .rewrite import Rewriter, is_side_effect_free, is_trivially_dead


# --------------------------------------------------------------------------------------
# Unused results of structured control flow


def _top_level_in(op: Operation, block: Block) -> Operation | None:
    """The op of ``block`` that is ``op`` or holds it."""
    while op is not None and op.parent is not block:
        op = op.parent_op  # type: ignore[assignment]
    return op


def _carried_value_is_dead(loop: Operation, index: int) -> bool:
    """Loop-carried value ``index`` is dead when its result is unused and, inside the
    body, it flows only through side-effect-free ops back into its own yield slot."""
    if loop.results[index].uses:
        return False
    block = loop.regions[0].block
    terminator = block.last_op
    frontier = [block.arguments[1 + index]]
    seen: set[Operation] = set()
    while frontier:
        value = frontier.pop()
        for use in value.uses:
            if use.owner is terminator:
                if use.index != index:
                    return False
                continue
            top = _top_level_in(use.owner, block)
            if top is None or top is terminator or not is_side_effect_free(top):
                return False
            if top not in seen:
                seen.add(top)
                frontier.extend(top.results)
    return True


def _drop_dead_loop_carried(loop: Operation, rewriter: Rewriter) -> Operation | None:
    dead = {i for i in range(len(loop.results)) if _carried_value_is_dead(loop, i)}
    return drop_loop_carried(rewriter, loop, dead) if dead else None


def _drop_unused_if_results(op: Operation, rewriter: Rewriter) -> Operation | None:
    unused = {i for i, result in enumerate(op.results) if not result.uses}
    return drop_if_results(rewriter, op, unused) if unused else None


# Op name -> a function that rebuilds the op without its dead results (None: nothing dead).
RESULT_PRUNERS: dict[str, Callable[[Operation, Rewriter], Operation | None]] = {
    "scf.for": _drop_dead_loop_carried,
    "scf.if": _drop_unused_if_results,
}


# --------------------------------------------------------------------------------------
# The pass


@dataclass
class DeadCodeElimination(Pass):
    """Remove unused side-effect-free ops, dead loop-carried values and unreachable functions."""

    name: ClassVar[str] = "dce"
    summary: ClassVar[str] = "Remove unused side-effect-free ops, dead scf results and functions no kernel calls."

    remove_unused_functions: bool = True

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        self._rewriter = Rewriter()
        self._erased = 0
        self._pruned = 0
        self._simplify_regions(module)
        functions = 0
        if self.remove_unused_functions:
            for function in unreachable_functions(module):
                function.erase()
                functions += 1
        context.count("dce.erased-ops", self._erased)
        context.count("dce.erased-results", self._pruned)
        context.count("dce.erased-functions", functions)
        changed = self._erased or self._pruned or functions
        return PreservedAnalyses.none() if changed else PreservedAnalyses.all()

    def _simplify_regions(self, op: Operation) -> None:
        for region in op.regions:
            for block in region.blocks:
                self._simplify_block(block)

    def _simplify_block(self, block: Block) -> None:
        # Bottom-up: every user of a value comes after it, so by the time an op is
        # reached its users are gone if they were dead, and whole chains go in one sweep.
        op = block.last_op
        while op is not None:
            previous = op.prev_op
            if op.regions:
                op = self._simplify_nested(op)
            if is_trivially_dead(op):
                op.erase()
                self._erased += 1
            op = previous

    def _simplify_nested(self, op: Operation) -> Operation:
        """Clean ``op``'s regions, then drop its dead results, until neither changes."""
        while True:
            self._simplify_regions(op)
            pruner = RESULT_PRUNERS.get(op.name)
            if pruner is None:
                return op
            before = len(op.results)
            rebuilt = pruner(op, self._rewriter)
            if rebuilt is None:
                return op
            self._pruned += before - len(rebuilt.results)
            op = rebuilt
