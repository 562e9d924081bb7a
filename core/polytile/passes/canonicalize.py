"""The ``canonicalize`` pass: fold constants and apply the ops' canonicalization patterns
until nothing changes, in every function.  The patterns of the core dialects are in
:mod:`.canonical_patterns`; plugins attach theirs to their op classes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..ir.opdef import IsolatedFromAbove
from .canonical_patterns import register_canonical_patterns
from .pass_base import Pass, PassContext, PreservedAnalyses
from .rewrite import apply_patterns_greedily, collect_patterns


def isolated_children(module: Any) -> list[Any]:
    """The functions (ops isolated from above) directly in ``module``; the op itself when
    it is not a container of such ops."""
    if module.regions and module.regions[0].blocks:
        found = [op for op in module.regions[0].blocks[0] if op.has_trait(IsolatedFromAbove)]
        if found or module.name == "builtin.module":
            return found
    return [module]


@dataclass
class Canonicalize(Pass):
    """Fold constants and apply the ops' canonicalization patterns to a fixed point."""

    name: ClassVar[str] = "canonicalize"
    summary: ClassVar[str] = "Fold constants and simplify ops with their canonicalization patterns, to a fixed point."

    max_iterations: int = 10
    fold: bool = True

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        register_canonical_patterns()
        patterns = collect_patterns()
        changed = False
        for function in isolated_children(module):
            changed |= apply_patterns_greedily(function, patterns, fold=self.fold, max_iterations=self.max_iterations,
                                               registered=False, context=context,
                                               statistics_prefix=self.name)
        return PreservedAnalyses.none() if changed else PreservedAnalyses.all()
