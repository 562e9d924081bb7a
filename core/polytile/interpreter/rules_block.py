"""Interpretation rules of the block-pointer ops in :mod:`polytile.dialects.tile_block`.

A block pointer's value is a :class:`BlockPointer` held in a 0-d object array (the
executor's value for ``block_ptr`` types): its fields are plain ints, so advancing
one in a loop costs no NumPy work.  Loads and stores compute the tile of byte
addresses and the boundary mask, then go through the same ``locate`` as
``tile.load``/``tile.store``, so out-of-bounds accesses that are not masked off by
``boundary_check`` are reported exactly as for plain pointers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dialects import tile_block
from ..ir.operation import Operation
from . import rules
from .executor import (InterpreterUnsupportedError, MemoryElement, ProgramContext, memory_element, register_rule,
                       unsupported_type_message)


@dataclass(frozen=True)
class BlockPointer:
    base: int                     # byte address of element (0, ..., 0) of the array
    shape: tuple[int, ...]        # array extents, elements
    strides: tuple[int, ...]      # elements
    offsets: tuple[int, ...]      # where the block starts, elements


def _box(value: BlockPointer) -> np.ndarray:
    boxed = np.empty((), dtype=object)
    boxed[()] = value
    return boxed


def _unbox(value: np.ndarray) -> BlockPointer:
    return value[()] if isinstance(value, np.ndarray) else value


@register_rule(tile_block.MakeBlockPtrOp)
def make_block_ptr_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    named = rules.named_operands(op, operands)
    ints = lambda values: tuple(int(v) for v in values)  # noqa: E731
    return _box(BlockPointer(int(named["base"]), ints(named["shape"]), ints(named["strides"]),
                             ints(named["offsets"])))


@register_rule(tile_block.AdvanceOp)
def advance_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    named = rules.named_operands(op, operands)
    ptr = _unbox(named["ptr"])
    offsets = tuple(o + int(d) for o, d in zip(ptr.offsets, named["offsets"]))
    return _box(BlockPointer(ptr.base, ptr.shape, ptr.strides, offsets))


def memory_element_of(op: Operation, ctx: ProgramContext) -> MemoryElement:
    element = op.operands[0].type.tile.element
    found = memory_element(element)
    if found is None:
        raise ctx.error(op, unsupported_type_message(element), InterpreterUnsupportedError)
    return found


def _addresses(op: Operation, ptr: BlockPointer, itemsize: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The byte address of every element of the block, and where it lies inside the
    array along the ``boundary_check`` dimensions (None: no check)."""
    addresses, mask = block_addresses(op, [ptr], itemsize)
    return addresses[0], None if mask is None else mask[0]


def block_addresses(op: Operation, ptrs: list[BlockPointer], itemsize: int) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`_addresses` of several block pointers at once: arrays of shape
    ``(len(ptrs),) + block``."""
    block = op.operands[0].type.tile.shape
    rank = len(block)
    count = len(ptrs)
    fields = lambda name: np.array([getattr(p, name) for p in ptrs], dtype=np.int64).reshape(count, -1)  # noqa: E731
    offsets, strides, extents = fields("offsets"), fields("strides"), fields("shape")
    base = np.array([p.base for p in ptrs], dtype=np.int64)
    addresses = np.broadcast_to(base.reshape((count,) + (1,) * rank), (count,) + tuple(block))
    mask = None
    checked = op.attributes.get("boundary_check", ())
    for d in range(rank):
        along = tuple(block[d] if i == d else 1 for i in range(rank))
        index = offsets[:, d].reshape((count,) + (1,) * rank) + np.arange(block[d], dtype=np.int64).reshape(along)
        addresses = addresses + index * (strides[:, d] * itemsize).reshape((count,) + (1,) * rank)
        if d in checked:
            inside = (index >= 0) & (index < extents[:, d].reshape((count,) + (1,) * rank))
            mask = inside if mask is None else mask & inside
    if mask is not None:
        mask = np.broadcast_to(mask, (count,) + tuple(block))
    return addresses, mask


@register_rule(tile_block.LoadBlockOp)
def load_block_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    ptr = _unbox(operands[0])
    element = memory_element_of(op, ctx)
    addresses, mask = _addresses(op, ptr, element.itemsize)
    # Padding "" is undefined: the interpreter gives zeros, as the GPUs do in practice.
    fill = np.nan if op.attributes.get("padding", "") == "nan" else 0
    result = np.full(addresses.shape, fill, dtype=element.value)
    flat = result.reshape(-1)
    for buffer, lanes, indices in rules.locate(op, ctx, addresses, mask, element.itemsize):
        flat[lanes] = element.read(buffer.view(element.storage)[indices])
    return result


@register_rule(tile_block.StoreBlockOp)
def store_block_rule(op: Operation, operands: list, ctx: ProgramContext) -> None:
    ptr, value = _unbox(operands[0]), operands[1]
    element = memory_element_of(op, ctx)
    addresses, mask = _addresses(op, ptr, element.itemsize)
    access = rules.locate(op, ctx, addresses, mask, element.itemsize)
    rules._check_writeable(op, ctx, access)
    values = np.asarray(value).astype(element.value).reshape(-1)
    for buffer, lanes, indices in access:
        buffer.view(element.storage)[indices] = element.write(values[lanes])
    return None
