"""Shape builtins over two tiles: ``pl.join``, ``pl.interleave``, ``pl.split``, ``pl.cat``,
``pl.gather``; and ``pl.ravel``."""

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


@builtin
def gather(src: Any, index: Any, axis: Any) -> tensor:
    """Elements of ``src`` picked along ``axis`` by ``index`` (Triton's ``tl.gather``):
    ``result[i][j] = src[index[i][j]][j]`` for ``axis=0``, and so for any rank.  ``index``
    is an integer tensor of ``src``'s rank whose other dimensions equal ``src``'s; the
    result has ``index``'s shape and ``src``'s dtype.  An index outside ``[0,
    src.shape[axis])`` is undefined on a GPU, as in Triton (the interpreter reports it)."""
    src, index = sem.to_tensor(src), sem.to_tensor(index)
    axis = unwrap(axis)
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise semantic_error(f"pl.gather: axis must be a compile-time integer, got {axis!r}")
    if not src.shape:
        raise semantic_error("pl.gather needs a tensor to gather from, got a scalar")
    rank = len(src.shape)
    if not -rank <= axis < rank:
        raise semantic_error(f"pl.gather: axis {axis} is out of range for a tensor of rank {rank}")
    axis %= rank
    if not t.is_integer(index.type) or t.element_type(index.type) == t.i1:
        raise semantic_error(f"pl.gather: the index must be an integer tensor, got {sem._describe(index)}")
    if len(index.shape) != rank:
        raise semantic_error(f"pl.gather: the index must have the source's rank {rank}, got shape "
                             f"{list(index.shape)} for a source of shape {list(src.shape)}")
    for d in range(rank):
        if d != axis and index.shape[d] != src.shape[d]:
            raise semantic_error(f"pl.gather: the index's dimension {d} is {index.shape[d]} but the source's is "
                                 f"{src.shape[d]}: every dimension but the axis ({axis}) must match")
    return tensor(sem.emit(tile_shape.GatherOp, src.handle, index.handle, axis=axis).result)


@builtin
def ravel(x: Any, can_reorder: Any = False) -> tensor:
    """``x`` as a 1-D tensor of all its elements, in row-major order (Triton's
    ``tl.ravel``; ``can_reorder`` is accepted as Triton's, and the order kept)."""
    x = sem.to_tensor(x)
    count = 1
    for d in x.shape:
        count *= d
    return reshape(x, (count,))
