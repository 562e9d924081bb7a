"""Batched rules of the core data ops: program ids, shapes, memory, atomics, dot,
reductions and scans (contract in :mod:`polytile.interpreter.batch`).

Where every operand is uniform the op computes the same thing in every program, so
most rules here hand that case to the per-program rule.  Loads, stores and atomics work
on the flattened ``(P,) + shape`` tile, program after program, so the first bad lane
is the first failing program's and atomics serialize in program order.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..dialects import arith, tile, tile_clock, tile_shape
from ..dialects import semantics as sem
from ..ir import types as t
from ..ir.operation import Operation
from . import rules, rules_shape
from .batch import BatchContext, any_batched, elementwise, lift, locate_batched, uniform_or
from .executor import RULES, InterpreterUnsupportedError, register_batched_rule
from .memory import serialized_update

# The per-program rules first: registering one drops the batched rule of its class.
RULES.load_providers()


# --------------------------------------------------------------------------------------
# Rules that need nothing batch-specific

# Uniform by nature: the same in every program of the launch.
for _cls, _rule in ((arith.ConstantOp, rules.constant_rule), (tile.ArangeOp, rules.arange_rule),
                    (tile.NumProgramsOp, rules.num_programs_rule)):
    register_batched_rule(_cls, _rule)

# Elementwise: NumPy broadcasting of uniform and batched operands does the rest.  Their
# errors (division by zero, ...) are pinned to a program by the executor.
for _cls in (arith.CmpIOp, arith.CmpFOp, arith.SelectOp, tile.AddPtrOp,
             arith.PtrToIntOp, arith.IntToPtrOp,
             *(arith.BINARY_OPS[n] for n in ("divsi", "divui", "remsi", "remui")),
             *(arith.CASTS[n] for n in ("extsi", "extui", "trunci", "sitofp", "uitofp", "fptosi", "fptoui", "extf",
                                        "truncf", "bitcast"))):
    register_batched_rule(_cls, elementwise(RULES[_cls]))

# np.matmul broadcasts over the batch axis; the sum with the accumulator too.
register_batched_rule(tile.DotOp, rules.dot_rule)


@register_batched_rule(tile.ProgramIdOp)
def program_id_batched(op: Operation, operands: list, ctx: BatchContext) -> np.ndarray:
    ids = ctx.program_ids[:, op.attributes["axis"]]
    if (ids == ids[0]).all():  # one row of a 2-D grid, say: keep what follows uniform
        return np.asarray(ids[0], dtype=np.int32)
    return ids.astype(np.int32)


@register_batched_rule(tile_clock.ReadClockOp)
def read_clock_batched(op: Operation, operands: list, ctx: BatchContext) -> np.ndarray:
    # Each program's own virtual clock (programs of a batch may have taken other branches).
    clocks = ctx.run.clocks
    readings = np.empty(ctx.size, dtype=np.int64)
    for row, program in enumerate(map(tuple, ctx.program_ids.tolist())):
        readings[row] = clocks.get(program, 0)
        clocks[program] = readings[row] + 1
    return np.asarray(readings[0]) if (readings == readings[0]).all() else readings


register_batched_rule(tile_clock.ProcessorIdOp, rules.processor_id_rule)


# --------------------------------------------------------------------------------------
# Shapes: the IR's axes move one to the right on a batched value


def _shape(op: Operation, index: int = 0) -> tuple[int, ...]:
    return t.shape_of(op.results[index].type)


@register_batched_rule(tile.SplatOp)
@uniform_or(rules.splat_rule)
def splat_batched(op: Operation, operands: list, ctx: BatchContext) -> np.ndarray:
    shape = _shape(op)
    value = operands[0]
    return np.broadcast_to(value.reshape(value.shape + (1,) * len(shape)), value.shape + shape)


@register_batched_rule(tile.BroadcastOp)
@uniform_or(rules.broadcast_rule)
def broadcast_batched(op: Operation, operands: list, ctx: BatchContext) -> np.ndarray:
    return np.broadcast_to(operands[0], (ctx.size,) + _shape(op))


@register_batched_rule(tile.ExpandDimsOp)
@uniform_or(rules.expand_dims_rule)
def expand_dims_batched(op: Operation, operands: list, ctx: BatchContext) -> np.ndarray:
    axis = op.attributes["axis"]
    return np.expand_dims(operands[0], axis + 1 if axis >= 0 else axis)


@register_batched_rule(tile.ReshapeOp)
@uniform_or(rules.reshape_rule)
def reshape_batched(op: Operation, operands: list, ctx: BatchContext) -> np.ndarray:
    return np.reshape(operands[0], (ctx.size,) + _shape(op))


@register_batched_rule(tile.TransOp)
@uniform_or(rules.trans_rule)
def trans_batched(op: Operation, operands: list, ctx: BatchContext) -> np.ndarray:
    return np.transpose(operands[0], (0,) + tuple(int(o) + 1 for o in op.attributes["order"]))


def _lifted(op: Operation, operands: list, ctx: BatchContext) -> list:
    return [lift(v, value.type, ctx.size) for v, value in zip(operands, op._operands)]


@register_batched_rule(tile_shape.JoinOp)
@uniform_or(rules_shape.join_rule)
def join_batched(op: Operation, operands: list, ctx: BatchContext) -> np.ndarray:
    return np.stack(_lifted(op, operands, ctx), axis=-1)


@register_batched_rule(tile_shape.SplitOp)
def split_batched(op: Operation, operands: list, ctx: BatchContext) -> list:
    return rules_shape.split_rule(op, operands, ctx)  # the last axis is the last axis either way


@register_batched_rule(tile_shape.CatOp)
@uniform_or(rules_shape.cat_rule)
def cat_batched(op: Operation, operands: list, ctx: BatchContext) -> np.ndarray:
    return np.concatenate(_lifted(op, operands, ctx), axis=1)


@register_batched_rule(tile_shape.GatherOp)
@uniform_or(rules_shape.gather_rule)
def gather_batched(op: Operation, operands: list, ctx: BatchContext) -> np.ndarray:
    src, index = _lifted(op, operands, ctx)
    return rules_shape.gather(op, src, index, op.attributes["axis"] + 1, ctx, batched=True)


@register_batched_rule(tile_shape.HistogramOp)
@uniform_or(rules_shape.histogram_rule)
def histogram_batched(op: Operation, operands: list, ctx: BatchContext) -> np.ndarray:
    lifted = _lifted(op, operands, ctx)
    return rules_shape.histogram(lifted[0], lifted[1] if op.mask is not None else None, op.attributes["num_bins"])


@register_batched_rule(tile.ReduceOp)
def reduce_batched(op: Operation, operands: list, ctx: BatchContext) -> list:
    axis = op.attributes["axis"]
    if any_batched(op, operands):
        operands, axis = _lifted(op, operands, ctx), axis + 1
    return rules.tree_reduce(op.regions[0].blocks[0], operands, axis, ctx.combine_context().run_block)


@register_batched_rule(tile_shape.ScanOp)
def scan_batched(op: Operation, operands: list, ctx: BatchContext) -> list:
    axis = op.attributes["axis"]
    if any_batched(op, operands):
        operands, axis = _lifted(op, operands, ctx), axis + 1
    return rules_shape.tree_scan(op.regions[0].blocks[0], operands, axis, op.attributes.get("reverse", False),
                                 ctx.combine_context().run_block)


register_batched_rule(tile.ReduceReturnOp, rules.exit_rule)
register_batched_rule(tile_shape.ScanReturnOp, rules.exit_rule)


# --------------------------------------------------------------------------------------
# Memory


def _memory_operands(op: Operation, operands: list, ctx: BatchContext) -> dict[str, Any]:
    """The named operands, each lifted to the batch (absent optional ones stay None)."""
    named = rules.named_operands(op, operands)
    types = {group.name: op.operands[op.operand_group_slice(i)[0]].type
             for i, group in enumerate(op.definition.operands) if named[group.name] is not None}
    return {name: None if value is None else lift(value, types[name], ctx.size) for name, value in named.items()}


@register_batched_rule(tile.LoadOp)
@uniform_or(rules.load_rule)
def load_batched(op: Operation, operands: list, ctx: BatchContext) -> np.ndarray:
    named = _memory_operands(op, operands, ctx)
    pointers, mask, other = named["ptr"], named["mask"], named["other"]
    _, element = rules._pointee(op, ctx, op.operands[0].type)
    access = locate_batched(op, ctx, pointers, mask, element.itemsize)
    fill = 0 if other is None else other
    result = np.empty(pointers.shape, dtype=element.value)  # C order: flat below must be a view
    result[...] = np.asarray(fill).astype(element.value)
    flat = result.reshape(-1)
    for buffer, lanes, indices in access:
        flat[lanes] = element.read(buffer.view(element.storage)[indices])
    return result


@register_batched_rule(tile.StoreOp)
@uniform_or(rules.store_rule)  # every program stores the same values to the same places
def store_batched(op: Operation, operands: list, ctx: BatchContext) -> None:
    named = _memory_operands(op, operands, ctx)
    pointers, value, mask = named["ptr"], named["value"], named["mask"]
    _, element = rules._pointee(op, ctx, op.operands[0].type)
    access = locate_batched(op, ctx, pointers, mask, element.itemsize)
    rules._check_writeable(op, ctx, access)
    values = np.broadcast_to(np.asarray(value).astype(element.value), pointers.shape).reshape(-1)
    for buffer, lanes, indices in access:
        # Lanes storing to one address: the last program's value stays, as in program order.
        buffer.view(element.storage)[indices] = element.write(values[lanes])
    return None


#: Atomic kinds whose memory result does not depend on how updates interleave, applied
#: with ``ufunc.at`` (in lane order) when nothing reads the old values: ``kind -> (ufunc,
#: view)``; the view reinterprets memory and values as signed or unsigned.
UNORDERED_ATOMICS: dict[str, tuple[np.ufunc, Callable[[np.ndarray], np.ndarray]]] = {
    "add": (np.add, lambda a: a),
    "fadd": (np.add, lambda a: a),
    "max": (np.maximum, sem.as_signed),
    "min": (np.minimum, sem.as_signed),
    "umax": (np.maximum, sem.as_unsigned),
    "umin": (np.minimum, sem.as_unsigned),
    "and": (np.bitwise_and, lambda a: a),
    "or": (np.bitwise_or, lambda a: a),
    "xor": (np.bitwise_xor, lambda a: a),
}


def _atomic_batched(op: Operation, ctx: BatchContext, pointers: np.ndarray, mask: np.ndarray | None,
                    combine: Callable, unordered: tuple | None, *values: np.ndarray) -> np.ndarray:
    """Every program's read-modify-writes, lanes serialized program after program;
    returns the old values (0 where masked)."""
    dtype = rules.atomic_dtype(op, ctx)
    access = locate_batched(op, ctx, pointers, mask, dtype.itemsize)
    rules._check_writeable(op, ctx, access)
    flat_values = [np.broadcast_to(np.asarray(v).astype(dtype), pointers.shape).reshape(-1) for v in values]
    result = np.zeros(pointers.shape, dtype=dtype)
    if unordered is not None and not op.results[0].has_uses:
        ufunc, view = unordered
        for buffer, lanes, indices in access:
            ufunc.at(view(buffer.view(dtype)), indices, view(np.ascontiguousarray(flat_values[0][lanes])))
        return result
    flat = result.reshape(-1)

    def typed(*args: np.ndarray) -> np.ndarray:
        return np.asarray(combine(*args)).astype(dtype)

    for buffer, lanes, indices in access:
        flat[lanes] = serialized_update(buffer.view(dtype), indices, typed, *(v[lanes] for v in flat_values))
    return result


@register_batched_rule(tile.AtomicRMWOp)
def atomic_rmw_batched(op: Operation, operands: list, ctx: BatchContext) -> np.ndarray:
    # Uniform operands still mean one update per program: always lift.
    named = _memory_operands(op, operands, ctx)
    kind = op.attributes["kind"]
    combine = rules.ATOMIC_COMBINE.get(kind)
    if combine is None:
        raise ctx.error(op, f"atomic kind '{kind}' is not supported by the interpreter", InterpreterUnsupportedError,
                        lane=0)
    if kind in rules._INTEGER_ONLY_KINDS and not t.is_integer(op.operands[1].type):
        raise ctx.error(op, f"atomic '{kind}' needs integer values, got {op.operands[1].type}", lane=0)
    return _atomic_batched(op, ctx, named["ptr"], named["mask"], combine, UNORDERED_ATOMICS.get(kind), named["value"])


@register_batched_rule(tile.AtomicCASOp)
def atomic_cas_batched(op: Operation, operands: list, ctx: BatchContext) -> np.ndarray:
    pointers, compare, value = _lifted(op, operands, ctx)
    return _atomic_batched(op, ctx, pointers, None, rules._cas, None, compare, value)
