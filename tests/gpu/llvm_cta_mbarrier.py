"""mbarriers for the CTA simulator (llvm_cta.py), from the PTX ISA.

A barrier (8 bytes of shared memory) expects ``count`` arrivals per phase; when they
are in, its phase completes and the next begins.  ``mbarrier.try_wait.parity p`` is true
once the phase of parity ``p`` has completed: right after ``init`` (phase 0 running),
parity 0 waits and parity 1 passes at once (it names the phase before).

``cp.async.mbarrier.arrive.noinc`` arrives once all of this thread's earlier cp.async
copies have landed.  Here the copies land, and the arrival counts, only when some thread
waits on the barrier: the latest the hardware may take.  A completed phase shows the bytes
of its copies to the threads that waited for it, with no ``bar.sync``.

Reported, each where it happens: a wait for a phase that can never complete (too few
arrivals are coming: a wait on the wrong phase, or a fill never issued), a read of shared
bytes a copy is still writing (a wait that passed too early), a barrier used before
every thread could see its ``init`` or after its ``inval``, ``inval`` while arrivals are
still coming, ordinary loads and stores of a live barrier's bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .llvm_cta import CTA, SimulationError

_INIT = re.compile(r"mbarrier\.init\.shared\.b64 \[\$0\], (\d+);")
_ARRIVE = "cp.async.mbarrier.arrive.noinc.shared.b64"
BARRIER_BYTES = 8


@dataclass
class _Barrier:
    count: int
    initialized_by: int
    epoch: int
    #: Arrivals still missing in the running phase.
    missing: int = 0
    #: Phases completed.
    phase: int = 0
    #: Arrivals in flight, in order: (thread, [(shared address, bytes), ...]).
    coming: list = field(default_factory=list)


def _barriers(cta: CTA) -> dict:
    return cta.__dict__.setdefault("mbarriers", {})


def _live(cta: CTA, address: int, tid: int, what: str) -> _Barrier:
    barrier = _barriers(cta).get(address)
    if barrier is None:
        raise SimulationError(f"thread {tid} {what} the mbarrier at shared {address}, which is not initialized "
                              "(or was invalidated)")
    if barrier.epoch == cta.memory.epoch and tid != barrier.initialized_by:
        raise SimulationError(f"thread {tid} {what} the mbarrier at shared {address} that thread "
                              f"{barrier.initialized_by} initialized since the last barrier")
    return barrier


def mbarrier_step(cta: CTA, text: str, args: list, tid: int) -> None:
    """One thread's mbarrier.init, mbarrier.inval or cp.async.mbarrier.arrive."""
    memory = cta.memory
    if _ARRIVE in text:
        barrier = _live(cta, args[0], tid, "arrives on")
        from .llvm_cta_async import take_open_copies

        barrier.coming.append((tid, take_open_copies(cta, tid)))
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
            barriers[address] = _Barrier(count, tid, memory.epoch, missing=count)
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


def _complete(cta: CTA, address: int, barrier: _Barrier) -> None:
    """Let the next arrival in flight land and count."""
    from .llvm_cta_async import land

    tid, copies = barrier.coming.pop(0)
    for shared, data in copies:
        land(cta, shared, data, tid, visible=True)
    barrier.missing -= 1
    if barrier.missing == 0:
        barrier.phase += 1
        barrier.missing = barrier.count


def mbarrier_wait_step(cta: CTA, waits: list) -> list:
    """Every thread at one ``mbarrier.try_wait.parity`` loop, each with (address, parity):
    returns once each thread's phase has completed."""
    for tid, (address, parity) in enumerate(waits):
        barrier = _live(cta, address, tid, "waits on")
        if parity not in (0, 1):
            raise SimulationError(f"thread {tid} waits on parity {parity} of an mbarrier: parities are 0 and 1")
        while (barrier.phase & 1) == parity:
            if not barrier.coming:
                raise SimulationError(
                    f"thread {tid} waits for the phase of parity {parity} of the mbarrier at shared {address}, which "
                    f"can never complete: phase {barrier.phase} needs {barrier.missing} more arrivals and none are "
                    "in flight (a wait on the wrong phase, or a fill that was never issued)")
            _complete(cta, address, barrier)
    return [None] * len(waits)


__all__ = ["mbarrier_step", "mbarrier_wait_step"]
