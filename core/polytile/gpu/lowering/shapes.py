"""``tile.join``, ``tile.split`` and ``tile.cat`` on GPUs, for any layouts.

Each op is described once, by where every element of a result comes from: a function
``locate(result coordinates) -> (operand index, operand coordinates)`` on Python ints
(:data:`SHAPE_MAPS`, keyed by op class).  With power-of-two shapes these maps only move
coordinate bits (join: the last coordinate picks the operand; split: a fixed last
coordinate; cat: the top bit of the index picks the operand), so they are affine over
GF(2), like the linear layouts: composing one with a layout's bases is the whole
analysis, and it decides between two lowerings.

- **Registers**: when every lane and warp bit of the result moves to the same element
  the operands' lane and warp bit hold, and never changes the operand, each result
  register is a register of one operand in the same thread (the test of
  :func:`.indexing.register_map`, generalised to several operands and affine maps).
- **Shared memory** otherwise: the operands are stored one after another in the op's
  scratch, each row-major, a barrier, and each result register loads the offset its
  element's source has there.  Both sides are again linear maps from (register, lane,
  warp) to an offset, built as 1-D linear layouts (:func:`scratch_layout`), so the
  stores and loads are :func:`.shared.store_registers` / :func:`.shared.load_registers`
  over the same index math (:mod:`.indexing`) that the tests run on Python ints.  A
  thread accesses several registers at once where they are consecutive in the scratch.
  The op's one barrier sits between its stores and its loads (``sync = "inside"``:
  ``insert-barriers`` guards whoever uses those bytes next).

``tile.trans`` and ``tile.reshape`` are lowered by :mod:`.convert` (padded scratch against
bank conflicts).  ``tile.split`` has a layout rule: its results take the slice of the
source's layout along the split dimension, so that a source whose threads hold whole
pairs (a coalesced load of pairs, say) splits in registers.

Future work: the scratch is not padded, so some conversions meet bank conflicts; a join
result could take its operands' layout plus a register dimension (as Triton does), which
the group model of assign-layouts cannot yet say.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from ...dialects import tile_shape
from ...ir import types as t
from ..allocation import register_scratch
from ..layout_rules import register_layout_rule
from ..linear_layout import LinearLayout, log2
from .context import LoweringContext, linear_layout_of, register_lowering
from .indexing import register_offset
from .shared import (
    PaddedPlacement,
    check_storable,
    load_registers,
    store_registers,
    vector_width,
)
from .types import element_bits

Coords = tuple[int, ...]
#: ``locate(result coordinates) -> (operand index, operand coordinates)``.
Locate = Callable[[Coords], tuple[int, Coords]]
#: Op class -> ``fn(op) -> [locate of result 0, locate of result 1, ...]``.
SHAPE_MAPS: dict[type, Callable[[Any], list[Locate]]] = {}


def register_shape_map(*op_classes: type) -> Callable:
    """Decorator: ``fn(op)`` gives, per result of ``op``, where its elements come from
    (see the module docstring); the op is then lowered here, in registers or through
    shared memory.  The map must be affine over GF(2) on coordinate bits, which moving,
    dropping or adding whole coordinate bits is."""
    def register(fn: Callable[[Any], list[Locate]]) -> Callable[[Any], list[Locate]]:
        for cls in op_classes:
            SHAPE_MAPS[cls] = fn
            register_lowering(cls)(_lower_shape_op)
            register_scratch(cls)(_shape_op_scratch)
        return fn
    return register


# --------------------------------------------------------------------------------------
# The plan: registers or shared memory


@dataclass(frozen=True)
class Access:
    """One tile's side of the move through shared memory: its registers go to (or come
    from) element ``base + layout(register, lane, warp)`` of the scratch, ``width``
    registers at a time."""

    layout: LinearLayout
    base: int
    width: int


@dataclass(frozen=True)
class ShapePlan:
    """How one op runs: ``registers[j][r] = (operand, register)`` for each register
    ``r`` of result ``j`` when no element changes thread; otherwise ``stores`` (one per
    operand) and ``loads`` (one per result) through ``scratch_elements`` elements."""

    registers: list[list[tuple[int, int]]] | None
    stores: list[Access]
    loads: list[Access]
    scratch_elements: int

    @property
    def placement(self) -> PaddedPlacement:
        return PaddedPlacement((self.scratch_elements,), 0, ())


def _xor(a: Coords, b: Coords) -> Coords:
    return tuple(x ^ y for x, y in zip(a, b))


def _row_major(coords: Coords, shape: Sequence[int]) -> int:
    index = 0
    for c, size in zip(coords, shape):
        index = index * size + c
    return index


def value_layout(value: Any, like: LinearLayout) -> LinearLayout:
    """The linear layout of a tile value; a scalar is a rank-0 tile every thread holds."""
    if isinstance(value.type, t.TileType):
        return linear_layout_of(value)
    return LinearLayout((), (), ((),) * len(like.lane), ((),) * len(like.warp))


def _linear_part(locate: Locate, zero: Coords) -> Callable[[Coords], tuple[int, Coords]]:
    """``locate`` less its value at ``zero``: where a lane or warp bit moves an element."""
    k0, c0 = locate(zero)

    def part(basis: Coords) -> tuple[int, Coords]:
        k, c = locate(basis)
        return k ^ k0, _xor(c, c0)
    return part


def register_sources(sources: list[LinearLayout], result: LinearLayout, locate: Locate) -> list[tuple[int, int]] | None:
    """``(operand, register)`` for each register of ``result``, in the same thread; None
    when some element has to come from another thread."""
    part = _linear_part(locate, (0,) * len(result.shape))
    for kind in ("lane", "warp"):
        for bit, basis in enumerate(getattr(result, kind)):
            k, c = part(basis)
            if k or any(getattr(s, kind)[bit] != c for s in sources):
                return None
    where = [{} for _ in sources]
    for k, layout in enumerate(sources):
        for r in range(layout.num_registers):
            where[k].setdefault(register_offset(layout, r), r)
    mapping = []
    for r in range(result.num_registers):
        k, c = locate(register_offset(result, r))
        found = where[k].get(c)
        if found is None:
            return None
        mapping.append((k, found))
    return mapping


def scratch_layout(layout: LinearLayout, to_offset: Callable[[Coords], int], elements: int) -> tuple[LinearLayout, int]:
    """``(offsets, constant)``: the 1-D layout giving each (register, lane, warp) of
    ``layout`` the scratch element ``to_offset`` puts it at, less ``constant`` (the
    offset of register 0 of thread 0), which an affine ``to_offset`` adds to every one."""
    constant = to_offset((0,) * len(layout.shape))

    def offset(basis: Coords) -> tuple[int]:
        return (to_offset(basis) ^ constant,)

    offsets = LinearLayout((elements,), *(tuple(map(offset, getattr(layout, kind)))
                                          for kind in ("register", "lane", "warp")))
    moved = 0
    for basis in offsets.register + offsets.lane + offsets.warp:
        moved |= basis[0]
    if moved & constant:
        # XOR equals addition only on disjoint bits: the constant could not go in the base.
        raise ValueError(f"the scratch offsets of {layout} are not a power-of-two bit permutation")
    return offsets, constant


def _access(layout: LinearLayout, to_offset: Callable[[Coords], int], elements: int, bits: int,
            max_bits: int) -> Access:
    offsets, constant = scratch_layout(layout, to_offset, elements)
    width = vector_width(offsets, 0, bits, elements, max_bits)
    while constant % width:
        width //= 2
    return Access(offsets, constant, width)


def plan_shape_op(op: Any, max_bits: int = 128) -> ShapePlan:
    """Registers when the layouts allow it, else the moves through shared memory."""
    locates = SHAPE_MAPS[type(op)](op)
    source_values = list(op.operands)
    sources = [linear_layout_of(v) for v in source_values]
    results = [value_layout(v, sources[0]) for v in op.results]
    mappings = [register_sources(sources, result, locate) for result, locate in zip(results, locates)]
    if all(m is not None for m in mappings):
        return ShapePlan(mappings, [], [], 0)

    shapes = [v.type.shape for v in source_values]
    starts, total = [], 0
    for shape in shapes:
        starts.append(total)
        total += _numel(shape)
    bits = element_bits(source_values[0].type)
    stores = [_access(layout, lambda c, k=k: starts[k] + _row_major(c, shapes[k]), total, bits, max_bits)
              for k, layout in enumerate(sources)]

    def source_offset(locate: Locate) -> Callable[[Coords], int]:
        def offset(coords: Coords) -> int:
            k, c = locate(coords)
            return starts[k] + _row_major(c, shapes[k])
        return offset

    loads = [_access(result, source_offset(locate), total, bits, max_bits) for result, locate in zip(results, locates)]
    return ShapePlan(None, stores, loads, total)


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for size in shape:
        n *= size
    return n


# --------------------------------------------------------------------------------------
# Scratch size and lowering


def _max_bits(target: Any) -> int:
    return getattr(target, "max_vector_bits", 128)


def _shape_op_scratch(op: Any, target: Any, num_warps: int) -> int:
    try:
        plan = plan_shape_op(op, _max_bits(target))
    except ValueError:
        return 0  # the lowering reports it, at the op's source line
    return plan.scratch_elements * element_bits(op.operands[0].type) // 8


def _lower_shape_op(op: Any, operands: list, ctx: LoweringContext) -> list:
    try:
        plan = plan_shape_op(op, _max_bits(ctx.target))
    except ValueError as exc:
        raise ctx.unsupported(op, f"'{op.name}' from {', '.join(str(v.type) for v in op.operands)} ({exc})") from None
    tiles = [isinstance(r.type, t.TileType) for r in op.results]
    if plan.registers is not None:
        lowered = [[operands[k][s] for k, s in mapping] for mapping in plan.registers]
        return [regs if tile_ else regs[0] for regs, tile_ in zip(lowered, tiles)]

    element = t.element_type(op.operands[0].type)
    check_storable(ctx, op, element)
    scratch = ctx.scratch(op)
    bytes_ = element_bits(op.operands[0].type) // 8
    placement = plan.placement
    for registers, access in zip(operands, plan.stores):
        store_registers(ctx, _advance(ctx, scratch, access.base * bytes_), registers, access.layout, element,
                        placement, access.width)
    ctx.target.barrier(ctx.builder)
    results = []
    for access, tile_ in zip(plan.loads, tiles):
        registers = load_registers(ctx, _advance(ctx, scratch, access.base * bytes_), access.layout, element,
                                   placement, access.width)
        results.append(registers if tile_ else registers[0])
    return results


def _advance(ctx: LoweringContext, pointer: Any, bytes_: int) -> Any:
    if not bytes_:
        return pointer
    return ctx.builder.gep(pointer, [ctx.i32(bytes_)], inbounds=True, source_etype=ir.IntType(8))


# --------------------------------------------------------------------------------------
# The ops


@register_shape_map(tile_shape.JoinOp)
def _join(op: Any) -> list[Locate]:
    return [lambda c: (c[-1], c[:-1])]


@register_shape_map(tile_shape.SplitOp)
def _split(op: Any) -> list[Locate]:
    return [lambda c, half=half: (0, c + (half,)) for half in (0, 1)]


@register_shape_map(tile_shape.CatOp)
def _cat(op: Any) -> list[Locate]:
    lhs, rhs = op.lhs.type.shape[0], op.rhs.type.shape[0]
    if lhs != rhs:
        # Layouts need power-of-two sizes: only equal halves give one.
        raise ValueError(f"concatenating {lhs} and {rhs} elements")
    bits = log2(lhs)
    return [lambda c: (c[0] >> bits, (c[0] & (lhs - 1),))]


# A split's halves are the source without its last dimension: sliced like a reduction's
# result, the thread that holds a pair keeps both halves.
@register_layout_rule(tile_shape.SplitOp)
def _split_layout(op: Any, groups: Any) -> None:
    groups.add(op.source)
    halves = [r for r in op.results if isinstance(r.type, t.TileType)]
    groups.union(halves)
    for half in halves:
        groups.slices.append((half, op.source.type.rank - 1, op.source, op))


__all__ = [
    "SHAPE_MAPS",
    "Access",
    "ShapePlan",
    "plan_shape_op",
    "register_shape_map",
    "register_sources",
    "scratch_layout",
    "value_layout",
]
