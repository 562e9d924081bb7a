"""``gpu.convert_layout``: the same tile, held by other threads or other registers.

How a conversion is lowered depends on the pair of layouts, so the lowering looks in a
second table, :data:`CONVERSIONS`, keyed by ``(source layout class, result layout
class)``; ``None`` in a key matches any class.  Lookup order: the exact pair, then
``(source, None)``, ``(None, result)``, ``(None, None)``.  Before any of those, a
conversion that keeps every element in the thread that holds it (only the register
order changes, or the result holds copies the source already had) is a register shuffle
and needs no table entry.

A backend or plugin adds a conversion with ``@register_conversion(BlockedLayout,
DotOperandLayout, scratch=size)`` (say, shared memory plus ``ldmatrix``); a conversion
that needs shared memory gives ``scratch(op, target, num_warps) -> bytes``, which the
memory stage turns into ``ctx.scratch(op)`` for the conversion to use.

The ``(None, None)`` entry, any layout to any layout, goes through shared memory
(:mod:`.shared`): each thread stores its registers into a padded row-major copy of the
tile, vectorized along the dimension both layouts hold most consecutive elements of, the
program synchronizes, and each thread loads what the result layout gives it.  The scratch
is the whole tile plus padding; the op's one barrier sits between its stores and its
loads (``sync = "inside"`` for ``insert-barriers``).

``tile.trans`` and ``tile.reshape`` are lowered here too: in registers when every thread
already holds the elements it needs, otherwise by the same store-synchronize-load, the
stores placing each element where the result's coordinates put it.

**Rounds.**  With ``gpu.scratch_rounds = R`` (set by the memory stage when shared memory
is short, see :mod:`polytile.gpu.allocation`), the shuffle runs ``R`` times over one slab
of the tile each (:class:`ShuffleInRounds`): the scratch holds ``1/R`` of the tile, and
each round is store, barrier, load, with a barrier before the next round's stores.
Which round an element belongs to is the high bits of its coordinate along the split
dimension.  When neither layout spreads those bits over lanes or warps (the usual case:
they are register bits) each register's round is known at compile time; otherwise each
access checks it at run time (a predicated store, a load and a select).
"""

from __future__ import annotations

from typing import Any, Callable

from ...dialects import tile
from ...dialects.gpu import ConvertLayoutOp
from ...plugins.tables import OwnedTable
from ..allocation import ScratchSize, register_scratch, scratch_rounds
from ..linear_layout import LinearLayout, log2
from .context import LoweringContext, layout_of, linear_layout_of, register_lowering
from .indexing import coordinates, duplicate_register_mask, register_map
from .shared import (LLVMAddOps, PaddedPlacement, PyAddOps, _address, _from_storage, _to_storage, check_storable,
                     element_bytes, element_offset, load_registers, storage_type, store_registers, vector_width)
from .types import element_bits

#: ``fn(op, registers, ctx) -> registers`` for one conversion (see the module docstring).
Conversion = Callable[[Any, list, LoweringContext], list]
#: (source layout class | None, result layout class | None) -> (conversion, scratch size | None).
#: Each entry owned by who registered it (:class:`~polytile.plugins.tables.OwnedTable`).
#: The core's are in this module and in :mod:`.dot_operands` (imported on the first read).
CONVERSIONS: OwnedTable[tuple[Conversion, ScratchSize | None]] = OwnedTable(
    "layout conversion", providers=("polytile.gpu.lowering.dot_operands",))


def register_conversion(source: type | None, result: type | None, *,
                        scratch: ScratchSize | None = None) -> Callable[[Conversion], Conversion]:
    """Decorator: ``fn`` lowers conversions from ``source`` layouts to ``result`` layouts
    (layout classes of :mod:`polytile.gpu.layouts`; ``None`` for any).  ``scratch(op,
    target, num_warps) -> bytes`` says how much shared memory it needs (None: none)."""
    def register(fn: Conversion) -> Conversion:
        CONVERSIONS.add((source, result), (fn, scratch))
        return fn
    return register


def find_conversion(source_layout: Any, result_layout: Any) -> tuple[Conversion, ScratchSize | None] | None:
    src, dst = type(source_layout), type(result_layout)
    for key in ((src, dst), (src, None), (None, dst), (None, None)):
        found = CONVERSIONS.get(key)
        if found is not None:
            return found
    return None


def _in_registers(op: Any) -> list[int] | None:
    """The register permutation that performs ``op`` without moving data between threads."""
    return register_map(linear_layout_of(op.source), linear_layout_of(op.result), lambda c: c)


def _conversion_rounds(op: Any, target: Any, num_warps: int) -> int:
    if _in_registers(op) is not None or find_conversion(layout_of(op.source), layout_of(op.result)) != \
            CONVERSIONS.get((None, None)):
        return 1  # only the generic shuffle below knows how to work in rounds
    return _plain_shuffle(op, target).max_rounds()


@register_scratch(ConvertLayoutOp, rounds=_conversion_rounds)
def _conversion_scratch(op: Any, target: Any, num_warps: int) -> int:
    if _in_registers(op) is not None:
        return 0
    found = find_conversion(layout_of(op.source), layout_of(op.result))
    return 0 if found is None or found[1] is None else found[1](op, target, num_warps)


@register_lowering(ConvertLayoutOp)
def _convert_layout(op: Any, operands: list, ctx: LoweringContext) -> list:
    source, result = op.source, op.result
    mapping = _in_registers(op)
    if mapping is not None:
        return [[operands[0][r] for r in mapping]]
    found = find_conversion(layout_of(source), layout_of(result))
    if found is None:
        raise ctx.unsupported(op, f"'{op.name}' from {source.type} to {result.type}, which moves data between "
                                  "threads (through shared memory),")
    return [found[0](op, operands[0], ctx)]


# --------------------------------------------------------------------------------------
# Through shared memory


class ShuffleThroughShared:
    """How one op moves a tile through shared memory: where the elements go
    (``placement``, in the result's coordinates), how the source's coordinates map there
    (``to_placement``, None when they are the same), and how many registers each store
    and load moves at once."""

    def __init__(self, source: LinearLayout, result: LinearLayout, bits: int, max_bits: int,
                 source_dim_of: Any = None, to_placement: Any = None, reshape: bool = False):
        shape, rank = result.shape, len(result.shape)
        self.to_placement = to_placement
        source_dim_of = source_dim_of or (lambda d: d)
        if reshape:
            # Row-major without padding: the offset is the flat index, which both sides share.
            inner = rank - 1
            self.store_width = vector_width(source, len(source.shape) - 1, bits, source.shape[-1], max_bits)
            self.load_width = vector_width(result, inner, bits, shape[inner], max_bits)
            pad = 0
        else:
            def widths(d: int) -> tuple[int, int]:
                return (vector_width(source, source_dim_of(d), bits, shape[d], max_bits),
                        vector_width(result, d, bits, shape[d], max_bits))

            # The dimension both layouts hold the most consecutive elements of; ties go to
            # the wider loads, then to the last dimension.
            inner = max(range(rank), key=lambda d: (min(widths(d)), widths(d)[1], widths(d)[0], d))
            self.store_width, self.load_width = widths(inner)
            # Rows shifted by a vector from each other: threads walking down a column meet
            # different banks (Triton pads its conversion scratch the same way).
            pad = max(self.store_width, self.load_width) if any(shape[d] > 1 for d in range(rank) if d != inner) else 0
        outer = tuple(d for d in range(rank) if d != inner)
        self.placement = PaddedPlacement(tuple(shape), inner, outer, pad)

    def scratch_bytes(self, bits: int) -> int:
        return self.placement.elements * bits // 8

    def split_dimensions(self) -> list[tuple[int, int]]:
        """(dimension, the most rounds it splits into) of each dimension the tile can be
        cut along: an outer one into single rows, the inner one into whole vectors."""
        placement = self.placement
        found = [(d, placement.shape[d]) for d in placement.outer if placement.shape[d] > 1]
        vector = max(self.store_width, self.load_width)
        if placement.shape[placement.inner] > vector:
            found.append((placement.inner, placement.shape[placement.inner] // vector))
        return found

    def max_rounds(self) -> int:
        return max((most for _, most in self.split_dimensions()), default=1)

    def in_rounds(self, rounds: int, source: LinearLayout, result: LinearLayout) -> Any:
        """This shuffle done in ``rounds`` rounds (itself for 1)."""
        return self if rounds <= 1 else ShuffleInRounds(self, rounds, source, result)

    def emit(self, ctx: LoweringContext, op: Any, registers: list, source: LinearLayout, result: LinearLayout,
             element: Any) -> list:
        check_storable(ctx, op, element)
        base = ctx.scratch(op)
        if not self._store_rows(ctx, base, registers, source, element):
            store_registers(ctx, base, registers, source, element, self.placement, self.store_width,
                            self.to_placement)
        ctx.target.barrier(ctx.builder)
        return load_registers(ctx, base, result, element, self.placement, self.load_width)

    def _store_rows(self, ctx: LoweringContext, base: Any, registers: list, source: LinearLayout,
                    element: Any) -> bool:
        """The matrix unit's own store of whole rows, where it has one that applies
        (NVIDIA: ``stmatrix`` for MMA accumulators, see ``MatrixUnit.store_rows``)."""
        if self.to_placement is not None:
            return False
        from .dot import MATRIX_UNITS

        store = getattr(MATRIX_UNITS.get(ctx.target.backend_name), "store_rows", None)
        return store is not None and store(ctx, base, registers, source, element, self.placement)


class ShuffleInRounds:
    """A :class:`ShuffleThroughShared` in ``rounds`` rounds, one slab of the tile along
    ``split`` each: the scratch holds a slab (see the module docstring)."""

    def __init__(self, whole: ShuffleThroughShared, rounds: int, source: LinearLayout, result: LinearLayout):
        self.rounds = rounds
        self.store_width, self.load_width, self.to_placement = whole.store_width, whole.load_width, whole.to_placement
        self._static: dict[tuple, bool] = {}
        candidates = [d for d, most in whole.split_dimensions() if most >= rounds]
        if not candidates:
            raise ValueError(f"a tile of shape {whole.placement.shape} cannot be moved in {rounds} rounds "
                             f"(at most {whole.max_rounds()})")
        shape = list(whole.placement.shape)

        def known_at_compile_time(d: int) -> bool:
            self.split, self.slab_bits = d, log2(shape[d] // rounds)
            return self.static(source, self.to_placement) and self.static(result, None)

        # Prefer a dimension where every register's round is known at compile time.
        self.split = next((d for d in candidates if known_at_compile_time(d)), candidates[0])
        shape[self.split] //= rounds
        self.slab_bits = log2(shape[self.split])
        outer, inner = whole.placement.outer, whole.placement.inner
        pad = whole.placement.pad if any(shape[d] > 1 for d in outer) else 0
        self.placement = PaddedPlacement(tuple(shape), inner, outer, pad)

    def scratch_bytes(self, bits: int) -> int:
        return self.placement.elements * bits // 8

    def _round_of(self, ops: Any, coords: list, to_placement: Any) -> Any:
        where = coords if to_placement is None else to_placement(ops, coords)
        return ops.shr(where[self.split], self.slab_bits)

    def static(self, layout: LinearLayout, to_placement: Any) -> bool:
        """Whether no lane or warp bit reaches the round bits (the map is linear, so
        checking each bit alone is enough)."""
        key = (layout, to_placement, self.split, self.slab_bits)
        known = self._static.get(key)
        if known is None:
            known = self._static[key] = self._no_thread_bit_reaches_the_round(layout, to_placement)
        return known

    def _no_thread_bit_reaches_the_round(self, layout: LinearLayout, to_placement: Any) -> bool:
        ops = PyAddOps()
        threads = [(1 << i, 0) for i in range(len(layout.lane))] + [(0, 1 << i) for i in range(len(layout.warp))]
        return all(self._round_of(ops, coordinates(ops, layout, lane, warp)[0], to_placement) == 0
                   for lane, warp in threads)

    def plan(self, ops: Any, layout: LinearLayout, width: int, lane: Any, warp: Any,
             to_placement: Any = None) -> list[tuple[Any, int, Any]]:
        """``(round, first register, element offset in the slab)`` of each access of the
        thread; the round is an int when :meth:`static`, else a run-time value."""
        static = self.static(layout, to_placement)
        duplicates = duplicate_register_mask(layout)
        coords = coordinates(ops, layout, lane, warp)
        constant = coordinates(PyAddOps(), layout, 0, 0) if static else None
        mask = (1 << self.slab_bits) - 1
        plan = []
        for start in range(0, layout.num_registers, width):
            if start & duplicates:
                continue
            where = coords[start] if to_placement is None else to_placement(ops, coords[start])
            round_ = self._round_of(PyAddOps(), constant[start], to_placement) if static else \
                ops.shr(where[self.split], self.slab_bits)
            local = list(where)
            local[self.split] = ops.and_(where[self.split], mask)
            plan.append((round_, start, element_offset(ops, self.placement, local)))
        return plan

    def emit(self, ctx: LoweringContext, op: Any, registers: list, source: LinearLayout, result: LinearLayout,
             element: Any) -> list:
        check_storable(ctx, op, element)
        b = ctx.builder
        base = ctx.scratch(op)
        stored, bytes_ = storage_type(element), element_bytes(element)
        ops = LLVMAddOps(b)
        stores = self.plan(ops, source, self.store_width, ctx.lane_id, ctx.warp_id, self.to_placement)
        loads = self.plan(ops, result, self.load_width, ctx.lane_id, ctx.warp_id)
        static_stores, static_loads = self.static(source, self.to_placement), self.static(result, None)
        loaded: list[Any] = [None] * result.num_registers
        for k in range(self.rounds):
            if k:
                ctx.target.barrier(b)  # the last round's loads are done before its slab is overwritten
            for round_, start, offset in stores:
                if static_stores:
                    if round_ == k:
                        self._store(ctx, base, registers[start:start + self.store_width], offset, stored, bytes_)
                    continue
                with b.if_then(b.icmp_unsigned("==", round_, ctx.i32(k))):
                    self._store(ctx, base, registers[start:start + self.store_width], offset, stored, bytes_)
            ctx.target.barrier(b)
            width = self.load_width
            for round_, start, offset in loads:
                if static_loads and round_ != k:
                    continue
                values = [_from_storage(b, v, element) for v in self._load(ctx, base, offset, stored, bytes_, width)]
                if not static_loads and k:
                    # A load of another round's slab is in bounds but not this register's element.
                    mine = b.icmp_unsigned("==", round_, ctx.i32(k))
                    values = [b.select(mine, new, old) for new, old in zip(values, loaded[start:start + width])]
                loaded[start:start + width] = values
        duplicates = duplicate_register_mask(result)
        return [loaded[r] if loaded[r] is not None else loaded[r & ~duplicates] for r in range(result.num_registers)]

    @staticmethod
    def _store(ctx: LoweringContext, base: Any, values: list, offset: Any, stored: Any, bytes_: int) -> None:
        from llvmlite import ir

        b = ctx.builder
        values = [_to_storage(b, v, stored) for v in values]
        if len(values) == 1:
            b.store(values[0], _address(ctx, base, offset, bytes_, stored), align=bytes_)
            return
        vector = ir.VectorType(stored, len(values))
        packed = ir.Constant(vector, None)
        for i, v in enumerate(values):
            packed = b.insert_element(packed, v, ctx.i32(i))
        b.store(packed, _address(ctx, base, offset, bytes_, vector), align=len(values) * bytes_)

    @staticmethod
    def _load(ctx: LoweringContext, base: Any, offset: Any, stored: Any, bytes_: int, width: int) -> list:
        from llvmlite import ir

        b = ctx.builder
        if width == 1:
            return [b.load(_address(ctx, base, offset, bytes_, stored), typ=stored, align=bytes_)]
        vector = ir.VectorType(stored, width)
        loaded = b.load(_address(ctx, base, offset, bytes_, vector), typ=vector, align=width * bytes_)
        return [b.extract_element(loaded, ctx.i32(i)) for i in range(width)]


def _element_bits(op: Any) -> int:
    return element_bits(op.result.type)


def _max_bits(target: Any) -> int:
    return getattr(target, "max_vector_bits", 128)


def _plain_shuffle(op: Any, target: Any) -> ShuffleThroughShared:
    return ShuffleThroughShared(linear_layout_of(op.source), linear_layout_of(op.result), _element_bits(op),
                                _max_bits(target))


def _shuffle_of(op: Any, target: Any) -> Any:
    source, result = linear_layout_of(op.source), linear_layout_of(op.result)
    return _plain_shuffle(op, target).in_rounds(scratch_rounds(op), source, result)


@register_conversion(None, None, scratch=lambda op, target, num_warps: _shuffle_of(op, target).scratch_bytes(
    _element_bits(op)))
def _through_shared(op: Any, registers: list, ctx: LoweringContext) -> list:
    return _shuffle_of(op, ctx.target).emit(ctx, op, registers, linear_layout_of(op.source),
                                            linear_layout_of(op.result), op.result.type.element)


def _permuted(order: tuple[int, ...]) -> Any:
    return lambda ops, coords: [coords[order[i]] for i in range(len(order))]


def _reshaped(source_shape: tuple[int, ...], result_shape: tuple[int, ...]) -> Any:
    """Coordinates in ``source_shape`` -> coordinates of the same row-major index in
    ``result_shape`` (powers of two: shifts, masks and XOR)."""
    def convert(ops: Any, coords: list) -> list:
        flat, shift = None, 0
        for d in reversed(range(len(source_shape))):
            if source_shape[d] > 1:
                part = ops.shl(coords[d], shift) if shift else coords[d]
                flat = part if flat is None else ops.xor(flat, part)
            shift += log2(source_shape[d])
        flat = flat if flat is not None else ops.const(0)
        result, shift = [None] * len(result_shape), 0
        for d in reversed(range(len(result_shape))):
            size = result_shape[d]
            result[d] = ops.and_(ops.shr(flat, shift) if shift else flat, size - 1) if size > 1 else ops.const(0)
            shift += log2(size)
        return result
    return convert


def _unflatten_py(index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    coords = []
    for size in reversed(shape):
        coords.append(index % size)
        index //= size
    return tuple(reversed(coords))


def _flatten_py(coords: tuple[int, ...], shape: tuple[int, ...]) -> int:
    index = 0
    for c, size in zip(coords, shape):
        index = index * size + c
    return index


def _shape_op_plan(op: Any, target: Any) -> tuple[list[int] | None, ShuffleThroughShared | None]:
    """(register map, None) when every thread holds what it needs, else (None, shuffle)."""
    source, result = linear_layout_of(op.source), linear_layout_of(op.result)
    src_shape, dst_shape = op.source.type.shape, op.result.type.shape
    if isinstance(op, tile.TransOp):
        order = tuple(op.order)
        inverse = tuple(order.index(d) for d in range(len(order)))
        mapping = register_map(source, result, lambda c: tuple(c[inverse[d]] for d in range(len(order))))
        if mapping is not None:
            return mapping, None
        return None, ShuffleThroughShared(source, result, _element_bits(op), _max_bits(target),
                                          source_dim_of=lambda d: order[d], to_placement=_permuted(order))
    mapping = register_map(source, result, lambda c: _unflatten_py(_flatten_py(c, dst_shape), src_shape))
    if mapping is not None:
        return mapping, None
    return None, ShuffleThroughShared(source, result, _element_bits(op), _max_bits(target),
                                      to_placement=_reshaped(src_shape, dst_shape), reshape=True)


def _shape_op_rounds(op: Any, target: Any, num_warps: int) -> int:
    shuffle = _shape_op_plan(op, target)[1]
    return 1 if shuffle is None else shuffle.max_rounds()


def _shape_op_shuffle(op: Any, target: Any) -> Any:
    shuffle = _shape_op_plan(op, target)[1]
    if shuffle is None:
        return None
    return shuffle.in_rounds(scratch_rounds(op), linear_layout_of(op.source), linear_layout_of(op.result))


@register_scratch(tile.TransOp, tile.ReshapeOp, rounds=_shape_op_rounds)
def _shape_op_scratch(op: Any, target: Any, num_warps: int) -> int:
    shuffle = _shape_op_shuffle(op, target)
    return 0 if shuffle is None else shuffle.scratch_bytes(_element_bits(op))


@register_lowering(tile.TransOp, tile.ReshapeOp)
def _shape_op(op: Any, operands: list, ctx: LoweringContext) -> list:
    mapping = _shape_op_plan(op, ctx.target)[0]
    if mapping is not None:
        return [[operands[0][r] for r in mapping]]
    return [_shape_op_shuffle(op, ctx.target).emit(ctx, op, operands[0], linear_layout_of(op.source),
                                                   linear_layout_of(op.result), op.result.type.element)]


__all__ = ["CONVERSIONS", "Conversion", "ShuffleInRounds", "ShuffleThroughShared", "find_conversion",
           "register_conversion"]
