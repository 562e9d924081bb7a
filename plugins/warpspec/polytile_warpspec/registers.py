"""How many registers each warp group of a specialised kernel holds.

The kernel starts with ``kernel`` registers per thread for all of its threads (the
assembler is told so: ``.maxnreg``); the producer gives back down to ``producer``
(``setmaxnreg.dec``) and the consumers take up to ``consumer`` (``setmaxnreg.inc``) from
what it gave.  So ``producer <= kernel <= consumer``, every count a multiple of 8 from
24 to 256, and the consumers' and producer's registers together fit the program's share
of the register file, and the consumers grow by no more than the producer gives back
(``setmaxnreg.inc`` waits for registers in the program's pool).  Defaults as CUTLASS's
Hopper kernels: the producer keeps 40.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Registers per thread a warp group may ask for (``setmaxnreg``: a multiple of 8 in it).
LOWEST, HIGHEST = 24, 256
#: What the consumers take at most when nothing says otherwise: ptxas gives a thread at
#: most 255, and a count above what the code needs buys nothing.
CONSUMER_CEILING = 240


@dataclass(frozen=True)
class RegisterPlan:
    producer_warps: int
    producer: int
    consumer: int
    kernel: int


def _down8(value: int) -> int:
    return value // 8 * 8


def plan_registers(target: Any, consumer_warps: int, producer_warps: int, producer: int, consumer: int,
                   maxnreg: int | None) -> RegisterPlan | str:
    """The plan for ``consumer_warps`` + ``producer_warps`` warps; ``producer`` and
    ``consumer``: asked for (0: the settings, then the defaults); ``maxnreg``: the
    kernel's cap when the user set one.  A string says why no plan fits."""
    from polytile import config

    warp = target.warp_size
    total = target.registers_per_program or 65536
    producer = producer or int(config.get("warpspec_producer_registers"))
    consumer = consumer or int(config.get("warpspec_consumer_registers"))
    threads = (consumer_warps + producer_warps) * warp
    if threads > 1024:
        return (f"{consumer_warps} warps and a producer warp group of {producer_warps} make {threads} threads, more "
                "than the 1024 a program holds")
    asked = consumer
    kernel = min(_down8(min(total // threads, 255)), HIGHEST)
    if maxnreg is not None:
        kernel = min(kernel, _down8(maxnreg))
    if kernel < LOWEST:
        return f"{threads} threads leave {kernel} registers per thread, fewer than a warp group needs"
    if producer > kernel:
        return (f"the producer keeps {producer} registers per thread, more than the {kernel} each thread of "
                f"{threads} starts with")
    # setmaxnreg.inc waits until the program's pool holds the registers asked for, and
    # only what the producer gives back is in it: the consumers may grow by that much.
    pool = producer_warps * (kernel - producer)
    room = min(_down8(kernel + pool // consumer_warps), HIGHEST)
    consumer = consumer or min(room, CONSUMER_CEILING)
    if consumer > room:
        return (f"the consumers' {consumer} registers per thread do not fit: the {producer_warps} producer warps give "
                f"back {kernel - producer} each from {kernel}, which lets {consumer_warps} consumer warps grow to "
                f"{room}")
    if consumer < kernel:
        if asked:
            return (f"the consumers' {asked} registers per thread are fewer than the {kernel} each thread starts "
                    "with; setmaxnreg.inc only grows them")
        kernel = consumer
    return RegisterPlan(producer_warps, producer, consumer, kernel)


__all__ = ["RegisterPlan", "plan_registers"]
