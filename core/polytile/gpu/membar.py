"""``insert-barriers``: a ``gpu.barrier`` exactly where a shared-memory hazard needs one.

After ``allocate-shared`` every shared-memory access of an op is a byte range: an op's
scratch (``gpu.scratch_offset``, its size from the scratch table), a buffer
(``gpu.buffer_offset`` of its ``gpu.local_alloc``), or a call's reservation for its
callee.  Walking each function in program order, the pass keeps the accesses made since
the last barrier (the *pending* set) and puts a barrier before an op whose access
conflicts with a pending one: a read after a write, a write after a read, or a write
after a write, on overlapping bytes.  A barrier clears the pending set.

- An op with scratch follows its ``sync`` registration (see :mod:`.allocation`):
  ``"inside"`` writes first, synchronizes everything before its reads, and leaves its
  reads pending; ``"end"`` leaves nothing; ``"none"`` leaves reads and writes.
- Buffers: ``gpu.local_alloc`` with a source and ``gpu.local_store`` write,
  ``gpu.local_load`` and ``gpu.local_load_slot`` read, and so does ``gpu.dot_wait`` (the
  asynchronous dots it retires read its ``buffers`` until then); other ops declare theirs with
  :func:`register_buffer_access`.
- Asynchronous copies: ``gpu.async_copy`` is checked as a write of its ring where it is
  issued (the bytes may change from then on), and ``gpu.async_wait`` leaves the rings
  written (the bytes land there): a read after the wait needs a barrier, which is what
  makes the other threads' copies visible.  Copies that complete on an mbarrier leave
  nothing: the ``gpu.mbarrier_wait`` that pipeline-loops puts before every read of a slot
  shows all threads' bytes to the waiting thread.  A plugin's copy into a ring (an op
  with the ``IssuesIntoRing`` trait and a ``ring`` operand) is counted the same way.  A
  barrier buffer is written by
  ``gpu.mbarrier_init`` and ``gpu.mbarrier_inval`` and read by arrivals and waits.
- ``scf.if``: both branches start from the same pending set; after it, the union.
- An op with the ``RunsInWarpGroups`` trait (its regions run at once in different
  warps, ordered by mbarriers): a barrier before it where anything pending conflicts
  with an access inside; each region walked from nothing; after it, the union.
  ``scf.for`` / ``scf.while``: the body starts from the union of what comes in and what
  the previous iteration left, iterated to a fixed point, so a barrier at the top of a
  body is placed only when the previous iteration left a conflicting access.  What comes
  in and conflicts with an access in the loop gets its barrier before the loop (once,
  not every iteration).
- Calls: callees are done first.  A callee reports the ranges it leaves pending at its
  return (``gpu.pending_at_return``: ``[[offset, size, "r" | "w"], ...]``, relative to
  its base) and whether every path through it passes a barrier
  (``gpu.always_synchronizes``).  The caller synchronizes before a call that could touch
  pending bytes of the callee's reservation, and carries the callee's leftovers after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterable

from ..dialects import func, scf, tile_debug
from ..dialects.gpu import (AsyncCopyArriveOp, AsyncCopyOp, AsyncWaitOp, BarrierOp, DotWaitOp, IssuesIntoRing, LocalAllocOp,
                            LocalLoadOp, LocalLoadSlotOp, LocalStoreOp, MBarrierArriveOp, MBarrierInitOp, MBarrierInvalOp,
                            MBarrierWaitOp, RunsInWarpGroups)
from ..passes.pass_base import Pass, PassContext, PreservedAnalyses
from ..plugins.tables import OwnedTable
from .allocation import BUFFER_OFFSET_ATTR, SCRATCH_OFFSET_ATTR, buffer_bytes, scratch_bytes, scratch_sync

#: Function attributes a callee's summary is kept in (see the module docstring).
PENDING_AT_RETURN_ATTR = "gpu.pending_at_return"
ALWAYS_SYNCHRONIZES_ATTR = "gpu.always_synchronizes"

READ, WRITE = "r", "w"


@dataclass(frozen=True)
class Access:
    """``kind`` (read or write) of bytes ``[start, start + size)``."""

    start: int
    size: int
    kind: str

    def conflicts(self, other: "Access") -> bool:
        if self.kind == READ and other.kind == READ:
            return False
        return self.start < other.start + other.size and other.start < self.start + self.size

    def shifted(self, by: int) -> "Access":
        return Access(self.start + by, self.size, self.kind)


#: Op class -> ``fn(op) -> [(buffer value, "r" | "w"), ...]``: the buffers an op accesses.
BufferAccess = Callable[[Any], list]
#: Each entry owned by who registered it (:class:`~polytile.plugins.tables.OwnedTable`).
BUFFER_ACCESSES: OwnedTable[BufferAccess] = OwnedTable("buffer access")


def register_buffer_access(*op_classes: type) -> Callable[[BufferAccess], BufferAccess]:
    """Decorator: ``@register_buffer_access(MyOp)`` says which ``!gpu.buffer`` operands an
    op reads and writes, as ``[(value, "r" | "w"), ...]``."""
    def register(fn: BufferAccess) -> BufferAccess:
        for cls in op_classes:
            BUFFER_ACCESSES.add(cls, fn)
        return fn
    return register


register_buffer_access(LocalAllocOp)(lambda op: [(op.result, WRITE)] if op.source is not None else [])
register_buffer_access(LocalStoreOp)(lambda op: [(op.buffer, WRITE)])
register_buffer_access(LocalLoadOp)(lambda op: [(op.buffer, READ)])
register_buffer_access(LocalLoadSlotOp)(lambda op: [(op.ring, READ)])
# The asynchronous dots it retires read their buffers until here.
register_buffer_access(DotWaitOp)(lambda op: [(buffer, READ) for buffer in op.buffers])
# A barrier's init and inval write it (one thread; every other uses it after a barrier);
# arrivals and waits only read it here: the hardware orders them among themselves.
register_buffer_access(MBarrierInitOp, MBarrierInvalOp)(lambda op: [(op.barriers, WRITE)])
register_buffer_access(MBarrierWaitOp, MBarrierArriveOp, AsyncCopyArriveOp)(lambda op: [(op.barriers, READ)])


def _copies_into_ring(op: Any) -> bool:
    """``gpu.async_copy``, or a plugin's copy into a ring (an op with the
    ``IssuesIntoRing`` trait and a ``ring`` operand, a bulk tensor copy): a write of
    the ring from its issue to the wait that retires it."""
    return isinstance(op, AsyncCopyOp) or (op.has_trait(IssuesIntoRing) and getattr(op, "ring", None) is not None)


def _buffer_range(value: Any) -> tuple[int, int] | None:
    alloc = value.defining_op
    if not isinstance(alloc, LocalAllocOp) or alloc.attributes.get(BUFFER_OFFSET_ATTR) is None:
        return None
    return alloc.attributes[BUFFER_OFFSET_ATTR], buffer_bytes(value.type)


@dataclass
class _Effect:
    """What one op does to shared memory, as the walk sees it."""

    checked: list[Access]          # must not conflict with pending accesses
    synchronizes: bool = False     # a barrier inside it: pending accesses before it are done
    leaves: tuple[Access, ...] = ()  # pending after it


class _Walker:
    def __init__(self, target: Any, num_warps: int, summaries: dict[str, tuple[list[Access], bool]]):
        self.target = target
        self.num_warps = num_warps
        self.summaries = summaries
        self.async_rings: dict[Any, tuple[Access, ...]] = {}

    # -- effects of one op ------------------------------------------------------------
    def effect(self, op: Any) -> _Effect | None:
        if isinstance(op, (BarrierOp, tile_debug.BarrierOp)):
            return _Effect([], synchronizes=True)
        if isinstance(op, func.CallOp):
            return self._call(op)
        if isinstance(op, AsyncWaitOp) or _copies_into_ring(op):
            return self._async(op)
        accessor = BUFFER_ACCESSES.get(type(op))
        if accessor is not None:
            accesses = []
            for value, kind in accessor(op):
                found = _buffer_range(value)
                if found is not None:
                    accesses.append(Access(found[0], found[1], kind))
            return _Effect(accesses, leaves=tuple(accesses)) if accesses else None
        offset = op.attributes.get(SCRATCH_OFFSET_ATTR)
        if offset is None:
            return None
        size = scratch_bytes(op, self.target, self.num_warps)
        if not size:
            return None
        read, write = Access(offset, size, READ), Access(offset, size, WRITE)
        mode = scratch_sync(op)
        if mode == "none":
            return _Effect([read, write], leaves=(read, write))
        return _Effect([write], synchronizes=True, leaves=(read,) if mode == "inside" else ())

    def _async(self, op: Any) -> _Effect | None:
        """A copy writes its ring from its issue (checked against earlier accesses, as
        a write) to the wait that retires it (pending from there, against later reads).
        A wait may retire any copy of the function: it leaves all their rings written."""
        if _copies_into_ring(op):
            found = _buffer_range(op.ring)
            return _Effect([Access(found[0], found[1], WRITE)]) if found is not None else None
        function = next(a for a in op.ancestors() if isinstance(a, func.FuncOp))
        rings = self.async_rings.get(function)
        if rings is None:
            ranges = {_buffer_range(o.ring) for o in function.walk() if isinstance(o, AsyncCopyOp)}
            rings = self.async_rings[function] = tuple(Access(r[0], r[1], WRITE) for r in sorted(ranges - {None}))
        return _Effect([], leaves=rings) if rings else None

    def _call(self, op: Any) -> _Effect | None:
        offset = op.attributes.get(SCRATCH_OFFSET_ATTR)
        summary = self.summaries.get(op.attributes["callee"].name)
        if offset is None or summary is None:
            return None
        pending, always, total = summary
        whole = [Access(offset, total, WRITE)]
        return _Effect(whole, synchronizes=always, leaves=tuple(a.shifted(offset) for a in pending))

    # -- walking ----------------------------------------------------------------------
    def block(self, block: Any, pending: frozenset, insert: bool) -> tuple[frozenset, bool]:
        """Walk ``block`` from ``pending``; return what is pending at its end and whether
        every path through it passed a barrier."""
        synchronized = False
        for op in list(block):
            if isinstance(op, scf.IfOp):
                then_end, then_sync = self.block(op.then_region.block, pending, insert)
                else_end, else_sync = self.block(op.else_region.block, pending, insert) \
                    if op.else_region.blocks else (pending, False)
                pending = then_end | else_end
                synchronized |= then_sync and else_sync
                continue
            if op.has_trait(RunsInWarpGroups):
                pending, synchronized = self._warp_groups(op, pending, insert, synchronized)
                continue
            if isinstance(op, (scf.ForOp, scf.WhileOp)) and pending and self._conflicts_inside(op, pending):
                # What is pending from before the loop would need a barrier in its body,
                # run every iteration: one before the loop does, once.
                if insert:
                    _insert_barrier(op)
                pending = frozenset()
                synchronized = True
            if isinstance(op, scf.ForOp):
                pending = self._loop([op.body.block], pending, insert)
                continue
            if isinstance(op, scf.WhileOp):
                pending = self._loop([op.before.block, op.after.block], pending, insert, exits_after_first=True)
                continue
            effect = self.effect(op)
            if effect is None:
                continue
            if any(a.conflicts(p) for a in effect.checked for p in pending):
                if insert:
                    _insert_barrier(op)
                pending = frozenset()
                synchronized = True
            if effect.synchronizes:
                pending = frozenset()
                synchronized = True
            pending = pending | frozenset(effect.leaves)
        return pending, synchronized

    def _warp_groups(self, op: Any, pending: frozenset, insert: bool, synchronized: bool) -> tuple[frozenset, bool]:
        """An op whose regions run at once in different warps: what is pending and touched
        inside is synchronized before it (every warp is there); each region is walked on
        its own from nothing (its barriers are its warps' alone); after it, the union."""
        if pending and self._conflicts_inside(op, pending):
            if insert:
                _insert_barrier(op)
            pending, synchronized = frozenset(), True
        after = pending
        for region in op.regions:
            for block in region.blocks:
                end, _ = self.block(block, frozenset(), insert)
                after = after | end
        return after, synchronized

    def _conflicts_inside(self, loop: Any, pending: frozenset) -> bool:
        """Whether an access of an op anywhere in ``loop`` conflicts with ``pending``."""
        for op in loop.walk():
            if op is loop or isinstance(op, (scf.IfOp, scf.ForOp, scf.WhileOp)) or op.has_trait(RunsInWarpGroups):
                continue
            effect = self.effect(op)
            if effect is not None and any(a.conflicts(p) for a in effect.checked for p in pending):
                return True
        return False

    def _loop(self, blocks: list, pending: frozenset, insert: bool, exits_after_first: bool = False) -> frozenset:
        """A loop whose body is ``blocks`` run in sequence; returns what is pending when
        it exits (the loop may run zero times: the entry state flows out too).  A while
        loop (``exits_after_first``) leaves after its ``before`` block, so what that block
        leaves pending on the last run flows out as well."""
        entry = pending
        while True:
            state = entry
            for block in blocks:
                state, _ = self.block(block, state, False)
            widened = entry | state
            if widened == entry:
                break
            entry = widened
        if insert:
            state = entry
            for block in blocks:
                state, _ = self.block(block, state, True)
        if exits_after_first:
            leaving, _ = self.block(blocks[0], entry, False)
            return entry | leaving
        return entry


def _insert_barrier(op: Any) -> None:
    from ..ir.builder import Builder

    Builder.before(op, op.location).create(BarrierOp)


def insert_barriers(function: Any, target: Any, num_warps: int,
                    summaries: dict[str, tuple[list[Access], bool, int]]) -> tuple[list[Access], bool]:
    """Insert the barriers ``function`` needs; return its summary (pending accesses at
    its return, whether it always synchronizes)."""
    walker = _Walker(target, num_warps, summaries)
    pending, always = walker.block(function.entry_block, frozenset(), True)
    return sorted(pending, key=lambda a: (a.start, a.size, a.kind)), always


@dataclass
class InsertBarriers(Pass):
    """Synchronize threads before a shared-memory access that conflicts with an earlier
    unsynchronized one (see the module docstring)."""

    name: ClassVar[str] = "insert-barriers"
    summary: ClassVar[str] = "gpu.barrier before shared-memory accesses that race with earlier ones"

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        from ..analysis.call_graph import CallGraph
        from .allocation import SHARED_BYTES_ATTR
        from .lowering.target import NUM_WARPS_ATTR, gpu_target_of, num_warps_of

        target = gpu_target_of(context)
        summaries: dict[str, tuple[list[Access], bool, int]] = {}
        for function in context.analyses.get(CallGraph, module).bottom_up():
            num_warps = function.attributes.get(NUM_WARPS_ATTR, num_warps_of(context))
            pending, always = insert_barriers(function, target, num_warps, summaries)
            name = function.attributes["sym_name"]
            summaries[name] = (pending, always, int(function.attributes.get(SHARED_BYTES_ATTR, 0)))
            if not function.attributes.get("kernel"):
                function.set_attr(PENDING_AT_RETURN_ATTR, tuple((a.start, a.size, a.kind) for a in pending))
                function.set_attr(ALWAYS_SYNCHRONIZES_ATTR, always)
        return PreservedAnalyses.none()


def pending_accesses(accesses: Iterable[tuple[int, int, str]]) -> list[Access]:
    """The ``gpu.pending_at_return`` attribute of a callee as :class:`Access` values."""
    return [Access(start, size, kind) for start, size, kind in accesses]


__all__ = ["ALWAYS_SYNCHRONIZES_ATTR", "Access", "BUFFER_ACCESSES", "InsertBarriers", "PENDING_AT_RETURN_ATTR",
           "insert_barriers", "pending_accesses", "register_buffer_access"]
