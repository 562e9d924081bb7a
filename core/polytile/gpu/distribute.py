"""The distribute stage: give every tile a layout.

``assign-layouts`` makes the tile types of a module carry a distributed layout
(``tile<256xf32, #gpu.blocked<...>>``).  Values that must share a layout are grouped:
the operands and results of an elementwise op, a load's pointer, mask, ``other`` and
result, a broadcast's source and result, the values a loop carries through its
arguments, yields and results.  Each group then gets one layout:

- a group that is the source of ``expand_dims`` (or the result of a reduction) takes the
  *slice* of its partner's layout, so the thread that holds an element still holds it
  after the shape op: groups are decided from the highest rank down;
- otherwise a group with memory accesses takes the coalesced blocked layout of its best
  access: axis info (contiguity, divisibility) says how many consecutive elements one
  thread may access at once, up to 16 bytes, and the threads of a warp follow each other
  along the most contiguous dimension (Triton's ``Coalesce``);
- any other group takes the default blocked layout (one element per thread per repetition).

A ``tile.dot`` whose operand types the target's matrix unit serves (NVIDIA: ``mma.sync``,
see :mod:`.lowering.dot`) gives its result's group, accumulator and loop-carried copies
included, the instruction's accumulator layout (``#gpu.mma``); its operands keep the
layout their own group chose (coalesced loads) and are converted into
``#gpu.dot_operand`` layouts just before the dot.  A load or store of that group is cut
from it first (``gpu.convert_layout`` on the loaded or stored value), so memory is still
accessed in the coalesced layout and only the data changes layout (Triton's
AccelerateMatmul).  Other dots compute with multiply-adds: the result keeps its blocked
layout and the operands become ``#gpu.dot_operand`` of it (each thread holds whole rows
of A and columns of B).

A load or store whose pointers or mask the dot's group still shares is cut at those
operands too; a value broadcast to tiles of different shapes gives each further shape a
conversion; and a dot operand's load that its group's layout would not coalesce, or any
load or store whose group runs along another dimension than its own pointers (a column-
major operand and a row-major result sharing ``offs_m[:, None]``), gets a group of its
own (the layouts are then chosen again): each access keeps the coalesced layout of its
own pointers, the data changes layout in between, and the index arithmetic is
recomputed, not moved.

Where a value cannot have the layout a use needs (``x[:, None] + x[None, :]``), a
``gpu.convert_layout`` goes in between.  ``remove-redundant-converts`` then drops
conversions to the same layout, folds chains, and recomputes cheap producers (splat,
constant, arange, and chains of index, pointer and mask arithmetic over them) in the
wanted layout instead of converting them; such a chain that starts at a conversion out
of the wanted layout (``m[:, None]`` of a row maximum, expanded in a layout of its own
and converted back) reads the conversion's source instead: no data moves at all.

Union rules are a table keyed by op class (:data:`LAYOUT_RULES`); a plugin that adds tile
ops registers its rule with :func:`register_layout_rule`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterable

from ..analysis.axis_info import AxisInfoAnalysis, register_axis_info_rule
from ..dialects import arith, scf, tile, tile_shape
from ..dialects.gpu import ConvertLayoutOp
from ..ir import types as t
from ..ir.opdef import Elementwise, Pure
from ..passes.pass_base import Pass, PassContext, PreservedAnalyses
from .coalesce import coalesced_layout
from .layouts import BlockedLayout, DistributedLayout, DotOperandLayout, SliceLayout, default_blocked_layout
from .layout_rules import LAYOUT_RULES, LayoutRule, register_layout_rule  # noqa: F401  (re-exported)
from .lowering.target import NUM_WARPS_ATTR, WARP_SIZE_ATTR, gpu_target_of, num_warps_of


# A conversion moves elements between threads; the values, and so their facts, stay.
register_axis_info_rule(ConvertLayoutOp)(lambda op, infos: [infos[0]])


# --------------------------------------------------------------------------------------
# Groups of values that share a layout


class _Groups:
    """Union-find over tile values, plus the facts the layout choice needs."""

    def __init__(self) -> None:
        self.parent: dict[Any, Any] = {}
        #: (child value, axis, parent value): child's layout is the slice of parent's.
        self.slices: list[tuple[Any, int, Any, Any]] = []
        #: memory ops as (op, pointer value), by group after `finish`.
        self.accesses: list[tuple[Any, Any]] = []
        self.dots: list[Any] = []
        self.scans: list[Any] = []

    def add(self, value: Any) -> None:
        if isinstance(value.type, t.TileType) and value not in self.parent:
            self.parent[value] = value

    def find(self, value: Any) -> Any:
        root = value
        while self.parent[root] is not root:
            root = self.parent[root]
        while self.parent[value] is not root:
            self.parent[value], value = root, self.parent[value]
        return root

    def union(self, values: Iterable[Any]) -> None:
        tiles = [v for v in values if isinstance(v.type, t.TileType)]
        for v in tiles:
            self.add(v)
        for v in tiles[1:]:
            a, b = self.find(tiles[0]), self.find(v)
            if a is not b:
                self.parent[b] = a

    def members(self) -> dict[Any, list[Any]]:
        groups: dict[Any, list[Any]] = {}
        for value in self.parent:
            groups.setdefault(self.find(value), []).append(value)
        return groups


# The rule table lives in .layout_rules (lowering modules register into it); re-exported.


def _same(op: Any, groups: _Groups) -> None:
    groups.union([*op.operands, *op.results])


@register_layout_rule(tile.LoadOp, tile.StoreOp, tile.AtomicRMWOp, tile.AtomicCASOp)
def _memory(op: Any, groups: _Groups) -> None:
    _same(op, groups)
    if isinstance(op.ptr.type, t.TileType):
        groups.accesses.append((op, op.ptr))


register_layout_rule(tile.BroadcastOp)(_same)


@register_layout_rule(tile_shape.ScanOp)
def _scan(op: Any, groups: _Groups) -> None:
    _same(op, groups)
    groups.scans.append(op)


@register_layout_rule(tile.ExpandDimsOp)
def _expand_dims(op: Any, groups: _Groups) -> None:
    groups.add(op.source)
    groups.add(op.result)
    groups.slices.append((op.source, op.axis, op.result, op))


@register_layout_rule(tile.ReduceOp)
def _reduce(op: Any, groups: _Groups) -> None:
    groups.union(op.sources)
    for result in op.outputs:
        if isinstance(result.type, t.TileType):
            groups.add(result)
            groups.slices.append((result, op.axis, op.sources[0], op))


@register_layout_rule(tile.DotOp)
def _dot(op: Any, groups: _Groups) -> None:
    # The operands are converted into the dot's operand layouts: they constrain nothing.
    groups.add(op.a)
    groups.add(op.b)
    groups.union([op.acc, op.result])
    groups.dots.append(op)


@register_layout_rule(scf.ForOp)
def _for(op: Any, groups: _Groups) -> None:
    yielded = op.body.block.last_op.operands
    for row in zip(op.init_args, op.region_iter_args, op.results, yielded):
        groups.union(row)


@register_layout_rule(scf.IfOp)
def _if(op: Any, groups: _Groups) -> None:
    for i, result in enumerate(op.results):
        groups.union([result, op.then_region.block.last_op.operands[i], op.else_region.block.last_op.operands[i]])


@register_layout_rule(scf.WhileOp)
def _while(op: Any, groups: _Groups) -> None:
    before, after = op.before.block, op.after.block
    for row in zip(op.init_args, before.arguments, after.last_op.operands):
        groups.union(row)
    for row in zip(before.last_op.operands[1:], after.arguments, op.results):
        groups.union(row)


def _collect(function: Any, groups: _Groups) -> None:
    for arg in function.arguments:
        groups.add(arg)
    for op in function.walk():
        if op is function:
            continue
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    groups.add(arg)
        for value in (*op.operands, *op.results):
            groups.add(value)
        rule = LAYOUT_RULES.get(type(op))
        if rule is not None:
            rule(op, groups)
        elif op.has_trait(Elementwise):
            _same(op, groups)


# --------------------------------------------------------------------------------------
# The pass


@dataclass
class AssignLayouts(Pass):
    """Give every tile value a distributed layout (see the module docstring)."""

    name: ClassVar[str] = "assign-layouts"
    summary: ClassVar[str] = "attach distributed layouts to tile types; coalesce memory accesses"

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        target = gpu_target_of(context)
        num_warps = num_warps_of(context)
        infos = context.analyses.get(AxisInfoAnalysis, module)
        functions = [op for op in module.walk() if op.name == "func.func"]
        for function in functions:
            function.set_attr(NUM_WARPS_ATTR, num_warps)
            function.set_attr(WARP_SIZE_ATTR, target.warp_size)
            _assign(function, infos, num_warps, target)
        return PreservedAnalyses.none()


def _assign(function: Any, infos: Any, num_warps: int, target: Any, retry: bool = True) -> None:
    warp_size, max_vector_bits = target.warp_size, target.max_vector_bits
    _separate_broadcasts(function)
    groups = _collect_groups(function)
    from .lowering.dot import select_instruction  # the lowering package imports this module's rules

    instructions = {op: select_instruction(op, target, num_warps) for op in groups.dots}
    matrix_dots = [op for op, found in instructions.items() if found is not None]
    if _cut_from_matrix_groups(groups, matrix_dots, [op for op, found in instructions.items() if found is None]):
        groups = _collect_groups(function)
    if _cut_accesses_from_matrix_groups(groups, matrix_dots):
        groups = _collect_groups(function)
    members = groups.members()
    shape_of_group = {root: _widest(values) for root, values in members.items()}
    accesses: dict[Any, list[tuple[Any, Any]]] = {}
    for op, ptr in groups.accesses:
        accesses.setdefault(groups.find(ptr), []).append((op, ptr))
    children: dict[Any, list[tuple[int, Any]]] = {}
    for child, axis, parent, _ in groups.slices:
        children.setdefault(groups.find(child), []).append((axis, groups.find(parent)))
    matrix_layouts: dict[Any, DistributedLayout] = {}
    for op, instruction in instructions.items():
        if instruction is not None:
            matrix_layouts.setdefault(groups.find(op.result), instruction.result_layout(op.result.type.shape, num_warps))

    chosen: dict[Any, DistributedLayout] = {}
    for root in sorted(members, key=lambda r: -len(shape_of_group[r])):
        shape = shape_of_group[root]
        if root in matrix_layouts:
            chosen[root] = matrix_layouts[root]
            continue
        for axis, parent in children.get(root, ()):
            if parent in chosen and len(shape) >= 1 and chosen[parent].rank >= 2:
                chosen[root] = SliceLayout(axis, chosen[parent])
                break
        else:
            chosen[root] = _coalesced(accesses.get(root, ()), shape, infos, num_warps, warp_size, max_vector_bits)

    if retry:
        # A dot operand's load that its group's layout would not coalesce (a tile of K
        # next to a tile of V of the same shape, contiguous along the other dimension)
        # gets a group of its own, and the layouts are chosen again.  So does any load or
        # store whose group runs its threads along another dimension than its own pointers
        # are contiguous in (a result stored row by row through the same ``offs_m[:, None]``
        # as a column-major operand's pointers): each access stays coalesced, and the data
        # changes layout between them, as Triton's Coalesce gives each access its own.
        def own(op: Any, ptr: Any) -> BlockedLayout:
            return _coalesced([(op, ptr)], tuple(ptr.type.shape), infos, num_warps, warp_size, max_vector_bits)

        misplaced = [op for op, ptr in groups.accesses if type(op) in (tile.LoadOp, tile.StoreOp)
                     and not any(_carried(v) for v in op.operands)
                     and ((type(op) is tile.LoadOp and _feeds_dot(op.result) and chosen[groups.find(ptr)] != own(op, ptr))
                          or _runs_across(chosen[groups.find(ptr)], own(op, ptr)))]
        if misplaced:
            for op in misplaced:
                for index, value in enumerate(op.operands):
                    if isinstance(value.type, t.TileType):
                        _convert_operand(op, index, None)
                for result in op.results:
                    _convert_result(op, result, None)
            _assign(function, infos, num_warps, target, retry=False)
            return
    for root, values in members.items():
        for value in values:
            value.type = t.TileType(value.type.shape, value.type.element, chosen[root])

    # Whether each op consumes its slice (expand_dims) or makes it (reduce) is decided
    # before any conversion: converting a reduce's result replaces the same value where
    # an expand_dims reads it, which must not then be taken for a result of its own.
    slices = [(child, axis, parent, op, list(op.operands).index(child) if child in op.operands else None)
              for child, axis, parent, op in groups.slices]
    for child, axis, parent, op, operand in slices:
        wanted = SliceLayout(axis, parent.type.layout) if parent.type.rank >= 2 else None
        if wanted is None:
            continue
        if operand is not None:
            if op.operands[operand].type.layout != wanted:
                _convert_operand(op, operand, wanted)
        elif child.type.layout != wanted:
            _convert_result(op, child, wanted)

    for op, instruction in instructions.items():
        result_layout = op.result.type.layout
        for index in (0, 1):
            if instruction is not None:
                wanted = instruction.operand_layout(index, result_layout)
                if wanted is None:
                    _read_operand_as_computed(op, index)
                    if index == 0 and instruction.register_a and _accumulator_of_same_warps(op.a, result_layout):
                        _convert_operand(op, 0, DotOperandLayout(0, result_layout, instruction.k_width))
                    continue
            else:
                wanted = _fma_layouts(result_layout)[index] if isinstance(result_layout, BlockedLayout) else None
            if wanted is not None and op.operands[index].type.layout != wanted:
                _convert_operand(op, index, wanted)

    for op in groups.scans:
        _make_scannable(op, num_warps, warp_size)


def _runs_across(layout: Any, own: BlockedLayout) -> bool:
    """Whether ``layout`` (a group's) puts consecutive elements of a thread along another
    dimension than ``own`` (an access's coalesced layout), which has more than one."""
    if not isinstance(layout, BlockedLayout) or layout.rank < 2 or own.rank != layout.rank:
        return False
    fastest = own.order[0]
    return layout.order[0] != fastest and own.size_per_thread[fastest] > 1


def _make_scannable(op: Any, num_warps: int, warp_size: int) -> None:
    """Run a scan in a blocked layout when the one it was given cannot be scanned along
    its axis (an MMA/MFMA/WMMA layout, or a slice of one: a cumsum of a dot's result or
    of its row sums), with conversions around it."""
    from .lowering.context import linear_layout_of
    from .lowering.reduce import NotReducible
    from .lowering.scan import plan_scan

    try:
        plan_scan(linear_layout_of(op.operands[0]), op.axis, bool(op.reverse))
        return
    except NotReducible:
        pass
    blocked = default_blocked_layout(op.operands[0].type.shape, num_warps, warp_size)
    for index in range(len(op.operands)):
        _convert_operand(op, index, blocked)
    for result in op.results:
        _convert_result(op, result, blocked)


def _read_operand_as_computed(op: Any, index: int) -> None:
    """A dot whose instruction takes its operands in any layout (wgmma writes them to
    shared memory itself) reads operand ``index`` in the layout it was computed in: a
    conversion in between (a load cut from the dot's group) only moves data twice."""
    producer = op.operands[index].defining_op
    if type(producer) is ConvertLayoutOp and isinstance(producer.source.type, t.TileType):
        op.set_operand(index, producer.source)
        if not producer.result.has_uses:
            producer.erase()


def _accumulator_of_same_warps(value: Any, result_layout: Any) -> bool:
    """``value`` is in the accumulator layout of a dot whose warps are those of
    ``result_layout``: into its A operand layout, the elements stay in their threads."""
    layout = value.type.layout
    return type(layout) is type(result_layout) and getattr(layout, "version", None) == \
        getattr(result_layout, "version", None) and layout.warps_per_cta == result_layout.warps_per_cta


def _feeds_dot(value: Any) -> bool:
    return any(type(use.owner) is tile.DotOp and use.index in (0, 1) for use in value.uses)


def _carried(value: Any) -> bool:
    """A block argument (a loop-carried value): a conversion of it could not be recomputed."""
    return value.defining_op is None


def _separate_broadcasts(function: Any) -> None:
    """Values broadcast to tiles of different shapes (``offs_n[None, :]`` in the pointers
    of a 32x128 tile of B and of the 64x128 result, through ``% N`` or not) would tie
    their layouts together: the group takes one coalesced layout for both, right for one
    access and wrong for the other.  Each further shape reads its broadcast source
    through a conversion instead, which ``remove-redundant-converts`` drops or recomputes."""
    groups = _collect_groups(function)
    by_group: dict[Any, list] = {}
    for op in function.walk():
        if type(op) is tile.BroadcastOp:
            by_group.setdefault(groups.find(op.source), []).append(op)
    for broadcasts in by_group.values():
        first = tuple(broadcasts[0].result.type.shape)
        for broadcast in broadcasts[1:]:
            if tuple(broadcast.result.type.shape) != first:
                _convert_operand(broadcast, 0, None)


def _collect_groups(function: Any) -> _Groups:
    groups = _Groups()
    _collect(function, groups)
    return groups


def _cut_from_matrix_groups(groups: _Groups, matrix_dots: list, fma_dots: list) -> bool:
    """Give what cannot share a layout with a matrix-instruction dot's result (MMA, MFMA,
    WMMA) a group of its own, behind ``gpu.convert_layout`` ops whose layout is decided
    later: the loads and stores of values in that group, and the dots lowered to FMAs
    (their lowering takes a blocked layout).  True if anything was cut (the groups must
    then be collected again)."""
    matrix_groups = {groups.find(op.result) for op in matrix_dots}
    in_matrix_group = lambda value: groups.find(value) in matrix_groups  # noqa: E731
    # Decide everything before changing anything: a conversion gives the users of the
    # value it converts (a store of a loaded value, say) a value the groups never saw.
    loads = [op for op, _ in groups.accesses if type(op) is tile.LoadOp and in_matrix_group(op.result)]
    stores = [op for op, _ in groups.accesses if type(op) is tile.StoreOp and in_matrix_group(op.value)]
    fma = [op for op in fma_dots if in_matrix_group(op.result)]
    for op in loads:
        _convert_result(op, op.result, None)
    for op in stores:
        _convert_operand(op, 1, None)
    for op in fma:
        _convert_operand(op, 2, None)  # the accumulator
        _convert_result(op, op.result, None)
    return bool(loads or stores or fma)


def _cut_accesses_from_matrix_groups(groups: _Groups, matrix_dots: list) -> bool:
    """After :func:`_cut_from_matrix_groups`: a load or store whose pointers or mask the
    dot's group still shares (the ``cols[None, :] < n`` that masks both a tile of K and
    the scores) is cut at those operands too, so that it keeps a coalesced layout of its
    own; ``remove-redundant-converts`` then recomputes the cheap pointer and mask
    arithmetic there instead of converting it.  True if anything was cut."""
    matrix_groups = {groups.find(op.result) for op in matrix_dots}
    # A loop-carried operand stays: its conversion could not be recomputed and would move
    # the tile between threads every iteration.
    cuts = [(op, [i for i, v in enumerate(op.operands)
                  if isinstance(v.type, t.TileType) and groups.find(v) in matrix_groups and not _carried(v)])
            for op, _ in groups.accesses if type(op) in (tile.LoadOp, tile.StoreOp)]
    for op, indices in cuts:
        for index in indices:
            _convert_operand(op, index, None)
    return any(indices for _, indices in cuts)


def _coalesced(accesses: list, shape: tuple[int, ...], infos: Any, num_warps: int, warp_size: int,
               max_vector_bits: int) -> BlockedLayout:
    """The group's layout: coalesced for its widest access (a narrower access of the
    group then makes several smaller accesses per thread, never a wrong one)."""
    if not accesses:
        return default_blocked_layout(shape, num_warps, warp_size)
    facts = [(infos[_analysed(ptr, infos)], _element_bits(ptr.type)) for _, ptr in accesses]
    candidates = [coalesced_layout(shape, info, bits, num_warps, warp_size, max_bits=max_vector_bits,
                                   same_order=facts) for info, bits in facts]
    return max(candidates, key=_vector_width)


def _analysed(value: Any, infos: Any) -> Any:
    """``value``, or where it is a conversion made after the axis analysis ran (a load cut
    from a dot's group), the value it converts: the same elements, the same facts."""
    while not infos.knows(value) and type(value.defining_op) is ConvertLayoutOp:
        value = value.defining_op.source
    return value


def _widest(values: list[Any]) -> tuple[int, ...]:
    rank = len(values[0].type.shape)
    return tuple(max(v.type.shape[d] for v in values if len(v.type.shape) == rank) for d in range(rank))


def _element_bits(ptr_type: Any) -> int:
    pointee = t.element_type(ptr_type).pointee
    return 64 if isinstance(pointee, t.PointerType) else max(getattr(pointee, "width", 8), 8)


def _vector_width(layout: BlockedLayout) -> int:
    return layout.size_per_thread[layout.order[0]]


def _convert_operand(op: Any, index: int, layout: DistributedLayout | None) -> None:
    """Feed operand ``index`` of ``op`` through a conversion to ``layout`` (None: a
    conversion whose layout assign-layouts decides, as the end of a group)."""
    from ..ir.builder import Builder

    source = op.operands[index]
    convert = Builder.before(op, op.location).create(
        ConvertLayoutOp, source, result_types=[t.TileType(source.type.shape, source.type.element, layout)])
    op.set_operand(index, convert.result)


def _convert_result(op: Any, result: Any, layout: DistributedLayout | None) -> None:
    from ..ir.builder import Builder

    old_type = result.type
    result.type = t.TileType(old_type.shape, old_type.element, layout)
    convert = Builder.after(op, op.location).create(ConvertLayoutOp, result, result_types=[old_type])
    result.replace_uses_if(convert.result, lambda use: use.owner is not convert)


# --------------------------------------------------------------------------------------
# Removing conversions

#: Producers cheaper to recompute in another layout than to convert.
_REMATERIALIZE = (tile.SplatOp, tile.ArangeOp, arith.ConstantOp)
#: Elementwise ops recomputed with their operands where a conversion of their result is
#: wanted: index, pointer and mask arithmetic (``start + offs``, ``cols[None, :] < n``).
_CHEAP_ELEMENTWISE = frozenset({"arith.addi", "arith.subi", "arith.muli", "arith.andi", "arith.ori", "arith.xori",
                                "arith.shli", "arith.shrsi", "arith.shrui", "arith.minsi", "arith.maxsi",
                                "arith.minui", "arith.maxui", "arith.cmpi", "arith.select", "arith.extsi",
                                "arith.extui", "arith.trunci", "tile.addptr"})
#: The most ops one conversion recomputes instead of moving data.
_REMATERIALIZE_BUDGET = 32


@dataclass
class RemoveRedundantConverts(Pass):
    """Drop conversions that change nothing, fold chains of them, and recompute splats,
    constants and aranges in the wanted layout instead of converting them."""

    name: ClassVar[str] = "remove-redundant-converts"
    summary: ClassVar[str] = "fold and drop gpu.convert_layout where no data has to move"

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        changed = False
        for op in [op for op in module.walk() if type(op) is ConvertLayoutOp]:
            if _simplify(op):
                changed = True
                context.count("remove-redundant-converts.removed")
        return PreservedAnalyses.none() if changed else PreservedAnalyses.all()


def _simplify(op: Any) -> bool:
    source = op.source
    if source.type == op.result.type:
        op.result.replace_all_uses_with(source)
        op.erase()
        return True
    producer = source.defining_op
    if type(producer) is ConvertLayoutOp:
        op.set_operand(0, producer.source)
        if not producer.result.has_uses:
            producer.erase()
        return _simplify(op) or True
    layout = op.result.type.layout
    if layout is not None and _recomputable(source, layout, [_REMATERIALIZE_BUDGET]):
        copy = _recompute(source, layout, op, {})
        op.result.replace_all_uses_with(copy)
        op.erase()
        _erase_if_dead(producer)
        return True
    return False


def _operand_layouts(op: Any, layout: Any) -> list | None:
    """The layouts ``op``'s tile operands need for its result to be in ``layout``; None
    where it is not cheap to recompute."""
    kind = type(op)
    if kind in _REMATERIALIZE:
        return []
    if kind is tile.BroadcastOp:
        return [layout]
    if kind is tile.ExpandDimsOp:
        return [SliceLayout(op.axis, layout)]
    if op.name in _CHEAP_ELEMENTWISE and op.has_trait(Elementwise):
        return [layout for v in op.operands if isinstance(v.type, t.TileType)]
    return None


def _recomputable(value: Any, layout: Any, budget: list) -> bool:
    """Whether ``value`` can be computed in ``layout`` from values at hand: scalars,
    tiles already in it, and at most ``budget`` cheap ops."""
    if not isinstance(value.type, t.TileType) or value.type.layout == layout:
        return True
    op = value.defining_op
    if type(op) is ConvertLayoutOp:
        # A conversion back to where its source came from costs nothing to undo.
        return _recomputable(op.source, layout, budget)
    if op is None or op.regions or len(op.results) != 1:
        return False
    wanted = _operand_layouts(op, layout)
    budget[0] -= 1
    if wanted is None or budget[0] < 0:
        return False
    tiles = [v for v in op.operands if isinstance(v.type, t.TileType)]
    return all(_recomputable(v, w, budget) for v, w in zip(tiles, wanted))


def _recompute(value: Any, layout: Any, before: Any, done: dict) -> Any:
    """``value`` computed again in ``layout`` before ``before`` (see :func:`_recomputable`)."""
    if not isinstance(value.type, t.TileType) or value.type.layout == layout:
        return value
    op = value.defining_op
    if type(op) is ConvertLayoutOp:
        return _recompute(op.source, layout, before, done)
    key = (value, layout)
    if key not in done:
        tiles = [v for v in op.operands if isinstance(v.type, t.TileType)]
        mapping = {v: _recompute(v, w, before, done) for v, w in zip(tiles, _operand_layouts(op, layout))}
        copy = op.clone(mapping)
        copy.results[0].type = t.TileType(value.type.shape, value.type.element, layout)
        before.parent.insert_before(copy, before)
        done[key] = copy.results[0]
    return done[key]


def _erase_if_dead(op: Any) -> None:
    """Erase ``op`` and then its producers while nothing uses them (recomputed elsewhere)."""
    if op is None or op.regions or any(r.has_uses for r in op.results) or not op.has_trait(Pure):
        return
    producers = [v.defining_op for v in op.operands]
    op.erase()
    for producer in producers:
        _erase_if_dead(producer)


DISTRIBUTE_PASSES = (AssignLayouts, RemoveRedundantConverts)


def _fma_layouts(layout: Any) -> Any:
    from .lowering.dot import fma_layouts

    return fma_layouts(layout)
