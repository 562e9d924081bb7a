"""Interpretation rules of the core ops (builtin, func, arith, math, scf, tile).

Each rule is ``rule(op, operands, ctx)`` (see :mod:`polytile.interpreter.executor`); it
takes NumPy values and returns NumPy values, reading program ids from ``ctx``.
Elementwise ``arith`` and ``math`` ops with NumPy ``semantics`` need no rule here: the
executor applies their semantics directly.  Rules here cover the rest and the
elementwise ops whose semantics need a check first (division by zero, NaN to integer).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..dialects import arith, func, scf, tile, tile_clock
from ..dialects import semantics as sem
from ..ir import types as t
from ..ir.operation import Operation
from .executor import (
    UNDEFINED_RESULT_MESSAGES,
    InterpreterUnsupportedError,
    ProgramContext,
    as_value,
    MemoryElement,
    dtype_of,
    emulated_of,
    exit_rule,
    memory_element,
    register_rule,
    unsupported_type_message,
)
from .memory import Access, serialized_update

# --------------------------------------------------------------------------------------
# Helpers


def result_dtype(op: Operation, ctx: ProgramContext, index: int = 0) -> np.dtype:
    """The NumPy dtype of result ``index``; unsupported types (bf16, fp8) raise."""
    type_ = op.results[index].type
    dtype = dtype_of(type_)
    if dtype is None:
        raise ctx.error(op, unsupported_type_message(type_), InterpreterUnsupportedError)
    return dtype


def named_operands(op: Operation, operands: list) -> dict[str, Any]:
    """The operand values by group name: a value, None (absent optional) or a list (variadic)."""
    named: dict[str, Any] = {}
    for index, group in enumerate(op.definition.operands):
        start, stop = op.operand_group_slice(index)
        values = operands[start:stop]
        named[group.name] = list(values) if group.variadic else (values[0] if values else None)
    return named


def describe_lane(lane: int, shape: tuple[int, ...]) -> str:
    if not shape:
        return ""
    position = tuple(int(i) for i in np.unravel_index(lane, shape))
    return f" (at element {position[0] if len(position) == 1 else position} of the pointer tile)"


def _pointee(op: Operation, ctx: ProgramContext, pointer_type: t.Type) -> tuple[t.Type, MemoryElement]:
    """The pointee type of ``pointer_type`` and how its elements are stored."""
    pointee = t.element_type(pointer_type).pointee
    element = memory_element(pointee)
    if element is None:
        raise ctx.error(op, unsupported_type_message(pointee), InterpreterUnsupportedError)
    return pointee, element


def element_size(pointee: t.Type) -> int:
    """Bytes of one element of ``pointee`` in memory (what pointer arithmetic steps by)."""
    element = memory_element(pointee)
    if element is not None:
        return element.itemsize
    return max(getattr(pointee, "width", 8) // 8, 1)


def locate(op: Operation, ctx: ProgramContext, pointers: np.ndarray, mask: np.ndarray | None,
           itemsize: int) -> Access:
    """Where the active (unmasked) lanes of ``pointers`` go; raises on a bad address."""
    flat = pointers.reshape(-1)
    if mask is None:
        lanes = np.arange(flat.size)
    else:
        lanes = np.flatnonzero(np.broadcast_to(mask, pointers.shape))
    access = ctx.memory.locate(flat[lanes], itemsize, lanes, ctx.bounds_check)
    if access.problem is not None:
        raise ctx.error(op, access.problem.message + describe_lane(access.problem.lane, pointers.shape))
    return access


def _check_writeable(op: Operation, ctx: ProgramContext, access: Access) -> None:
    for buffer, _, _ in access:
        if not buffer.flat.flags.writeable:
            raise ctx.error(op, f"writes {buffer.describe()}, which is read-only")


# --------------------------------------------------------------------------------------
# arith


@register_rule(arith.ConstantOp)
def constant_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    dtype = result_dtype(op, ctx)
    value = op.attributes["value"]
    if dtype.kind in "iu":
        bits = dtype.itemsize * 8
        scalar = np.array(int(value) & ((1 << bits) - 1), dtype=np.dtype(f"uint{bits}")).view(dtype)
    elif dtype.kind == "b":
        scalar = np.array(bool(value))
    else:
        scalar = np.array(value, dtype=dtype)
    shape = t.shape_of(op.results[0].type)
    return np.full(shape, scalar, dtype=dtype) if shape else scalar


def compare_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    return type(op).predicates[op.attributes["predicate"]](*operands)


register_rule(arith.CmpIOp, compare_rule)
register_rule(arith.CmpFOp, compare_rule)


@register_rule(arith.SelectOp)
def select_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    condition, if_true, if_false = operands
    return np.where(condition, if_true, if_false)


def division_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    """Integer division and remainder: a zero divisor is an error, not a NumPy warning."""
    _, divisor = operands
    zero = np.asarray(divisor == 0)
    if zero.any():
        where = ""
        if zero.ndim:
            first = tuple(int(i) for i in np.unravel_index(int(np.argmax(zero)), zero.shape))
            where = f" (at element {first[0] if len(first) == 1 else first} of the divisor)"
        raise ctx.error(op, f"integer division by zero{where}")
    semantics = _DIVISION_SEMANTICS.get(type(op), type(op).semantics)
    return semantics(*operands)


# Signed division wraps at run time (INT_MIN / -1 == INT_MIN, as GPUs compute it); the
# ops' own semantics refuse that case because folding must not assume a result.
def _signed_division(fn: Callable) -> Callable:
    def divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype == np.bool_:  # i1: true is -1; compute in 8 bits and keep the low bit
            result = fn(arith.widen_i1(a, True), arith.widen_i1(b, True))
            return (result & 1).astype(np.bool_)
        return fn(sem.as_signed(a), sem.as_signed(b))

    return divide


_DIVISION_SEMANTICS: dict[type, Callable] = {
    arith.DivSIOp: _signed_division(sem.trunc_div),
    arith.RemSIOp: _signed_division(sem.trunc_rem),
}

for _name in ("divsi", "divui", "remsi", "remui"):
    register_rule(arith.BINARY_OPS[_name], division_rule)

for _name in ("shli", "shrsi", "shrui"):
    UNDEFINED_RESULT_MESSAGES[arith.BINARY_OPS[_name]] = (
        "shifts by a negative amount or by at least the bit width, which is undefined")

def cast_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    """Casts through their ``semantics(a, dtype)``, shared with constant folding; casts
    from or to bf16 and the 8-bit floats see their bits (bitcast) or round once, from
    the exact source value (see :mod:`polytile.dialects.emulated_floats`)."""
    (value,) = operands
    source, target = emulated_of(op.operands[0].type), emulated_of(op.results[0].type)
    if source is not None or target is not None:
        if isinstance(op, arith.BitcastOp):
            return _bitcast_emulated(np.asarray(value), source, target, result_dtype(op, ctx))
        if target is not None and not isinstance(op, arith.ExtFOp):
            # To bf16 or fp8: computed exactly in f64, rounded once when the result is bound.
            return type(op).semantics(np.asarray(value), np.float64)
    result = type(op).semantics(np.asarray(value), result_dtype(op, ctx))
    if result is None:
        raise ctx.error(op, "converts NaN, infinity or a value out of the integer type's range to an integer, "
                                "which is undefined")
    return result


for _name in ("extsi", "extui", "trunci", "sitofp", "uitofp", "fptosi", "fptoui", "extf", "truncf", "bitcast"):
    register_rule(arith.CASTS[_name], cast_rule)


def _bitcast_emulated(value: np.ndarray, source: Any, target: Any, dtype: np.dtype) -> np.ndarray:
    """A bitcast with an emulated float on either side: through the bits memory holds."""
    bits = source.encode(value) if source is not None else value.view(f"u{value.dtype.itemsize}")
    return target.decode(bits) if target is not None else bits.view(dtype)


@register_rule(arith.PtrToIntOp)
def ptrtoint_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    return operands[0].astype(result_dtype(op, ctx))


@register_rule(arith.IntToPtrOp)
def inttoptr_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    return sem.as_unsigned(operands[0]).astype(np.int64)  # zero-extends, as LLVM does


# --------------------------------------------------------------------------------------
# tile: program ids, shapes, pointers


@register_rule(tile.ProgramIdOp)
def program_id_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    return np.asarray(ctx.program_id[op.attributes["axis"]], dtype=np.int32)


@register_rule(tile_clock.ReadClockOp)
def read_clock_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    # The virtual clock: 0, 1, 2... per program, whichever clock is read (deterministic).
    reading, ctx.clock = ctx.clock, ctx.clock + 1
    return np.asarray(reading, dtype=np.int64)


@register_rule(tile_clock.ProcessorIdOp)
def processor_id_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    return np.asarray(0, dtype=np.int32)


@register_rule(tile.NumProgramsOp)
def num_programs_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    return np.asarray(ctx.num_programs[op.attributes["axis"]], dtype=np.int32)


@register_rule(tile.ArangeOp)
def arange_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    return np.arange(op.attributes["start"], op.attributes["end"], dtype=np.int32)


@register_rule(tile.SplatOp)
def splat_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    return np.full(op.results[0].type.shape, operands[0], dtype=result_dtype(op, ctx))


@register_rule(tile.BroadcastOp)
def broadcast_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    return np.broadcast_to(operands[0], op.results[0].type.shape)


@register_rule(tile.ExpandDimsOp)
def expand_dims_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    return np.expand_dims(operands[0], op.attributes["axis"])


@register_rule(tile.ReshapeOp)
def reshape_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    return np.reshape(operands[0], op.results[0].type.shape)


@register_rule(tile.TransOp)
def trans_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    return np.transpose(operands[0], op.attributes["order"])


@register_rule(tile.AddPtrOp)
def addptr_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    pointer, offset = operands
    size = element_size(t.element_type(op.results[0].type).pointee)
    return pointer + offset.astype(np.int64) * np.int64(size)


# --------------------------------------------------------------------------------------
# tile: memory


@register_rule(tile.LoadOp)
def load_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    named = named_operands(op, operands)
    pointers, mask, other = named["ptr"], named["mask"], named["other"]
    _, element = _pointee(op, ctx, op.operands[0].type)
    access = locate(op, ctx, pointers, mask, element.itemsize)
    fill = 0 if other is None else other
    result = np.empty(pointers.shape, dtype=element.value)  # C order: flat below must be a view
    result[...] = np.asarray(fill).astype(element.value)
    flat = result.reshape(-1)
    for buffer, lanes, indices in access:
        flat[lanes] = element.read(buffer.view(element.storage)[indices])
    return result


@register_rule(tile.StoreOp)
def store_rule(op: Operation, operands: list, ctx: ProgramContext) -> None:
    named = named_operands(op, operands)
    pointers, value, mask = named["ptr"], named["value"], named["mask"]
    _, element = _pointee(op, ctx, op.operands[0].type)
    access = locate(op, ctx, pointers, mask, element.itemsize)
    _check_writeable(op, ctx, access)
    values = np.broadcast_to(np.asarray(value).astype(element.value), pointers.shape).reshape(-1)
    for buffer, lanes, indices in access:
        # Lanes storing to one address: NumPy keeps the last, the GPU keeps one of them.
        buffer.view(element.storage)[indices] = element.write(values[lanes])
    return None


def atomic_dtype(op: Operation, ctx: ProgramContext) -> np.dtype:
    """The dtype an atomic on ``op``'s pointer updates memory in; bf16 and the 8-bit
    floats are refused (the GPU backends have no atomics on them either)."""
    pointee, element = _pointee(op, ctx, op.operands[0].type)
    if element.emulated is not None:
        raise ctx.error(op, f"atomics on {pointee} are not supported", InterpreterUnsupportedError)
    return element.value


def _signed(fn: Callable) -> Callable:
    return lambda old, new: fn(sem.as_signed(old), sem.as_signed(new))


def _unsigned(fn: Callable) -> Callable:
    return lambda old, new: fn(sem.as_unsigned(old), sem.as_unsigned(new))


#: ``tile.atomic_rmw`` kinds: ``new memory = combine(old memory, value)``.
ATOMIC_COMBINE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "fadd": np.add,
    "max": _signed(np.maximum),
    "min": _signed(np.minimum),
    "umax": _unsigned(np.maximum),
    "umin": _unsigned(np.minimum),
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "xchg": lambda old, new: new,
}
_INTEGER_ONLY_KINDS = {"umax", "umin", "and", "or", "xor"}


def _atomic(op: Operation, ctx: ProgramContext, pointers: np.ndarray, mask: np.ndarray | None,
            combine: Callable, *values: np.ndarray) -> np.ndarray:
    """Serialize the active lanes' read-modify-writes; return the old values (0 where masked)."""
    dtype = atomic_dtype(op, ctx)
    access = locate(op, ctx, pointers, mask, dtype.itemsize)
    _check_writeable(op, ctx, access)
    flat_values = [np.broadcast_to(np.asarray(v).astype(dtype), pointers.shape).reshape(-1) for v in values]
    result = np.zeros(pointers.shape, dtype=dtype)
    flat = result.reshape(-1)

    def typed(*args: np.ndarray) -> np.ndarray:
        return np.asarray(combine(*args)).astype(dtype)

    for buffer, lanes, indices in access:
        flat[lanes] = serialized_update(buffer.view(dtype), indices, typed, *(v[lanes] for v in flat_values))
    return result


@register_rule(tile.AtomicRMWOp)
def atomic_rmw_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    named = named_operands(op, operands)
    kind = op.attributes["kind"]
    combine = ATOMIC_COMBINE.get(kind)
    if combine is None:
        raise ctx.error(op, f"atomic kind '{kind}' is not supported by the interpreter", InterpreterUnsupportedError)
    if kind in _INTEGER_ONLY_KINDS and not t.is_integer(op.operands[1].type):
        raise ctx.error(op, f"atomic '{kind}' needs integer values, got {op.operands[1].type}")
    return _atomic(op, ctx, named["ptr"], named["mask"], combine, named["value"])


def _cas(old: np.ndarray, compare: np.ndarray, new: np.ndarray) -> np.ndarray:
    if old.dtype.kind == "f":  # compare bits, as the hardware does
        bits = np.dtype(f"uint{old.dtype.itemsize * 8}")
        equal = old.view(bits) == compare.view(bits)
    else:
        equal = old == compare
    return np.where(equal, new, old)


@register_rule(tile.AtomicCASOp)
def atomic_cas_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    pointers, compare, value = operands
    return _atomic(op, ctx, pointers, None, _cas, compare, value)


# --------------------------------------------------------------------------------------
# tile: dot and reduce


@register_rule(tile.DotOp)
def dot_rule(op: Operation, operands: list, ctx: ProgramContext) -> np.ndarray:
    """``a @ b + acc``, accumulating in the accumulator's type (f32 for f16 accumulators)."""
    a, b, acc = operands
    work = acc.dtype
    if work.kind == "f" and work.itemsize < 4:
        work = np.dtype(np.float32)
    return np.matmul(a.astype(work), b.astype(work)) + acc.astype(work)


@register_rule(tile.ReduceOp)
def reduce_rule(op: Operation, operands: list, ctx: ProgramContext) -> list:
    """Combines neighbours pairwise (a tree, as GPUs reduce), running the combine region
    once per level on whole arrays of pairs, so it needs only associativity."""
    return tree_reduce(op.regions[0].blocks[0], operands, op.attributes["axis"], ctx.run_block)


def tree_reduce(block: Any, operands: list, axis: int, run_block: Callable) -> list:
    """Reduce ``operands`` along ``axis`` with the combine region ``block``."""
    values = [np.moveaxis(v, axis, 0) for v in operands]
    dtypes = [v.dtype for v in values]
    while values[0].shape[0] > 1:
        count = values[0].shape[0]
        pairs = count // 2
        left = [v[0:2 * pairs:2] for v in values]
        right = [v[1:2 * pairs:2] for v in values]
        combined = run_block(block, left + right)
        combined = [np.broadcast_to(as_value(c, d), left[0].shape) for c, d in zip(combined, dtypes)]
        if count % 2:
            combined = [np.concatenate([c, v[-1:]]) for c, v in zip(combined, values)]
        values = combined
    return [v[0, ...] for v in values]


# --------------------------------------------------------------------------------------
# Terminators


for _terminator in (scf.YieldOp, scf.ConditionOp, func.ReturnOp, tile.ReduceReturnOp):
    register_rule(_terminator, exit_rule)


# --------------------------------------------------------------------------------------
# scf


@register_rule(scf.ForOp)
def for_rule(op: Operation, operands: list, ctx: ProgramContext) -> list:
    lower, upper, step = (int(v) for v in operands[:3])
    carried = list(operands[3:])
    if step <= 0:
        raise ctx.error(op, f"has step {step}; the step of a loop must be positive")
    iv_dtype = operands[0].dtype
    block = op.regions[0].blocks[0]
    iv = lower
    while iv < upper:
        carried = ctx.run_block(block, [np.asarray(iv, dtype=iv_dtype)] + carried)
        iv += step
    return carried


def _run_region(op: Operation, index: int, arguments: list, ctx: ProgramContext) -> list:
    if index >= len(op.regions) or not op.regions[index].blocks:
        return []  # an absent else region
    return ctx.run_block(op.regions[index].blocks[0], arguments)


@register_rule(scf.IfOp)
def if_rule(op: Operation, operands: list, ctx: ProgramContext) -> list:
    return _run_region(op, 0 if bool(operands[0]) else 1, [], ctx)


@register_rule(scf.WhileOp)
def while_rule(op: Operation, operands: list, ctx: ProgramContext) -> list:
    arguments = list(operands)
    while True:
        condition, *passed = _run_region(op, 0, arguments, ctx)
        if not bool(condition):
            return passed
        arguments = _run_region(op, 1, passed, ctx)


# --------------------------------------------------------------------------------------
# func


@register_rule(func.CallOp)
def call_rule(op: Operation, operands: list, ctx: ProgramContext) -> list:
    name = op.attributes["callee"].name
    callee = ctx.lookup_function(name)
    if callee is None or callee.name != "func.func":
        raise ctx.error(op, f"calls '@{name}', which is not a function of the module")
    if not callee.regions or not callee.regions[0].blocks:
        raise ctx.error(op, f"calls '@{name}', which has no body", InterpreterUnsupportedError)
    return ctx.call_function(callee, operands)
