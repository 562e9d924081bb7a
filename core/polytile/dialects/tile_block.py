"""``tile`` ops on block pointers: ``make_block_ptr``, ``advance``, ``load_block`` and
``store_block`` (Triton's ``make_block_ptr`` / ``advance`` / ``load`` / ``store`` on a
block pointer).

A ``block_ptr<BxCxT>`` describes a ``BxC`` window of elements of type ``T`` into an
N-D array in memory: the array's base pointer, shape and strides (in elements), and the
window's offsets.  The offsets are the only part that changes as a kernel walks the
array (``tile.advance``), so a block pointer is a single SSA value that loops carry like
any other.  The ops live in their own module to keep ``tile.py`` about plain pointers;
``polytile.dialects`` adds them to the ``tile`` dialect.
"""

from __future__ import annotations

from ..ir import types as t
from ..ir.constraints import BlockPointer, Index, Tile, TypeConstraint
from ..ir.opdef import Attr, Operand, Pure, ReadsMemory, Result, define_op, op_error
from ..ir.operation import Operation

ScalarPointer = TypeConstraint("a pointer scalar", lambda x: isinstance(x, t.PointerType))

#: ``padding`` of ``tile.load_block``: "" leaves out-of-bounds elements undefined.
PADDING_OPTIONS = ("", "zero", "nan")


def _check_boundary_check(op: Operation, dims: tuple, rank: int) -> None:
    if not all(type(d) is int for d in dims) or len(set(dims)) != len(dims):
        raise op_error(op, f"boundary_check {list(dims)} must be distinct dimension numbers")
    for d in dims:
        if not 0 <= d < rank:
            raise op_error(op, f"boundary_check dimension {d} is out of range for a block of rank {rank}")


@define_op
class MakeBlockPtrOp(Operation):
    """A block pointer: ``block_shape`` elements at ``offsets`` of the array at ``base``
    with ``shape`` and ``strides`` (elements, one per dimension).  ``order`` lists the
    dimensions from fastest- to slowest-varying in memory (a hint for backends: the
    addresses follow from the strides alone)."""

    name = "tile.make_block_ptr"
    base = Operand(ScalarPointer)
    shape = Operand(Index, variadic=True)
    strides = Operand(Index, variadic=True)
    offsets = Operand(Index, variadic=True)
    result = Result(BlockPointer)
    block_shape = Attr(tuple)
    order = Attr(tuple)
    traits = (Pure,)

    @staticmethod
    def infer_result_types(operands: dict, attributes: dict) -> list[t.Type]:
        pointee = operands["base"].type.pointee
        return [t.BlockPointerType(t.TileType(tuple(attributes["block_shape"]), pointee))]

    def verify_op(self) -> None:
        rank = len(self.block_shape)
        if rank == 0 or not all(type(d) is int and d > 0 for d in self.block_shape):
            raise op_error(self, f"block_shape {list(self.block_shape)} must be positive sizes")
        for group in ("shape", "strides", "offsets"):
            count = len(getattr(self, group))
            if count != rank:
                raise op_error(self, f"has {count} {group} for a block of rank {rank}")
        if not all(type(i) is int for i in self.order) or sorted(self.order) != list(range(rank)):
            raise op_error(self, f"order {list(self.order)} is not a permutation of 0..{rank - 1}")
        expected = self.infer_result_types({"base": self.base}, {"block_shape": self.block_shape})[0]
        if self.result.type != expected:
            raise op_error(self, f"a block of {list(self.block_shape)} through {self.base.type} is {expected}, "
                                 f"not {self.result.type}")


@define_op
class AdvanceOp(Operation):
    """The block pointer moved by ``offsets`` elements (one per dimension)."""

    name = "tile.advance"
    ptr = Operand(BlockPointer)
    offsets = Operand(Index, variadic=True)
    result = Result(BlockPointer)
    traits = (Pure,)
    infer_result_types = staticmethod(lambda operands, attributes: [operands["ptr"].type])

    def verify_op(self) -> None:
        rank = self.ptr.type.tile.rank
        if len(self.offsets) != rank:
            raise op_error(self, f"has {len(self.offsets)} offsets for a block of rank {rank}")
        if self.result.type != self.ptr.type:
            raise op_error(self, f"result must have the block pointer's type {self.ptr.type}")


@define_op
class LoadBlockOp(Operation):
    """Loads the block.  Elements outside the array in the ``boundary_check`` dimensions
    are not read and take ``padding`` (zero, NaN, or undefined for "")."""

    name = "tile.load_block"
    ptr = Operand(BlockPointer)
    result = Result(Tile)
    boundary_check = Attr(tuple, default=())
    padding = Attr(str, default="")
    traits = (ReadsMemory,)
    infer_result_types = staticmethod(lambda operands, attributes: [operands["ptr"].type.tile])

    def verify_op(self) -> None:
        block = self.ptr.type.tile
        if self.result.type.without_layout() != block:
            raise op_error(self, f"loading through {self.ptr.type} gives {block}, not {self.result.type}")
        _check_boundary_check(self, self.boundary_check, block.rank)
        if self.padding not in PADDING_OPTIONS:
            raise op_error(self, f"unknown padding '{self.padding}'; use 'zero', 'nan' or ''")
        if self.padding == "nan" and not isinstance(block.element, t.FloatType):
            raise op_error(self, f"padding 'nan' needs a float block, not {block.element}")


@define_op
class StoreBlockOp(Operation):
    """Stores ``value`` into the block; elements outside the array in the
    ``boundary_check`` dimensions are not written."""

    name = "tile.store_block"
    ptr = Operand(BlockPointer)
    value = Operand(Tile)
    boundary_check = Attr(tuple, default=())

    def verify_op(self) -> None:
        block = self.ptr.type.tile
        if self.value.type.without_layout() != block:
            raise op_error(self, f"cannot store {self.value.type} through {self.ptr.type}")
        _check_boundary_check(self, self.boundary_check, block.rank)


TILE_BLOCK_OPS = (MakeBlockPtrOp, AdvanceOp, LoadBlockOp, StoreBlockOp)
