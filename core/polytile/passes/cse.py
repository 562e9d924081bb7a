"""The ``cse`` pass: common subexpression elimination.

Two side-effect-free ops without regions that have the same name, operands, attributes
and result types compute the same values; the later one is replaced by the earlier when
the earlier dominates it.  In structured IR that means: earlier in the same block, or in
a block that encloses the later one.  A scoped hash table follows exactly that: each
block opens a scope on top of its parents', closed when the block ends, so siblings
(the two branches of an ``scf.if``) never see each other's ops and nothing defined in a
nested region is reused outside it.  Regions of an op isolated from above (a function)
start from an empty table.

Reads (``tile.load``, ``ReadsMemory``) are never merged: a store between them may change
what they read, and this pass does not reason about memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Hashable

from ..ir.opdef import IsolatedFromAbove, Pure
from ..ir.operation import Operation
from .pass_base import Pass, PassContext, PreservedAnalyses
from .rewrite import attributes_key


def cse_key(op: Operation) -> Hashable | None:
    """What must be equal for two ops to be merged, or None if ``op`` is never merged."""
    if op.regions or not op.results or not op.has_trait(Pure):
        return None
    try:
        key = (op.name, tuple(op.operands), op.operand_segments, tuple(r.type for r in op.results),
               attributes_key(op.attributes))
        hash(key)
    except TypeError:
        return None  # an attribute or type that cannot be hashed: leave the op alone
    return key


@dataclass
class CommonSubexpressionElimination(Pass):
    """Merge equal side-effect-free ops when the first dominates the second."""

    name: ClassVar[str] = "cse"
    summary: ClassVar[str] = "Merge equal side-effect-free ops when the first dominates the second."

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        self._erased = 0
        self._simplify(module, [])
        context.count("cse.erased", self._erased)
        return PreservedAnalyses.none() if self._erased else PreservedAnalyses.all()

    def _simplify(self, op: Operation, scopes: list[dict[Hashable, Operation]]) -> None:
        if op.has_trait(IsolatedFromAbove):
            scopes = []
        for region in op.regions:
            for block in region.blocks:
                # Each block gets its own scope: with several blocks in a region, one
                # does not necessarily dominate another.
                scopes.append({})
                for inner in block:
                    key = cse_key(inner)
                    if key is not None:
                        existing = _lookup(scopes, key)
                        if existing is not None:
                            inner.replace_all_uses_with(list(existing.results))
                            inner.erase()
                            self._erased += 1
                            continue
                        scopes[-1][key] = inner
                    if inner.regions:
                        self._simplify(inner, scopes)
                scopes.pop()


def _lookup(scopes: list[dict[Hashable, Operation]], key: Hashable) -> Operation | None:
    for scope in reversed(scopes):
        found = scope.get(key)
        if found is not None:
            return found
    return None
