"""The ``tile`` dialect: the hardware-neutral tile operations kernels are written in.

Program ids, ranges, shape manipulation, pointer arithmetic, memory access, dot and
reductions.  Tiles have static shapes; pointer tiles address global memory elementwise.
"""

from __future__ import annotations


from ..ir import types as t
from ..ir.constraints import AnyType, BoolLike, IntLike, Numeric, NumericOrPointer, PointerLike, Scalar, Tile
from ..ir.opdef import (
    Attr,
    Elementwise,
    HasParent,
    IsolatedFromAbove,
    Operand,
    Pure,
    ReadsMemory,
    RecursivelyPure,
    RegionDef,
    Result,
    ReturnLike,
    Terminator,
    define_op,
    op_error,
)
from ..ir.operation import Operation
from ..ir.registry import Dialect


def _shape(value) -> tuple[int, ...]:
    return t.shape_of(value.type)


@define_op
class ProgramIdOp(Operation):
    """The index of this program along grid ``axis`` (0, 1 or 2)."""

    name = "tile.program_id"
    axis = Attr(int)
    result = Result(AnyType)
    traits = (Pure,)
    infer_result_types = staticmethod(lambda operands, attributes: [t.i32])

    def verify_op(self) -> None:
        if self.axis not in (0, 1, 2):
            raise op_error(self, f"axis must be 0, 1 or 2, got {self.axis}")
        if self.result.type != t.i32:
            raise op_error(self, f"result must be i32, got {self.result.type}")


@define_op
class NumProgramsOp(Operation):
    """The number of programs along grid ``axis``."""

    name = "tile.num_programs"
    axis = Attr(int)
    result = Result(AnyType)
    traits = (Pure,)
    infer_result_types = staticmethod(lambda operands, attributes: [t.i32])
    verify_op = ProgramIdOp.verify_op


@define_op
class ArangeOp(Operation):
    """The integers ``start, start+1, ..., end-1`` as a 1-D tile of i32."""

    name = "tile.arange"
    start = Attr(int)
    end = Attr(int)
    result = Result(Tile)
    traits = (Pure,)
    infer_result_types = staticmethod(lambda operands, attributes: [t.TileType((attributes["end"] - attributes["start"],), t.i32)])

    def verify_op(self) -> None:
        n = self.end - self.start
        if n <= 0:
            raise op_error(self, f"end ({self.end}) must be greater than start ({self.start})")
        if self.result.type.without_layout() != t.TileType((n,), t.i32):
            raise op_error(self, f"result must be tile<{n}xi32>, got {self.result.type}")


@define_op
class SplatOp(Operation):
    """A tile with every element equal to a scalar."""

    name = "tile.splat"
    value = Operand(Scalar)
    result = Result(Tile)
    traits = (Pure,)

    def verify_op(self) -> None:
        if self.result.type.element != self.value.type:
            raise op_error(self, f"splats {self.value.type} into a tile of {self.result.type.element}")


@define_op
class BroadcastOp(Operation):
    """Stretches dimensions of size 1 to the result's shape."""

    name = "tile.broadcast"
    source = Operand(Tile)
    result = Result(Tile)
    traits = (Pure,)

    def verify_op(self) -> None:
        src, dst = self.source.type, self.result.type
        if src.element != dst.element or src.rank != dst.rank:
            raise op_error(self, f"cannot broadcast {src} to {dst}: element type and rank must match")
        for a, b in zip(src.shape, dst.shape):
            if a != b and a != 1:
                raise op_error(self, f"cannot broadcast {src} to {dst}: only dimensions of size 1 stretch")


@define_op
class ExpandDimsOp(Operation):
    """Inserts a dimension of size 1 at ``axis``."""

    name = "tile.expand_dims"
    source = Operand(Tile)
    axis = Attr(int)
    result = Result(Tile)
    traits = (Pure,)

    @staticmethod
    def infer_result_types(operands: dict, attributes: dict) -> list[t.Type]:
        src = operands["source"].type
        shape = list(src.shape)
        shape.insert(attributes["axis"], 1)
        return [t.TileType(tuple(shape), src.element)]

    def verify_op(self) -> None:
        src = self.source.type
        if not 0 <= self.axis <= src.rank:
            raise op_error(self, f"axis {self.axis} is out of range for a tile of rank {src.rank}")
        expected = self.infer_result_types({"source": self.source}, {"axis": self.axis})[0]
        if self.result.type.without_layout() != expected:
            raise op_error(self, f"result must be {expected}, got {self.result.type}")


@define_op
class ReshapeOp(Operation):
    """The same elements in row-major order, in another shape."""

    name = "tile.reshape"
    source = Operand(Tile)
    result = Result(Tile)
    traits = (Pure,)

    def verify_op(self) -> None:
        src, dst = self.source.type, self.result.type
        if src.numel != dst.numel or src.element != dst.element:
            raise op_error(self, f"cannot reshape {src} to {dst}")


@define_op
class TransOp(Operation):
    """Permutes dimensions: result dim i is source dim ``order[i]``."""

    name = "tile.trans"
    source = Operand(Tile)
    order = Attr(tuple)
    result = Result(Tile)
    traits = (Pure,)

    def verify_op(self) -> None:
        src, dst = self.source.type, self.result.type
        if not all(type(i) is int for i in self.order) or sorted(self.order) != list(range(src.rank)):
            raise op_error(self, f"order {list(self.order)} is not a permutation of 0..{src.rank - 1}")
        if tuple(src.shape[i] for i in self.order) != dst.shape or src.element != dst.element:
            raise op_error(self, f"transposing {src} by {list(self.order)} does not give {dst}")


@define_op
class AddPtrOp(Operation):
    """``pointer + offset`` elements (not bytes), elementwise for tiles."""

    name = "tile.addptr"
    ptr = Operand(PointerLike)
    offset = Operand(IntLike)
    result = Result(PointerLike)
    traits = (Pure, Elementwise)
    infer_result_types = staticmethod(lambda operands, attributes: [operands["ptr"].type])

    def verify_op(self) -> None:
        if self.result.type != self.ptr.type:
            raise op_error(self, f"result must have the pointer's type {self.ptr.type}")
        if _shape(self.ptr) != _shape(self.offset):
            raise op_error(self, f"pointer and offset shapes differ: {self.ptr.type} and {self.offset.type}")


_CACHE_MODIFIERS = ("", ".ca", ".cg", ".cv", ".cs", ".wb", ".wt")
_EVICTION_POLICIES = ("", "evict_first", "evict_last", "evict_normal")


def _check_mask_and_shape(op: Operation, ptr, mask, what: str) -> None:
    if mask is not None and _shape(mask) != _shape(ptr):
        raise op_error(op, f"mask shape {mask.type} differs from the {what} shape {ptr.type}")


@define_op
class LoadOp(Operation):
    """Loads through a pointer (tile); masked-off lanes take ``other`` (undefined without it)."""

    name = "tile.load"
    ptr = Operand(PointerLike)
    mask = Operand(BoolLike, optional=True)
    other = Operand(AnyType, optional=True)
    result = Result(AnyType)
    cache = Attr(str, default="")
    evict = Attr(str, default="")
    volatile = Attr(bool, default=False)
    traits = (ReadsMemory,)

    @staticmethod
    def infer_result_types(operands: dict, attributes: dict) -> list[t.Type]:
        ptr_type = operands["ptr"].type
        return [t.like(ptr_type, t.element_type(ptr_type).pointee)]

    def verify_op(self) -> None:
        expected = self.infer_result_types({"ptr": self.ptr}, {})[0]
        if t.element_type(self.result.type) != t.element_type(expected) or _shape(self.result) != _shape(self.ptr):
            raise op_error(self, f"loading through {self.ptr.type} gives {expected}, not {self.result.type}")
        _check_mask_and_shape(self, self.ptr, self.mask, "pointer")
        if self.other is not None and self.other.type != self.result.type:
            raise op_error(self, f"'other' must have the result type {self.result.type}, got {self.other.type}")
        if self.cache not in _CACHE_MODIFIERS:
            raise op_error(self, f"unknown cache modifier '{self.cache}'; use one of {', '.join(repr(c) for c in _CACHE_MODIFIERS)}")
        if self.evict not in _EVICTION_POLICIES:
            raise op_error(self, f"unknown eviction policy '{self.evict}'; use one of {', '.join(repr(c) for c in _EVICTION_POLICIES)}")


@define_op
class StoreOp(Operation):
    """Stores ``value`` through a pointer (tile) where ``mask`` holds."""

    name = "tile.store"
    ptr = Operand(PointerLike)
    value = Operand(AnyType)
    mask = Operand(BoolLike, optional=True)
    cache = Attr(str, default="")
    evict = Attr(str, default="")

    def verify_op(self) -> None:
        _check_writable(self)
        pointee = t.element_type(self.ptr.type).pointee
        if t.element_type(self.value.type) != pointee or _shape(self.value) != _shape(self.ptr):
            raise op_error(self, f"cannot store {self.value.type} through {self.ptr.type}")
        _check_mask_and_shape(self, self.ptr, self.mask, "pointer")


def _check_writable(op: Operation) -> None:
    if t.element_type(op.ptr.type).const:
        raise op_error(op, f"writes through {op.ptr.type}, a const pointer (read only)")


ATOMIC_KINDS = ("add", "fadd", "max", "min", "umax", "umin", "and", "or", "xor", "xchg")
MEMORY_SEMANTICS = ("relaxed", "acquire", "release", "acq_rel")
MEMORY_SCOPES = ("gpu", "cta", "sys")


@define_op
class AtomicRMWOp(Operation):
    """Atomically combines ``value`` into memory; returns the old values."""

    name = "tile.atomic_rmw"
    ptr = Operand(PointerLike)
    value = Operand(NumericOrPointer)
    mask = Operand(BoolLike, optional=True)
    result = Result(AnyType)
    kind = Attr(str)
    sem = Attr(str, default="acq_rel")
    scope = Attr(str, default="gpu")
    infer_result_types = staticmethod(lambda operands, attributes: [operands["value"].type])

    def verify_op(self) -> None:
        _check_writable(self)
        if self.kind not in ATOMIC_KINDS:
            raise op_error(self, f"unknown kind '{self.kind}'; use one of {', '.join(ATOMIC_KINDS)}")
        _check_memory_order(self)
        if self.result.type != self.value.type:
            raise op_error(self, f"result must have the value's type {self.value.type}")
        pointee = t.element_type(self.ptr.type).pointee
        if t.element_type(self.value.type) != pointee or _shape(self.value) != _shape(self.ptr):
            raise op_error(self, f"cannot combine {self.value.type} into memory through {self.ptr.type}")
        _check_mask_and_shape(self, self.ptr, self.mask, "pointer")


@define_op
class AtomicCASOp(Operation):
    """Atomic compare-and-swap; returns the old values."""

    name = "tile.atomic_cas"
    ptr = Operand(PointerLike)
    compare = Operand(Numeric)
    value = Operand(Numeric)
    result = Result(Numeric)
    sem = Attr(str, default="acq_rel")
    scope = Attr(str, default="gpu")
    infer_result_types = staticmethod(lambda operands, attributes: [operands["value"].type])

    def verify_op(self) -> None:
        _check_writable(self)
        _check_memory_order(self)
        if not self.compare.type == self.value.type == self.result.type:
            raise op_error(self, f"compare, value and result must have one type, got {self.compare.type}, "
                                 f"{self.value.type} -> {self.result.type}")
        pointee = t.element_type(self.ptr.type).pointee
        if t.element_type(self.value.type) != pointee or _shape(self.value) != _shape(self.ptr):
            raise op_error(self, f"cannot compare-and-swap {self.value.type} through {self.ptr.type}")


def _check_memory_order(op: Operation) -> None:
    for attr, allowed in (("sem", MEMORY_SEMANTICS), ("scope", MEMORY_SCOPES)):
        value = getattr(op, attr)  # the declared default when the text leaves it out
        if value not in allowed:
            raise op_error(op, f"unknown {attr} '{value}'; use one of {', '.join(allowed)}")


INPUT_PRECISIONS = ("tf32", "tf32x3", "ieee")

#: The element types ``tile.dot`` multiplies, and the accumulator types each allows
#: (what tensor cores and matrix cores provide; f16 inputs may accumulate in f16).
#: Operand element type -> the accumulator types a dot of it may use, default first (Triton's).
DOT_ACCUMULATORS: dict[t.Type, tuple[t.Type, ...]] = {
    t.f16: (t.f32, t.f16),
    t.bf16: (t.f32,),
    t.f32: (t.f32,),
    t.f64: (t.f64,),
    t.f8e4m3: (t.f32, t.f16),
    t.f8e5m2: (t.f32, t.f16),
    t.i8: (t.i32,),
}


@define_op
class DotOp(Operation):
    """Matrix product ``a @ b + acc`` of 2-D tiles (MxK by KxN, accumulated MxN), or of
    3-D ones batched along their first dimension (BxMxK by BxKxN, accumulated BxMxN; GPU
    pipelines split those into 2-D dots, ``unbatch-dots``)."""

    name = "tile.dot"
    a = Operand(Tile)
    b = Operand(Tile)
    acc = Operand(Tile)
    result = Result(Tile)
    input_precision = Attr(str, default="tf32")
    max_num_imprecise_acc = Attr(int, default=0)
    traits = (Pure,)
    infer_result_types = staticmethod(lambda operands, attributes: [operands["acc"].type])

    def verify_op(self) -> None:
        a, b, acc = self.a.type, self.b.type, self.acc.type
        if a.rank not in (2, 3) or b.rank != a.rank or acc.rank != a.rank:
            raise op_error(self, f"needs 2-D tiles, or 3-D ones batched along the first dimension, got {a}, {b}, "
                                 f"{acc}")
        batch = a.shape[:-2]
        (m, k), (k2, n) = a.shape[-2:], b.shape[-2:]
        if k != k2 or b.shape[:-2] != batch or acc.shape != batch + (m, n):
            raise op_error(self, f"shapes do not chain: {a} @ {b} accumulated into {acc}")
        if a.element != b.element:
            raise op_error(self, f"a and b must have one element type, got {a.element} and {b.element}")
        accumulators = DOT_ACCUMULATORS.get(a.element)
        if accumulators is None:
            raise op_error(self, f"cannot multiply tiles of {a.element}; supported: "
                                 + ", ".join(map(str, DOT_ACCUMULATORS)))
        if acc.element not in accumulators:
            raise op_error(self, f"a dot of {a.element} accumulates in {' or '.join(map(str, accumulators))}, "
                                 f"not {acc.element}")
        if self.input_precision not in INPUT_PRECISIONS:
            raise op_error(self, f"unknown input_precision '{self.input_precision}'; use one of {', '.join(INPUT_PRECISIONS)}")
        if self.result.type != acc:
            raise op_error(self, f"result must have the accumulator's type {acc}")


def verify_combine_operands(op: Operation, verb: str) -> tuple[int, ...]:
    """Checks shared by ops that combine tiles along ``axis`` (reduce, scan): at least one
    operand, one shape, the axis in range, a result per operand.  Returns the shape."""
    if not op.sources:  # type: ignore[attr-defined]
        raise op_error(op, "needs at least one operand")
    shapes = {s.type.shape for s in op.sources}  # type: ignore[attr-defined]
    if len(shapes) != 1:
        raise op_error(op, "operands must have one shape")
    shape = next(iter(shapes))
    axis = op.axis  # type: ignore[attr-defined]
    if not 0 <= axis < len(shape):
        raise op_error(op, f"axis {axis} is out of range for rank {len(shape)}")
    if len(op.results) != len(op.sources):  # type: ignore[attr-defined]
        raise op_error(op, f"{verb} {len(op.sources)} operands but has {len(op.results)} results")  # type: ignore[attr-defined]
    return shape


@define_op
class ReduceOp(Operation):
    """Reduces ``operands`` (tiles of one shape) along ``axis`` with the combine region.

    The region takes two values per operand (the accumulated ones, then the new ones)
    and ends in ``tile.reduce_return``.  It is isolated from above, as in Triton: a
    backend can turn it into a shuffle tree without looking outside it.
    """

    name = "tile.reduce"
    sources = Operand(Tile, variadic=True)
    outputs = Result(AnyType, variadic=True)
    axis = Attr(int)
    combine = RegionDef(terminators=("tile.reduce_return",))
    # Not Pure: the combine region is arbitrary code; a store in it must keep the op.
    traits = (RecursivelyPure, IsolatedFromAbove)

    def verify_op(self) -> None:
        shape = verify_combine_operands(self, "reduces")
        reduced = shape[: self.axis] + shape[self.axis + 1:]
        for source, result in zip(self.sources, self.results):
            expected = t.TileType(reduced, source.type.element) if reduced else source.type.element
            if t.shape_of(result.type) != t.shape_of(expected) or t.element_type(result.type) != source.type.element:
                raise op_error(self, f"reducing {source.type} along axis {self.axis} gives {expected}, not {result.type}")
        args = self.combine.block.arguments
        elements = [s.type.element for s in self.sources]
        if [a.type for a in args] != elements * 2:
            raise op_error(self, "the combine region must take two scalars per operand: "
                                 f"({', '.join(str(e) for e in elements * 2)})")
        returned = self.combine.block.last_op
        if returned is not None and [v.type for v in returned.operands] != elements:
            raise op_error(returned, f"returns ({', '.join(str(v.type) for v in returned.operands)}) but the "
                                     f"reduction combines ({', '.join(map(str, elements))})")


@define_op
class ReduceReturnOp(Operation):
    """Ends a combine region of ``tile.reduce``."""

    name = "tile.reduce_return"
    values = Operand(AnyType, variadic=True)
    traits = (Terminator, ReturnLike, HasParent("tile.reduce"))


TILE_DIALECT = Dialect(
    "tile",
    ops=(ProgramIdOp, NumProgramsOp, ArangeOp, SplatOp, BroadcastOp, ExpandDimsOp, ReshapeOp, TransOp, AddPtrOp,
         LoadOp, StoreOp, AtomicRMWOp, AtomicCASOp, DotOp, ReduceOp, ReduceReturnOp),
    doc="Hardware-neutral tile operations.",
)
