"""``tile.read_clock`` and ``tile.processor_id``: where and when a program runs (Triton's
``tl.extra.cuda.globaltimer`` and ``smid``; what a profiler's records hold).

``tile.read_clock {clock = "global"}`` is a clock in nanoseconds that every processor of
the device shares (NVIDIA ``%globaltimer``; AMD the 100 MHz real-time counter, scaled);
``{clock = "cycles"}`` counts the processor's own cycles (``%clock64``, ``s_memtime``).
Neither is ``Pure``: two reads are two readings, so no pass merges, hoists or deletes one.
On the interpreter both read a virtual clock that starts at 0 for each launch and steps
by one per read, the same in every run (tests check the order of events exactly).

``tile.processor_id`` is the processor (NVIDIA SM, AMD compute unit) the program runs on;
0 on the interpreter.
"""

from __future__ import annotations

from ..ir import types as t
from ..ir.constraints import AnyType
from ..ir.opdef import Attr, Pure, Result, define_op, op_error
from ..ir.operation import Operation

#: The clocks ``tile.read_clock`` reads.
CLOCKS = ("global", "cycles")


@define_op
class ReadClockOp(Operation):
    """A reading (i64) of ``clock``: "global" (nanoseconds, shared by the device's
    processors) or "cycles" (this processor's cycle counter)."""

    name = "tile.read_clock"
    clock = Attr(str)
    result = Result(AnyType)
    infer_result_types = staticmethod(lambda operands, attributes: [t.i64])

    def verify_op(self) -> None:
        if self.clock not in CLOCKS:
            raise op_error(self, f"clock must be one of {', '.join(CLOCKS)}, got {self.clock!r}")
        if self.result.type != t.i64:
            raise op_error(self, f"result must be i64, got {self.result.type}")


@define_op
class ProcessorIdOp(Operation):
    """The index (i32) of the processor this program runs on."""

    name = "tile.processor_id"
    result = Result(AnyType)
    traits = (Pure,)
    infer_result_types = staticmethod(lambda operands, attributes: [t.i32])

    def verify_op(self) -> None:
        if self.result.type != t.i32:
            raise op_error(self, f"result must be i32, got {self.result.type}")


TILE_CLOCK_OPS = (ReadClockOp, ProcessorIdOp)

__all__ = ["CLOCKS", "TILE_CLOCK_OPS", "ProcessorIdOp", "ReadClockOp"]
