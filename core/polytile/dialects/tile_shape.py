"""``tile`` ops that rearrange or accumulate whole tiles: scans, join, split and cat.

They belong to the ``tile`` dialect (``polytile.dialects`` adds them to it); they live
in their own module to keep ``tile.py`` about memory, dot and reductions.
"""

from __future__ import annotations

from ..ir import types as t
from ..ir.constraints import AnyType, Tile
from ..ir.opdef import (
    Attr,
    HasParent,
    IsolatedFromAbove,
    Operand,
    Pure,
    RecursivelyPure,
    RegionDef,
    Result,
    ReturnLike,
    Terminator,
    define_op,
    op_error,
)
from ..ir.operation import Operation
from .tile import verify_combine_operands


def _check_combine_region(op: Operation, region, elements: list, what: str) -> None:
    """A combine region takes two scalars per operand (the accumulated ones, then the new
    ones) and returns one per operand, of the operands' element types."""
    args = region.block.arguments
    if [a.type for a in args] != elements * 2:
        raise op_error(op, "the combine region must take two scalars per operand: "
                           f"({', '.join(str(e) for e in elements * 2)})")
    returned = region.block.last_op
    if returned is not None and [v.type for v in returned.operands] != elements:
        raise op_error(returned, f"returns ({', '.join(str(v.type) for v in returned.operands)}) but the "
                                 f"{what} combines ({', '.join(map(str, elements))})")


@define_op
class ScanOp(Operation):
    """Inclusive prefix scan of ``sources`` (tiles of one shape) along ``axis``.

    Result ``i`` along the axis is ``combine`` folded over elements ``0..i`` (in order;
    with ``reverse``, over ``i..n-1`` starting from the end).  The combine region is as
    in ``tile.reduce``: two scalars per operand, ending in ``tile.scan_return``; it must
    be associative (backends scan in a tree).
    """

    name = "tile.scan"
    sources = Operand(Tile, variadic=True)
    outputs = Result(Tile, variadic=True)
    axis = Attr(int)
    reverse = Attr(bool, default=False)
    combine = RegionDef(terminators=("tile.scan_return",))
    # Not Pure: the combine region is arbitrary code (see tile.reduce).
    traits = (RecursivelyPure, IsolatedFromAbove)

    def verify_op(self) -> None:
        verify_combine_operands(self, "scans")
        for source, result in zip(self.sources, self.results):
            if result.type.without_layout() != source.type.without_layout():
                raise op_error(self, f"scanning {source.type} gives {source.type}, not {result.type}")
        _check_combine_region(self, self.combine, [s.type.element for s in self.sources], "scan")


@define_op
class ScanReturnOp(Operation):
    """Ends a combine region of ``tile.scan``."""

    name = "tile.scan_return"
    values = Operand(AnyType, variadic=True)
    traits = (Terminator, ReturnLike, HasParent("tile.scan"))


@define_op
class JoinOp(Operation):
    """Stacks two tiles of one type along a new minor dimension of size 2:
    ``result[..., 0] = lhs``, ``result[..., 1] = rhs``."""

    name = "tile.join"
    lhs = Operand(Tile)
    rhs = Operand(Tile)
    result = Result(Tile)
    traits = (Pure,)

    @staticmethod
    def infer_result_types(operands: dict, attributes: dict) -> list[t.Type]:
        src = operands["lhs"].type
        return [t.TileType(src.shape + (2,), src.element)]

    def verify_op(self) -> None:
        a, b = self.lhs.type.without_layout(), self.rhs.type.without_layout()
        if a != b:
            raise op_error(self, f"joins tiles of one type, got {a} and {b}")
        expected = t.TileType(a.shape + (2,), a.element)
        if self.result.type.without_layout() != expected:
            raise op_error(self, f"joining two {a} gives {expected}, not {self.result.type}")


@define_op
class SplitOp(Operation):
    """The inverse of ``tile.join``: the two halves of a minor dimension of size 2
    (scalars when the source is a ``tile<2x...>`` of rank 1)."""

    name = "tile.split"
    source = Operand(Tile)
    lhs = Result(AnyType)
    rhs = Result(AnyType)
    traits = (Pure,)

    @staticmethod
    def infer_result_types(operands: dict, attributes: dict) -> list[t.Type]:
        src = operands["source"].type
        half = t.TileType(src.shape[:-1], src.element) if src.rank > 1 else src.element
        return [half, half]

    def verify_op(self) -> None:
        src = self.source.type
        if src.shape[-1] != 2:
            raise op_error(self, f"splits a tile whose last dimension is 2, got {src}")
        expected = self.infer_result_types({"source": self.source}, {})[0]
        for result in self.results:
            found = result.type.without_layout() if isinstance(result.type, t.TileType) else result.type
            if found != expected:
                raise op_error(self, f"splitting {src} gives two {expected}, not {result.type}")


@define_op
class CatOp(Operation):
    """Concatenates two 1-D tiles of one type.  As Triton's ``cat``, the order of the
    result's elements is unspecified (the interpreter keeps ``lhs`` then ``rhs``)."""

    name = "tile.cat"
    lhs = Operand(Tile)
    rhs = Operand(Tile)
    result = Result(Tile)
    traits = (Pure,)

    @staticmethod
    def infer_result_types(operands: dict, attributes: dict) -> list[t.Type]:
        a, b = operands["lhs"].type, operands["rhs"].type
        return [t.TileType((a.shape[0] + b.shape[0],), a.element)]

    def verify_op(self) -> None:
        a, b = self.lhs.type, self.rhs.type
        if a.rank != 1 or b.rank != 1 or a.element != b.element:
            raise op_error(self, f"concatenates 1-D tiles of one element type, got {a} and {b}")
        expected = t.TileType((a.shape[0] + b.shape[0],), a.element)
        if self.result.type.without_layout() != expected:
            raise op_error(self, f"concatenating {a} and {b} gives {expected}, not {self.result.type}")


@define_op
class GatherOp(Operation):
    """Elements of ``src`` picked along ``axis`` by ``index`` (Triton's ``gather``):
    ``result[i][j] = src[index[i][j]][j]`` for axis 0, and so for any rank.  ``index`` is
    an integer tile of ``src``'s rank whose other dimensions equal ``src``'s; the result
    has ``index``'s shape and ``src``'s element type.  An index outside ``[0,
    src.shape[axis])`` is undefined behaviour on a GPU (as in Triton); the interpreter
    reports it."""

    name = "tile.gather"
    src = Operand(Tile)
    index = Operand(Tile)
    result = Result(Tile)
    axis = Attr(int)
    traits = (Pure,)

    @staticmethod
    def infer_result_types(operands: dict, attributes: dict) -> list[t.Type]:
        return [t.TileType(operands["index"].type.shape, operands["src"].type.element)]

    def verify_op(self) -> None:
        src, index, axis = self.src.type, self.index.type, self.attributes["axis"]
        if not t.is_integer(index.element) or index.element == t.i1:
            raise op_error(self, f"needs an integer index tile, got {index}")
        if src.rank != index.rank:
            raise op_error(self, f"needs an index of the source's rank {src.rank}, got {index}")
        if not 0 <= axis < src.rank:
            raise op_error(self, f"axis {axis} is out of range for a tile of rank {src.rank}")
        for d in range(src.rank):
            if d != axis and src.shape[d] != index.shape[d]:
                raise op_error(self, f"the index's dimension {d} is {index.shape[d]}, but the source's is "
                                     f"{src.shape[d]}: every dimension but the axis must match")
        expected = t.TileType(index.shape, src.element)
        if self.result.type.without_layout() != expected:
            raise op_error(self, f"gathering from {src} by {index} gives {expected}, not {self.result.type}")


@define_op
class HistogramOp(Operation):
    """How many elements of the 1-D integer tile ``input`` (where ``mask`` holds, if given)
    equal each of ``0 .. num_bins - 1`` (Triton's ``histogram``): an i32 tile of
    ``num_bins``.  Values outside ``[0, num_bins)`` are not counted."""

    name = "tile.histogram"
    input = Operand(Tile)
    mask = Operand(Tile, optional=True)
    result = Result(Tile)
    num_bins = Attr(int)
    traits = (Pure,)

    @staticmethod
    def infer_result_types(operands: dict, attributes: dict) -> list[t.Type]:
        return [t.TileType((attributes["num_bins"],), t.i32)]

    def verify_op(self) -> None:
        source, bins = self.input.type, self.attributes["num_bins"]
        if source.rank != 1 or not t.is_integer(source.element) or source.element == t.i1:
            raise op_error(self, f"counts the values of a 1-D integer tile, got {source}")
        if bins < 1 or bins & (bins - 1):
            raise op_error(self, f"num_bins must be a power of two (a tile's size), got {bins}")
        if self.mask is not None and (self.mask.type.without_layout() != t.TileType(source.shape, t.i1)):
            raise op_error(self, f"the mask must be an i1 tile of the input's shape {list(source.shape)}, got "
                                 f"{self.mask.type}")
        if self.result.type.without_layout() != t.TileType((bins,), t.i32):
            raise op_error(self, f"counts into tile<{bins}xi32>, not {self.result.type}")


TILE_SHAPE_OPS = (ScanOp, ScanReturnOp, JoinOp, SplitOp, CatOp, GatherOp, HistogramOp)
