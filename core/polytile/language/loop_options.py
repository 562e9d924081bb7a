"""``pl.WarpSpecialize``: per-loop options of ``pl.range(..., warp_specialize=...)``.

``warp_specialize=True`` (Triton's spelling) asks for the loop to be split into a producer
warp group and the consumer warps with the settings' register split
(``warpspec_producer_registers``, ``warpspec_consumer_registers``, ``warpspec_pingpong``:
docs/configuration.md).  ``warp_specialize=pl.WarpSpecialize(...)`` asks the same with
this loop's own values, which win over the settings::

    for k in pl.range(k_tiles, warp_specialize=pl.WarpSpecialize(producer_registers=24,
                                                                  consumer_registers=240)):

It is a compile-time value: written in the kernel from literals and constexprs, or passed
as a constexpr argument, so an autotune config can try several (``pt.Config({"WS":
pl.WarpSpecialize(producer_registers=24)})``).  Each value is another specialization.
Where no plugin splits loops, the loop runs unspecialised as with ``True``.

Kept apart from the builtins (cheap to import: a kernel module that names it in a
default argument imports only this).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import CompilationError
from .core import unwrap

#: Registers per thread a warp group may be given (``setmaxnreg``: a multiple of 8 in it).
LOWEST_REGISTERS, HIGHEST_REGISTERS = 24, 256


class LoopOptionError(CompilationError, ValueError):
    """A loop option that cannot work; in a kernel, reported at its line."""


@dataclass(frozen=True)
class WarpSpecialize:
    """How to split one ``pl.range`` loop into a producer warp group and the consumers.

    ``producer_registers``: registers per thread the producer warp group keeps
    (``setmaxnreg.dec``); ``consumer_registers``: registers per thread the consumer warp
    groups grow to (``setmaxnreg.inc``); each a multiple of 8 from 24 to 256, or 0 for the
    setting.  ``pingpong``: whether two consumer warp groups take turns issuing their dots
    (True, False, or None for the setting).  ``overlap``: whether the loop's second dot
    runs one iteration behind, during the work between the dots (FlashAttention-3's
    intra-warpgroup overlap: attention's softmax beside the previous ``p @ v``; True,
    False, or None for the setting ``warpspec_overlap``).  A split that does not fit the register file
    leaves the loop unspecialised, and the compile metadata says why.
    """

    producer_registers: int = 0
    consumer_registers: int = 0
    pingpong: bool | None = None
    overlap: bool | None = None

    def __init__(self, producer_registers: Any = 0, consumer_registers: Any = 0, pingpong: Any = None,
                 overlap: Any = None):
        for name, value in (("producer_registers", producer_registers), ("consumer_registers", consumer_registers)):
            value = unwrap(value)
            if not isinstance(value, bool) and hasattr(value, "__index__"):
                value = value.__index__()  # a NumPy integer
            if isinstance(value, bool) or not isinstance(value, int):
                raise LoopOptionError(f"pl.WarpSpecialize({name}={value!r}): use a compile-time integer "
                                      f"(a multiple of 8 from {LOWEST_REGISTERS} to {HIGHEST_REGISTERS}, or 0 for "
                                      "the setting)")
            if value and (not LOWEST_REGISTERS <= value <= HIGHEST_REGISTERS or value % 8):
                raise LoopOptionError(f"pl.WarpSpecialize({name}={value}): registers per thread of a warp group are "
                                      f"a multiple of 8 from {LOWEST_REGISTERS} to {HIGHEST_REGISTERS} (0: the "
                                      "setting)")
            object.__setattr__(self, name, value)
        for name, value in (("pingpong", pingpong), ("overlap", overlap)):
            value = unwrap(value)
            if value is not None and not isinstance(value, bool):
                raise LoopOptionError(f"pl.WarpSpecialize({name}={value!r}): use True, False or None (the setting)")
            object.__setattr__(self, name, value)

    def __repr__(self) -> str:  # as written in a kernel (and read back by `polytile compile -c`)
        return (f"pl.WarpSpecialize(producer_registers={self.producer_registers}, "
                f"consumer_registers={self.consumer_registers}, pingpong={self.pingpong}, overlap={self.overlap})")

    def __bool__(self) -> bool:
        return True  # asks for the split, as warp_specialize=True does

    def attributes(self) -> dict[str, Any]:
        """The loop attributes that carry the options that differ from the settings."""
        values = {"producer_registers": self.producer_registers or None,
                  "consumer_registers": self.consumer_registers or None, "pingpong": self.pingpong,
                  "overlap": self.overlap}
        return {f"{OPTION_PREFIX}{name}": value for name, value in values.items() if value is not None}


#: The ``scf.for`` attributes of the options: ``pt.warp_specialize.producer_registers``...
OPTION_PREFIX = "pt.warp_specialize."

__all__ = ["LoopOptionError", "OPTION_PREFIX", "WarpSpecialize"]
