"""Interpretation rules of the tile ops in :mod:`polytile.dialects.tile_shape`:
scans, join, split, cat and gather."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..dialects import tile_shape
from ..ir.operation import Operation
from .executor import ProgramContext, as_value, exit_rule, register_rule


@register_rule(tile_shape.ScanOp)
def scan_rule(op: Operation, operands: list, ctx: ProgramContext) -> list:
    """A Hillis-Steele scan: ``log2(n)`` steps, each running the combine region once on
    whole arrays (element ``i`` combines with element ``i - step``), so it needs only
    associativity, as a GPU's tree scan does.  ``reverse`` scans the flipped axis."""
    return tree_scan(op.regions[0].blocks[0], operands, op.attributes["axis"], op.attributes.get("reverse", False),
                     ctx.run_block)


def tree_scan(block: Any, operands: list, axis: int, reverse: bool, run_block: Callable) -> list:
    """Scan ``operands`` along ``axis`` with the combine region ``block``."""
    values = [np.moveaxis(v, axis, 0) for v in operands]
    if reverse:
        values = [v[::-1] for v in values]
    dtypes = [v.dtype for v in values]
    values = [np.array(v) for v in values]
    n, step = values[0].shape[0], 1
    while step < n:
        earlier = [v[:-step] for v in values]
        later = [v[step:] for v in values]
        combined = run_block(block, earlier + later)
        combined = [np.broadcast_to(as_value(c, d), later[0].shape) for c, d in zip(combined, dtypes)]
        values = [np.concatenate([v[:step], c]) for v, c in zip(values, combined)]
        step *= 2
    if reverse:
        values = [v[::-1] for v in values]
    return [np.ascontiguousarray(np.moveaxis(v, 0, axis)) for v in values]


register_rule(tile_shape.ScanReturnOp, exit_rule)


@register_rule(tile_shape.JoinOp)
def join_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    return np.stack(operands, axis=-1)


@register_rule(tile_shape.SplitOp)
def split_rule(op: Operation, operands: list, ctx: ProgramContext) -> list:
    (source,) = operands
    return [source[..., 0], source[..., 1]]


@register_rule(tile_shape.CatOp)
def cat_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    return np.concatenate(operands)


def gather(op: Operation, src: np.ndarray, index: np.ndarray, axis: int, ctx: Any, batched: bool = False) -> np.ndarray:
    """``take_along_axis``, after checking every index (NumPy would wrap negative ones)."""
    size = src.shape[axis]
    bad = (index < 0) | (index >= size)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        lane = {"lane": where[0]} if batched else {}
        message = (f"gather index {int(index[where])} at position {list(where[1:] if batched else where)} is out "
                   f"of range for axis {op.attributes['axis']} of size {size}")
        raise ctx.error(op, message, **lane)
    return np.take_along_axis(src, index.astype(np.int64), axis=axis)


@register_rule(tile_shape.GatherOp)
def gather_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    src, index = operands
    return gather(op, np.asarray(src), np.asarray(index), op.attributes["axis"], ctx)


def histogram(values: np.ndarray, mask: Any, bins: int) -> np.ndarray:
    """Counts of ``0 .. bins - 1`` in ``values`` (the last axis) where ``mask`` holds."""
    values = values.astype(np.int64)
    keep = (values >= 0) & (values < bins)
    if mask is not None:
        keep &= np.asarray(mask, bool)
    rows = values.reshape(-1, values.shape[-1])
    kept = np.broadcast_to(keep, values.shape).reshape(rows.shape)
    counts = np.stack([np.bincount(row[k], minlength=bins) for row, k in zip(rows, kept)])
    return counts.reshape(values.shape[:-1] + (bins,)).astype(np.int32)


@register_rule(tile_shape.HistogramOp)
def histogram_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    mask = operands[1] if op.mask is not None else None
    return histogram(np.asarray(operands[0]), mask, op.attributes["num_bins"])
