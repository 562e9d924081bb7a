"""Shared memory: which ops need it, for how long, and where each piece goes.

Three kinds of pieces live in a program's shared memory:

- **scratch** of an op that moves data between threads (a layout conversion, a reduction
  across warps, a scan).  Its lowering registers the size with :func:`register_scratch`;
  the piece is live only while the op runs.  The lowering reads it with
  ``LoweringContext.scratch(op)``; the op gets ``gpu.scratch_offset``.
- **buffers** made by ``gpu.local_alloc``: live from the alloc to its last use (a use
  inside a loop keeps it for the whole loop); the alloc gets ``gpu.buffer_offset``.
- **calls** of ``noinline`` functions: the callee's own total, reserved while the call
  runs; the call gets ``gpu.scratch_offset``, which the lowering passes to the callee as
  the base of its pieces.  So a callee's total is the most it needs at once, and a
  kernel's total includes everything it calls.

``allocate-shared`` numbers the ops of a function in program order, turns every piece
into a lifetime interval, and places the pieces first-fit, largest first: two pieces
share bytes when their lifetimes do not overlap.  Each function's total goes into
``gpu.shared_bytes`` (for a kernel, the dynamic shared memory of the launch).

An op whose scratch registration gives ``rounds`` (layout conversions, transposes,
reshapes) can move its tile in several rounds, one slab at a time, with barriers
between: its ``gpu.scratch_rounds`` attribute says how many, and its scratch shrinks by
that factor.  ``allocate-shared`` sets it where an op's scratch is over the pass's
``max_scratch_bytes``, and, for a kernel over the target's limit, on the largest such
ops until the kernel fits (``split_scratch_over_limit``).  A kernel that still needs
more than the target allows is an :class:`~polytile.errors.OutOfResourcesError` naming
the kernel, both numbers and the largest piece.

How an op's scratch is synchronized is part of its registration (``sync``), for the
``insert-barriers`` pass (:mod:`.membar`):

- ``"inside"`` (the default): the op writes its scratch first, a barrier of its own
  separates those writes from its reads, and it ends reading.  Accesses before it are
  synchronized by that barrier; its reads are still unsynchronized after it.
- ``"end"``: as ``"inside"``, and the op ends with a barrier: nothing is left pending.
- ``"none"``: the op has no barrier: it may read and write its scratch anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from ..dialects import func
from ..errors import CompilationError, OutOfResourcesError
from ..passes.pass_base import Pass, PassContext, PreservedAnalyses
from ..plugins.tables import OwnedTable

#: Op attribute: the byte offset of the op's scratch (or of a call's callee) in the
#: function's shared memory.
SCRATCH_OFFSET_ATTR = "gpu.scratch_offset"
#: ``gpu.local_alloc`` attribute: the byte offset of the buffer.
BUFFER_OFFSET_ATTR = "gpu.buffer_offset"
#: Function attribute: the bytes of shared memory the function needs, callees included
#: (for a kernel, the dynamic shared memory of the launch).
SHARED_BYTES_ATTR = "gpu.shared_bytes"
#: Every piece starts at a multiple of this, so that 16-byte vector accesses stay aligned.
SCRATCH_ALIGNMENT = 16
#: Buffers (``gpu.local_alloc``) of at least this many bytes start at a multiple of it:
#: the swizzled layouts NVIDIA's tensor cores read (wgmma) repeat every 1024 bytes and are
#: read in place from ring slots.
BUFFER_ALIGNMENT = 1024

#: Op attribute: in how many rounds (a power of two) the op moves data through its
#: scratch, which then holds one round's share (absent: 1).
SCRATCH_ROUNDS_ATTR = "gpu.scratch_rounds"

SCRATCH_SYNC_MODES = ("inside", "end", "none")

#: ``fn(op, target, num_warps) -> bytes`` (0 when this instance needs none), by op class.
ScratchSize = Callable[[Any, Any, int], int]
#: Each of these tables owns its entries by who registered them (a plugin's leave with it).
#: The core's entries are in the lowering modules named here, imported on the first read.
_CORE_SCRATCH = tuple(f"polytile.gpu.lowering.{name}" for name in ("atomics", "convert", "dot", "gather",
                                                                    "histogram", "reduce", "scan", "shapes"))
SCRATCH_BYTES: OwnedTable[ScratchSize] = OwnedTable("scratch size", _CORE_SCRATCH)
#: How the scratch of an op class is synchronized (see the module docstring).
SCRATCH_SYNC: OwnedTable[str] = OwnedTable("scratch synchronization", _CORE_SCRATCH)
#: ``fn(op, target, num_warps) -> the most rounds this op's lowering can split into``, for
#: the op classes whose lowering honours ``gpu.scratch_rounds``.
ScratchRounds = Callable[[Any, Any, int], int]
SCRATCH_ROUNDS: OwnedTable[ScratchRounds] = OwnedTable("scratch rounds", ("polytile.gpu.lowering.convert",))


def register_scratch(*op_classes: type, sync: str = "inside",
                     rounds: ScratchRounds | None = None) -> Callable[[ScratchSize], ScratchSize]:
    """Decorator: ``@register_scratch(MyOp)`` says how many bytes of shared memory an op of
    that class needs while it runs (given the op, the ``GpuTarget`` and ``num_warps``),
    and ``sync`` how its lowering synchronizes them (see the module docstring).
    ``rounds``: the lowering honours ``gpu.scratch_rounds`` up to what ``rounds`` returns
    (the size function must then give one round's bytes)."""
    if sync not in SCRATCH_SYNC_MODES:
        raise ValueError(f"sync must be one of {SCRATCH_SYNC_MODES}, got {sync!r}")

    def register(fn: ScratchSize) -> ScratchSize:
        for cls in op_classes:
            SCRATCH_BYTES.add(cls, fn)
            SCRATCH_SYNC.add(cls, sync)
            if rounds is not None:
                SCRATCH_ROUNDS.add(cls, rounds)
        return fn
    return register


def scratch_rounds(op: Any) -> int:
    return int(op.attributes.get(SCRATCH_ROUNDS_ATTR, 1))


def _splittable(function: Any, target: Any, num_warps: int) -> list[tuple[Any, int]]:
    """(op, the most rounds it allows) of each op of ``function`` that can split further."""
    found = []
    for op in function.walk():
        rounds_of = SCRATCH_ROUNDS.get(type(op))
        most = 1 if rounds_of is None else int(rounds_of(op, target, num_warps))
        if scratch_rounds(op) * 2 <= most:
            found.append((op, most))
    return found


def split_scratch(function: Any, target: Any, num_warps: int, max_bytes: int) -> bool:
    """Give each op of ``function`` that can work in rounds and needs more than
    ``max_bytes`` of scratch the fewest rounds that bring it within (or the most it
    allows); return whether any op changed."""
    changed = False
    for op, most in _splittable(function, target, num_warps):
        rounds = scratch_rounds(op)
        while scratch_bytes(op, target, num_warps) > max_bytes and rounds * 2 <= most:
            rounds *= 2
            op.set_attr(SCRATCH_ROUNDS_ATTR, rounds)
            changed = True
    return changed


def fit_by_rounds(function: Any, target: Any, num_warps: int, limit: int,
                  callee_bytes: dict[str, int] | None = None) -> tuple[int, bool]:
    """Split the largest splittable scratch of ``function`` in half, again and again,
    until its total is within ``limit`` or nothing splits further.  Returns the total
    (its pieces placed) and whether any op changed."""
    callee_bytes = callee_bytes or {}
    total = allocate_function(function, target, num_warps, callee_bytes)
    changed = False
    while total > limit:
        candidates = _splittable(function, target, num_warps)
        if not candidates:
            break
        largest = max(scratch_bytes(op, target, num_warps) for op, _ in candidates)
        if not split_scratch(function, target, num_warps, largest // 2):
            break
        changed = True
        total = allocate_function(function, target, num_warps, callee_bytes)
    return total, changed


def scratch_bytes(op: Any, target: Any, num_warps: int) -> int:
    size = SCRATCH_BYTES.get(type(op))
    return 0 if size is None else int(size(op, target, num_warps))


def scratch_sync(op: Any) -> str:
    return SCRATCH_SYNC.get(type(op), "inside")


def buffer_bytes(buffer_type: Any) -> int:
    """Bytes of a ``!gpu.buffer`` (i1 is stored as a byte, pointers as 8 bytes)."""
    from ..ir import types as t

    element = buffer_type.element
    bits = 64 if isinstance(element, t.PointerType) else max(getattr(element, "width", 8), 8)
    return buffer_type.numel * bits // 8


def _align(n: int) -> int:
    return (n + SCRATCH_ALIGNMENT - 1) // SCRATCH_ALIGNMENT * SCRATCH_ALIGNMENT


# --------------------------------------------------------------------------------------
# Lifetimes


@dataclass
class Piece:
    """One allocation: ``owner`` (the op that gets the offset attribute) needs ``size``
    bytes from op number ``start`` to op number ``end`` (inclusive, program order)."""

    owner: Any
    attr: str
    size: int
    start: int
    end: int
    offset: int = -1
    #: The piece starts at a multiple of this.
    alignment: int = SCRATCH_ALIGNMENT

    def overlaps_in_time(self, other: "Piece") -> bool:
        return self.start <= other.end and other.start <= self.end

    def overlaps_in_memory(self, offset: int, size: int) -> bool:
        return self.offset < offset + size and offset < self.offset + self.size


class _Numbering:
    """Op numbers in program order, and the last number inside each op (its regions)."""

    def __init__(self, function: Any):
        self.index: dict[Any, int] = {}
        self.last: dict[Any, int] = {}
        for number, op in enumerate(function.walk()):
            self.index[op] = number
        for op in function.walk(post_order=True):
            inner = [self.last[o] for region in op.regions for block in region.blocks for o in block]
            self.last[op] = max([self.index[op], *inner])


def _buffer_end(alloc: Any, numbering: _Numbering, function: Any) -> int:
    """The last op number at which the buffer of ``alloc`` may still be used."""
    from ..ir.opdef import Terminator

    from ..dialects import tile
    from ..dialects.gpu import IN_PLACE_ATTR, LocalLoadOp, LocalLoadSlotOp

    block = alloc.parent
    end = numbering.index[alloc]
    users = [use.owner for use in alloc.result.uses]
    # A dot operand read from a ring slot, or from a buffer marked to be read in place,
    # may be read from shared memory when the dot runs (wgmma): the buffer lives until then.
    in_place = [user for user in users if isinstance(user, LocalLoadSlotOp)
                or (isinstance(user, LocalLoadOp) and user.attributes.get(IN_PLACE_ATTR))]
    users += [use.owner for user in in_place for use in user.result.uses if isinstance(use.owner, tile.DotOp)]
    for user in users:
        if user.has_trait(Terminator) or user.regions:
            # Handed on (yielded, carried by a loop, passed to a call): keep it to the end.
            return numbering.last[function]
        while user.parent is not block:
            user = user.parent_op
        end = max(end, numbering.last[user])
    return end


def buffer_alignment(size: int) -> int:
    """Where a buffer of ``size`` bytes starts: a multiple of 1024 from 1024 bytes on, else
    of its size rounded up to a power of two, at least 128.  A swizzled layout repeats
    every 8 rows of its swizzle width (up to 1024 bytes), and copy engines that swizzle by
    address (TMA) and read in place (wgmma) need the buffer at such a boundary; bulk
    copies need 128 bytes at least."""
    if size >= BUFFER_ALIGNMENT:
        return BUFFER_ALIGNMENT
    return max(128, 1 << max(size - 1, 0).bit_length())


def collect_pieces(function: Any, target: Any, num_warps: int, callee_bytes: dict[str, int]) -> list[Piece]:
    """Every piece of shared memory ``function`` needs, with its lifetime."""
    from ..dialects.gpu import LocalAllocOp, RunsInWarpGroups

    numbering = _Numbering(function)
    pieces = []
    for op in function.walk():
        if op is function:
            continue
        number = numbering.index[op]
        # Regions that run at once (RunsInWarpGroups): what one of them uses lives as long
        # as the whole op, so that no other region's piece shares its bytes.
        group = next((a for a in op.ancestors() if a.has_trait(RunsInWarpGroups)), None)
        start = numbering.index[group] if group is not None else number
        floor = numbering.last[group] if group is not None else number
        if isinstance(op, LocalAllocOp):
            size = _align(buffer_bytes(op.result.type))
            pieces.append(Piece(op, BUFFER_OFFSET_ATTR, size, start, max(floor, _buffer_end(op, numbering, function)),
                                alignment=buffer_alignment(size)))
            continue
        if isinstance(op, func.CallOp):
            size = callee_bytes.get(op.attributes["callee"].name, 0)
        else:
            size = scratch_bytes(op, target, num_warps)
        if size:
            pieces.append(Piece(op, SCRATCH_OFFSET_ATTR, _align(size), start, max(floor, numbering.last[op])))
    return pieces


def place(pieces: list[Piece]) -> int:
    """Give each piece the lowest offset free during its lifetime, largest pieces first;
    return the total."""
    placed: list[Piece] = []
    for piece in sorted(pieces, key=lambda p: (-p.size, p.start)):
        live = [p for p in placed if p.overlaps_in_time(piece)]
        align = piece.alignment
        candidates = sorted({0, *((p.offset + p.size + align - 1) // align * align for p in live)})
        piece.offset = next(c for c in candidates if not any(p.overlaps_in_memory(c, piece.size) for p in live))
        placed.append(piece)
    return max((p.offset + p.size for p in placed), default=0)


def allocate_function(function: Any, target: Any, num_warps: int, callee_bytes: dict[str, int] | None = None) -> int:
    """Place the shared memory of ``function`` (attributes on its ops); return its total.
    ``callee_bytes``: the totals of the noinline functions it calls, by name."""
    return _allocate(function, target, num_warps, callee_bytes or {})[0]


def _allocate(function: Any, target: Any, num_warps: int, callee_bytes: dict[str, int]) -> tuple[int, list[Piece]]:
    pieces = collect_pieces(function, target, num_warps, callee_bytes)
    total = place(pieces)
    for piece in pieces:
        piece.owner.set_attr(piece.attr, piece.offset)
    function.set_attr(SHARED_BYTES_ATTR, total)
    return total, pieces


@dataclass
class AllocateShared(Pass):
    """Place shared memory (scratch, buffers, callees) by lifetime; record each function's
    total and check each kernel's against the target's limit."""

    name: ClassVar[str] = "allocate-shared"
    summary: ClassVar[str] = "shared memory offsets by liveness (gpu.scratch_offset, gpu.buffer_offset, gpu.shared_bytes)"

    #: Bytes of shared memory a block may use; 0: the GpuTarget's ``max_shared_bytes``
    #: (no check when it has none).
    max_shared_bytes: int = 0
    #: The most scratch one op may take when its lowering can work in rounds (layout
    #: conversions); 0: no cap.  More rounds mean more barriers, less shared memory.
    max_scratch_bytes: int = 0
    #: A kernel over the limit first gets its largest conversions split into rounds.
    split_scratch_over_limit: bool = True

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        from ..analysis.call_graph import CallGraph
        from .lowering.target import NUM_WARPS_ATTR, gpu_target_of, num_warps_of

        target = gpu_target_of(context)
        graph = context.analyses.get(CallGraph, module)
        cycle = graph.find_cycle()
        if cycle:
            first = graph.function(cycle[0])
            raise CompilationError(f"noinline functions call each other in a cycle ({' -> '.join(cycle + cycle[:1])}); "
                                   "GPU code cannot recurse", first.location)
        limit = self.max_shared_bytes or getattr(target, "max_shared_bytes", None)
        totals: dict[str, int] = {}
        for function in graph.bottom_up():
            num_warps = function.attributes.get(NUM_WARPS_ATTR, num_warps_of(context))
            if self.max_scratch_bytes:
                split_scratch(function, target, num_warps, self.max_scratch_bytes)
            total, pieces = _allocate(function, target, num_warps, totals)
            if limit is not None and total > limit and function.attributes.get("kernel"):
                tried = []
                if self.split_scratch_over_limit and _splittable(function, target, num_warps):
                    tried.append("conversions-in-rounds")
                    fit_by_rounds(function, target, num_warps, limit, totals)
                    total, pieces = _allocate(function, target, num_warps, totals)
                if total > limit:
                    largest = max(pieces, key=lambda p: p.size)
                    raise _limit_error(function, total, limit, getattr(target, "arch", ""), largest, tried)
            totals[function.attributes["sym_name"]] = total
        return PreservedAnalyses.all()


def _limit_error(function: Any, need: int, limit: int, arch: str, largest: Piece,
                 tried: list[str]) -> OutOfResourcesError:
    from ..errors import SourceLocation

    op = largest.owner
    what = f"the call of '@{op.attributes['callee'].name}'" if isinstance(op, func.CallOp) else f"'{op.name}'"
    location = op.location if isinstance(op.location, SourceLocation) else None
    source_line = None
    if location is not None:
        import linecache

        text = linecache.getline(location.file, location.line)
        if text.strip():
            indent = len(text) - len(text.lstrip())
            source_line = text.strip()
            location = SourceLocation(location.file, location.line, max(location.column - indent, 0))
    return OutOfResourcesError(
        kernel=str(function.attributes.get("sym_name")), resource="shared memory", need=need, limit=limit,
        target=arch, remedies_tried=tried, location=location, source_line=source_line,
        hint=f"the largest piece is {largest.size} bytes for {what}; use smaller block sizes or fewer stages")


__all__ = ["AllocateShared", "BUFFER_OFFSET_ATTR", "Piece", "SCRATCH_BYTES", "SCRATCH_OFFSET_ATTR", "SCRATCH_ROUNDS",
           "SCRATCH_ROUNDS_ATTR", "SCRATCH_SYNC", "SHARED_BYTES_ATTR", "allocate_function", "buffer_bytes",
           "collect_pieces", "fit_by_rounds", "place", "register_scratch", "scratch_bytes", "scratch_rounds",
           "scratch_sync", "split_scratch"]
