"""mbarriers for ``gpu.mbarrier_*`` (sm_90 and later): the NVIDIA barrier unit.

A barrier is 8 bytes of shared memory.  ``mbarrier.init`` and ``mbarrier.inval`` are
thread 0's (predicated in the asm); the wait is ``mbarrier.try_wait.parity`` in a loop
(the instruction itself waits a while in hardware before it answers, so the loop spins
little).  Each asm statement sits in braces: its predicate register and label are its own,
however many copies of it the kernel holds.  sm_80's ``mbarrier.test_wait`` would do,
but there the pipeline keeps ``cp.async.wait_group`` (as Triton does).

The asm statements clobber memory: LLVM must not move shared-memory reads above a wait.
A barrier initialized here is used by cp.async's ``mbarrier.arrive`` (generic proxy);
a copy engine of the async proxy (TMA) also needs ``fence.mbarrier_init`` after the
initialization, which its plugin emits with its copies.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir


from .architectures import ARCHITECTURES

_I32 = ir.IntType(32)


def init_ptx(count: int) -> str:
    """``mbarrier.init``: $0 the barrier's shared address, $1 non-zero: this thread does it."""
    return "{ .reg .pred p; setp.ne.b32 p, $1, 0; @p mbarrier.init.shared.b64 [$0], " + str(count) + "; }"


WAIT_PTX = ("{ .reg .pred done; wait_phase: mbarrier.try_wait.parity.shared.b64 done, [$0], $1; "
            "@!done bra.uni wait_phase; }")
# One arrival per warp, by its first lane: bar.warp.sync orders every lane's earlier work
# (its reads of the slot) before it, and the release before the waiter's acquire.
ARRIVE_PTX = ("{ .reg .pred p; .reg .b64 state; setp.ne.b32 p, $1, 0; bar.warp.sync -1; "
              "@p mbarrier.arrive.release.cta.shared::cta.b64 state, [$0]; }")
INVAL_PTX = "{ .reg .pred p; setp.ne.b32 p, $1, 0; @p mbarrier.inval.shared.b64 [$0]; }"


def _void_asm(builder: ir.IRBuilder, text: str, inputs: list, constraints: list[str]) -> None:
    function_type = ir.FunctionType(ir.VoidType(), [v.type for v in inputs])
    builder.asm(function_type, text, ",".join([*constraints, "~{memory}"]), inputs, side_effect=True)


class NvidiaBarriers:
    """The ``BarrierUnit`` of the NVIDIA backend."""

    def supports(self, target: Any) -> bool:
        arch = ARCHITECTURES.get(target.arch)
        return arch is not None and arch.compute_capability >= (9, 0)

    def init(self, builder: ir.IRBuilder, address: Any, count: int, predicate: Any) -> None:
        _void_asm(builder, init_ptx(count), [address, builder.zext(predicate, _I32)], ["r", "r"])

    def wait(self, builder: ir.IRBuilder, address: Any, phase: Any) -> None:
        _void_asm(builder, WAIT_PTX, [address, phase], ["r", "r"])

    def invalidate(self, builder: ir.IRBuilder, address: Any, predicate: Any) -> None:
        _void_asm(builder, INVAL_PTX, [address, builder.zext(predicate, _I32)], ["r", "r"])

    def arrive(self, builder: ir.IRBuilder, address: Any, predicate: Any) -> None:
        _void_asm(builder, ARRIVE_PTX, [address, builder.zext(predicate, _I32)], ["r", "r"])


NVIDIA_BARRIERS = NvidiaBarriers()

__all__ = ["ARRIVE_PTX", "INVAL_PTX", "NVIDIA_BARRIERS", "NvidiaBarriers", "WAIT_PTX", "init_ptx"]
