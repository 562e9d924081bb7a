"""``tile.scan`` on GPUs: a sequential scan inside each thread, a Hillis-Steele scan of
the threads' totals across lanes, then the totals of earlier warps and repetitions
through shared memory (Triton's ScanOpToLLVM, on linear layouts).

Along the axis, a scan line's elements are held, from the smallest step up, by: a few
consecutive registers of a thread, the lanes, the warps, then more registers when the
tile is larger than the layout's footprint (*chunks*; every blocked layout and slice of
one is so).  Per scan line and chunk:

1. each thread scans its consecutive registers in order; the last one is its total;
2. lanes scan the thread totals: ``log2(lanes)`` steps, each fetching the running value
   of the lane ``2^s`` positions earlier along the axis (``shuffle_up`` by ``2^s`` when
   the axis is on the low lane bits, else ``shuffle_idx`` of the computed lane); the
   value of the previous lane then goes in front of the thread's elements;
3. the warp's total (its last lane's value) is what later warps and chunks need: with
   several warps along the axis, every warp writes it to shared memory and, after a
   barrier, each thread folds, in axis order, the totals of every (chunk, warp) before
   its own; with one warp, the chunks' totals fold in registers.

Only associativity is assumed, and every combine keeps the earlier elements on the left,
so the result is the sequential scan's for any associative combine.  ``reverse`` scans
the flipped axis: the same steps with "earlier" meaning a larger index.  Lane and warp
bits with zero bases only hold copies and take no part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ...dialects import tile_shape
from ..allocation import register_scratch
from ..linear_layout import LinearLayout, log2
from .context import LoweringContext, linear_layout_of, register_lowering
from .indexing import coordinates
from .reduce import (
    NotReducible,
    Pack,
    ThreadOps,
    element_bytes,
    axis_bits,
    check_distinct_steps,
    compact_bits,
    drop,
    line_index,
    register_groups,
    scratch_offsets,
    thread_ops,
)
from .types import UnsupportedType, llvm_type


@dataclass(frozen=True)
class ScanPlan:
    """Which registers, lanes and warps take part, in which order (see the module
    docstring)."""

    axis: int
    reverse: bool
    layout: LinearLayout
    #: Per scan line held by a thread: its chunks in scan order, each the registers of
    #: the chunk in scan order (copies left out).
    lines: tuple[tuple[tuple[int, ...], ...], ...]
    #: Register -> the register holding the same element that the scan computes.
    copies: tuple[int, ...]
    #: Lane-id bits along the axis, smallest step first (and so lowest bit first).
    lane_bits: tuple[int, ...]
    #: Warp-id bits along the axis, smallest step first.
    warp_bits: tuple[int, ...]

    @property
    def num_chunks(self) -> int:
        return len(self.lines[0])

    @property
    def warps_along_axis(self) -> int:
        return 1 << len(self.warp_bits)

    @property
    def scratch_slots(self) -> int:
        """Shared memory elements per operand: a total per scan line, chunk and warp
        along the axis (none when one warp spans the axis)."""
        if not self.warp_bits:
            return 0
        count = 1
        for n in drop(self.layout.shape, self.axis):
            count *= n
        return count * self.num_chunks * self.warps_along_axis


def plan_scan(layout: LinearLayout, axis: int, reverse: bool = False) -> ScanPlan:
    check_distinct_steps(layout, axis)
    registers = axis_bits(layout.register, axis, "register")
    lanes = axis_bits(layout.lane, axis, "lane")
    warps = axis_bits(layout.warp, axis, "warp")
    if [bit for bit, _ in lanes] != sorted(bit for bit, _ in lanes):
        raise NotReducible("higher lane bits must move further along the axis")
    threads = [step for _, step in lanes + warps]
    if lanes and warps and lanes[-1][1] > warps[0][1]:
        raise NotReducible("warps must move further along the axis than lanes")
    low = [step for _, step in registers if not threads or step < threads[0]]
    if threads and any(threads[0] < step < threads[-1] for _, step in registers):
        raise NotReducible("registers step along the axis between lanes or warps")
    low_span = 1 << len(low)  # the low registers hold steps 1, 2, ... low_span / 2
    chunk_shift = log2(low_span) + len(threads)

    lines, copies = [], list(range(layout.num_registers))
    for group in register_groups(layout, axis):
        chunks: dict[int, list[int]] = {}
        for r in group:
            chunks.setdefault(layout.apply(r, 0, 0)[axis] >> chunk_shift, []).append(r)
        ordered = [chunks[h] for h in sorted(chunks)]
        if reverse:
            ordered = [list(reversed(c)) for c in reversed(ordered)]
        lines.append(tuple(map(tuple, ordered)))
    canonical = {layout.apply(r, 0, 0): r for line in lines for chunk in line for r in chunk}
    for r in range(layout.num_registers):
        copies[r] = canonical[layout.apply(r, 0, 0)]
    return ScanPlan(axis, reverse, layout, tuple(lines), tuple(copies), tuple(b for b, _ in lanes),
                    tuple(b for b, _ in warps))


# --------------------------------------------------------------------------------------
# The algorithm


class _LaneSteps:
    """The lanes each step reads from, and whether the step applies, for this thread."""

    def __init__(self, plan: ScanPlan, ops: ThreadOps, warp_size: int):
        axis_mask = sum(1 << b for b in plan.lane_bits)
        others = (warp_size - 1) & ~axis_mask
        lane = ops.lane
        own = ops.and_(lane, axis_mask)
        rest = ops.and_(lane, others)
        #: With the axis on the low lane bits (lane = position along the axis + a multiple
        #: of ``span``), step ``s`` reads lane ``lane - 2^s`` wherever it applies: a fixed
        #: move (``shuffle_up``) where the target has one, no lane to compute.
        self.span = 0
        if not plan.reverse and ops.can_shuffle_up and plan.lane_bits == tuple(range(len(plan.lane_bits))):
            self.span = 1 << len(plan.lane_bits)
        self.deltas = [1 << bit for bit in plan.lane_bits]
        self.sources, self.applies = [], []
        for bit in plan.lane_bits:
            # Step 2^s along the axis is 2^bit in the lane id, borrowing (carrying)
            # through the lane bits that do not move along the axis.
            if plan.reverse:
                moved = ops.and_(ops.add(ops.or_(lane, others), 1 << bit), axis_mask)
                applies = ops.ult(own, axis_mask - (1 << bit) + 1)
            else:
                moved = None if self.span else ops.and_(ops.sub(own, 1 << bit), axis_mask)
                applies = ops.ugt(own, (1 << bit) - 1)
            self.sources.append(None if moved is None else ops.xor(moved, rest))
            self.applies.append(applies)
        self.last = ops.xor(rest, ops.const(0 if plan.reverse else axis_mask))


def _combine_in_front(ops: ThreadOps, prefix: Pack, valid: Any, values: list[Pack]) -> list[Pack]:
    """``combine(prefix, v)`` for each ``v`` where ``valid`` (True, or a condition)."""
    if valid is True:
        return [ops.combine(prefix, v) for v in values]
    return [ops.select_pack(valid, ops.combine(prefix, v), v) for v in values]


def emit_scan(plan: ScanPlan, ops: ThreadOps, inputs: Sequence[Sequence[Any]], warp_size: int) -> list[list[Any]]:
    """``inputs[k][r]``: register ``r`` of operand ``k``; returns the scan in the same form."""
    count = len(inputs)
    lanes = _LaneSteps(plan, ops, warp_size) if plan.lane_bits else None
    need_totals = plan.num_chunks > 1 or bool(plan.warp_bits)
    scanned: list[list[list[Pack]]] = []  # [line][chunk][register in scan order]
    totals: list[list[Pack]] = []  # [line][chunk]: the warp's total of the chunk
    for line in plan.lines:
        scanned.append([])
        totals.append([])
        for chunk in line:
            values = [[inputs[k][r] for k in range(count)] for r in chunk]
            for i in range(1, len(values)):
                values[i] = ops.combine(values[i - 1], values[i])
            total = values[-1]
            if lanes is not None:
                values, total = _across_lanes(ops, lanes, values, need_totals)
            scanned[-1].append(values)
            totals[-1].append(total)
    if plan.warp_bits:
        prefixes = _warp_prefixes(plan, ops, totals, count)
    else:
        prefixes = [_chunk_prefixes(ops, line_totals) for line_totals in totals]
    out = [[None] * plan.layout.num_registers for _ in range(count)]
    for line, line_values, line_prefixes in zip(plan.lines, scanned, prefixes):
        for chunk, values, (prefix, valid) in zip(line, line_values, line_prefixes):
            if prefix is not None:
                values = _combine_in_front(ops, prefix, valid, values)
            for r, pack in zip(chunk, values):
                for k in range(count):
                    out[k][r] = pack[k]
    for k in range(count):
        out[k] = [out[k][plan.copies[r]] for r in range(plan.layout.num_registers)]
    return out


def _earlier(ops: ThreadOps, lanes: _LaneSteps, step: int, pack: Pack) -> Pack:
    """The values of the lane ``2^step`` places earlier along the axis (where it applies)."""
    if lanes.span:
        return [ops.shuffle_up(v, lanes.deltas[step], lanes.span) for v in pack]
    return [ops.shuffle_idx(v, lanes.sources[step]) for v in pack]


def _across_lanes(ops: ThreadOps, lanes: _LaneSteps, values: list[Pack], need_total: bool) -> tuple[list[Pack], Any]:
    running = values[-1]
    for step, applies in enumerate(lanes.applies):
        earlier = _earlier(ops, lanes, step, running)
        running = ops.select_pack(applies, ops.combine(earlier, running), running)
    if len(values) > 1:
        before = _earlier(ops, lanes, 0, running)
        values = _combine_in_front(ops, before, lanes.applies[0], values[:-1]) + [running]
    else:
        values = [running]
    total = [ops.shuffle_idx(v, lanes.last) for v in running] if need_total else None
    return values, total


def _chunk_prefixes(ops: ThreadOps, totals: list[Pack]) -> list[tuple[Pack | None, Any]]:
    prefixes, running = [], None
    for total in totals:
        prefixes.append((running, True))
        running = total if running is None else ops.combine(running, total)
    return prefixes


def _warp_prefixes(plan: ScanPlan, ops: ThreadOps, totals: list[list[Pack]], count: int) -> list[list[tuple]]:
    """Per line and chunk: the fold of the totals of every (chunk, warp) before this
    thread's, and whether there are any (a condition for the first chunk)."""
    warps, chunks = plan.warps_along_axis, plan.num_chunks
    warp_index = compact_bits(ops, ops.warp, plan.warp_bits)
    position = ops.xor(warp_index, ops.const(warps - 1)) if plan.reverse else warp_index
    held = coordinates(ops, plan.layout, ops.lane, ops.warp)
    shape = drop(plan.layout.shape, plan.axis)
    bases = [ops.shl(line_index(ops, drop(held[line[0][0]], plan.axis), shape), log2(chunks * warps))
             for line in plan.lines]

    def slot(base: Any, chunk: int, warp: int) -> Any:
        return ops.xor(base, ops.const(chunk * warps + warp))

    for base, line_totals in zip(bases, totals):
        for c, total in enumerate(line_totals):
            for k in range(count):
                ops.store(k, ops.xor(slot(base, c, 0), warp_index), total[k])
    ops.barrier()
    prefixes = []
    for base in bases:
        line_prefixes, running = [], None
        for c in range(chunks):
            prefix, valid = running, True
            for w in range(warps):
                actual = warps - 1 - w if plan.reverse else w
                total = [ops.load(k, slot(base, c, actual)) for k in range(count)]
                earlier = ops.ugt(position, w)
                if prefix is None:
                    prefix, valid = total, earlier
                else:
                    prefix = ops.select_pack(earlier, ops.combine(prefix, total), prefix)
                running = total if running is None else ops.combine(running, total)
            line_prefixes.append((prefix, valid))
        prefixes.append(line_prefixes)
    return prefixes


# --------------------------------------------------------------------------------------
# The lowering


def _plan(op: Any) -> ScanPlan:
    return plan_scan(linear_layout_of(op.operands[0]), op.axis, bool(op.reverse))


# Writes, then its one barrier, then reads: insert-barriers synchronizes the rest.
@register_scratch(tile_shape.ScanOp, sync="inside")
def _scan_scratch(op: Any, target: Any, num_warps: int) -> int:
    try:
        plan = _plan(op)
        sizes = [element_bytes(llvm_type(v.type)) for v in op.operands]
    except (NotReducible, UnsupportedType):
        return 0  # the lowering reports it
    return scratch_offsets(sizes, plan.scratch_slots)[1] if plan.scratch_slots else 0


@register_lowering(tile_shape.ScanOp)
def _scan(op: Any, operands: list, ctx: LoweringContext) -> list:
    try:
        plan = _plan(op)
    except NotReducible as exc:
        raise ctx.unsupported(op, f"'{op.name}' along axis {op.axis} of {op.operands[0].type} ({exc})") from None
    if plan.lane_bits and ctx.target.shuffle_idx is None:
        raise ctx.unsupported(op, f"'{op.name}' across lanes (the target has no shuffle_idx)")
    ops = thread_ops(op, ctx, plan.scratch_slots)
    return emit_scan(plan, ops, operands, ctx.warp_size)


__all__ = ["ScanPlan", "emit_scan", "plan_scan"]
