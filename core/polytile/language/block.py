"""Block pointers: ``pl.make_block_ptr``, ``pl.advance``, and ``pl.load`` / ``pl.store``
through a block pointer (Triton's API).

A block pointer is one IR value of type ``block_ptr<...>`` (``tile.make_block_ptr``,
``tile.advance``), so it flows through ``if`` and loops like any tensor: the common
``a_ptr = pl.advance(a_ptr, (0, BLOCK_K))`` in a run-time loop makes it loop-carried with
no special handling.  Loads and stores become ``tile.load_block`` / ``tile.store_block``,
which keep the whole-block access visible to backends (a TMA plugin, say).
"""

from __future__ import annotations

from typing import Any

from ..dialects import tile_block
from ..ir import types as t
from . import semantic as sem
from .core import builtin, semantic_error, tensor, unwrap

_PADDING = {"": "", None: "", "zero": "zero", "nan": "nan"}


def is_block_pointer(value: Any) -> bool:
    value = unwrap(value)
    return isinstance(value, tensor) and isinstance(value.type, t.BlockPointerType)


def _ints(value: Any, what: str, rank: int | None = None) -> tuple:
    """A compile-time tuple of ints (``block_shape``, ``order``, ``boundary_check``)."""
    value = unwrap(value)
    if isinstance(value, (int, tensor)) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, (tuple, list)):
        raise semantic_error(f"{what} must be a tuple of integers, got {sem._describe(value)}")
    items = tuple(unwrap(v) for v in value)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise semantic_error(f"{what} must be compile-time integers, got {list(items)}")
    if rank is not None and len(items) != rank:
        raise semantic_error(f"{what} has {len(items)} entries for a block of rank {rank}")
    return items


def _scalars(value: Any, what: str, rank: int, type_: t.Type) -> list:
    """Integer scalars (run-time or literal) as IR values of ``type_`` (i32/i64)."""
    value = unwrap(value)
    if not isinstance(value, (tuple, list)):
        value = (value,)
    if len(value) != rank:
        raise semantic_error(f"{what} has {len(value)} entries for a block of rank {rank}")
    handles = []
    for item in value:
        item = unwrap(item)
        item = sem.to_tensor(item) if not isinstance(item, tensor) else item
        if item.shape or not t.is_integer(item.type) or item.type == t.i1:
            raise semantic_error(f"{what} must be integer scalars, got {sem._describe(item)}")
        handles.append(sem.cast_type(item, type_).handle)
    return handles


@builtin
def make_block_ptr(base: Any, shape: Any, strides: Any, offsets: Any, block_shape: Any, order: Any) -> tensor:
    """A pointer to a ``block_shape`` block at ``offsets`` of the N-D array at ``base``
    with ``shape`` and ``strides`` (in elements).  ``order`` lists the dimensions from the
    fastest- to the slowest-varying in memory, as in Triton."""
    base = unwrap(base)
    if not isinstance(base, tensor) or not isinstance(base.type, t.PointerType):
        raise semantic_error("pl.make_block_ptr needs a pointer scalar as its base (a kernel argument bound to "
                             f"an array), got {sem._describe(base)}")
    if isinstance(base.type.pointee, t.PointerType):
        raise semantic_error("pl.make_block_ptr: blocks of pointers are not supported")
    block_shape = _ints(block_shape, "pl.make_block_ptr's block_shape")
    rank = len(block_shape)
    if rank == 0 or any(d <= 0 for d in block_shape):
        raise semantic_error(f"pl.make_block_ptr's block_shape must be positive sizes, got {list(block_shape)}")
    order = _ints(order, "pl.make_block_ptr's order", rank)
    if sorted(order) != list(range(rank)):
        raise semantic_error(f"pl.make_block_ptr's order {list(order)} must be a permutation of "
                             f"{list(range(rank))}")
    # As Triton: shape and strides are i64 (arrays may exceed 2**31 elements), offsets i32.
    return tensor(sem.emit(tile_block.MakeBlockPtrOp, base.handle,
                           _scalars(shape, "pl.make_block_ptr's shape", rank, t.i64),
                           _scalars(strides, "pl.make_block_ptr's strides", rank, t.i64),
                           _scalars(offsets, "pl.make_block_ptr's offsets", rank, t.i32),
                           block_shape=block_shape, order=order).result)


@builtin
def advance(base: Any, offsets: Any) -> tensor:
    """The block pointer ``base`` moved by ``offsets`` elements (one per dimension)."""
    base = unwrap(base)
    if not is_block_pointer(base):
        raise semantic_error(f"pl.advance needs a block pointer (from pl.make_block_ptr), got {sem._describe(base)}")
    rank = base.type.tile.rank
    return tensor(sem.emit(tile_block.AdvanceOp, base.handle,
                           _scalars(offsets, "pl.advance's offsets", rank, t.i32)).result)


def _boundary_check(value: Any, rank: int, what: str) -> tuple:
    dims = _ints(value if unwrap(value) is not None else (), f"{what}'s boundary_check")
    for d in dims:
        if not 0 <= d < rank:
            raise semantic_error(f"{what}'s boundary_check names dimension {d}, but the block has rank {rank} "
                                 f"(dimensions 0..{rank - 1})")
    if len(set(dims)) != len(dims):
        raise semantic_error(f"{what}'s boundary_check repeats a dimension: {list(dims)}")
    return tuple(sorted(dims))


def load_block(pointer: tensor, mask: Any, other: Any, boundary_check: Any, padding_option: Any) -> tensor:
    """``pl.load`` through a block pointer (called by ``pl.load``)."""
    if unwrap(mask) is not None or unwrap(other) is not None:
        raise semantic_error("pl.load through a block pointer takes no mask or other; use boundary_check and "
                             "padding_option")
    block = pointer.type.tile
    dims = _boundary_check(boundary_check, block.rank, "pl.load")
    padding = unwrap(padding_option)
    if padding not in _PADDING:
        raise semantic_error(f"pl.load: unknown padding_option {padding!r}; use 'zero', 'nan' or '' (undefined)")
    padding = _PADDING[padding]
    if padding == "nan" and not isinstance(block.element, t.FloatType):
        raise semantic_error(f"pl.load: padding_option 'nan' needs a float block, not {sem.type_name(block.element)}")
    attrs = {}
    if dims:
        attrs["boundary_check"] = dims
    if padding:
        attrs["padding"] = padding
    return tensor(sem.emit(tile_block.LoadBlockOp, pointer.handle, **attrs).result)


def store_block(pointer: tensor, value: Any, mask: Any, boundary_check: Any) -> None:
    """``pl.store`` through a block pointer (called by ``pl.store``)."""
    if unwrap(mask) is not None:
        raise semantic_error("pl.store through a block pointer takes no mask; use boundary_check")
    block = pointer.type.tile
    dims = _boundary_check(boundary_check, block.rank, "pl.store")
    value = unwrap(value)
    value = sem.to_tensor(value, block.element) if not isinstance(value, tensor) else value
    if t.is_pointer(value.type):
        raise semantic_error(f"pl.store: cannot store {sem._describe(value)} through a block pointer")
    if not value.shape:
        value = sem.broadcast_to_shape(value, block.shape)  # a scalar fills the block, as Triton
    if tuple(value.shape) != tuple(block.shape):
        raise semantic_error(f"pl.store: the value has shape {list(value.shape)} but the block pointer's "
                             f"block_shape is {list(block.shape)}; they must match")
    value = sem.cast_type(value, block.element)
    attrs = {"boundary_check": dims} if dims else {}
    sem.emit(tile_block.StoreBlockOp, pointer.handle, value.handle, **attrs)


__all__ = ["make_block_ptr", "advance"]
