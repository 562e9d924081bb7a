"""Tensor descriptors in kernels: ``pl.make_tensor_descriptor`` and the methods of a
descriptor value (Triton's ``tl.make_tensor_descriptor`` and ``tensor_descriptor``).

A descriptor is one IR value of type ``!tma.desc<...>``; the frontend wraps every value
of that type in :class:`tensor_descriptor` (registered as the type's value class), so a
descriptor made in the kernel, passed to an inlined helper or returned from one has the
same methods.
"""

from __future__ import annotations

from typing import Any

from polytile.ir import types as t
from polytile.language import semantic as sem
from polytile.language.block import _ints, _scalars
from polytile.language.core import builtin, dtype_of, semantic_error, tensor, unwrap

from . import ops
from .types import MAX_RANK, PADDINGS, TensorDescType


@builtin
def make_tensor_descriptor(base: Any, shape: Any, strides: Any, block_shape: Any,
                           padding_option: Any = "zero") -> "tensor_descriptor":
    """A descriptor of the array at ``base`` with ``shape`` and ``strides`` (elements; the
    last stride must be 1), accessed in blocks of ``block_shape`` (compile-time sizes);
    loads read ``padding_option`` ("zero" or "nan") outside the array."""
    base = unwrap(base)
    if not isinstance(base, tensor) or not isinstance(base.type, t.PointerType) or base.shape:
        raise semantic_error("pl.make_tensor_descriptor needs a pointer scalar as its base (a kernel argument "
                             f"bound to an array), got {sem._describe(base)}")
    if isinstance(base.type.pointee, t.PointerType):
        raise semantic_error("pl.make_tensor_descriptor: descriptors of pointers are not supported")
    block_shape = _ints(block_shape, "pl.make_tensor_descriptor's block_shape")
    rank = len(block_shape)
    if not 1 <= rank <= MAX_RANK:
        raise semantic_error(f"pl.make_tensor_descriptor: a descriptor has rank 1 to {MAX_RANK}, but block_shape "
                             f"{list(block_shape)} has rank {rank}")
    if any(d <= 0 for d in block_shape):
        raise semantic_error(f"pl.make_tensor_descriptor's block_shape must be positive sizes, got {list(block_shape)}")
    padding = unwrap(padding_option)
    if padding not in PADDINGS:
        raise semantic_error(f"pl.make_tensor_descriptor: unknown padding_option {padding!r}; use 'zero' or 'nan'")
    if padding == "nan" and not isinstance(base.type.pointee, t.FloatType):
        raise semantic_error(f"pl.make_tensor_descriptor: padding_option 'nan' needs a float array, not "
                             f"{sem.type_name(base.type.pointee)}")
    _check_last_stride(strides, rank)
    _no_wide_integers(shape, "pl.make_tensor_descriptor's shape")
    # As Triton: the shape is i32, the strides i64.
    op = sem.emit(ops.MakeDescriptorOp, base.handle,
                  _scalars(shape, "pl.make_tensor_descriptor's shape", rank, t.i32),
                  _scalars(strides, "pl.make_tensor_descriptor's strides", rank, t.i64),
                  block_shape=block_shape, padding=padding)
    return tensor(op.result)


def descriptor_from_parts(base: Any, shape: list, strides: list, block_shape: list, padding: str,
                          tensor_map: Any) -> "tensor_descriptor":
    """The descriptor a host ``TensorDescriptor`` argument stands for on Hopper: its
    parts (kernel values, the strides but the last) and its tensor map."""
    op = sem.emit(ops.MakeDescriptorOp, unwrap(base).handle, [unwrap(s).handle for s in shape],
                  [*(unwrap(s).handle for s in strides), sem.to_tensor(1, t.i64).handle],
                  map=unwrap(tensor_map).handle, block_shape=tuple(block_shape), padding=padding)
    return tensor(op.result)


def _no_wide_integers(values: Any, what: str) -> None:
    """Shapes and offsets are i32 (Triton's rule): a 64-bit value would be truncated, so
    it is an error here, not a silently wrong block."""
    values = unwrap(values)
    items = values if isinstance(values, (tuple, list)) else (values,)
    for index, item in enumerate(items):
        item = unwrap(item)
        if isinstance(item, tensor) and t.is_integer(item.type) and getattr(item.type, "width", 32) > 32:
            raise semantic_error(f"{what}[{index}] has type {sem.type_name(item.type)}; a descriptor's shape and "
                                 "offsets are 32-bit (as in Triton): convert it with .to(pl.int32) where it fits")
        if isinstance(item, int) and not isinstance(item, bool) and not -2**31 <= item < 2**31:
            raise semantic_error(f"{what}[{index}] = {item} does not fit in 32 bits; a descriptor's shape and "
                                 "offsets are 32-bit (as in Triton)")


def _check_last_stride(strides: Any, rank: int) -> None:
    """Triton requires a contiguous last dimension; a literal other than 1 is caught here."""
    strides = unwrap(strides)
    items = strides if isinstance(strides, (tuple, list)) else (strides,)
    if len(items) == rank:
        last = unwrap(items[-1])
        if isinstance(last, int) and not isinstance(last, bool) and last != 1:
            raise semantic_error(f"pl.make_tensor_descriptor: the last dimension must be contiguous (stride 1), "
                                 f"got strides[{rank - 1}] = {last}")


class tensor_descriptor(tensor):
    """A tensor descriptor inside a kernel (``pl.make_tensor_descriptor``, or a
    ``TensorDescriptor`` argument): blocks of ``block_shape`` of an N-D array."""

    __slots__ = ()

    @property
    def type(self) -> TensorDescType:
        return self.handle.type

    @property
    def block_type(self) -> t.TileType:
        return self.handle.type.block

    @property
    def block_shape(self) -> list[int]:
        return list(self.handle.type.block.shape)

    @property
    def dtype(self) -> Any:
        return dtype_of(self.handle.type.element)

    @property
    def shape(self) -> tuple:  # type: ignore[override]
        """The array's shape: i32 scalars, known at run time."""
        return tuple(tensor(sem.emit(ops.DimOp, self.handle, kind="shape", index=d).result)
                     for d in range(self.handle.type.rank))

    @property
    def strides(self) -> tuple:
        """The array's strides in elements: i64 scalars, known at run time."""
        return tuple(tensor(sem.emit(ops.DimOp, self.handle, kind="stride", index=d).result)
                     for d in range(self.handle.type.rank))

    @property
    def numel(self) -> int:
        raise semantic_error("a tensor descriptor has no numel: it describes an array, it is not a tile")

    def __repr__(self) -> str:
        return f"tensor_descriptor({self.handle.type})"

    # -- accesses -------------------------------------------------------------------
    def _offsets(self, offsets: Any, what: str) -> list:
        _no_wide_integers(offsets, what)
        return _scalars(offsets, what, self.handle.type.rank, t.i32)

    def _block_value(self, value: Any, shape: tuple, what: str) -> tensor:
        value = unwrap(value)
        element = self.handle.type.element
        value = sem.to_tensor(value, element) if not isinstance(value, tensor) else value
        if isinstance(value, tensor_descriptor) or t.is_pointer(value.type):
            raise semantic_error(f"{what}: cannot store {sem._describe(value)} through a tensor descriptor")
        if not value.shape:
            value = sem.broadcast_to_shape(value, shape)  # a scalar fills the block, as Triton
        if tuple(value.shape) != tuple(shape):
            raise semantic_error(f"{what}: the value has shape {list(value.shape)} but the descriptor moves blocks "
                                 f"of {list(shape)}; they must match")
        return sem.cast_type(value, element)

    def load(self, offsets: Any) -> tensor:
        """The block at ``offsets`` (one per dimension); padding outside the array."""
        return tensor(sem.emit(ops.LoadOp, self.handle, self._offsets(offsets, "desc.load's offsets")).result)

    def store(self, offsets: Any, value: Any) -> None:
        """Stores ``value`` (a block, or a scalar filling it) at ``offsets``; what falls
        outside the array is not written."""
        value = self._block_value(value, self.handle.type.block.shape, "desc.store")
        sem.emit(ops.StoreOp, self.handle, self._offsets(offsets, "desc.store's offsets"), value.handle)

    def _reduce(self, kind: str, offsets: Any, value: Any) -> None:
        what = f"desc.atomic_{kind}"
        element = self.handle.type.element
        if kind in ops.INTEGER_ONLY_KINDS and not ops.reduce_takes(kind, element):
            raise semantic_error(f"{what} combines integers; this descriptor holds {sem.type_name(element)}")
        if not ops.reduce_takes(kind, element):
            raise semantic_error(f"{what} through a descriptor combines integers, float16 and bfloat16 (Triton's "
                                 f"rule: what the copy engine combines); this descriptor holds "
                                 f"{sem.type_name(element)}")
        value = self._block_value(value, self.handle.type.block.shape, what)
        sem.emit(ops.ReduceOp, self.handle, self._offsets(offsets, f"{what}'s offsets"), value.handle, kind=kind)

    def atomic_add(self, offsets: Any, value: Any) -> None:
        """Atomically adds ``value`` into the block at ``offsets``."""
        self._reduce("add", offsets, value)

    def atomic_min(self, offsets: Any, value: Any) -> None:
        self._reduce("min", offsets, value)

    def atomic_max(self, offsets: Any, value: Any) -> None:
        self._reduce("max", offsets, value)

    def atomic_and(self, offsets: Any, value: Any) -> None:
        self._reduce("and", offsets, value)

    def atomic_or(self, offsets: Any, value: Any) -> None:
        self._reduce("or", offsets, value)

    def atomic_xor(self, offsets: Any, value: Any) -> None:
        self._reduce("xor", offsets, value)

    def _rows(self, x_offsets: Any, y_offset: Any, what: str) -> tuple:
        desc = self.handle.type
        if desc.rank != 2 or desc.block.shape[0] != 1:
            raise semantic_error(f"{what} needs a 2-D descriptor whose block is one row (block_shape [1, N]); this "
                                 f"one has block_shape {list(desc.block.shape)}")
        rows = unwrap(x_offsets)
        if not isinstance(rows, tensor) or len(rows.shape) != 1 or not t.is_integer(t.element_type(rows.type)):
            raise semantic_error(f"{what}'s x_offsets must be a 1-D tile of row numbers, got {sem._describe(rows)}")
        rows = sem.cast_type(rows, t.i32)
        return rows, _scalars(y_offset, f"{what}'s y_offset", 1, t.i32)[0]

    def gather(self, x_offsets: Any, y_offset: Any) -> tensor:
        """Rows ``x_offsets`` of the array, ``block_shape[1]`` elements from column
        ``y_offset`` each (padding outside the array)."""
        rows, column = self._rows(x_offsets, y_offset, "desc.gather")
        return tensor(sem.emit(ops.GatherOp, self.handle, rows.handle, column).result)

    def scatter(self, value: Any, x_offsets: Any, y_offset: Any) -> None:
        """Stores row ``i`` of ``value`` into row ``x_offsets[i]`` from column ``y_offset``."""
        rows, column = self._rows(x_offsets, y_offset, "desc.scatter")
        value = self._block_value(value, (rows.shape[0], self.handle.type.block.shape[1]), "desc.scatter")
        sem.emit(ops.ScatterOp, self.handle, value.handle, rows.handle, column)


__all__ = ["descriptor_from_parts", "make_tensor_descriptor", "tensor_descriptor"]
