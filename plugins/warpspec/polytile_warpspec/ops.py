"""The ``ws`` dialect: ``ws.warp_specialize`` and its terminator ``ws.yield``."""

from __future__ import annotations

from typing import Any

from polytile.dialects.gpu import RunsInWarpGroups
from polytile.ir.constraints import AnyType
from polytile.ir.opdef import Attr, HasParent, Operand, RegionDef, Result, Terminator, define_op, op_error
from polytile.ir.operation import Block, Operation, Region


@define_op
class WarpSpecializeOp(Operation):
    """Runs its two regions at the same time in different warps of the program.

    ``consumer``: run by the kernel's ``num_warps`` warps (the ones every layout is for),
    with ``consumer_registers`` registers per thread; what it yields are the op's results,
    and the rest of the kernel after the op is theirs alone.  ``producer``: run by
    ``producer_warps`` more warps (the kernel's ``gpu.worker_warps``), with
    ``producer_registers`` registers per thread; the first ``producer_working_warps`` of
    them run it (one issues bulk copies; per-thread copies take all, with tiles laid out
    for that many warps), it yields nothing, and its warps end with it.
    ``kernel_registers``: the registers per thread the kernel starts with, which both
    groups move from (the producer gives back, the consumers take).  The regions share
    memory only through what the op's maker synchronizes with mbarriers."""

    name = "ws.warp_specialize"
    outputs = Result(AnyType, variadic=True)
    consumer = RegionDef(terminators=("ws.yield",))
    producer = RegionDef(terminators=("ws.yield",))
    producer_warps = Attr(int)
    #: How many of the producer's warps run its region (1: one thread issues bulk copies;
    #: all of them for per-thread copies laid out for that many warps); the rest end.
    producer_working_warps = Attr(int, default=1)
    producer_registers = Attr(int)
    consumer_registers = Attr(int)
    kernel_registers = Attr(int)
    traits = (RunsInWarpGroups,)

    @classmethod
    def create(cls, result_types=(), *, producer_warps: int, producer_registers: int, consumer_registers: int,
               kernel_registers: int, producer_working_warps: int = 1, location: Any = None) -> "WarpSpecializeOp":
        regions = [Region([Block()]), Region([Block()])]
        attributes = {"producer_warps": producer_warps, "producer_registers": producer_registers,
                      "consumer_registers": consumer_registers, "kernel_registers": kernel_registers}
        if producer_working_warps != 1:
            attributes["producer_working_warps"] = producer_working_warps
        return cls([], list(result_types), attributes, regions, location)

    def verify_op(self) -> None:
        if self.producer_warps < 1:
            raise op_error(self, f"producer_warps must be positive, got {self.producer_warps}")
        if not 1 <= self.producer_working_warps <= self.producer_warps:
            raise op_error(self, f"producer_working_warps = {self.producer_working_warps}: from 1 to producer_warps "
                                 f"({self.producer_warps})")
        if not self.producer_registers <= self.kernel_registers <= self.consumer_registers:
            raise op_error(self, f"registers: the producer's ({self.producer_registers}) <= the kernel's "
                                 f"({self.kernel_registers}) <= the consumers' ({self.consumer_registers}) must hold: "
                                 "the producer gives registers back and the consumers take them")
        for count, what in ((self.producer_registers, "producer"), (self.consumer_registers, "consumer"),
                            (self.kernel_registers, "kernel")):
            if not 24 <= count <= 256 or count % 8:
                raise op_error(self, f"{what}_registers = {count}: a warp group's registers per thread are a "
                                     "multiple of 8 from 24 to 256")
        produced = self.producer.block.last_op
        if produced is not None and produced.operands:
            raise op_error(produced, "the producer region yields nothing: its warps end with it")
        consumed = self.consumer.block.last_op
        if consumed is not None and [v.type for v in consumed.operands] != [r.type for r in self.results]:
            raise op_error(consumed, "the consumer region yields values whose types differ from the op's results")


@define_op
class YieldOp(Operation):
    """Ends a region of ``ws.warp_specialize``, handing back the consumer's values."""

    name = "ws.yield"
    values = Operand(AnyType, variadic=True)
    traits = (Terminator, HasParent("ws.warp_specialize"))


@define_op
class TurnOp(Operation):
    """Ping-pong between the consumer warp groups: they take turns issuing their dots, so
    that one group's dots run on the tensor cores while the others do the rest of their
    iteration (FlashAttention-3's scheduling).  ``step``: ``"wait"`` (this group's turn:
    the previous group has passed it), ``"pass"`` (to the next group), ``"start"`` (before
    the loop: the last group gives the first group its first turn), ``"end"`` (after it:
    the first group takes the last group's final pass, so that every arrival is waited
    for).  Only in the consumer region of ``ws.warp_specialize``, with two or more
    consumer warp groups."""

    name = "ws.turn"
    step = Attr(str)

    def verify_op(self) -> None:
        if self.step not in TURN_STEPS:
            raise op_error(self, f"step is one of {', '.join(TURN_STEPS)}, got {self.step!r}")


TURN_STEPS = ("wait", "pass", "start", "end")

WS_OPS = (WarpSpecializeOp, YieldOp, TurnOp)

__all__ = ["TURN_STEPS", "TurnOp", "WS_OPS", "WarpSpecializeOp", "YieldOp"]
