"""The ``tma`` dialect's ops: making a descriptor and moving blocks through it.

Every access through a descriptor is a whole block at run-time offsets (one per
dimension), bounds-checked against the descriptor's shape in every dimension: loads
read the descriptor's padding outside it, stores, reductions and scatters drop what falls
outside.  That is the meaning on every target; ``lower-tensor-descriptors`` spells it in
the core's block and pointer ops, and a backend with a tensor memory accelerator may
instead lower the ops to bulk copies.
"""

from __future__ import annotations

from typing import Any

from polytile.ir import types as t
from polytile.ir.constraints import Tile, TypeConstraint
from polytile.ir.opdef import Attr, Operand, Pure, ReadsMemory, Result, WritesMemory, define_op, op_error
from polytile.ir.operation import Operation

from .types import MAX_RANK, PADDINGS, TensorDescType, TensorMapType

Descriptor = TypeConstraint("a tensor descriptor", lambda x: isinstance(x, TensorDescType))
ScalarPointer = TypeConstraint("a pointer scalar", lambda x: isinstance(x, t.PointerType))
I32 = TypeConstraint("an i32 scalar", lambda x: x == t.i32)
I64 = TypeConstraint("an i64 scalar", lambda x: x == t.i64)
TensorMap = TypeConstraint("a TMA tensor map (!tma.map)", lambda x: isinstance(x, TensorMapType))

#: ``tma.reduce`` kinds (Triton's ``desc.atomic_add`` ... ``atomic_xor``).
REDUCE_KINDS = ("add", "min", "max", "and", "or", "xor")
#: Kinds defined on integers only.
INTEGER_ONLY_KINDS = ("and", "or", "xor")
#: The float elements min and max combine through a descriptor, as in Triton 3.6 (the
#: copy engine's bulk reductions take them; elsewhere they are 16-bit atomics).
MINMAX_FLOATS = ("f16", "bf16")


def reduce_takes(kind: str, element: Any) -> bool:
    """Whether a reduction of ``kind`` through a descriptor combines ``element`` values:
    and, or and xor integers; min and max integers and :data:`MINMAX_FLOATS`; add all."""
    if isinstance(element, t.IntType):
        return True
    if kind in INTEGER_ONLY_KINDS:
        return False
    return kind not in ("min", "max") or str(element) in MINMAX_FLOATS


def _check_offsets(op: Operation, desc: TensorDescType, offsets: list, what: str = "offsets") -> None:
    if len(offsets) != desc.rank:
        raise op_error(op, f"has {len(offsets)} {what} for a descriptor of rank {desc.rank}")


def _block_value(op: Operation, desc: TensorDescType, value_type: t.Type, shape: tuple) -> None:
    expected = t.TileType(shape, desc.element)
    if not isinstance(value_type, t.TileType) or value_type.without_layout() != expected:
        raise op_error(op, f"moves {expected} through {desc}, not {value_type}")


@define_op
class MakeDescriptorOp(Operation):
    """A descriptor of the array at ``base`` with ``shape`` (i32) and ``strides`` (i64,
    in elements), accessed in blocks of ``block_shape``; loads read ``padding`` outside
    the array."""

    name = "tma.make_descriptor"
    base = Operand(ScalarPointer)
    shape = Operand(I32, variadic=True)
    strides = Operand(I64, variadic=True)
    #: The tensor map of a host descriptor on a target with a tensor memory accelerator
    #: (Hopper): ``lower-tensor-descriptors`` turns its loads into bulk copies.
    map = Operand(TensorMap, optional=True)
    result = Result(Descriptor)
    block_shape = Attr(tuple)
    padding = Attr(str, default="zero")
    traits = (Pure,)

    @staticmethod
    def infer_result_types(operands: dict, attributes: dict) -> list[t.Type]:
        pointee = operands["base"].type.pointee
        block = t.TileType(tuple(attributes["block_shape"]), pointee)
        return [TensorDescType(block, attributes.get("padding", "zero"))]

    def verify_op(self) -> None:
        rank = len(self.block_shape)
        if not 1 <= rank <= MAX_RANK:
            raise op_error(self, f"a descriptor has rank 1 to {MAX_RANK}, not {rank}")
        if not all(type(d) is int and d > 0 for d in self.block_shape):
            raise op_error(self, f"block_shape {list(self.block_shape)} must be positive sizes")
        for group in ("shape", "strides"):
            if len(getattr(self, group)) != rank:
                raise op_error(self, f"has {len(getattr(self, group))} {group} for a block of rank {rank}")
        if self.padding not in PADDINGS:
            raise op_error(self, f"unknown padding '{self.padding}'; use zero or nan")
        if isinstance(self.base.type.pointee, t.PointerType):
            raise op_error(self, "a descriptor of pointers is not supported")
        expected = self.infer_result_types({"base": self.base}, {"block_shape": self.block_shape,
                                                                 "padding": self.padding})[0]
        if self.result.type != expected:
            raise op_error(self, f"describes {expected}, not {self.result.type}")


@define_op
class DimOp(Operation):
    """The descriptor's ``shape`` (i32) or ``strides`` (i64) entry ``index``."""

    name = "tma.dim"
    desc = Operand(Descriptor)
    result = Result(TypeConstraint("an i32 or i64 scalar", lambda x: x in (t.i32, t.i64)))
    kind = Attr(str)
    index = Attr(int)
    traits = (Pure,)
    infer_result_types = staticmethod(lambda operands, attributes: [t.i32 if attributes["kind"] == "shape"
                                                                     else t.i64])

    def verify_op(self) -> None:
        if self.kind not in ("shape", "stride"):
            raise op_error(self, f"kind '{self.kind}' must be shape or stride")
        if not 0 <= self.index < self.desc.type.rank:
            raise op_error(self, f"dimension {self.index} is out of range for a descriptor of rank "
                                 f"{self.desc.type.rank}")
        if self.result.type != (t.i32 if self.kind == "shape" else t.i64):
            raise op_error(self, f"a {self.kind} is {'i32' if self.kind == 'shape' else 'i64'}, not {self.result.type}")


@define_op
class LoadOp(Operation):
    """The block at ``offsets``; elements outside the array are the descriptor's padding."""

    name = "tma.load"
    desc = Operand(Descriptor)
    offsets = Operand(I32, variadic=True)
    result = Result(Tile)
    traits = (ReadsMemory,)
    infer_result_types = staticmethod(lambda operands, attributes: [operands["desc"].type.block])

    def verify_op(self) -> None:
        desc = self.desc.type
        _check_offsets(self, desc, self.offsets)
        _block_value(self, desc, self.result.type, desc.block.shape)


@define_op
class StoreOp(Operation):
    """Stores ``value`` into the block at ``offsets``; elements outside the array are dropped."""

    name = "tma.store"
    desc = Operand(Descriptor)
    offsets = Operand(I32, variadic=True)
    value = Operand(Tile)
    traits = (WritesMemory,)

    def verify_op(self) -> None:
        desc = self.desc.type
        _check_offsets(self, desc, self.offsets)
        _block_value(self, desc, self.value.type, desc.block.shape)


@define_op
class ReduceOp(Operation):
    """Atomically combines ``value`` into the block at ``offsets`` (``kind``: add, min,
    max, and, or, xor), element by element; elements outside the array are dropped."""

    name = "tma.reduce"
    desc = Operand(Descriptor)
    offsets = Operand(I32, variadic=True)
    value = Operand(Tile)
    kind = Attr(str)

    def verify_op(self) -> None:
        desc = self.desc.type
        _check_offsets(self, desc, self.offsets)
        _block_value(self, desc, self.value.type, desc.block.shape)
        if self.kind not in REDUCE_KINDS:
            raise op_error(self, f"unknown kind '{self.kind}'; use one of {', '.join(REDUCE_KINDS)}")
        if not reduce_takes(self.kind, desc.element):
            takes = "integers" if self.kind in INTEGER_ONLY_KINDS else "integers, f16 and bf16"
            raise op_error(self, f"'{self.kind}' combines {takes}, not {desc.element}")


def _check_rows(op: Operation, desc: TensorDescType, rows: t.Type) -> tuple:
    """A gather's or scatter's rows: a 1-D tile of i32 row numbers, through a 2-D
    descriptor whose block is one row (Triton's rule); returns the moved tile's shape."""
    if desc.rank != 2 or desc.block.shape[0] != 1:
        raise op_error(op, f"gathers and scatters go through a 2-D descriptor with a block of one row "
                           f"(block [1, N]), not {desc}")
    if not isinstance(rows, t.TileType) or rows.rank != 1 or rows.element != t.i32:
        raise op_error(op, f"row offsets must be a 1-D tile of i32, not {rows}")
    return (rows.shape[0], desc.block.shape[1])


@define_op
class GatherOp(Operation):
    """Rows ``x_offsets[i]`` of the array, ``block_shape[1]`` elements from column
    ``y_offset`` each: a ``len(x_offsets) x block_shape[1]`` tile (padding outside)."""

    name = "tma.gather"
    desc = Operand(Descriptor)
    x_offsets = Operand(Tile)
    y_offset = Operand(I32)
    result = Result(Tile)
    traits = (ReadsMemory,)

    @staticmethod
    def infer_result_types(operands: dict, attributes: dict) -> list[t.Type]:
        desc, rows = operands["desc"].type, operands["x_offsets"].type
        return [t.TileType((rows.shape[0], desc.block.shape[-1]), desc.element)]

    def verify_op(self) -> None:
        _block_value(self, self.desc.type, self.result.type, _check_rows(self, self.desc.type, self.x_offsets.type))


@define_op
class ScatterOp(Operation):
    """Stores row ``i`` of ``value`` into row ``x_offsets[i]`` of the array from column
    ``y_offset``; elements outside the array are dropped."""

    name = "tma.scatter"
    desc = Operand(Descriptor)
    value = Operand(Tile)
    x_offsets = Operand(Tile)
    y_offset = Operand(I32)

    def verify_op(self) -> None:
        _block_value(self, self.desc.type, self.value.type, _check_rows(self, self.desc.type, self.x_offsets.type))


TMA_OPS = (MakeDescriptorOp, DimOp, LoadOp, StoreOp, ReduceOp, GatherOp, ScatterOp)
