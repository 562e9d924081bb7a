"""``tile.reduce`` on GPUs: inside each thread, then across lanes with shuffles, then
across warps through shared memory.

The plan is layout math (:func:`plan_reduce`): with the operand's linear layout, the
registers of a thread that differ only along the axis hold inputs of the same output
element, so they are combined first (in axis order, copies skipped); each lane bit whose
basis moves along the axis is one butterfly step (``shuffle_xor``), after which every
lane of the warp holds the warp's partial result; if warp bits move along the axis, each
warp writes its partials to shared memory, and after a barrier every thread reads, in
warp order, the partials of the elements its result registers hold (the result has the
operand layout's slice along the axis, so nothing else moves).  Lane and warp bits whose
bases are zero only hold copies: they are never combined, so copies are not counted twice.

As in Triton, the combine function must be associative and commutative: registers are
combined before lanes, so elements a thread repeats along the axis (a tile larger than
the layout's footprint) are combined out of order.  Within each step the lower index is
the left operand, so threads holding copies of an element agree on it bit for bit, and
where the layout's axis bits run registers, lanes, warps (no repetition) the order is the
sequential one.

The algorithm is written once against :class:`ThreadOps`, so that it runs on LLVM values
(:class:`LLVMThreadOps`, the lowering) and on every thread of a program at once in Python
(:class:`SimulatedThreads`, the tests' oracle).  ``tile.scan`` (:mod:`.scan`) shares the
layout analysis, the combine-region lowering and both twins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from llvmlite import ir

from ...dialects import tile
from ...ir import types as t
from ..allocation import SCRATCH_ALIGNMENT, register_scratch
from ..linear_layout import LinearLayout, log2
from .context import LoweringContext, linear_layout_of, register_lowering
from .indexing import LLVMOps, PyOps, coordinates
from .types import UnsupportedType, llvm_type
from .types import byte_width as element_bytes  # scratch bytes of one element (scan's too)

Pack = list  # one value per operand of the reduction (argmax: value, index)
Combine = Callable[[Pack, Pack], Pack]


class NotReducible(ValueError):
    """The layout moves data along the axis in a way this lowering does not handle (a
    basis that moves along the axis and another dimension at once, say)."""


# --------------------------------------------------------------------------------------
# Layout analysis, shared with scan


def drop(coords: Sequence[int], axis: int) -> tuple[int, ...]:
    return tuple(coords[:axis]) + tuple(coords[axis + 1:])


def axis_bits(bases: Sequence[tuple[int, ...]], axis: int, kind: str) -> list[tuple[int, int]]:
    """``(bit, step)`` for the bits of ``bases`` that move along ``axis`` (by ``step``
    elements), smallest step first."""
    found = []
    for bit, basis in enumerate(bases):
        if basis[axis] == 0:
            continue
        if any(drop(basis, axis)):
            raise NotReducible(f"{kind} bit {bit} moves along the axis and across it at once ({list(basis)})")
        found.append((bit, basis[axis]))
    return sorted(found, key=lambda item: item[1])


def check_distinct_steps(layout: LinearLayout, axis: int) -> None:
    steps = [b[axis] for b in layout.register + layout.lane + layout.warp if b[axis]]
    if len(set(steps)) != len(steps) or any(s & (s - 1) for s in steps):
        raise NotReducible(f"the layout's steps along axis {axis} ({steps}) are not distinct powers of two")


def register_groups(layout: LinearLayout, axis: int) -> list[list[int]]:
    """The registers of a thread that hold elements differing only along ``axis``, each
    group in ascending axis order and without copies, groups in register order."""
    axis_bits(layout.register, axis, "register")  # refuses mixed bases
    groups: dict[tuple[int, ...], dict[int, int]] = {}
    for r in range(layout.num_registers):
        offset = layout.apply(r, 0, 0)
        groups.setdefault(drop(offset, axis), {}).setdefault(offset[axis], r)
    return [[by_step[s] for s in sorted(by_step)] for by_step in groups.values()]


def line_index(ops: Any, coords: Sequence[Any], shape: Sequence[int]) -> Any:
    """The row-major index of ``coords`` in a tile of ``shape`` (powers of two, so the
    terms occupy disjoint bits and XOR adds them)."""
    index, shift = None, 0
    for c, n in zip(reversed(coords), reversed(shape)):
        term = ops.shl(c, shift) if shift else c
        index = term if index is None else ops.xor(index, term)
        shift += log2(n)
    return ops.const(0) if index is None else index


def compact_bits(ops: Any, value: Any, bits: Sequence[int]) -> Any:
    """The bits ``bits`` of ``value`` gathered into bits 0, 1, ... (in that order)."""
    result = None
    for position, bit in enumerate(bits):
        term = ops.and_(ops.shr(value, bit), 1) if bit else ops.and_(value, 1)
        term = ops.shl(term, position) if position else term
        result = term if result is None else ops.xor(result, term)
    return ops.const(0) if result is None else result


def scratch_offsets(sizes: Sequence[int], slots: int) -> tuple[list[int], int]:
    """Byte offset of each operand's array of ``slots`` elements of ``sizes[k]`` bytes,
    and the total."""
    offsets, total = [], 0
    for size in sizes:
        offsets.append(total)
        total += -(-slots * size // SCRATCH_ALIGNMENT) * SCRATCH_ALIGNMENT
    return offsets, total


# --------------------------------------------------------------------------------------
# The reduction plan


@dataclass(frozen=True)
class ReducePlan:
    """Which registers, lanes and warps combine (see the module docstring)."""

    axis: int
    operand: LinearLayout
    #: The result's layout; None when the result is a scalar.
    result: LinearLayout | None
    #: Operand registers combined into each partial result, in axis order.
    groups: tuple[tuple[int, ...], ...]
    #: Lane-id bits to butterfly over, smallest step along the axis first.
    lane_bits: tuple[int, ...]
    #: Warp-id bits along the axis, smallest step first.
    warp_bits: tuple[int, ...]
    #: For each result register, its group.
    result_groups: tuple[int, ...]

    @property
    def warps_along_axis(self) -> int:
        return 1 << len(self.warp_bits)

    @property
    def result_shape(self) -> tuple[int, ...]:
        return drop(self.operand.shape, self.axis)

    @property
    def scratch_slots(self) -> int:
        """Shared memory elements per operand: every result element's partial of every
        warp along the axis (none when one warp spans the axis)."""
        if not self.warp_bits:
            return 0
        count = 1
        for n in self.result_shape:
            count *= n
        return count * self.warps_along_axis


def plan_reduce(operand: LinearLayout, axis: int, result: LinearLayout | None) -> ReducePlan:
    check_distinct_steps(operand, axis)
    groups = register_groups(operand, axis)
    lanes = [bit for bit, _ in axis_bits(operand.lane, axis, "lane")]
    warps = [bit for bit, _ in axis_bits(operand.warp, axis, "warp")]
    if result is None:
        if len(groups) != 1:
            raise NotReducible("a reduction to a scalar needs a rank-1 operand")
        result_groups = (0,)
    else:
        if result.lane != tuple(drop(b, axis) for b in operand.lane) or \
                result.warp != tuple(drop(b, axis) for b in operand.warp):
            raise NotReducible("the result's layout is not the slice of the operand's layout along the axis")
        key_of = {drop(operand.apply(g[0], 0, 0), axis): i for i, g in enumerate(groups)}
        try:
            result_groups = tuple(key_of[result.apply(r, 0, 0)] for r in range(result.num_registers))
        except KeyError:
            raise NotReducible("the result's layout is not the slice of the operand's layout along the axis") from None
    return ReducePlan(axis, operand, result, tuple(map(tuple, groups)), tuple(lanes), tuple(warps), result_groups)


# --------------------------------------------------------------------------------------
# The operations the algorithms need, on LLVM values and on simulated threads


class ThreadOps:
    """What reductions and scans do, beyond :class:`~.indexing.IntOps` integer math.

    ``lane`` and ``warp`` are the thread's ids; conditions come from :meth:`bit`,
    :meth:`ult` and :meth:`ugt`; data values are combined as packs (one value per
    operand).  Shared memory is per operand, indexed in elements."""

    lane: Any
    warp: Any

    def or_(self, x: Any, c: int) -> Any: raise NotImplementedError
    def add(self, x: Any, c: int) -> Any: raise NotImplementedError
    def sub(self, x: Any, c: int) -> Any: raise NotImplementedError
    def bit(self, x: Any, bit: int) -> Any: raise NotImplementedError
    def ult(self, x: Any, c: int) -> Any: raise NotImplementedError
    def ugt(self, x: Any, c: int) -> Any: raise NotImplementedError
    def select(self, cond: Any, a: Any, b: Any) -> Any: raise NotImplementedError
    def combine(self, lhs: Pack, rhs: Pack) -> Pack: raise NotImplementedError
    def shuffle_xor(self, value: Any, lane_mask: int) -> Any: raise NotImplementedError
    def shuffle_idx(self, value: Any, lane: Any) -> Any: raise NotImplementedError
    #: Whether :meth:`shuffle_up` is there (the target's ``shuffle_up`` hook).
    can_shuffle_up = False
    def shuffle_up(self, value: Any, delta: int, span: int) -> Any: raise NotImplementedError
    def store(self, operand: int, slot: Any, value: Any) -> None: raise NotImplementedError
    def load(self, operand: int, slot: Any) -> Any: raise NotImplementedError
    def barrier(self) -> None: raise NotImplementedError

    def select_pack(self, cond: Any, a: Pack, b: Pack) -> Pack:
        return [self.select(cond, x, y) for x, y in zip(a, b)]


class LLVMThreadOps(LLVMOps, ThreadOps):
    """:class:`ThreadOps` emitting LLVM IR through the lowering context; ``combine`` is
    the lowered combine region, shared memory is the op's scratch."""

    def __init__(self, ctx: LoweringContext, combine: Combine, scratch: Any = None,
                 elements: Sequence[ir.Type] = (), offsets: Sequence[int] = ()):
        super().__init__(ctx.builder)
        self.ctx = ctx
        self.lane, self.warp = ctx.lane_id, ctx.warp_id
        self._combine = combine
        self._scratch = _opaque(ctx.builder, scratch) if scratch is not None else None
        self._elements, self._offsets = list(elements), list(offsets)

    def or_(self, x, c): return self.b.or_(x, self.const(c))
    def add(self, x, c): return self.b.add(x, self.const(c))
    def sub(self, x, c): return self.b.sub(x, self.const(c))
    def bit(self, x, bit): return self.b.icmp_unsigned("!=", self.b.and_(x, self.const(1 << bit)), self.const(0))
    def ult(self, x, c): return self.b.icmp_unsigned("<", x, self.const(c))
    def ugt(self, x, c): return self.b.icmp_unsigned(">", x, self.const(c))
    def select(self, cond, a, b): return self.b.select(cond, a, b)
    def combine(self, lhs, rhs): return self._combine(lhs, rhs)
    def barrier(self): self.ctx.target.barrier(self.b)

    def _as_bits(self, value: Any) -> tuple[Any, Callable[[Any], Any]]:
        # The shuffles move integers and floats; pointers travel as i64.
        if isinstance(value.type, ir.PointerType):
            type_ = value.type
            return self.b.ptrtoint(value, ir.IntType(64)), lambda v: self.b.inttoptr(v, type_)
        return value, lambda v: v

    def shuffle_xor(self, value, lane_mask):
        bits, back = self._as_bits(value)
        return back(self.ctx.target.shuffle_xor(self.b, bits, lane_mask))

    @property
    def can_shuffle_up(self):
        return self.ctx.target.shuffle_up is not None

    def shuffle_up(self, value, delta, span):
        bits, back = self._as_bits(value)
        return back(self.ctx.target.shuffle_up(self.b, bits, delta, span))

    def shuffle_idx(self, value, lane):
        shuffle = self.ctx.target.shuffle_idx
        if shuffle is None:
            raise RuntimeError(f"the {self.ctx.target.backend_name} target has no shuffle_idx hook, which scans need")
        bits, back = self._as_bits(value)
        return back(shuffle(self.b, bits, lane))

    def _slot_pointer(self, operand: int, slot: Any) -> tuple[Any, ir.Type]:
        element = self._elements[operand]
        stored = ir.IntType(8) if element == ir.IntType(1) else element
        base = self._scratch
        if self._offsets[operand]:
            base = self.b.gep(base, [self.const(self._offsets[operand])], inbounds=True, source_etype=ir.IntType(8))
        return self.b.gep(base, [slot], inbounds=True, source_etype=stored), stored

    def store(self, operand, slot, value):
        pointer, stored = self._slot_pointer(operand, slot)
        self.b.store(self.b.zext(value, stored) if stored != value.type else value, pointer)

    def load(self, operand, slot):
        pointer, stored = self._slot_pointer(operand, slot)
        value = self.b.load(pointer, typ=stored)
        element = self._elements[operand]
        return self.b.trunc(value, element) if stored != element else value


def _opaque(builder: ir.IRBuilder, pointer: Any) -> Any:
    """``pointer`` as an opaque ``ptr``, so that typed GEPs, loads and stores of any
    element type apply to it (llvmlite folds a bitcast between pointer types away)."""
    if pointer.type.is_opaque:
        return pointer
    cast = ir.instructions.CastInstr(builder.block, "bitcast", pointer, ir.PointerType(addrspace=pointer.type.addrspace))
    builder._insert(cast)
    return cast


class SimulatedThreads(PyOps, ThreadOps):
    """:class:`ThreadOps` on every thread of a program at once, in Python: a run-time
    value is a NumPy array with one entry per thread (warp-major); data are object arrays
    and ``combine`` a Python function of packs of them.

    Shared memory checks the barriers: reading a slot written since the last barrier, or
    writing one read or written with another value since then, is a race and raises."""

    def __init__(self, num_warps: int, warp_size: int, combine: Combine):
        import numpy as np

        self.np = np
        self.warp_size = warp_size
        thread = np.arange(num_warps * warp_size)
        self.lane, self.warp = thread % warp_size, thread // warp_size
        self._combine = combine
        self.memory: dict[tuple[int, int], tuple[Any, int, str]] = {}  # (operand, slot) -> value, epoch, access
        self.epoch = 0
        self.barriers = 0

    def or_(self, x, c): return x | c
    def add(self, x, c): return x + c
    def sub(self, x, c): return x - c
    def bit(self, x, bit): return (x >> bit) & 1 == 1
    def ult(self, x, c): return x < c
    def ugt(self, x, c): return x > c
    def combine(self, lhs, rhs): return self._combine(lhs, rhs)

    def select(self, cond, a, b):
        return self.np.where(cond, a, b).astype(object)

    def _threads(self, lane: Any) -> Any:
        return self.warp * self.warp_size + (self.np.asarray(lane) & (self.warp_size - 1))

    def shuffle_xor(self, value, lane_mask):
        return value[self._threads(self.lane ^ lane_mask)]

    def shuffle_idx(self, value, lane):
        return value[self._threads(self.np.broadcast_to(lane, self.lane.shape))]

    can_shuffle_up = True

    def shuffle_up(self, value, delta, span):
        # Lanes less than delta into their span read a lane of another span: the contract
        # leaves their value open, and a scan must not use it.
        return value[self._threads(self.lane - delta)]

    def barrier(self):
        self.epoch += 1
        self.barriers += 1

    def store(self, operand, slot, value):
        slots = self.np.broadcast_to(slot, self.lane.shape)
        for thread, s in enumerate(slots):
            key = (operand, int(s))
            old = self.memory.get(key)
            if old is not None and old[1] == self.epoch and (old[2] == "read" or old[0] != value[thread]):
                raise AssertionError(f"race on shared slot {key}: {old[2]} since the last barrier, now written "
                                     "with another value")
            self.memory[key] = (value[thread], self.epoch, "write")

    def load(self, operand, slot):
        slots = self.np.broadcast_to(slot, self.lane.shape)
        out = self.np.empty(len(slots), dtype=object)
        for thread, s in enumerate(slots):
            key = (operand, int(s))
            if key not in self.memory:
                raise AssertionError(f"shared slot {key} read before it was written")
            value, epoch, access = self.memory[key]
            if access == "write" and epoch == self.epoch:
                raise AssertionError(f"race on shared slot {key}: read in the epoch it was written")
            out[thread] = value
            self.memory[key] = (value, self.epoch, "read")
        return out


# --------------------------------------------------------------------------------------
# The algorithm


def fold(ops: ThreadOps, packs: Sequence[Pack]) -> Pack:
    acc = packs[0]
    for pack in packs[1:]:
        acc = ops.combine(acc, pack)
    return acc


def emit_reduce(plan: ReducePlan, ops: ThreadOps, inputs: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """``inputs[k][r]``: register ``r`` of operand ``k``; returns ``out[k][r]`` for each
    register of the result (one register for a scalar)."""
    count = len(inputs)
    partials = [fold(ops, [[inputs[k][r] for k in range(count)] for r in group]) for group in plan.groups]
    for bit in plan.lane_bits:
        upper = ops.bit(ops.lane, bit)
        for i, mine in enumerate(partials):
            theirs = [ops.shuffle_xor(v, 1 << bit) for v in mine]
            # The lane with the bit clear holds the lower indices: it goes left.
            partials[i] = ops.combine(ops.select_pack(upper, theirs, mine), ops.select_pack(upper, mine, theirs))
    if plan.warp_bits:
        results = _across_warps(plan, ops, partials, count)
    else:
        results = [partials[g] for g in plan.result_groups]
    return [[pack[k] for pack in results] for k in range(count)]


def _across_warps(plan: ReducePlan, ops: ThreadOps, partials: list[Pack], count: int) -> list[Pack]:
    """Each warp writes its partials; every thread then folds, in warp order, the
    partials of each element it holds in the result."""
    warps = plan.warps_along_axis
    shift = log2(warps)
    warp_index = compact_bits(ops, ops.warp, plan.warp_bits)
    held = coordinates(ops, plan.operand, ops.lane, ops.warp)
    shape = plan.result_shape
    for group, pack in zip(plan.groups, partials):
        slot = ops.xor(ops.shl(line_index(ops, drop(held[group[0]], plan.axis), shape), shift), warp_index)
        for k in range(count):
            ops.store(k, slot, pack[k])
    ops.barrier()
    wanted = coordinates(ops, plan.result, ops.lane, ops.warp) if plan.result is not None else [[]]
    results = []
    for coords in wanted:
        base = ops.shl(line_index(ops, coords, shape), shift)
        results.append(fold(ops, [[ops.load(k, ops.xor(base, ops.const(w))) for k in range(count)]
                                  for w in range(warps)]))
    return results


# --------------------------------------------------------------------------------------
# The lowering


def element_types(op: Any, ctx: LoweringContext) -> list[ir.Type]:
    try:
        return [llvm_type(v.type) for v in op.operands]
    except UnsupportedType as exc:
        raise ctx.unsupported(op, f"'{op.name}' of {exc}") from None


def combine_function(op: Any, ctx: LoweringContext) -> Combine:
    """The op's combine region as a function of two packs of LLVM scalars: its ops are
    lowered (through ``LOWERINGS``) each time it is called."""
    from .module import lower_op

    block = op.regions[0].blocks[0]
    for inner in block:
        for nested in inner.walk():
            for value in nested.results:
                if isinstance(value.type, t.TileType):
                    raise ctx.error(nested, f"the combine function of '{op.name}' works on scalars, but "
                                            f"'{nested.name}' makes a {value.type}")
    terminator = block.last_op

    def combine(lhs: Pack, rhs: Pack) -> Pack:
        for argument, value in zip(block.arguments, list(lhs) + list(rhs)):
            ctx.set(argument, value)
        for inner in block:
            if inner is not terminator:
                lower_op(inner, ctx)
        return [ctx.get(v) for v in terminator.operands]

    return combine


def _plan(op: Any) -> ReducePlan:
    result = op.results[0]
    result_layout = linear_layout_of(result) if isinstance(result.type, t.TileType) else None
    return plan_reduce(linear_layout_of(op.operands[0]), op.axis, result_layout)


# Writes, then its one barrier, then reads: insert-barriers synchronizes the rest.
@register_scratch(tile.ReduceOp, sync="inside")
def _reduce_scratch(op: Any, target: Any, num_warps: int) -> int:
    try:
        plan = _plan(op)
        sizes = [element_bytes(llvm_type(v.type)) for v in op.operands]
    except (NotReducible, UnsupportedType):
        return 0  # the lowering reports it
    return scratch_offsets(sizes, plan.scratch_slots)[1] if plan.scratch_slots else 0


def thread_ops(op: Any, ctx: LoweringContext, slots: int) -> LLVMThreadOps:
    """The LLVM twin for ``op``: its combine region, and its scratch split by operand."""
    elements = element_types(op, ctx)
    combine = combine_function(op, ctx)
    if not slots:
        return LLVMThreadOps(ctx, combine)
    offsets, _ = scratch_offsets([element_bytes(e) for e in elements], slots)
    return LLVMThreadOps(ctx, combine, ctx.scratch(op), elements, offsets)


@register_lowering(tile.ReduceOp)
def _reduce(op: Any, operands: list, ctx: LoweringContext) -> list:
    try:
        plan = _plan(op)
    except NotReducible as exc:
        raise ctx.unsupported(op, f"'{op.name}' along axis {op.axis} of {op.operands[0].type} ({exc})") from None
    ops = thread_ops(op, ctx, plan.scratch_slots)
    out = emit_reduce(plan, ops, operands)
    return [values if isinstance(result.type, t.TileType) else values[0] for values, result in zip(out, op.results)]


__all__ = ["LLVMThreadOps", "NotReducible", "ReducePlan", "SimulatedThreads", "ThreadOps", "emit_reduce",
           "plan_reduce"]
