"""Scans: ``pl.associative_scan``, ``pl.cumsum``, ``pl.cumprod`` (``tile.scan``)."""

from __future__ import annotations

from typing import Any

from ..dialects import arith, tile_shape
from ..ir import types as t
from ..ir.builder import InsertionPoint
from ..ir.operation import Block, Region
from . import semantic as sem
from .core import builtin, current_context, semantic_error, tensor, unwrap
from .standard import _axis


def combine_region(elements: list[t.Type], combine: Any, terminator: type) -> Region:
    """A region taking two scalars per operand that ends in ``terminator`` with what
    ``combine(lhs, rhs)`` builds (shared shape with ``tile.reduce``'s region)."""
    ctx = current_context()
    block = Block(elements * 2)
    n = len(elements)
    with ctx.builder.at(InsertionPoint.at_end(block)):
        args = [tensor(a) for a in block.arguments]
        results = combine(args[:n], args[n:])
        results = results if isinstance(results, (tuple, list)) else (results,)
        if len(results) != n:
            raise semantic_error(f"the combine function must return {n} value(s), got {len(results)}")
        handles = []
        for r, e in zip(results, elements):
            r = sem.to_tensor(r, e)
            if r.shape:
                raise semantic_error(f"the combine function must return scalars, got a tensor of shape "
                                     f"{list(r.shape)}")
            handles.append(sem.cast_type(r, e).handle)
        sem.emit(terminator, handles)
    return Region([block])


def scan_values(inputs: list[tensor], axis: Any, combine: Any, reverse: Any = False) -> list[tensor]:
    """Inclusive scan of ``inputs`` (tiles of one shape) along ``axis`` with ``combine``."""
    inputs = [sem.to_tensor(x) for x in inputs]
    shape = inputs[0].shape
    if not shape:
        raise semantic_error("a scan needs a tensor with at least one dimension, got a scalar")
    for x in inputs[1:]:
        if x.shape != shape:
            raise semantic_error(f"the scanned tensors must have one shape, got {list(shape)} and {list(x.shape)}")
    axis = _axis(axis, len(shape))
    reverse = unwrap(reverse)
    if not isinstance(reverse, bool):
        raise semantic_error(f"reverse must be a compile-time bool, got {sem._describe(reverse)}")
    elements = [x.type.element for x in inputs]
    region = combine_region(elements, combine, tile_shape.ScanReturnOp)
    attrs = {"reverse": True} if reverse else {}
    op = sem.emit(tile_shape.ScanOp, [x.handle for x in inputs], axis=axis, result_types=[x.type for x in inputs],
                  regions=[region], **attrs)
    return [tensor(r) for r in op.results]


@builtin
def associative_scan(input: Any, axis: Any, combine_fn: Any, reverse: Any = False) -> Any:
    """Inclusive scan with a ``@jit`` combine function of two (tuples of) scalars; it must
    be associative.  ``input`` may be a tuple of tensors of one shape."""
    ctx = current_context()
    inputs = list(input) if isinstance(input, tuple) else [input]

    def combine(lhs, rhs):
        return ctx.call_function(combine_fn, [*lhs, *rhs])

    out = scan_values(inputs, axis, combine, reverse)
    return tuple(out) if isinstance(input, tuple) else out[0]


def _arith_combine(float_name: str, int_name: str):
    def combine(lhs, rhs):
        a, b = lhs[0], rhs[0]
        name = float_name if t.is_float(a.type) else int_name
        return tensor(sem.emit(arith.BINARY_OPS[name], a.handle, b.handle).result)

    return combine


def _scan_input(input: Any, dtype: Any, widen_small_ints: bool) -> tensor:
    input = sem.to_tensor(input)
    if unwrap(dtype) is not None:
        return sem.cast(input, dtype)
    element = t.element_type(input.type)
    if element == t.bf16:
        return sem.cast_type(input, t.f32)  # as Triton: bf16 scans in fp32
    if widen_small_ints and isinstance(element, t.IntType) and element.width < 32:
        # As Triton's cumsum: narrow integers sum in (u)int32 so they do not overflow.
        return sem.cast_type(input, t.i32 if element.signed or element == t.i1 else t.u32)
    return input


@builtin
def cumsum(input: Any, axis: Any = 0, reverse: Any = False, dtype: Any = None) -> tensor:
    """Inclusive prefix sum along ``axis``; integers narrower than 32 bits sum in (u)int32."""
    input = _scan_input(input, dtype, True)
    return scan_values([input], axis, _arith_combine("addf", "addi"), reverse)[0]


@builtin
def cumprod(input: Any, axis: Any = 0, reverse: Any = False) -> tensor:
    """Inclusive prefix product along ``axis``."""
    input = _scan_input(input, None, False)
    return scan_values([input], axis, _arith_combine("mulf", "muli"), reverse)[0]


__all__ = ["associative_scan", "cumsum", "cumprod"]
