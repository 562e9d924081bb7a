"""mbarriers for the CTA simulator (llvm_cta.py), from the PTX ISA.

A barrier (8 bytes of shared memory) expects ``count`` arrivals per phase; when they
are in, its phase completes and the next begins.  ``mbarrier.try_wait.parity p`` is true
once the phase of parity ``p`` has completed: right after ``init`` (phase 0 running),
parity 0 waits and parity 1 passes at once (it names the phase before).

``cp.async.mbarrier.arrive.noinc`` arrives once all of this thread's earlier cp.async
copies have landed.  Here the copies land, and the arrival counts, only when some thread
waits on the barrier: the latest the hardware may take.  ``mbarrier.arrive.release``
(after ``bar.warp.sync``: a warp releasing a slot it read, warp specialization's empty
barriers) counts at once.  A completed phase orders everything its arrivals did before
them (their copies included) before what the threads that waited for it do next: the
arrival releases the arriving thread's clock, the wait acquires the phase's
(llvm_cta_schedule.py), with no ``bar.sync``.

A warp waits until the phase each lane waits for has completed; other warps run
meanwhile (a producer waiting on an empty barrier while the consumers wait on a full
one).  Reported, each where it happens: a wait for a phase that can never complete (no
warp can make progress and too few arrivals are coming: a wait on the wrong phase, or a
fill never issued), a read of shared bytes a copy is still writing (a wait that passed
too early), a barrier used by a thread not ordered after its ``init`` or after its
``inval``, ``inval`` while arrivals are still coming, ordinary loads and stores of a live
barrier's bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .llvm_cta import CTA, SimulationError

_INIT = re.compile(r"mbarrier\.init\.shared\.b64 \[\$0\], (\d+);")
_ARRIVE = "cp.async.mbarrier.arrive.noinc.shared.b64"
_RELEASE = "mbarrier.arrive.release"
BARRIER_BYTES = 8


@dataclass
class _Barrier:
    count: int
    initialized_by: int
    #: The clock of the initializing thread at ``init``: users must be ordered after it.
    init_clock: int
    #: Arrivals still missing in the running phase.
    missing: int = 0
    #: Phases completed.
    phase: int = 0
    #: Arrivals and bulk copies in flight, in order (:class:`_Coming`).
    coming: list = field(default_factory=list)
    #: Transaction bytes the running phase still expects (expect_tx adds, copies complete).
    tx: int = 0
    #: The join of the clocks the running phase's arrivals released.
    releasing: Any = None
    #: Phase number -> the clock its arrivals released (what a wait for it acquires).
    released: dict = field(default_factory=dict)
    #: Whether a ``fence.mbarrier_init`` showed it to the async proxy (bulk copies).
    seen_by_async_proxy: bool = False


@dataclass
class _Coming:
    """Something in flight on a barrier: ``thread``'s copies (shared address, bytes) that
    land when it counts, the clock it released, whether it is an arrival (``counts``) and
    the transaction bytes it adds (expect_tx, positive) or completes (a bulk copy,
    negative)."""

    thread: int
    copies: list
    clock: Any
    counts: bool = True
    tx: int = 0
    #: Written through the async proxy (bulk copies): wgmma reads them with no fence.
    async_proxy: bool = False


def _barriers(cta: CTA) -> dict:
    return cta.__dict__.setdefault("mbarriers", {})


def _live(cta: CTA, address: int, tid: int, what: str) -> _Barrier:
    barrier = _barriers(cta).get(address)
    if barrier is None:
        raise SimulationError(f"thread {tid} {what} the mbarrier at shared {address}, which is not initialized "
                              "(or was invalidated)")
    if not cta.memory.ordered(tid, barrier.initialized_by, barrier.init_clock):
        raise SimulationError(f"thread {tid} {what} the mbarrier at shared {address} that thread "
                              f"{barrier.initialized_by} initialized since the last barrier")
    return barrier


def release(cta: CTA, tid: int) -> np.ndarray:
    """``tid``'s clock as a release gives it away; the thread moves on to its next clock."""
    from .llvm_cta_schedule import release_clock

    return release_clock(cta, tid)


def mbarrier_step(cta: CTA, text: str, args: list, tid: int) -> None:
    """One thread's mbarrier.init, mbarrier.inval or cp.async.mbarrier.arrive."""
    memory = cta.memory
    if _ARRIVE in text:
        barrier = _live(cta, args[0], tid, "arrives on")
        from .llvm_cta_async import take_open_copies

        copies = take_open_copies(cta, tid)
        barrier.coming.append(_Coming(tid, copies, release(cta, tid)))
        return None
    if "mbarrier.arrive.expect_tx" in text:
        if args[2]:
            # Counts where it is executed (the copies it expects land later, lazily), after
            # any arrival still in flight before it.
            barrier = _live(cta, args[0], tid, "arrives on")
            coming = _Coming(tid, [], release(cta, tid), tx=int(args[1]))
            if any(c.counts for c in barrier.coming):
                barrier.coming.append(coming)
            else:
                _count(barrier, coming)
        return None
    if "mbarrier.init" in text or "mbarrier.inval" in text:
        if not args[1]:
            return None  # predicated off: another thread's job
        address = args[0]
        if address % BARRIER_BYTES:
            raise SimulationError(f"thread {tid}: an mbarrier at shared {address} is not 8-byte aligned")
        barriers = _barriers(cta)
        if "mbarrier.init" in text:
            if address in barriers:
                raise SimulationError(f"thread {tid} initializes the live mbarrier at shared {address} again")
            count = int(_INIT.search(text).group(1))
            barriers[address] = _Barrier(count, tid, memory.now(tid), missing=count)
            memory.live_barriers.update(range(address, address + BARRIER_BYTES))
            return None
        barrier = _live(cta, address, tid, "invalidates")
        if barrier.coming:
            raise SimulationError(f"thread {tid} invalidates the mbarrier at shared {address} while "
                                  f"{len(barrier.coming)} arrivals on it are still in flight")
        del barriers[address]
        memory.live_barriers.difference_update(range(address, address + BARRIER_BYTES))
        return None
    raise SimulationError(f"the simulator does not know the asm '{text}'")


def _count(barrier: _Barrier, coming: _Coming) -> None:
    """``coming`` counts in the running phase, releasing its clock to it; the phase
    completes once every arrival is in and no transaction byte is missing."""
    clock = coming.clock
    barrier.releasing = clock.copy() if barrier.releasing is None else np.maximum(barrier.releasing, clock)
    if coming.counts and barrier.missing == 0:
        raise SimulationError(f"thread {coming.thread} arrives on an mbarrier whose phase has all {barrier.count} "
                              "arrivals and still waits for transaction bytes")
    barrier.missing -= 1 if coming.counts else 0
    barrier.tx += coming.tx
    if barrier.missing == 0 and barrier.tx == 0:
        barrier.released[barrier.phase] = barrier.releasing
        barrier.releasing = None
        barrier.phase += 1
        barrier.missing = barrier.count


def _complete(cta: CTA, address: int, barrier: _Barrier) -> None:
    """Let the next arrival or copy in flight land and count."""
    from .llvm_cta_async import land

    coming = barrier.coming.pop(0)
    for shared, data in coming.copies:
        land(cta, shared, data, coming.thread, clock=int(coming.clock[coming.thread]))
        if coming.async_proxy:
            cta.memory.written_by_async_proxy(shared, len(data))
    _count(barrier, coming)


def expect_transfer(cta: CTA, tid: int, address: int, copies: list, size: int) -> None:
    """A bulk copy of ``size`` bytes (``copies``) that completes its bytes on the barrier
    at ``address``."""
    barrier = _live(cta, address, tid, "copies into a transaction of")
    if not barrier.seen_by_async_proxy:
        raise SimulationError(f"thread {tid} starts a bulk copy that completes on the mbarrier at shared {address}, "
                              "whose init no fence.mbarrier_init showed to the async proxy")
    barrier.coming.append(_Coming(tid, copies, release(cta, tid), counts=False, tx=-size, async_proxy=True))


def fence_init(cta: CTA, tid: int) -> None:
    """``fence.mbarrier_init``: the barriers whose ``init`` this thread is ordered after
    are visible to the async proxy."""
    for barrier in _barriers(cta).values():
        if cta.memory.ordered(tid, barrier.initialized_by, barrier.init_clock):
            barrier.seen_by_async_proxy = True


def warp_sync_step(cta: CTA, text: str, inputs: list, warp: int) -> list:
    """``bar.warp.sync -1`` (the warp's lanes ordered with each other), then the lanes whose
    predicate ($1) is set arrive on the mbarrier at $0 (``mbarrier.arrive.release``)."""
    from .llvm_cta_schedule import join

    lanes = [warp * cta.warp_size + lane for lane in range(cta.warp_size)]
    join(cta, lanes)
    if _RELEASE not in text:
        return [None] * len(inputs)
    for tid, args in zip(lanes, inputs):
        if not args[1]:
            continue
        barrier = _live(cta, args[0], tid, "arrives on")
        coming = _Coming(tid, [], release(cta, tid))
        if barrier.coming:  # after the arrivals in flight before it
            barrier.coming.append(coming)
        else:
            _count(barrier, coming)
    return [None] * len(inputs)


def waited(cta: CTA, tid: int, address: int, parity: int) -> bool:
    """Whether thread ``tid``'s ``mbarrier.try_wait.parity`` passes now (letting arrivals
    in flight land and count as far as it needs); when it does, the thread acquires the
    clock of the phase it waited for."""
    barrier = _live(cta, address, tid, "waits on")
    if parity not in (0, 1):
        raise SimulationError(f"thread {tid} waits on parity {parity} of an mbarrier: parities are 0 and 1")
    while (barrier.phase & 1) == parity:
        if not barrier.coming:
            return False
        _complete(cta, address, barrier)
    released = barrier.released.get(barrier.phase - 1)
    if released is not None:
        clocks = cta.memory.clocks
        clocks[tid] = np.maximum(clocks[tid], released)
    return True


def never_completes(cta: CTA, tid: int, address: int, parity: int) -> str:
    """Why thread ``tid``'s wait cannot pass (when no warp can move any more)."""
    barrier = _barriers(cta)[address]
    return (f"thread {tid} waits for the phase of parity {parity} of the mbarrier at shared {address}, which "
            f"can never complete: phase {barrier.phase} needs {barrier.missing} more arrivals"
            f"{f', its transaction count {barrier.tx} bytes from zero,' if barrier.tx else ''} and none are in flight (a "
            "wait on the wrong phase, or a fill that was never issued)")


__all__ = ["expect_transfer", "fence_init", "mbarrier_step", "never_completes", "waited", "warp_sync_step"]
