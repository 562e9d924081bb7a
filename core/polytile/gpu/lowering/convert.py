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

The ``(None, None)`` entry, any layout to any layout, goes through shared memory
(:mod:`.shared`): each thread stores its registers into a padded row-major copy of the
tile, vectorized along the dimension both layouts hold most consecutive elements of, the
program synchronizes, and each thread loads what the result layout gives it.  The scratch
is the whole tile plus padding; the op's one barrier sits between its stores and its
loads (``sync = "inside"`` for ``insert-barriers``).

``tile.trans`` and ``tile.reshape`` are lowered here too: in registers when every thread
already holds the elements it needs, otherwise by the same store-synchronize-load, the
stores placing each element where the result's coordinates put it.
"""

from __future__ import annotations

from typing import Any, Callable

from ...dialects import tile
from ...dialects.gpu import ConvertLayoutOp
from ..allocation import ScratchSize, register_scratch
from ..linear_layout import LinearLayout, log2
from .context import LoweringContext, layout_of, linear_layout_of, register_lowering
from .indexing import register_map
from .shared import PaddedPlacement, check_storable, load_registers, store_registers, vector_width
from .types import element_bits

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


# --------------------------------------------------------------------------------------
# Through shared memory


class ShuffleThroughShared:
    """How one op moves a tile through shared memory: where the elements go
    (``placement``, in the result's coordinates), how the source's coordinates map there
    (``to_placement``, None when they are the same), and how many registers each store
    and load moves at once."""

    def __init__(self, source: LinearLayout, result: LinearLayout, bits: int, max_bits: int,
                 source_dim_of: Any = None, to_placement: Any = None, reshape: bool = False):
        shape, rank = result.shape, len(result.shape)
        self.to_placement = to_placement
        source_dim_of = source_dim_of or (lambda d: d)
        if reshape:
            # Row-major without padding: the offset is the flat index, which both sides share.
            inner = rank - 1
            self.store_width = vector_width(source, len(source.shape) - 1, bits, source.shape[-1], max_bits)
            self.load_width = vector_width(result, inner, bits, shape[inner], max_bits)
            pad = 0
        else:
            def widths(d: int) -> tuple[int, int]:
                return (vector_width(source, source_dim_of(d), bits, shape[d], max_bits),
                        vector_width(result, d, bits, shape[d], max_bits))

            # The dimension both layouts hold the most consecutive elements of; ties go to
            # the wider loads, then to the last dimension.
            inner = max(range(rank), key=lambda d: (min(widths(d)), widths(d)[1], widths(d)[0], d))
            self.store_width, self.load_width = widths(inner)
            # Rows shifted by a vector from each other: threads walking down a column meet
            # different banks (Triton pads its conversion scratch the same way).
            pad = max(self.store_width, self.load_width) if any(shape[d] > 1 for d in range(rank) if d != inner) else 0
        outer = tuple(d for d in range(rank) if d != inner)
        self.placement = PaddedPlacement(tuple(shape), inner, outer, pad)

    def scratch_bytes(self, bits: int) -> int:
        return self.placement.elements * bits // 8

    def emit(self, ctx: LoweringContext, op: Any, registers: list, source: LinearLayout, result: LinearLayout,
             element: Any) -> list:
        check_storable(ctx, op, element)
        base = ctx.scratch(op)
        store_registers(ctx, base, registers, source, element, self.placement, self.store_width, self.to_placement)
        ctx.target.barrier(ctx.builder)
        return load_registers(ctx, base, result, element, self.placement, self.load_width)


def _element_bits(op: Any) -> int:
    return element_bits(op.result.type)


def _max_bits(target: Any) -> int:
    return getattr(target, "max_vector_bits", 128)


def _plain_shuffle(op: Any, target: Any) -> ShuffleThroughShared:
    return ShuffleThroughShared(linear_layout_of(op.source), linear_layout_of(op.result), _element_bits(op),
                                _max_bits(target))


@register_conversion(None, None, scratch=lambda op, target, num_warps: _plain_shuffle(op, target).scratch_bytes(
    _element_bits(op)))
def _through_shared(op: Any, registers: list, ctx: LoweringContext) -> list:
    return _plain_shuffle(op, ctx.target).emit(ctx, op, registers, linear_layout_of(op.source),
                                               linear_layout_of(op.result), op.result.type.element)


def _permuted(order: tuple[int, ...]) -> Any:
    return lambda ops, coords: [coords[order[i]] for i in range(len(order))]


def _reshaped(source_shape: tuple[int, ...], result_shape: tuple[int, ...]) -> Any:
    """Coordinates in ``source_shape`` -> coordinates of the same row-major index in
    ``result_shape`` (powers of two: shifts, masks and XOR)."""
    def convert(ops: Any, coords: list) -> list:
        flat, shift = None, 0
        for d in reversed(range(len(source_shape))):
            if source_shape[d] > 1:
                part = ops.shl(coords[d], shift) if shift else coords[d]
                flat = part if flat is None else ops.xor(flat, part)
            shift += log2(source_shape[d])
        flat = flat if flat is not None else ops.const(0)
        result, shift = [None] * len(result_shape), 0
        for d in reversed(range(len(result_shape))):
            size = result_shape[d]
            result[d] = ops.and_(ops.shr(flat, shift) if shift else flat, size - 1) if size > 1 else ops.const(0)
            shift += log2(size)
        return result
    return convert


def _unflatten_py(index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    coords = []
    for size in reversed(shape):
        coords.append(index % size)
        index //= size
    return tuple(reversed(coords))


def _flatten_py(coords: tuple[int, ...], shape: tuple[int, ...]) -> int:
    index = 0
    for c, size in zip(coords, shape):
        index = index * size + c
    return index


def _shape_op_plan(op: Any, target: Any) -> tuple[list[int] | None, ShuffleThroughShared | None]:
    """(register map, None) when every thread holds what it needs, else (None, shuffle)."""
    source, result = linear_layout_of(op.source), linear_layout_of(op.result)
    src_shape, dst_shape = op.source.type.shape, op.result.type.shape
    if isinstance(op, tile.TransOp):
        order = tuple(op.order)
        inverse = tuple(order.index(d) for d in range(len(order)))
        mapping = register_map(source, result, lambda c: tuple(c[inverse[d]] for d in range(len(order))))
        if mapping is not None:
            return mapping, None
        return None, ShuffleThroughShared(source, result, _element_bits(op), _max_bits(target),
                                          source_dim_of=lambda d: order[d], to_placement=_permuted(order))
    mapping = register_map(source, result, lambda c: _unflatten_py(_flatten_py(c, dst_shape), src_shape))
    if mapping is not None:
        return mapping, None
    return None, ShuffleThroughShared(source, result, _element_bits(op), _max_bits(target),
                                      to_placement=_reshaped(src_shape, dst_shape), reshape=True)


@register_scratch(tile.TransOp, tile.ReshapeOp)
def _shape_op_scratch(op: Any, target: Any, num_warps: int) -> int:
    shuffle = _shape_op_plan(op, target)[1]
    return 0 if shuffle is None else shuffle.scratch_bytes(_element_bits(op))


@register_lowering(tile.TransOp, tile.ReshapeOp)
def _shape_op(op: Any, operands: list, ctx: LoweringContext) -> list:
    mapping, shuffle = _shape_op_plan(op, ctx.target)
    if mapping is not None:
        return [[operands[0][r] for r in mapping]]
    return [shuffle.emit(ctx, op, operands[0], linear_layout_of(op.source), linear_layout_of(op.result),
                         op.result.type.element)]


__all__ = ["CONVERSIONS", "Conversion", "ShuffleThroughShared", "find_conversion", "register_conversion"]
