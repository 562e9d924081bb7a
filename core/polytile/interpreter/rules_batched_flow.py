"""Batched rules of control flow, calls, debugging ops and block pointers (contract in
:mod:`polytile.interpreter.batch`).

Control flow splits the batch where programs disagree: ``scf.if`` runs each region on
the programs that take it and merges the results; a loop whose bounds or condition
differ between programs keeps the programs that still iterate and lets the others
leave, their results put aside until the loop ends for all.  A loop or branch on a
uniform condition runs as in one program, for the whole batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dialects import func, scf, tile, tile_block, tile_debug
from ..ir.operation import Operation
from . import rules, rules_block, rules_debug
from .batch import (
    CALLEES,
    UNBOUNDED_LOOPS,
    WAITS_ON_OTHER_PROGRAMS,
    BatchContext,
    is_batched,
    lift,
    locate_batched,
    merge,
    uniform_or,
)
from .executor import RULES, InterpreterUnsupportedError, register_batched_rule

# The per-program rules first: registering one drops the batched rule of its class.
RULES.load_providers()

for _terminator in (scf.YieldOp, scf.ConditionOp, func.ReturnOp):
    register_batched_rule(_terminator, rules.exit_rule)

register_batched_rule(func.CallOp, rules.call_rule)  # the callee runs for the same batch
CALLEES[func.CallOp] = lambda op: op.attributes["callee"].name


def _divergent(op: Operation, ctx: BatchContext) -> None:
    if not ctx.strict:
        raise ctx.error(op, "inside a reduce or scan combine function is not supported by the interpreter when its "
                            "condition depends on the values combined", InterpreterUnsupportedError, lane=0)


def _rows(values: list, types: list, rows: np.ndarray) -> list:
    return [v[rows] if is_batched(v, ty) else v for v, ty in zip(values, types)]


@register_batched_rule(scf.IfOp)
def if_batched(op: Operation, operands: list, ctx: BatchContext) -> list:
    condition = operands[0]
    if not is_batched(condition, op.operands[0].type):
        return rules.if_rule(op, operands, ctx)
    _divergent(op, ctx)
    taken = np.asarray(condition, dtype=bool)
    if taken.all() or not taken.any():
        return rules._run_region(op, 0 if taken[0] else 1, [], ctx)
    then_rows, else_rows = np.flatnonzero(taken), np.flatnonzero(~taken)
    then_values = rules._run_region(op, 0, [], ctx.subset(then_rows))
    else_values = rules._run_region(op, 1, [], ctx.subset(else_rows))
    return [merge(ctx.size, [(then_rows, a), (else_rows, b)], result.type)
            for a, b, result in zip(then_values, else_values, op.results)]


class _Leaving:
    """Results of the programs that have left a loop, merged when the loop ends."""

    def __init__(self, op: Operation, ctx: BatchContext):
        self.op, self.ctx = op, ctx
        self.parts: list[tuple[np.ndarray, list]] = []

    def leave(self, rows: np.ndarray, values: list) -> None:
        self.parts.append((rows, values))

    def results(self) -> list:
        if len(self.parts) == 1 and len(self.parts[0][0]) == self.ctx.size:
            return self.parts[0][1]  # all left together: keep uniform values uniform
        return [merge(self.ctx.size, [(rows, values[i]) for rows, values in self.parts], result.type)
                for i, result in enumerate(self.op.results)]


@register_batched_rule(scf.ForOp)
def for_batched(op: Operation, operands: list, ctx: BatchContext) -> list:
    if not any(is_batched(v, value.type) for v, value in zip(operands[:3], op.operands[:3])):
        return rules.for_rule(op, operands, ctx)
    _divergent(op, ctx)
    lower, upper, step = (lift(v, value.type, ctx.size).astype(np.int64) for v, value in zip(operands[:3],
                                                                                               op.operands[:3]))
    if (step <= 0).any():
        lane = int(np.argmax(step <= 0))
        raise ctx.error(op, f"has step {int(step[lane])}; the step of a loop must be positive", lane=lane)
    iv_dtype = operands[0].dtype
    types = [r.type for r in op.results]
    block = op.regions[0].blocks[0]
    carried = list(operands[3:])
    active, sub, iv = np.arange(ctx.size), ctx, lower
    leaving = _Leaving(op, ctx)
    while True:
        going = iv < upper
        if not going.all():
            done, keep = np.flatnonzero(~going), np.flatnonzero(going)
            leaving.leave(active[done], _rows(carried, types, done))
            if not keep.size:
                return leaving.results()
            active, iv, upper, step = active[keep], iv[keep], upper[keep], step[keep]
            carried = _rows(carried, types, keep)
            sub = ctx.subset(active)
        # Programs at one iteration (different trip counts, one start) share a uniform counter.
        counter = np.asarray(iv[0], dtype=iv_dtype) if (iv == iv[0]).all() else iv.astype(iv_dtype)
        carried = sub.run_block(block, [counter] + carried)
        iv = iv + step


@register_batched_rule(scf.WhileOp)
def while_batched(op: Operation, operands: list, ctx: BatchContext) -> list:
    types = [r.type for r in op.results]
    condition_type = op.regions[0].blocks[0].last_op.operands[0].type
    arguments, active, sub = list(operands), np.arange(ctx.size), ctx
    leaving = _Leaving(op, ctx)
    while True:
        condition, *passed = rules._run_region(op, 0, arguments, sub)
        if not is_batched(condition, condition_type):
            if not bool(condition):
                leaving.leave(active, passed)
                return leaving.results()
        else:
            _divergent(op, ctx)
            going = np.asarray(condition, dtype=bool)
            if not going.all():
                done, keep = np.flatnonzero(~going), np.flatnonzero(going)
                leaving.leave(active[done], _rows(passed, types, done))
                if not keep.size:
                    return leaving.results()
                active, passed = active[keep], _rows(passed, types, keep)
                sub = ctx.subset(active)
        arguments = rules._run_region(op, 1, passed, sub)


UNBOUNDED_LOOPS.add(scf.WhileOp)


# --------------------------------------------------------------------------------------
# Debugging


@register_batched_rule(tile_debug.PrintOp)
def print_batched(op: Operation, operands: list, ctx: BatchContext) -> None:
    """Each program's lines are kept and printed in program order when the batch ends."""
    types = [v.type for v in op._operands]
    for lane in range(ctx.size):
        values = [v[lane] if is_batched(v, ty) else v for v, ty in zip(operands, types)]
        ctx.run.emit(int(ctx.lanes[lane]), rules_debug.print_text(op, values, ctx.program_id_of(lane)))


@register_batched_rule(tile_debug.AssertOp)
def assert_batched(op: Operation, operands: list, ctx: BatchContext) -> None:
    _check_batched(op, operands[0], ctx, rules_debug.assertion_failure)


@register_batched_rule(tile_debug.AssumeOp)
def assume_batched(op: Operation, operands: list, ctx: BatchContext) -> None:
    _check_batched(op, operands[0], ctx, rules_debug.assumption_failure)


def _check_batched(op: Operation, condition: Any, ctx: BatchContext, failure: Any) -> None:
    """Raise ``failure``'s message for the first program whose ``condition`` is false."""
    if not is_batched(condition, op.operands[0].type):
        message = failure(op, condition)
        lane = 0
    else:
        failing = ~np.asarray(condition, dtype=bool).reshape(ctx.size, -1).all(axis=1)
        if not failing.any():
            return None
        lane = int(np.argmax(failing))
        message = failure(op, condition[lane])
    if message is not None:
        raise ctx.error(op, message, lane=lane)
    return None


register_batched_rule(tile_debug.BarrierOp, rules_debug.barrier_rule)  # lockstep: every program is there


# --------------------------------------------------------------------------------------
# Block pointers: a batched one is an object array of one BlockPointer per program


def _pointers(value: np.ndarray, size: int) -> list:
    boxed = value if value.ndim else np.broadcast_to(value, (size,))
    return list(boxed)


def _box_all(pointers: list) -> np.ndarray:
    boxed = np.empty((len(pointers),), dtype=object)
    for i, pointer in enumerate(pointers):
        boxed[i] = pointer
    return boxed


@register_batched_rule(tile_block.MakeBlockPtrOp)
@uniform_or(rules_block.make_block_ptr_rule)
def make_block_ptr_batched(op: Operation, operands: list, ctx: BatchContext) -> np.ndarray:
    types = [v.type for v in op._operands]
    lifted = [lift(v, ty, ctx.size) for v, ty in zip(operands, types)]
    return _box_all([rules_block._unbox(rules_block.make_block_ptr_rule(op, [v[lane] for v in lifted], ctx))
                     for lane in range(ctx.size)])


@register_batched_rule(tile_block.AdvanceOp)
@uniform_or(rules_block.advance_rule)
def advance_batched(op: Operation, operands: list, ctx: BatchContext) -> np.ndarray:
    pointers = _pointers(operands[0], ctx.size)
    deltas = [lift(v, value.type, ctx.size) for v, value in zip(operands[1:], op.operands[1:])]
    return _box_all([rules_block._unbox(rules_block.advance_rule(op, [ptr] + [d[lane] for d in deltas], ctx))
                     for lane, ptr in enumerate(pointers)])


@register_batched_rule(tile_block.LoadBlockOp)
@uniform_or(rules_block.load_block_rule)
def load_block_batched(op: Operation, operands: list, ctx: BatchContext) -> np.ndarray:
    element = rules_block.memory_element_of(op, ctx)
    addresses, mask = rules_block.block_addresses(op, _pointers(operands[0], ctx.size), element.itemsize)
    fill = np.nan if op.attributes.get("padding", "") == "nan" else 0
    result = np.full(addresses.shape, fill, dtype=element.value)
    flat = result.reshape(-1)
    for buffer, lanes, indices in locate_batched(op, ctx, addresses, mask, element.itemsize):
        flat[lanes] = element.read(buffer.view(element.storage)[indices])
    return result


@register_batched_rule(tile_block.StoreBlockOp)
@uniform_or(rules_block.store_block_rule)
def store_block_batched(op: Operation, operands: list, ctx: BatchContext) -> None:
    element = rules_block.memory_element_of(op, ctx)
    addresses, mask = rules_block.block_addresses(op, _pointers(operands[0], ctx.size), element.itemsize)
    access = locate_batched(op, ctx, addresses, mask, element.itemsize)
    rules._check_writeable(op, ctx, access)
    values = np.broadcast_to(np.asarray(operands[1]).astype(element.value), addresses.shape).reshape(-1)
    for buffer, lanes, indices in access:
        buffer.view(element.storage)[indices] = element.write(values[lanes])
    return None


def _always(op: Operation) -> bool:
    return True


def _volatile(op: Operation) -> bool:
    return bool(op.attributes.get("volatile", False))


for _cls, _waits in ((tile.AtomicRMWOp, _always), (tile.AtomicCASOp, _always), (tile.LoadOp, _volatile)):
    WAITS_ON_OTHER_PROGRAMS[_cls] = _waits

