"""``gpu.convert_layout``: the same tile, held by other threads or other registers.

How a conversion is lowered depends on the pair of layouts, so the lowering looks in a
second table, :data:`CONVERSIONS`, keyed by ``(source layout class, result layout
class)``; ``None`` in a key matches any class.  Lookup order: the exact pair, then
``(source, None)``, ``(None, result)``, ``(None, None)``.  Before any of those, a
conversion that keeps every element in the thread that holds it (only the register
order changes, or the result holds copies the source already had) is a register shuffle
and needs no table entry.

A backend or plugin adds a conversion with ``@register_conversion(BlockedLayout,
DotOperandLayout)`` (say, shared memory plus ``ldmatrix``); a conversion that needs
shared memory also registers its size for the op (``allocation.register_scratch``),
which the memory stage turns into ``ctx.scratch(op)``.
"""

from __future__ import annotations

from typing import Any, Callable

from ...dialects.gpu import ConvertLayoutOp
from .context import LoweringContext, layout_of, linear_layout_of, register_lowering
from .indexing import register_map

#: ``fn(op, registers, ctx) -> registers`` for one conversion (see the module docstring).
Conversion = Callable[[Any, list, LoweringContext], list]
CONVERSIONS: dict[tuple[type | None, type | None], Conversion] = {}


def register_conversion(source: type | None, result: type | None) -> Callable[[Conversion], Conversion]:
    """Decorator: ``fn`` lowers conversions from ``source`` layouts to ``result`` layouts
    (layout classes of :mod:`polytile.gpu.layouts`; ``None`` for any)."""
    def register(fn: Conversion) -> Conversion:
        CONVERSIONS[(source, result)] = fn
        return fn
    return register


def find_conversion(source_layout: Any, result_layout: Any) -> Conversion | None:
    src, dst = type(source_layout), type(result_layout)
    for key in ((src, dst), (src, None), (None, dst), (None, None)):
        found = CONVERSIONS.get(key)
        if found is not None:
            return found
    return None


@register_lowering(ConvertLayoutOp)
def _convert_layout(op: Any, operands: list, ctx: LoweringContext) -> list:
    source, result = op.source, op.result
    mapping = register_map(linear_layout_of(source), linear_layout_of(result), lambda c: c)
    if mapping is not None:
        return [[operands[0][r] for r in mapping]]
    conversion = find_conversion(layout_of(source), layout_of(result))
    if conversion is None:
        raise ctx.unsupported(op, f"'{op.name}' from {source.type} to {result.type}, which moves data between "
                                  "threads (through shared memory),")
    return [conversion(op, operands[0], ctx)]


__all__ = ["CONVERSIONS", "Conversion", "find_conversion", "register_conversion"]
