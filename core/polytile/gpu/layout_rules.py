"""The table of how an op's tiles relate in ``assign-layouts`` (see :mod:`.distribute`).

Kept apart from the pass so that lowering modules (which ``distribute`` itself imports,
for the matrix units) can register rules for their ops without an import cycle.
"""

from __future__ import annotations

from typing import Any, Callable

from ..plugins.tables import OwnedTable

#: ``rule(op, groups)``: union the op's values that must share a layout, record slices,
#: accesses and dots on ``groups`` (a ``distribute._Groups``).
LayoutRule = Callable[[Any, Any], None]

#: Op class -> how its tiles relate.  Ops without a rule constrain nothing (each of their
#: tiles is grouped only through other ops); ops with the Elementwise trait share one.
#: Each entry owned by who registered it (:class:`~polytile.plugins.tables.OwnedTable`).
LAYOUT_RULES: OwnedTable[LayoutRule] = OwnedTable("layout rule")


def register_layout_rule(*op_classes: type) -> Callable[[LayoutRule], LayoutRule]:
    """Decorator: ``rule`` says how the tiles of ops of ``op_classes`` relate."""
    def register(rule: LayoutRule) -> LayoutRule:
        for cls in op_classes:
            LAYOUT_RULES.add(cls, rule)
        return rule
    return register


__all__ = ["LAYOUT_RULES", "LayoutRule", "register_layout_rule"]
