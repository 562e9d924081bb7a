"""``tile.gather`` on GPUs: the source through shared memory, each result element loaded
where its index points.

The result takes the index's layout (the layout rule below unions them; the source keeps
its own).  The lowering stores the source row-major in the op's scratch
(:func:`.shared.store_registers`, vectorized where the source's threads hold consecutive
elements), synchronizes once, and each thread loads every element it holds of the
result from the offset of ``src[..., index, ...]``: its own coordinates with the axis
coordinate replaced by the index register.  An index is masked to the axis's
(power-of-two) size first: an index out of range is undefined behaviour, as in Triton,
but it never reads outside the scratch.

``sync = "inside"``: the one barrier sits between the stores and the loads, and
``insert-barriers`` guards whoever uses the bytes next.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from ...dialects import tile_shape
from ..allocation import register_scratch
from ..layout_rules import register_layout_rule
from .context import LoweringContext, linear_layout_of, register_lowering
from .indexing import coordinates
from .shared import (
    LLVMAddOps,
    PaddedPlacement,
    _address,
    _from_storage,
    check_storable,
    element_bytes,
    element_offset,
    storage_type,
    store_registers,
    vector_width,
)
from .types import element_bits


@register_layout_rule(tile_shape.GatherOp)
def _gather_layouts(op: Any, groups: Any) -> None:
    groups.add(op.src)
    groups.union([op.index, op.result])


def _placement(op: Any) -> PaddedPlacement:
    shape = tuple(op.src.type.shape)
    rank = len(shape)
    return PaddedPlacement(shape, rank - 1, tuple(range(rank - 1)))


@register_scratch(tile_shape.GatherOp)
def _gather_scratch(op: Any, target: Any, num_warps: int) -> int:
    return _placement(op).elements * element_bits(op.src.type.element) // 8


@register_lowering(tile_shape.GatherOp)
def _gather(op: Any, operands: list, ctx: LoweringContext) -> list:
    sources, indices = operands
    element = op.src.type.element
    check_storable(ctx, op, element)
    b = ctx.builder
    placement = _placement(op)
    source_layout, result_layout = linear_layout_of(op.src), linear_layout_of(op.result)
    rank, axis = len(placement.shape), op.attributes["axis"]
    base = ctx.scratch(op)
    width = vector_width(source_layout, rank - 1, element_bits(element), placement.shape[-1], ctx.target.max_vector_bits)
    store_registers(ctx, base, sources, source_layout, element, placement, width)
    ctx.target.barrier(b)

    ops = LLVMAddOps(b)
    coords = coordinates(ops, result_layout, ctx.lane_id, ctx.warp_id)
    stored, bytes_ = storage_type(element), element_bytes(element)
    i32 = ir.IntType(32)
    mask = ir.Constant(i32, placement.shape[axis] - 1)
    results = []
    for register, index in enumerate(indices):
        if index.type.width > 32:
            index = b.trunc(index, i32)  # masked to the axis's size next: the low bits decide
        elif index.type.width < 32:
            # Zero-extended: a valid index is non-negative whatever its signedness (a uint8
            # index of 200 is 200), and a negative one is out of range either way.
            index = b.zext(index, i32)
        where = list(coords[register])
        where[axis] = b.and_(index, mask)
        offset = element_offset(ops, placement, where)
        value = b.load(_address(ctx, base, offset, bytes_, stored), typ=stored, align=bytes_)
        results.append(_from_storage(b, value, element))
    return [results]

