"""The table of how an op's tiles relate in ``assign-layouts`` (see :mod:`.distribute`).

Kept apart from the pass so that lowering modules can register rules for their ops
without an import cycle.
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
#: The core's rules are in the modules named here, imported on the table's first read.
LAYOUT_RULES: OwnedTable[LayoutRule] = OwnedTable("layout rule", providers=(
    "polytile.gpu.distribute", "polytile.gpu.lowering.debug", "polytile.gpu.lowering.gather",
    "polytile.gpu.lowering.histogram", "polytile.gpu.lowering.inline_asm",
    "polytile.gpu.lowering.shapes"))


def register_layout_rule(*op_classes: type) -> Callable[[LayoutRule], LayoutRule]:
    """Decorator: ``rule`` says how the tiles of ops of ``op_classes`` relate."""
    def register(rule: LayoutRule) -> LayoutRule:
        for cls in op_classes:
            LAYOUT_RULES.add(cls, rule)
        return rule
    return register


__all__ = ["LAYOUT_RULES", "LayoutRule", "register_layout_rule"]
