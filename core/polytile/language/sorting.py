"""Reordering along one dimension: ``pl.flip``, ``pl.sort``, ``pl.topk`` (Triton's names).

Each is a network of pair exchanges built from shape ops every target lowers
(``permute``, ``reshape``, ``split``, ``join``) and ``where``, so it runs wherever a
kernel does.  A dimension of size ``n = 2**m`` is viewed as ``m`` bits of an index; a
*level* ``j`` (a power of two below ``n``) pairs index ``i`` with ``i ^ j``:

    x: (..., n)  -->  (..., n / 2j, 2, j)  --permute the 2 last-->  (..., n / 2j, j, 2)
      --split-->  lo, hi: the elements whose bit j is 0 and 1, (..., n / 2j, j) each

and ``join`` then the inverse permute and reshape put a pair back.  Flipping swaps every
pair at every level (index ``i`` goes to ``i ^ (n - 1)``).  Sorting is Batcher's bitonic
network: for block sizes ``k = 2, 4, .., n`` and levels ``j = k/2, .., 1`` each pair is put
in order, ascending where bit ``k`` of its index is 0 (descending elsewhere, making the
bitonic runs the next block merges); ``m (m + 1) / 2`` levels in all.  The exchange keeps
the first element on ties and compares with ``>`` as Triton does; NaN compares false, so
NaNs stay where a comparison leaves them (Triton's sort is no different).
"""

from __future__ import annotations

from typing import Any

from . import semantic as sem
from .core import builtin, semantic_error, tensor, unwrap
from .shape import join, split
from .standard import arange, permute, reshape


def _log2(n: int, what: str) -> int:
    if n < 1 or n & (n - 1):
        raise semantic_error(f"{what} needs a power-of-two dimension, got {n}")
    return n.bit_length() - 1


def _dimension(x: tensor, dim: Any, what: str) -> int:
    dim = unwrap(dim)
    rank = len(x.shape)
    if rank == 0:
        raise semantic_error(f"{what} needs a tensor with a dimension, got a scalar")
    if dim is None:
        return rank - 1
    if not isinstance(dim, int) or not -rank <= dim < rank:
        raise semantic_error(f"{what}: dim={dim!r} is not a dimension of a tensor of rank {rank}")
    return dim % rank


def _to_last(x: tensor, dim: int) -> tuple[tensor, tuple[int, ...] | None]:
    """``x`` with dimension ``dim`` last, and the order that puts it back (None: it was)."""
    rank = len(x.shape)
    if dim == rank - 1:
        return x, None
    order = tuple(d for d in range(rank) if d != dim) + (dim,)
    back = tuple(order.index(d) for d in range(rank))
    return permute(x, order), back


def _pairs(x: tensor, j: int) -> tuple[tensor, tensor]:
    """The elements of ``x``'s last dimension whose index has bit ``j`` clear and set,
    each of shape ``(..., n / 2j, j)``."""
    *outer, n = x.shape
    view = reshape(x, (*outer, n // (2 * j), 2, j))
    rank = len(view.shape)
    last = permute(view, (*range(rank - 2), rank - 1, rank - 2))
    return split(last)


def _unpair(lo: tensor, hi: tensor, n: int) -> tensor:
    """The inverse of :func:`_pairs`."""
    joined = join(lo, hi)
    rank = len(joined.shape)
    view = permute(joined, (*range(rank - 3), rank - 3, rank - 1, rank - 2))
    return reshape(view, (*joined.shape[:-3], n))


def _bit_of_index(shape: tuple[int, ...], j: int, k: int) -> tensor:
    """For a pair view ``(..., n / 2j, j)``: whether bit ``k`` of the pair's lower index is
    set, broadcast over the view."""
    rows, cols = shape[-2], shape[-1]
    index = arange(0, rows)[:, None] * (2 * j) + arange(0, cols)[None, :]  # the lower index of each pair
    bit = (index & k) != 0
    return sem.broadcast_to_shape(bit, shape) if len(shape) > 2 else bit


@builtin
def flip(x: Any, dim: Any = None) -> tensor:
    """``x`` reversed along ``dim`` (default: the last), whose size must be a power of two."""
    x = sem.to_tensor(x)
    axis = _dimension(x, dim, "pl.flip")
    steps = _log2(x.shape[axis], "pl.flip")
    y, back = _to_last(x, axis)
    n = y.shape[-1]
    for level in range(steps):
        lo, hi = _pairs(y, 1 << level)
        y = _unpair(hi, lo, n)
    return y if back is None else permute(y, back)


def _bitonic_sort(y: tensor, descending: bool) -> tensor:
    n = y.shape[-1]
    steps = _log2(n, "pl.sort")
    for block in range(1, steps + 1):
        k = 1 << block
        for level in range(block - 1, -1, -1):
            j = 1 << level
            lo, hi = _pairs(y, j)
            # Ascending runs where bit k of the index is 0 (the whole dimension at the last
            # block, where k = n); a descending sort turns every run around.
            down = _bit_of_index(lo.shape, j, k) if k < n else None
            swap = lo > hi
            if down is not None:
                swap = swap != down
            if descending:
                swap = swap == False  # noqa: E712 (a tensor comparison)
                swap = swap & (lo != hi)  # equal elements stay where they are
            lo, hi = sem.where(swap, hi, lo), sem.where(swap, lo, hi)
            y = _unpair(lo, hi, n)
    return y


@builtin
def sort(x: Any, dim: Any = None, descending: Any = False) -> tensor:
    """``x`` sorted along ``dim`` (default: the last; its size a power of two), ascending
    unless ``descending`` (a compile-time bool)."""
    x = sem.to_tensor(x)
    axis = _dimension(x, dim, "pl.sort")
    descending = unwrap(descending)
    if not isinstance(descending, (bool, int)):
        raise semantic_error(f"pl.sort: descending must be a compile-time bool, got {sem._describe(descending)}")
    y, back = _to_last(x, axis)
    y = _bitonic_sort(y, bool(descending))
    return y if back is None else permute(y, back)


@builtin
def topk(x: Any, k: Any, dim: Any = None) -> tensor:
    """The ``k`` largest values of ``x`` along ``dim`` (default: the last), largest first;
    ``k`` and the dimension's size are powers of two, ``k`` at most the size."""
    x = sem.to_tensor(x)
    axis = _dimension(x, dim, "pl.topk")
    k = unwrap(k)
    if not isinstance(k, int) or isinstance(k, bool):
        raise semantic_error(f"pl.topk: k must be a compile-time integer, got {sem._describe(k)}")
    n = x.shape[axis]
    _log2(k, "pl.topk's k")
    if not 1 <= k <= n:
        raise semantic_error(f"pl.topk: k={k} is not between 1 and the dimension's size {n}")
    y, back = _to_last(x, axis)
    y = _bitonic_sort(y, True)
    while y.shape[-1] > k:  # keep the first half (the largest values): the pair level of half the size
        *outer, size = y.shape
        first, _ = _pairs(y, size // 2)
        y = reshape(first, (*outer, size // 2))
    return y if back is None else permute(y, back)


__all__ = ["flip", "sort", "topk"]
