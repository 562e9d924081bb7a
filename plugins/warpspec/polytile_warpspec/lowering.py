"""The LLVM lowering of ``ws.warp_specialize`` (every GPU backend whose target has named
barriers and ``set_max_registers``: NVIDIA sm_90a).

The kernel launches ``num_warps + producer_warps`` warps.  At the op, the warps past the
kernel's ``num_warps`` take the producer branch: they give registers back, all but the
first ``producer_working_warps`` of them end, and those run the producer region as a
program of that many warps (their thread and warp indices counted from their first
thread, so that tiles laid out for that many warps lower as in any kernel; their
barriers their own) and end.
The kernel's warps take more registers and run the consumer region and the rest of the
kernel, whose barriers now synchronize only them (``bar.sync 1, num_warps * 32``):
the producer's warps never arrive at the whole program's barrier again.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from polytile.gpu.lowering.context import LoweringContext, register_lowering

from .ops import TurnOp, WarpSpecializeOp

#: Hardware barriers: 0 is the whole program's; the consumers' and the producer's own;
#: from TURN_BARRIERS on, one per consumer warp group for their turns (ws.turn).
CONSUMER_BARRIER, PRODUCER_BARRIER, TURN_BARRIERS = 1, 2, 3
#: Warps of a warp group.
WARP_GROUP = 4


@register_lowering(WarpSpecializeOp)
def _warp_specialize(op: Any, operands: list, ctx: LoweringContext) -> list:
    target = ctx.target
    if target.named_barrier is None or target.set_max_registers is None:
        raise ctx.unsupported(op, f"'{op.name}' (warp groups with barriers and registers of their own on "
                                  f"{target.arch})")
    b = ctx.builder
    consumers = ctx.num_warps
    is_producer = b.icmp_unsigned(">=", ctx.warp_id, ctx.i32(consumers))
    producer_block = b.append_basic_block("ws.producer")
    consumer_block = b.append_basic_block("ws.consumer")
    b.cbranch(is_producer, producer_block, consumer_block)
    ctx.register_cap = op.kernel_registers

    # The producer: registers back (every warp of the group), then its working warps alone.
    b.position_at_end(producer_block)
    target.set_max_registers(b, op.producer_registers, False)
    producer_warp = b.sub(ctx.warp_id, ctx.i32(consumers))
    working = op.producer_working_warps
    work_block = b.append_basic_block("ws.producer.work")
    done_block = b.append_basic_block("ws.producer.done")
    b.cbranch(b.icmp_unsigned("<", producer_warp, ctx.i32(working)), work_block, done_block)
    b.position_at_end(done_block)
    b.ret_void()
    b.position_at_end(work_block)
    saved = (ctx.thread_id, ctx.warp_id, ctx.num_warps, ctx.target)
    ctx.thread_id = b.sub(ctx.thread_id, ctx.i32(consumers * ctx.warp_size))
    ctx.warp_id = producer_warp
    ctx.num_warps = working
    ctx.target = dataclasses.replace(target, barrier=lambda builder: target.named_barrier(
        builder, PRODUCER_BARRIER, working * ctx.warp_size))
    _lower_body(op.producer.block, ctx)
    b.ret_void()
    ctx.thread_id, ctx.warp_id, ctx.num_warps, ctx.target = saved

    # The consumers, and everything after the op: their barriers are theirs alone.
    b.position_at_end(consumer_block)
    target.set_max_registers(b, op.consumer_registers, True)
    threads = consumers * ctx.warp_size
    ctx.target = dataclasses.replace(target, barrier=lambda builder: target.named_barrier(
        builder, CONSUMER_BARRIER, threads))
    return [ctx.get(v) for v in _lower_body(op.consumer.block, ctx).operands]


@register_lowering(TurnOp)
def _turn(op: Any, operands: list, ctx: LoweringContext) -> list:
    """Group g waits on barrier TURN_BARRIERS + g for the previous group's arrival and
    passes to the next group's barrier; each barrier counts two groups' threads."""
    b = ctx.builder
    groups = ctx.num_warps // WARP_GROUP
    if groups < 2 or ctx.target.named_barrier is None:
        raise ctx.error(op, f"'{op.name}' needs two or more consumer warp groups with barriers of their own")
    threads = 2 * WARP_GROUP * ctx.warp_size
    group = b.udiv(ctx.warp_id, ctx.i32(WARP_GROUP))
    barrier = ctx.target.named_barrier
    if op.step == "wait":
        barrier(b, b.add(group, ctx.i32(TURN_BARRIERS)), threads)
    elif op.step == "pass":
        following = b.urem(b.add(group, ctx.i32(1)), ctx.i32(groups))
        barrier(b, b.add(following, ctx.i32(TURN_BARRIERS)), threads, arrive=True)
    else:
        # start: the last group arrives on the first group's barrier; end: the first
        # group waits there for the last group's final pass.
        mine = b.icmp_unsigned("==", group, ctx.i32(groups - 1 if op.step == "start" else 0))
        with b.if_then(mine):
            barrier(b, TURN_BARRIERS, threads, arrive=op.step == "start")
    return []


def _lower_body(block: Any, ctx: LoweringContext) -> Any:
    """Lower the ops of ``block`` before its ``ws.yield``; return the yield."""
    from polytile.gpu.lowering.module import lower_op

    terminator = block.last_op
    for inner in block:
        if inner is terminator:
            break
        lower_op(inner, ctx)
    return terminator


__all__ = ["CONSUMER_BARRIER", "PRODUCER_BARRIER", "TURN_BARRIERS"]
