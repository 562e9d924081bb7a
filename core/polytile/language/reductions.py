"""Reductions that return indices: ``pl.argmax``, ``pl.argmin`` and
``pl.max/min(..., return_indices=True)``; and ``pl.histogram``.

They are one ``tile.reduce`` of two operands, the values and their int32 indices, with
Triton's combine: the larger (smaller) value wins, and on a tie the smaller index when
``tie_break_left`` (Triton's default).  NaN compares false with everything, so, as in
Triton, which index a NaN input gives is unspecified.
"""

from __future__ import annotations

from typing import Any

from ..dialects import arith, tile, tile_shape
from ..ir import types as t
from . import semantic as sem
from .core import builtin, semantic_error, tensor, unwrap
from .standard import _axis, expand_dims, reduce_values, reshape


def _index_combine(kind: str, tie_break_left: bool):
    def combine(lhs, rhs):
        (v1, i1), (v2, i2) = lhs, rhs
        better = sem.compare("gt" if kind == "max" else "lt", v1, v2)
        if tie_break_left:
            tie = sem.binary("and", sem.compare("eq", v1, v2), sem.compare("lt", i1, i2))
            better = sem.binary("or", better, tie)
        value = tensor(sem.emit(arith.SelectOp, better.handle, v1.handle, v2.handle).result)
        index = tensor(sem.emit(arith.SelectOp, better.handle, i1.handle, i2.handle).result)
        return value, index

    return combine


def reduce_with_indices(kind: str, input: Any, axis: Any, tie_break_left: Any, keep_dims: Any) -> tuple:
    """The max (min) along ``axis`` and its int32 index (of the flattened tensor when
    ``axis`` is None)."""
    input = sem.to_tensor(input)
    if t.is_bool(input.type):
        input = sem.cast_type(input, t.i32)
    if not (t.is_float(input.type) or t.is_integer(input.type)):
        raise semantic_error(f"arg{kind} needs numbers, got {sem._describe(input)}")
    shape, axis, keep_dims = input.shape, unwrap(axis), bool(unwrap(keep_dims))
    if not shape:
        return input, sem.constant(0, t.i32)
    if axis is None:
        flat = reshape(input, (input.numel,))
        value, index = reduce_with_indices(kind, flat, 0, tie_break_left, False)
        if keep_dims:
            value, index = reshape(value, (1,) * len(shape)), reshape(index, (1,) * len(shape))
        return value, index
    axis = _axis(axis, len(shape))
    index = tensor(sem.emit(tile.ArangeOp, start=0, end=shape[axis]).result)
    others = tuple(d for d in range(len(shape)) if d != axis)
    if others:
        index = sem.broadcast_to_shape(expand_dims(index, others), shape)
    value, index = reduce_values([input, index], axis, _index_combine(kind, bool(unwrap(tie_break_left))),
                                 keep_dims)
    return value, index


@builtin
def argmax(input: Any, axis: Any, tie_break_left: Any = True, keep_dims: Any = False) -> tensor:
    """The int32 index of the maximum along ``axis`` (the first one on ties by default)."""
    return reduce_with_indices("max", input, axis, tie_break_left, keep_dims)[1]


@builtin
def argmin(input: Any, axis: Any, tie_break_left: Any = True, keep_dims: Any = False) -> tensor:
    """The int32 index of the minimum along ``axis`` (the first one on ties by default)."""
    return reduce_with_indices("min", input, axis, tie_break_left, keep_dims)[1]


__all__ = ["argmax", "argmin", "reduce_with_indices"]


@builtin
def histogram(input: Any, num_bins: Any, mask: Any = None) -> tensor:
    """How many elements of the 1-D integer tensor ``input`` equal each of ``0 ..
    num_bins - 1`` (Triton's ``tl.histogram``): an int32 tensor of ``num_bins``.  Elements
    where ``mask`` is false, and values outside ``[0, num_bins)``, are not counted."""
    x = sem.to_tensor(input)
    bins = unwrap(num_bins)
    if not isinstance(bins, int) or isinstance(bins, bool) or bins < 1 or bins & (bins - 1):
        raise semantic_error(f"pl.histogram: num_bins must be a compile-time power of two, got {bins!r}")
    if len(x.shape) != 1 or not t.is_integer(x.type) or t.element_type(x.type) == t.i1:
        raise semantic_error(f"pl.histogram counts the values of a 1-D integer tensor, got {sem._describe(x)}")
    handles = [x.handle]
    mask = unwrap(mask)
    if mask is not None:
        mask = sem.broadcast_to_shape(sem.to_bool(sem.to_tensor(mask)), tuple(x.shape))
        handles.append(mask.handle)
    return tensor(sem.emit(tile_shape.HistogramOp, *handles, num_bins=bins).result)
