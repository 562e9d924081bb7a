"""Asynchronous copies (cp.async) for the CTA simulator (llvm_cta.py), from the PTX ISA.

Each thread's copies form groups at cp.async.commit_group (or an mbarrier tracks them:
tests/gpu/llvm_cta_mbarrier.py); cp.async.wait_group N
returns once at most N of the thread's committed groups are still pending, and only then are their bytes in shared memory
(for the other threads, after the next barrier).  A copy writes cp-size bytes: the
first src-size from global memory, zeros after them.  Here the global bytes are read
when the copy is issued and land in shared memory at the wait that retires it, so a
read before the wait sees stale bytes (or none), and a landing after another thread's
read of the same bytes in the same barrier interval is a race.  The hardware may land a
copy at any time between issue and wait, so one issued into bytes an in-flight wgmma
reads is reported where it is issued.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .llvm_cta import CTA, SimulationError
from .llvm_cta_wgmma import in_flight_reader

_CP_ASYNC = re.compile(r"cp\.async\.(c[ag])\.shared\.global \[\$0\], \[\$1\], (\d+), \$2;")
_WAIT_GROUP = re.compile(r"cp\.async\.wait_group (\d+);")


@dataclass
class _AsyncCopies:
    open: list = field(default_factory=list)        # (shared address, bytes) not yet committed
    committed: list = field(default_factory=list)   # groups, oldest first


def async_copy_step(cta: CTA, text: str, args: list, tid: int) -> None:
    """One thread's cp.async, commit_group or wait_group (inline asm ``text`` with ``args``)."""
    copies = cta.__dict__.setdefault("async_copies", {}).setdefault(tid, _AsyncCopies())
    if text.startswith("cp.async.commit_group"):
        copies.committed.append(copies.open)
        copies.open = []
        return None
    wait = _WAIT_GROUP.match(text)
    if wait is not None:
        while len(copies.committed) > int(wait.group(1)):
            for address, data in copies.committed.pop(0):
                land(cta, address, data, tid)
        return None
    copy = _CP_ASYNC.search(text)
    if copy is None:
        raise SimulationError(f"the simulator does not know the asm '{text}'")
    if "@p" in text and not args[3]:
        return None
    cache, size = copy.group(1), int(copy.group(2))
    shared, source, source_size = args[0], args[1], args[2]
    if size not in (4, 8, 16) or (cache == "cg" and size != 16):
        raise SimulationError(f"thread {tid}: cp.async.{cache} of {size} bytes does not exist")
    if shared % size or (source_size and source % size):
        raise SimulationError(f"thread {tid}: cp.async of {size} bytes from {source:#x} to shared {shared:#x} "
                              "is not aligned to its size")
    if source_size > size:
        raise SimulationError(f"thread {tid}: cp.async src-size {source_size} exceeds cp-size {size}")
    reader = in_flight_reader(cta, shared, size)
    if reader is not None:
        raise SimulationError(f"thread {tid} starts a cp.async into shared bytes {shared}..{shared + size - 1}, which "
                              f"an in-flight wgmma.mma_async of warpgroup {reader} reads: the copy may land before "
                              "the wgmma.wait_group that retires it")
    memory = cta.memory
    for a in range(shared, shared + size):
        reader = memory.unordered_reader(a, tid)
        if reader is not None:
            raise SimulationError(f"thread {tid} starts a cp.async into shared byte {a} that thread "
                                  f"{reader} read since the last barrier (or mbarrier phase) between them")
    data = memory.load(1, source, source_size, tid) if source_size else b""
    memory._check_async(shared, size, tid, "starts a cp.async into")
    memory.in_flight.update(dict.fromkeys(range(shared, shared + size), tid))
    copies.open.append((shared, data + bytes(size - source_size)))
    return None


def take_open_copies(cta: CTA, tid: int) -> list:
    """This thread's copies issued since its last commit (an mbarrier arrival tracks them)."""
    copies = cta.__dict__.setdefault("async_copies", {}).setdefault(tid, _AsyncCopies())
    taken, copies.open = copies.open, []
    return taken


def land(cta: CTA, address: int, data: bytes, tid: int, clock: int | None = None) -> None:
    """A copy's bytes reach shared memory, written by ``tid`` at ``clock`` (an mbarrier
    arrival's: what the phase's waiters acquire; default the thread's clock now: its own
    wait_group, then the next barrier shows them to the others)."""
    memory = cta.memory
    for a in range(address, address + len(data)):
        memory.in_flight.pop(a, None)
    memory.store(3, address, data, tid, clock=clock)
