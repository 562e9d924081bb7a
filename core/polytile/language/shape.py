"""Shape builtins over two tiles: ``pl.join``, ``pl.interleave``, ``pl.split``, ``pl.cat``."""

from __future__ import annotations

from typing import Any

from ..dialects import tile_shape
from ..ir import types as t
from . import semantic as sem
from .core import builtin, semantic_error, tensor, unwrap
from .standard import reshape


@builtin
def join(a: Any, b: Any) -> tensor:
    """Stack ``a`` and ``b`` (promoted and broadcast to one type and shape) along a new
    minor dimension of size 2; two scalars give a tensor of shape [2]."""
    a, b = sem.unify([a, b])
    if t.is_pointer(a.type):
        pass  # pointers join like any element type
    scalar = not a.shape
    if scalar:
        a, b = sem.broadcast_to_shape(a, (1,)), sem.broadcast_to_shape(b, (1,))
    joined = tensor(sem.emit(tile_shape.JoinOp, a.handle, b.handle).result)
    return reshape(joined, (2,)) if scalar else joined


@builtin
def interleave(a: Any, b: Any) -> tensor:
    """The values of ``a`` and ``b`` alternating along their last dimension (Triton's
    ``tl.interleave``): ``join(a, b)`` reshaped to ``a.shape[:-1] + [2 * a.shape[-1]]``;
    two scalars give a tensor of shape [2]."""
    joined = join(a, b)
    if len(joined.shape) == 1:
        return joined
    return reshape(joined, (*joined.shape[:-2], 2 * joined.shape[-2]))


@builtin
def split(a: Any) -> tuple[tensor, tensor]:
    """The inverse of ``join``: the two halves of ``a``'s last dimension, which must be 2."""
    a = sem.to_tensor(a)
    if not a.shape or a.shape[-1] != 2:
        raise semantic_error(f"pl.split needs a tensor whose last dimension is 2, got shape {list(a.shape)}")
    op = sem.emit(tile_shape.SplitOp, a.handle)
    return tensor(op.results[0]), tensor(op.results[1])


@builtin
def cat(input: Any, other: Any, can_reorder: Any = False) -> tensor:
    """Concatenate two 1-D tensors.  As in Triton, the result's order is unspecified, so
    ``can_reorder=True`` is required (a reduction over the result does not care)."""
    if not unwrap(can_reorder):
        raise semantic_error("pl.cat may reorder the elements of its result; pass can_reorder=True to accept "
                             "that (as Triton requires), or use pl.join to keep an order")
    a, b = sem.to_tensor(input), sem.to_tensor(other)
    if len(a.shape) != 1 or len(b.shape) != 1:
        raise semantic_error(f"pl.cat needs 1-D tensors, got shapes {list(a.shape)} and {list(b.shape)}")
    if a.type.element != b.type.element:
        raise semantic_error(f"pl.cat needs tensors of one dtype, got {a.dtype} and {b.dtype}")
    return tensor(sem.emit(tile_shape.CatOp, a.handle, b.handle).result)


__all__ = ["join", "split", "cat"]
