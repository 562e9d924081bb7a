"""The ``lower-block-pointers`` pass: block pointers to plain pointer tiles.

A block pointer (``tile.make_block_ptr``) is a base pointer, the array's shape and
strides, and the block's offsets.  This pass keeps those parts as separate SSA values
and rewrites

- ``tile.advance`` into additions to the offsets;
- ``tile.load_block`` / ``tile.store_block`` into ``tile.load`` / ``tile.store`` through
  ``base + sum_d (offset_d + arange(B_d)) * stride_d``, masked by
  ``0 <= offset_d + i < shape_d`` in the ``boundary_check`` dimensions, with the padding
  (zero, NaN; none for "") as the load's ``other``;
- an ``scf.for`` that carries block pointers into one that carries their offsets (the
  base, shape and strides must be the same on every trip, as ``advance`` keeps them).

It is target neutral, so a GPU backend needs no lowering of its own for block pointers
(it runs first in the ``distribute`` stage).  Index arithmetic is done in i64 when any
of the pointer's shape, strides or offsets is i64, else in i32 (as Triton's
``RewriteTensorPointer``).  A block pointer that flows through ``scf.if``, ``scf.while``
or a call is an error naming the op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..dialects import arith, scf, tile, tile_block
from ..errors import CompilationError, SourceLocation
from ..ir import types as t
from ..ir.builder import Builder
from ..ir.operation import Block, Operation
from .pass_base import Pass, PassContext, PreservedAnalyses


@dataclass
class _Parts:
    """A block pointer as SSA values: ``offsets`` change, the rest do not."""

    base: Any
    shape: list
    strides: list
    offsets: list
    block: tuple[int, ...]

    def same_array(self, other: "_Parts") -> bool:
        return (self.base is other.base and all(a is b for a, b in zip(self.shape, other.shape))
                and all(a is b for a, b in zip(self.strides, other.strides)))


def _error(op: Operation, message: str) -> CompilationError:
    location = op.location if isinstance(op.location, SourceLocation) else None
    return CompilationError(f"lower-block-pointers: {message}", location)


def _is_block_pointer(value: Any) -> bool:
    return isinstance(value.type, t.BlockPointerType)


class _Lowering:
    def __init__(self) -> None:
        self.parts: dict[Any, _Parts] = {}
        self.dead: list[Operation] = []

    # -- helpers ------------------------------------------------------------------------
    @staticmethod
    def _cast(b: Builder, value: Any, type_: t.Type) -> Any:
        if value.type == type_:
            return value
        name = "extsi" if type_.width > value.type.width else "trunci"  # type: ignore[attr-defined]
        return b.create(arith.CASTS[name], value, result_types=[type_]).result

    def _get(self, op: Operation, value: Any) -> _Parts:
        found = self.parts.get(value)
        if found is None:
            raise _error(op, f"'{op.name}' uses a block pointer that does not come from tile.make_block_ptr, "
                             "tile.advance or an scf.for that carries one")
        return found

    # -- the walk -----------------------------------------------------------------------
    def block(self, block: Block) -> None:
        for op in list(block):
            handler = _HANDLERS.get(type(op))
            if handler is not None:
                handler(self, op)
                continue
            if any(_is_block_pointer(v) for v in (*op.operands, *op.results)) and op.name != "scf.yield":
                raise _error(op, f"a block pointer passed through '{op.name}' is not supported; carry it through "
                                 "an scf.for or recompute it (tile.make_block_ptr) where it is used")
            for region in op.regions:
                for inner in region.blocks:
                    self.block(inner)

    def make(self, op: Operation) -> None:
        self.parts[op.result] = _Parts(op.base, list(op.shape), list(op.strides), list(op.offsets),
                                       tuple(op.block_shape))
        self.dead.append(op)

    def advance(self, op: Operation) -> None:
        old = self._get(op, op.ptr)
        b = Builder.before(op)
        offsets = [b.create(arith.AddIOp, o, self._cast(b, d, o.type)).result
                   for o, d in zip(old.offsets, op.offsets)]
        self.parts[op.result] = _Parts(old.base, old.shape, old.strides, offsets, old.block)
        self.dead.append(op)

    def _pointers(self, op: Operation, parts: _Parts, checked: tuple) -> tuple[Any, Any]:
        """The tile of element pointers of the block and its in-bounds mask (None when no
        dimension is checked)."""
        b = Builder.before(op)
        wide = any(v.type == t.i64 for v in (*parts.shape, *parts.strides, *parts.offsets))
        index = t.i64 if wide else t.i32
        positions = [block_positions(b, parts.offsets[d], size, index) for d, size in enumerate(parts.block)]
        return element_addresses(b, parts.base, parts.shape, parts.strides, positions, checked)

    def load(self, op: Operation) -> None:
        parts = self._get(op, op.ptr)
        checked = tuple(op.boundary_check)
        pointers, mask = self._pointers(op, parts, checked)
        b = Builder.before(op)
        other = None
        if mask is not None and op.padding:
            value = float("nan") if op.padding == "nan" else 0
            element = op.result.type.element
            value = float(value) if isinstance(element, t.FloatType) else int(value)
            other = b.create(arith.ConstantOp, value=value, result_types=[op.result.type]).result
        load = b.create(tile.LoadOp, pointers, mask=mask, other=other, result_types=[op.result.type])
        op.result.replace_all_uses_with(load.result)
        op.erase()

    def store(self, op: Operation) -> None:
        parts = self._get(op, op.ptr)
        pointers, mask = self._pointers(op, parts, tuple(op.boundary_check))
        Builder.before(op).create(tile.StoreOp, pointers, op.value, mask=mask)
        op.erase()

    def for_(self, op: Operation) -> None:
        carried = [i for i, v in enumerate(op.init_args) if _is_block_pointer(v)]
        if not carried:
            for block in op.body.blocks:
                self.block(block)
            return
        inits: list[Any] = []
        layout: list[tuple[int, int]] = []  # per old carried value: (first new index, count)
        for i, value in enumerate(op.init_args):
            if i in carried:
                parts = self._get(op, value)
                layout.append((len(inits), len(parts.offsets)))
                inits.extend(parts.offsets)
            else:
                layout.append((len(inits), 1))
                inits.append(value)
        b = Builder.before(op)
        loop = b.insert(scf.ForOp.create(op.lower, op.upper, op.step, inits, location=op.location))
        loop.attributes.update(op.attributes)  # its pl.range options (num_stages, ...)
        new_block, old_block = loop.body.block, op.body.block
        old_block.arguments[0].replace_all_uses_with(new_block.arguments[0])
        new_block.arguments[0].name_hint = old_block.arguments[0].name_hint
        for i, arg in enumerate(old_block.arguments[1:]):
            start, count = layout[i]
            new_args = new_block.arguments[1 + start:1 + start + count]
            if i in carried:
                init = self.parts[op.init_args[i]]
                self.parts[arg] = _Parts(init.base, init.shape, init.strides, list(new_args), init.block)
            else:
                new_args[0].name_hint = arg.name_hint
                arg.replace_all_uses_with(new_args[0])
        for inner in list(old_block):
            new_block.append(inner.detach())
        self.block(new_block)
        yielded = new_block.last_op
        values = []
        for i, value in enumerate(yielded.operands):
            if i in carried:
                parts = self._get(yielded, value)
                if not parts.same_array(self.parts[op.init_args[i]]):
                    raise _error(op, "an scf.for carries a block pointer whose base, shape or strides change "
                                     "between trips; only its offsets may change (tile.advance)")
                values.extend(parts.offsets)
            else:
                values.append(value)
        Builder.before(yielded).create(scf.YieldOp, values)
        yielded.erase()
        for i, result in enumerate(op.results):
            start, count = layout[i]
            new_results = loop.results[start:start + count]
            if i in carried:
                init = self.parts[op.init_args[i]]
                self.parts[result] = _Parts(init.base, init.shape, init.strides, list(new_results), init.block)
            else:
                result.replace_all_uses_with(new_results[0])
        self.dead.append(op)

    def erase_dead(self) -> None:
        for op in reversed(self.dead):
            if op.parent is not None:
                op.erase()


_HANDLERS = {
    tile_block.MakeBlockPtrOp: _Lowering.make,
    tile_block.AdvanceOp: _Lowering.advance,
    tile_block.LoadBlockOp: _Lowering.load,
    tile_block.StoreBlockOp: _Lowering.store,
    scf.ForOp: _Lowering.for_,
}


def _cast_scalar(b: Builder, value: Any, type_: t.Type) -> Any:
    if value.type == type_:
        return value
    name = "extsi" if type_.width > value.type.width else "trunci"  # type: ignore[attr-defined]
    return b.create(arith.CASTS[name], value, result_types=[type_]).result


def block_positions(b: Builder, offset: Any, size: int, index: t.Type) -> Any:
    """``offset + arange(size)`` as a 1-D tile of ``index`` (i32 or i64): the positions a
    block starting at run-time ``offset`` covers along one dimension."""
    along = b.create(tile.ArangeOp, start=0, end=size).result
    if index != t.i32:
        along = b.create(arith.ExtSIOp, along, result_types=[t.TileType((size,), index)]).result
    start = b.create(tile.SplatOp, _cast_scalar(b, offset, index), result_types=[t.TileType((size,), index)]).result
    return b.create(arith.AddIOp, start, along).result


def element_addresses(b: Builder, base: Any, shape: list, strides: list, positions: list,
                      checked: tuple) -> tuple[Any, Any]:
    """The pointers ``base + sum_d positions[d] * strides[d]`` of an N-D tile whose
    dimension ``d`` covers the 1-D tile ``positions[d]`` of positions, and the mask
    ``0 <= position < shape[d]`` over the ``checked`` dimensions (None when none is).

    The index arithmetic is done in the positions' element type; ``shape`` and
    ``strides`` (scalars) are cast to it.  Block pointers (``tile.load_block``) and the
    plugins' block accesses (a tensor descriptor's loads, gathers and atomics) share it."""
    block = tuple(p.type.shape[0] for p in positions)
    rank = len(block)
    index = positions[0].type.element
    full = t.TileType(block, index)
    linear, mask = None, None
    for d in range(rank):
        position = positions[d]
        for axis in range(rank):
            if axis != d:
                position = b.create(tile.ExpandDimsOp, position, axis=axis).result
        if block != tuple(position.type.shape):
            position = b.create(tile.BroadcastOp, position, result_types=[full]).result
        stride = b.create(tile.SplatOp, _cast_scalar(b, strides[d], index), result_types=[full]).result
        term = b.create(arith.MulIOp, position, stride).result
        linear = term if linear is None else b.create(arith.AddIOp, linear, term).result
        if d in checked:
            zero = b.create(arith.ConstantOp, value=0, result_types=[full]).result
            extent = b.create(tile.SplatOp, _cast_scalar(b, shape[d], index), result_types=[full]).result
            inside = b.create(arith.AndIOp,
                              b.create(arith.CmpIOp, position, zero, predicate="sge").result,
                              b.create(arith.CmpIOp, position, extent, predicate="slt").result).result
            mask = inside if mask is None else b.create(arith.AndIOp, mask, inside).result
    pointers = b.create(tile.SplatOp, base, result_types=[t.TileType(block, base.type)]).result
    return b.create(tile.AddPtrOp, pointers, linear).result, mask


def lower_block_pointers(module: Any) -> bool:
    """Rewrite every block pointer of ``module``; True when something changed."""
    if not any(isinstance(op, tile_block.TILE_BLOCK_OPS) for op in module.walk()):
        return False
    for function in [op for op in module.walk() if op.name == "func.func"]:
        lowering = _Lowering()
        for region in function.regions:
            for block in region.blocks:
                lowering.block(block)
        lowering.erase_dead()
    return True


@dataclass
class LowerBlockPointers(Pass):
    """Block pointers to pointer tiles and masked loads and stores (see the module docstring)."""

    name: ClassVar[str] = "lower-block-pointers"
    summary: ClassVar[str] = "tile.make_block_ptr/advance/load_block/store_block to tile.load/store through pointer tiles"

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        return PreservedAnalyses.none() if lower_block_pointers(module) else PreservedAnalyses.all()


__all__ = ["LowerBlockPointers", "block_positions", "element_addresses", "lower_block_pointers"]
