"""Which threads of the CTA simulator (llvm_cta.py) run when, and what orders their
accesses to shared memory.

**Scheduling.**  Each thread runs on its own until it reaches a collective step (a
:class:`~.llvm_cta.Collective`); the lanes of a warp reach them together.  A step
completes once its participants are there, and only they wait for it:

- a warp's own step (``ldmatrix``, ``stmatrix``, ``mma.sync``, shuffles, AMD's cross-lane
  moves, ``bar.warp.sync`` and the mbarrier arrival after it): its lanes;
- ``wgmma.mma_async``: the four warps of its warpgroup;
- ``bar.sync``, ``barrier0`` and ``s_barrier``: every thread of the block; ``bar.sync id,
  n`` and ``bar.arrive id, n``: ``n`` threads at barrier ``id`` (``bar.arrive`` counts
  without waiting);
- ``mbarrier.try_wait``: a warp passes once the phase each of its lanes waits for has
  completed (llvm_cta_mbarrier.py).

So the warps of a warp-specialized kernel run apart: a producer waiting on an empty
mbarrier while the consumers wait on a full one and release the slot later.  When no
step can complete, the kernel would hang on the hardware: that is reported, with what
every waiting warp waits for.

**Happens-before.**  Every thread has a vector clock (``Memory.clocks``): ``clocks[t][u]``
is the latest clock of thread ``u`` that thread ``t`` is ordered after.  A barrier joins
the clocks of the threads it synchronizes; an mbarrier arrival releases the arriving
thread's clock to the phase and a wait that passes acquires it; a release moves the thread
to its next clock.  ``Memory`` checks every shared access against them: a read of a byte
another thread wrote, or a write over one another thread read, must be ordered after the
other access (the data races a missing barrier, a wait on the wrong phase or a slot
released too early make).  With every thread stepping through the same barriers this is
the usual "nothing between two barriers" rule.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from .llvm_cta import CTA, SimulationError, _resume


def release_clock(cta: CTA, tid: int) -> np.ndarray:
    """Thread ``tid``'s clock as a release hands it on; the thread moves to its next clock."""
    clocks = cta.memory.clocks
    clock = clocks[tid].copy()
    clocks[tid][tid] += 1
    return clock


def common_clock(cta: CTA, threads: Iterable[int]) -> np.ndarray:
    """The clock of what every one of ``threads`` is ordered after."""
    return cta.memory.clocks[list(threads)].min(axis=0)


def join(cta: CTA, threads: Iterable[int], released: Any = None) -> None:
    """A barrier of ``threads`` (and the clock ``released`` by threads that arrived without
    waiting): each is ordered after all of them, then moves to its next clock."""
    threads = list(threads)
    if not threads:
        return  # a round every thread of which arrived without waiting: nobody to order
    clocks = cta.memory.clocks
    together = clocks[threads].max(axis=0)
    if released is not None:
        together = np.maximum(together, released)
    clocks[threads] = together
    clocks[threads, threads] += 1


class _Barrier:
    """One named barrier's current round: the warps waiting at it and the threads counted."""

    def __init__(self) -> None:
        self.waiting: list[int] = []      # warps that wait (bar.sync)
        self.arrived = 0                  # threads counted, waiting or not
        self.released: Any = None         # the clocks of the threads that did not wait
        self.expected: int | None = None


#: Step the warps last-first (tests set it): nothing orders warps between barriers, so a
#: kernel must be right in either order; running warp 0 first hides a missing barrier
#: after something only warp 0 does.
WARPS_LAST_FIRST = False


def run_threads(cta: CTA, threads: list) -> None:
    """Run ``threads`` (one generator per thread, from ``CTA._thread``) to the end."""
    total, size = len(threads), cta.warp_size
    cta.memory.clocks = np.zeros((total, total), np.int64)
    np.fill_diagonal(cta.memory.clocks, 1)
    pending = [next(t, None) for t in threads]
    warps = range(total // size - 1, -1, -1) if WARPS_LAST_FIRST else range(total // size)
    barriers: dict[int, _Barrier] = {}

    def lanes(w: int) -> range:
        return range(w * size, (w + 1) * size)

    def kind_of(w: int) -> str | None:
        steps = [pending[t] for t in lanes(w)]
        if all(p is None for p in steps):
            return None
        if any(p is None for p in steps):
            raise SimulationError(f"some threads of warp {w} returned while others wait at a collective step")
        kinds = {p.kind for p in steps}
        if len(kinds) != 1:
            raise SimulationError(f"the threads of warp {w} wait at different collective steps: {sorted(kinds)[:3]}")
        return kinds.pop()

    def resume(w: int, results: list) -> None:
        for t, result in zip(lanes(w), results):
            pending[t] = _resume(threads[t], result)

    while True:
        if all(kind_of(w) is None for w in warps):
            _check_nothing_left(cta)
            return
        moved = False
        for w in warps:
            kind = kind_of(w)  # anew: a barrier another warp completed may have moved this one
            if kind is None:
                continue
            if kind == "barrier":
                moved |= _arrive(cta, w, [pending[t].inputs for t in lanes(w)], barriers, total, resume)
            elif "mbarrier.try_wait" in kind:
                moved |= _try_wait(cta, w, [pending[t].inputs for t in lanes(w)], resume)
            elif "wgmma.mma_async" not in kind:
                resume(w, cta.warp_step(kind, [pending[t].inputs for t in lanes(w)], w))
                moved = True
        kinds = {w: kind_of(w) for w in warps}
        for group in range(len(warps) // 4):
            members = range(4 * group, 4 * group + 4)
            if all(kinds[w] is not None and "wgmma.mma_async" in kinds[w] for w in members):
                if len({kinds[w] for w in members}) != 1:
                    raise SimulationError(f"the warps of warpgroup {group} issue different wgmma instructions")
                from .llvm_cta_wgmma import warpgroup_step

                group_threads = range(members[0] * size, (members[-1] + 1) * size)
                results = warpgroup_step(cta, kinds[members[0]], [pending[t].inputs for t in group_threads], group)
                for w in members:
                    resume(w, results[(w - members[0]) * size:(w - members[0] + 1) * size])
                moved = True
        if not moved:
            raise SimulationError(_deadlock(cta, {w: kind_of(w) for w in warps}, pending, barriers, size))


def _check_nothing_left(cta: CTA) -> None:
    """A kernel that returns with copies or wgmma still in flight (no wait retired them)
    leaves shared memory to whatever runs next: reported."""
    memory = cta.memory
    if memory.in_flight:
        a, tid = next(iter(memory.in_flight.items()))
        raise SimulationError(f"the kernel ended with a copy of thread {tid} into shared byte {a} still in flight "
                              "(no wait retired it)")
    if memory.bulk_reading:
        a, tid = next(iter(memory.bulk_reading.items()))
        raise SimulationError(f"the kernel ended while a bulk copy of thread {tid} still read shared byte {a} "
                              "(no cp.async.bulk.wait_group.read)")
    for address, barrier in cta.__dict__.get("mbarriers", {}).items():
        if barrier.coming:
            raise SimulationError(f"the kernel ended with {len(barrier.coming)} arrivals or copies still in flight on "
                                  f"the mbarrier at shared {address}")
    state = cta.__dict__.get("wgmma")
    if state is not None and (any(state.pending.values()) or any(state.open.values())):
        raise SimulationError("the kernel ended with wgmma.mma_async instructions no wgmma.wait_group retired")


def _arrive(cta: CTA, w: int, inputs: list, barriers: dict, total: int, resume: Any) -> bool:
    """Warp ``w`` at ``bar.sync``/``bar.arrive``: counted once; completes the round when
    every thread it expects is in.  Returns whether anything moved."""
    which, count, arrive_only = inputs[0]
    if any(tuple(i) != tuple(inputs[0]) for i in inputs):
        raise SimulationError(f"the threads of warp {w} name different barriers or thread counts: {inputs[:2]}")
    count = total if count is None else count
    if count % cta.warp_size:
        raise SimulationError(f"barrier {which} counts {count} threads, not a multiple of the warp size")
    barrier = barriers.setdefault(which, _Barrier())
    if w in barrier.waiting:
        return False  # already counted, waiting for the others
    if barrier.expected not in (None, count):
        raise SimulationError(f"barrier {which} is used with {barrier.expected} and {count} threads at once")
    barrier.expected = count
    size = cta.warp_size
    lanes = range(w * size, (w + 1) * size)
    barrier.arrived += size
    if arrive_only:
        clock = cta.memory.clocks[list(lanes)].max(axis=0)
        for t in lanes:
            release_clock(cta, t)
        barrier.released = clock if barrier.released is None else np.maximum(barrier.released, clock)
        resume(w, [None] * size)
    else:
        barrier.waiting.append(w)
    if barrier.arrived > count:
        raise SimulationError(f"{barrier.arrived} threads arrive at barrier {which}, which counts {count}")
    if barrier.arrived == count:
        waiting = [t for v in barrier.waiting for t in range(v * size, (v + 1) * size)]
        join(cta, waiting, barrier.released)
        for v in barrier.waiting:
            resume(v, [None] * size)
        del barriers[which]
    return True


def _try_wait(cta: CTA, w: int, inputs: list, resume: Any) -> bool:
    from .llvm_cta_mbarrier import waited

    size = cta.warp_size
    lanes = range(w * size, (w + 1) * size)
    if all([waited(cta, t, address, parity) for t, (address, parity) in zip(lanes, inputs)]):
        resume(w, [None] * size)
        return True
    return False


def _deadlock(cta: CTA, kinds: dict, pending: list, barriers: dict, size: int) -> str:
    from .llvm_cta_mbarrier import never_completes, waited

    reasons = []
    for w, kind in kinds.items():
        if kind is None:
            continue
        first = w * size
        if "mbarrier.try_wait" in kind:
            for t in range(first, first + size):
                address, parity = pending[t].inputs
                if not waited(cta, t, address, parity):
                    reasons.append(never_completes(cta, t, address, parity))
                    break
        elif kind == "barrier":
            which, count, _ = pending[first].inputs
            barrier = barriers.get(which)
            arrived = barrier.arrived if barrier is not None else 0
            expected = f"{count} threads" if count is not None else "the block's threads"
            reasons.append(f"warp {w} waits at barrier {which}, which {arrived} of its {expected} reached")
        else:
            reasons.append(f"warp {w} waits at '{kind[:60]}' for the other warps of its warpgroup")
    return "no warp can make progress (the kernel would hang): " + "; ".join(reasons)


__all__ = ["common_clock", "join", "release_clock", "run_threads"]
