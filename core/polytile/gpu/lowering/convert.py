"""``gpu.convert_layout``: the same tile, held by other threads or other registers.

How a conversion is lowered depends on the pair of layouts, so the lowering looks in a
second table, :data:`CONVERSIONS`, keyed by ``(source layout class, result layout
class)``; ``None`` in a key matches any class.  Lookup order: the exact pair, then
``(source, None)``, ``(None, result)``, ``(None, None)``.  Before any of those, a
conversion that keeps every element in the thread that holds it (only the register
order changes, or the result holds copies the source already had) is a register shuffle
and needs no table entry.

A backend or plugin adds a conversion with ``@register_conversion(BlockedLayout,
DotOperandLayout, scratch=size)`` (say, shared memory plus ``ldmatrix``); a conversion
that needs shared memory gives ``scratch(op, target, num_warps) -> bytes``, which the
memory stage turns into ``ctx.scratch(op)`` for the conversion to use.
"""

from __future__ import annotations

from typing import Any, Callable

from ...dialects.gpu import ConvertLayoutOp
from ..allocation import ScratchSize, register_scratch
from .context import LoweringContext, layout_of, linear_layout_of, register_lowering
from .indexing import register_map

#: ``fn(op, registers, ctx) -> registers`` for one conversion (see the module docstring).
Conversion = Callable[[Any, list, LoweringContext], list]
#: (source layout class | None, result layout class | None) -> (conversion, scratch size | None).
CONVERSIONS: dict[tuple[type | None, type | None], tuple[Conversion, ScratchSize | None]] = {}


def register_conversion(source: type | None, result: type | None, *,
                        scratch: ScratchSize | None = None) -> Callable[[Conversion], Conversion]:
    """Decorator: ``fn`` lowers conversions from ``source`` layouts to ``result`` layouts
    (layout classes of :mod:`polytile.gpu.layouts`; ``None`` for any).  ``scratch(op,
    target, num_warps) -> bytes`` says how much shared memory it needs (None: none)."""
    def register(fn: Conversion) -> Conversion:
        CONVERSIONS[(source, result)] = (fn, scratch)
        return fn
    return register


def find_conversion(source_layout: Any, result_layout: Any) -> tuple[Conversion, ScratchSize | None] | None:
    src, dst = type(source_layout), type(result_layout)
    for key in ((src, dst), (src, None), (None, dst), (None, None)):
        found = CONVERSIONS.get(key)
        if found is not None:
            return found
    return None


def _in_registers(op: Any) -> list[int] | None:
    """The register permutation that performs ``op`` without moving data between threads."""
    return register_map(linear_layout_of(op.source), linear_layout_of(op.result), lambda c: c)


@register_scratch(ConvertLayoutOp)
def _conversion_scratch(op: Any, target: Any, num_warps: int) -> int:
    if _in_registers(op) is not None:
        return 0
    found = find_conversion(layout_of(op.source), layout_of(op.result))
    return 0 if found is None or found[1] is None else found[1](op, target, num_warps)


@register_lowering(ConvertLayoutOp)
def _convert_layout(op: Any, operands: list, ctx: LoweringContext) -> list:
    source, result = op.source, op.result
    mapping = _in_registers(op)
    if mapping is not None:
        return [[operands[0][r] for r in mapping]]
    found = find_conversion(layout_of(source), layout_of(result))
    if found is None:
        raise ctx.unsupported(op, f"'{op.name}' from {source.type} to {result.type}, which moves data between "
                                  "threads (through shared memory),")
    return [found[0](op, operands[0], ctx)]


__all__ = ["CONVERSIONS", "Conversion", "find_conversion", "register_conversion"]
