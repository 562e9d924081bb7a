"""``tile.histogram`` on GPUs: the bins in shared memory, counted with shared-memory
atomics.

The op's scratch holds ``num_bins`` i32 counters.  Each thread zeroes the bins it holds
of the result, a barrier, then every element is counted once (by the first thread and
register holding it: layouts may give several threads copies) with an atomic add on
its bin, where it lies in ``[0, num_bins)`` and its mask holds; a barrier, and each
thread loads its bins of the result.  Shared-memory atomics are cheap on every GPU this
serves, and the counts need no order.

``sync = "inside"``: the op's first accesses are writes, its barriers separate them from
its reads, and ``insert-barriers`` guards whoever uses the bytes next.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from ...dialects import tile_shape
from ...ir import types as t
from ..allocation import register_scratch
from ..layout_rules import register_layout_rule
from .context import LoweringContext, linear_layout_of, register_lowering
from .indexing import duplicate_register_mask
from .memory import thread_owner
from .shared import PaddedPlacement, _address, load_registers, store_registers, vector_width


@register_layout_rule(tile_shape.HistogramOp)
def _histogram_layouts(op: Any, groups: Any) -> None:
    groups.union([op.input] + ([op.mask] if op.mask is not None else []))
    groups.add(op.result)


@register_scratch(tile_shape.HistogramOp)
def _histogram_scratch(op: Any, target: Any, num_warps: int) -> int:
    return 4 * op.attributes["num_bins"]


@register_lowering(tile_shape.HistogramOp)
def _histogram(op: Any, operands: list, ctx: LoweringContext) -> list:
    b = ctx.builder
    bins = op.attributes["num_bins"]
    values = operands[0]
    masks = operands[1] if op.mask is not None else None
    placement = PaddedPlacement((bins,), 0, ())
    result_layout = linear_layout_of(op.result)
    base = ctx.scratch(op)
    i32 = ir.IntType(32)
    width = vector_width(result_layout, 0, 32, bins, ctx.target.max_vector_bits)
    store_registers(ctx, base, [ir.Constant(i32, 0)] * result_layout.num_registers, result_layout, t.i32,
                    placement, width)
    ctx.target.barrier(b)

    layout = linear_layout_of(op.input)
    owner = thread_owner(ctx, layout)
    duplicates = duplicate_register_mask(layout)
    signed = t.element_type(op.input.type).signed
    for r, value in enumerate(values):
        if r & duplicates:
            continue  # a copy of register r & ~duplicates: counted there
        # In at least 32 bits (a bin count may not fit the element type: 256 bins of u8),
        # compared unsigned: negative values of signed inputs are huge, so out of range.
        if value.type.width < 32:
            value = b.sext(value, i32) if signed else b.zext(value, i32)
        counted = b.icmp_unsigned("<", value, ir.Constant(value.type, bins))
        if masks is not None:
            counted = b.and_(counted, masks[r])
        if owner is not None:
            counted = b.and_(counted, owner)
        bin_ = b.trunc(value, i32) if value.type.width > 32 else value  # in range: the low bits are the value
        with b.if_then(counted):
            b.atomic_rmw("add", _address(ctx, base, bin_, 4, i32), ir.Constant(i32, 1), "monotonic")
    ctx.target.barrier(b)
    return [load_registers(ctx, base, result_layout, t.i32, placement, width)]
