"""Whole-grid execution: one pass over the kernel for a batch of programs.

Values
    A value in a batch is either *uniform*, an array of its IR shape, the same for every
    program of the batch (constants, ``arange``, scalar arguments, values computed from
    those only), or *batched*, an array of shape ``(P,) + IR shape`` whose row ``i``
    belongs to program ``i`` of the batch.  :func:`is_batched` tells them apart by
    ``ndim`` against the IR type's rank.  Operands of an elementwise op have one IR shape,
    so NumPy broadcasting mixes uniform and batched operands correctly and every op with
    ``semantics`` and the ``Elementwise`` trait runs batched with no rule of its own.

Batched rules
    ``rule(op, operands, ctx)`` with ``ctx`` a :class:`BatchContext`; it returns results
    as a per-program rule does, each uniform or batched.  A rule must honour the batch
    axis (an op's ``axis`` attribute is ``axis + 1`` on a batched value), must not
    broadcast a value to another shape than ``IR shape`` or ``(P,) + IR shape`` (the
    executor checks), reports problems with ``ctx.error(op, message, lane=i)`` naming
    the program at row ``i``, and runs nested regions with ``ctx.run_block`` (same
    programs) or on ``ctx.subset(rows).run_block`` (some of them).  A per-program rule
    may serve as the batched rule when it only broadcasts its operands elementwise.

Errors
    An error in a pure op (no regions, no writes) that a rule raised without saying which
    program failed is pinned down by running the op's per-program rule program after
    program: the message is then exactly the one the per-program loop gives.

Order
    A batch runs the kernel's ops in lockstep: op ``k`` of every program before op
    ``k + 1``.  Lanes of one load, store or atomic are taken program after program, so a
    batched atomic returns what a sequential run in program order returns.
    ``device_print`` lines are kept per program and printed in program order when the
    batch ends.
"""

from __future__ import annotations

import sys
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..ir import types as t
from ..ir.opdef import Pure, ReadsMemory
from ..ir.operation import Block, Operation
from ..plugins.tables import OwnedTable
from .executor import (
    BlockExit,
    Interpreter,
    InterpreterError,
    InterpreterUnsupportedError,
    ProgramContext,
    batched_rule_for,
    dtype_of,
    elementwise_rule,
    _rules_changed,
    rules_version,
    unsupported_type_message,
    value_of,
)
from .memory import Access, Memory
from .rules import describe_lane

# --------------------------------------------------------------------------------------
# Uniform and batched values


def rank(type_: t.Type) -> int:
    """The number of dimensions of a value of ``type_`` in one program (0 for scalars and
    block pointers)."""
    return len(type_.shape) if isinstance(type_, t.TileType) else 0


def is_batched(value: Any, type_: t.Type) -> bool:
    """Whether ``value`` (of IR type ``type_``) holds one row per program of the batch."""
    return np.ndim(value) > rank(type_)


def lift(value: np.ndarray, type_: t.Type, size: int) -> np.ndarray:
    """``value`` as a batched value of ``size`` programs (a read-only view if uniform)."""
    if is_batched(value, type_):
        return value
    value = np.asarray(value)
    return np.broadcast_to(value, (size,) + value.shape)


def row(value: np.ndarray, type_: t.Type, lane: int) -> np.ndarray:
    """Program ``lane``'s value."""
    return value[lane] if is_batched(value, type_) else value


def align(value: np.ndarray, type_: t.Type, to_rank: int) -> np.ndarray:
    """A batched ``value`` of lower rank than its op's result (a scalar condition of a
    tile ``select``) with axes of size 1 after the batch axis, so it broadcasts per
    program; anything else unchanged."""
    own = rank(type_)
    if own >= to_rank or np.ndim(value) <= own:
        return value
    lead = np.ndim(value) - own
    return value.reshape(value.shape[:lead] + (1,) * (to_rank - own) + value.shape[lead:])


def merge(size: int, parts: Sequence[tuple[np.ndarray, Any]], type_: t.Type) -> np.ndarray:
    """One batched value from the values of disjoint sets of rows (``parts``: rows, value)."""
    dtype = dtype_of(type_)
    out = np.empty((size,) + t.shape_of(type_), dtype=dtype)
    for rows, value in parts:
        out[rows] = value
    return out


def batched_elementwise_rule(op: Operation, operands: list, ctx: "BatchContext") -> Any:
    """The batched rule of every op with ``semantics`` and the ``Elementwise`` trait."""
    return elementwise_rule(op, align_operands(op, operands), ctx)


def align_operands(op: Operation, operands: list) -> list:
    to_rank = max((rank(r.type) for r in op.results), default=0)
    return [align(v, value.type, to_rank) for v, value in zip(operands, op._operands)]


def elementwise(rule: Callable) -> Callable:
    """A per-program rule that only combines its operands elementwise, as a batched rule."""
    def batched(op: Operation, operands: list, ctx: "BatchContext") -> Any:
        return rule(op, align_operands(op, operands), ctx)

    batched.__doc__ = f"Batched form of {rule.__name__}: operands aligned on the batch axis."
    return batched


def any_batched(op: Operation, operands: list) -> bool:
    return any(is_batched(v, value.type) for v, value in zip(operands, op._operands))


def uniform_or(per_program: Callable) -> Callable:
    """Register-time helper: the per-program rule when no operand is batched, else the
    decorated batched rule."""
    def decorate(batched: Callable) -> Callable:
        def rule(op: Operation, operands: list, ctx: BatchContext) -> Any:
            if not any_batched(op, operands):
                return per_program(op, operands, ctx)
            return batched(op, operands, ctx)

        rule.__doc__ = batched.__doc__
        rule.__name__ = batched.__name__
        return rule

    return decorate



def locate_batched(op: Operation, ctx: BatchContext, pointers: np.ndarray, mask: np.ndarray | None,
                   itemsize: int) -> Access:
    """Where the active lanes of a batched tile of ``pointers`` go, lanes numbered
    program after program; a bad lane is reported for its program and element."""
    flat = pointers.reshape(-1)
    if mask is None:
        lanes = np.arange(flat.size)
    else:
        lanes = np.flatnonzero(np.broadcast_to(mask, pointers.shape))
    access = ctx.memory.locate(flat[lanes], itemsize, lanes, ctx.bounds_check)
    if access.problem is not None:
        shape = pointers.shape[1:]
        per_program = max(int(np.prod(shape, dtype=np.int64)), 1)
        lane, element = divmod(access.problem.lane, per_program)
        raise ctx.error(op, access.problem.message + describe_lane(element, shape), lane=lane)
    return access


# --------------------------------------------------------------------------------------
# Environments and contexts


class SubEnv(dict):
    """The values seen by a subset of a batch: values defined outside the region that is
    running are taken from the parent environment on first use, restricted to the rows
    of the subset."""

    __slots__ = ("parent", "rows")

    def __init__(self, parent: dict, rows: np.ndarray):
        super().__init__()
        self.parent = parent
        self.rows = rows

    def __missing__(self, key: Any) -> Any:
        value = self.parent[key]
        if is_batched(value, key.type):
            value = value[self.rows]
        self[key] = value
        return value


class BatchRun:
    """What the batches of one launch share: the interpreter and the print buffer."""

    def __init__(self, interpreter: Interpreter, num_programs: tuple[int, int, int]):
        self.interpreter = interpreter
        self.num_programs = num_programs
        self.printed: dict[int, list[str]] = {}
        #: Each program's virtual clock (``tile.read_clock``): readings so far, by program id.
        self.clocks: dict[tuple, int] = {}

    def emit(self, lane: int, text: str) -> None:
        self.printed.setdefault(lane, []).append(text)

    def flush(self, upto: int | None = None) -> None:
        """Print the kept lines of programs ``<= upto`` (chunk lanes), in program order."""
        lanes = sorted(lane for lane in self.printed if upto is None or lane <= upto)
        if lanes:
            print("\n".join("\n".join(self.printed[lane]) for lane in lanes), file=sys.stdout, flush=True)
        self.printed.clear()


class BatchContext:
    """What a batched rule may know about the programs it runs for.

    ``size`` programs; ``program_ids`` is an int64 array of shape ``(size, 3)``;
    ``lanes[i]`` is row ``i``'s position in the launch's current chunk (for output
    ordering).  ``num_programs``, ``memory``, ``bounds_check`` and ``kernel_name`` are as
    in :class:`~polytile.interpreter.executor.ProgramContext`.  ``strict`` is False
    inside reduce and scan combine regions, whose values carry extra axes.
    """

    __slots__ = ("run", "env", "program_ids", "lanes", "strict")

    def __init__(self, run: BatchRun, env: dict, program_ids: np.ndarray, lanes: np.ndarray, strict: bool = True):
        self.run = run
        self.env = env
        self.program_ids = program_ids
        self.lanes = lanes
        self.strict = strict

    @property
    def size(self) -> int:
        return len(self.program_ids)

    @property
    def num_programs(self) -> tuple[int, int, int]:
        return self.run.num_programs

    @property
    def kernel_name(self) -> str:
        return self.run.interpreter.kernel_name

    @property
    def memory(self) -> Memory:
        return self.run.interpreter.memory

    @property
    def bounds_check(self) -> bool:
        return self.run.interpreter.bounds_check

    def program_id_of(self, lane: int) -> tuple[int, int, int]:
        return tuple(int(i) for i in self.program_ids[lane])  # type: ignore[return-value]

    def error(self, op: Operation | None, message: str, cls: type[InterpreterError] = InterpreterError, *,
              lane: int | None = None) -> InterpreterError:
        """An error naming the kernel, program ``lane`` of the batch, ``op`` and its
        location.  Without ``lane`` it names the first program, and the executor tries to
        find the program at fault (see the module doc)."""
        error = cls(message, kernel=self.kernel_name, op_name=None if op is None else op.name,
                    location=None if op is None else op.location, program_id=self.program_id_of(lane or 0))
        error._batch_pinned = lane is not None  # type: ignore[attr-defined]
        return error

    def run_block(self, block: Block, arguments: Sequence[Any]) -> list:
        """Run ``block`` for this batch's programs; return its terminator's values."""
        return run_block(block, arguments, self)

    def subset(self, rows: np.ndarray) -> "BatchContext":
        """A context for the programs at ``rows`` (ascending) of this batch."""
        return BatchContext(self.run, SubEnv(self.env, rows), self.program_ids[rows], self.lanes[rows], self.strict)

    def combine_context(self) -> "BatchContext":
        """A context for running a reduce or scan combine region on arrays of pairs."""
        return BatchContext(self.run, self.env, self.program_ids, self.lanes, strict=False)

    def call_function(self, function: Operation, arguments: Sequence[Any]) -> list:
        """Run ``function`` (a ``func.func``) for this batch in a fresh environment."""
        callee = BatchContext(self.run, {}, self.program_ids, self.lanes, self.strict)
        return run_block(function.regions[0].blocks[0], arguments, callee)

    def lookup_function(self, name: str) -> Operation | None:
        return self.run.interpreter.lookup_function(name)


# --------------------------------------------------------------------------------------
# Running a block for a batch


def run_block(block: Block, arguments: Sequence[Any], ctx: BatchContext) -> list:
    env = ctx.env
    if len(arguments) != len(block.arguments):
        parent = block.parent.parent if block.parent is not None else None
        raise ctx.error(parent, f"internal error: region takes {len(block.arguments)} values, got {len(arguments)}",
                        lane=0)
    for argument, value in zip(block.arguments, arguments):
        env[argument] = value
    for op in block:
        try:
            operands = [env[v] for v in op._operands]
        except KeyError:
            raise ctx.error(op, "internal error: an operand is used before it is defined", lane=0) from None
        rule = batched_rule_for(op)
        if rule is None:  # the plan saw a rule that has been removed since
            raise ctx.error(op, "has no batched rule any more; run with interpreter_mode='per_program'",
                            InterpreterUnsupportedError, lane=0)
        try:
            result = rule(op, operands, ctx)
        except InterpreterError as exc:
            if exc.kernel is not None and getattr(exc, "_batch_pinned", True):
                raise
            raise _pin(op, operands, ctx, exc) from None
        except Exception as exc:
            raise _pin(op, operands, ctx, exc) from exc
        if isinstance(result, BlockExit):
            return result.values
        if op.results:
            _bind_results(op, result, env, ctx)
    return []


def _bind_results(op: Operation, result: Any, env: dict, ctx: BatchContext) -> None:
    results = op.results
    values = list(result) if isinstance(result, (list, tuple)) else [result]
    if len(values) != len(results):
        raise ctx.error(op, f"internal error: its rule returned {len(values)} values for {len(results)} results",
                        lane=0)
    for value_ir, value in zip(results, values):
        type_ = value_ir.type
        dtype = dtype_of(type_)
        if dtype is None:
            raise ctx.error(op, unsupported_type_message(type_), InterpreterUnsupportedError, lane=0)
        array = value_of(type_, value, dtype)
        if ctx.strict:
            shape = t.shape_of(type_)
            if array.shape != shape and array.shape != (ctx.size,) + shape:
                raise ctx.error(op, f"internal error: its batched rule gave an array of shape {array.shape} for "
                                    f"{type_} in a batch of {ctx.size} programs", lane=0)
        env[value_ir] = array


def _replayable(op: Operation) -> bool:
    cls = type(op)
    return not op.regions and (cls.has_trait(Pure) or cls.has_trait(ReadsMemory))


def _pin(op: Operation, operands: list, ctx: BatchContext, exc: Exception) -> InterpreterError:
    """The error ``exc`` of ``op``, naming the program at fault: found by running the
    per-program rule program after program when the op is pure, else the first program."""
    types = [v.type for v in op._operands]
    if ctx.strict and _replayable(op) and any(is_batched(v, ty) for v, ty in zip(operands, types)):
        from .executor import rule_for

        rule = rule_for(op)
        for lane in range(ctx.size):
            single = ProgramContext(ctx.run.interpreter, ctx.program_id_of(lane), ctx.num_programs)
            try:
                rule(op, [row(v, ty, lane) for v, ty in zip(operands, types)], single)
            except InterpreterError as found:
                if found.kernel is None:
                    found = single.error(op, found.message, type(found))
                found._batch_pinned = True  # type: ignore[attr-defined]
                return found
            except Exception as found:
                error = single.error(op, f"failed in the interpreter: {type(found).__name__}: {found}")
                error._batch_pinned = True  # type: ignore[attr-defined]
                return error
    if isinstance(exc, InterpreterError):
        error = ctx.error(op, exc.message, type(exc), lane=0) if exc.kernel is None else exc
    else:
        error = ctx.error(op, f"failed in the interpreter: {type(exc).__name__}: {exc}", lane=0)
    error._batch_pinned = True  # type: ignore[attr-defined]
    return error


# --------------------------------------------------------------------------------------
# Planning: batched or per program


@dataclass(frozen=True)
class ExecutionPlan:
    """How the interpreter runs a kernel: ``batched`` or not (then ``reason`` says why),
    and the largest number of elements of any tile the kernel holds."""

    batched: bool
    reason: str
    tile_elements: int


#: Ops that can wait for another program inside a loop (spin locks, flags), so that
#: lockstep execution could deadlock: ``class -> predicate(op)``.  Plugins may add theirs.
#: The core's entries of these three tables are in :mod:`.rules_batched_flow`.
_CORE_FLOW_RULES = ("polytile.interpreter.rules_batched_flow",)
WAITS_ON_OTHER_PROGRAMS: OwnedTable[Callable[[Operation], bool]] = OwnedTable("waiting op", _CORE_FLOW_RULES)

class _OwnedSet(OwnedTable[bool]):
    """An owned set of op classes: ``add(cls)``, ``cls in table``."""

    def add(self, name: Any, obj: bool = True, owner: Any = None) -> bool:  # type: ignore[override]
        return super().add(name, obj, owner)


#: Loops that run until memory says otherwise: ``class``.  A loop of these classes
#: holding an op of WAITS_ON_OTHER_PROGRAMS makes its kernel run program by program.
UNBOUNDED_LOOPS: OwnedTable[bool] = _OwnedSet("unbounded loop", _CORE_FLOW_RULES)

#: How to find the function a call op calls: ``class -> callee symbol name``.
CALLEES: OwnedTable[Callable[[Operation], str]] = OwnedTable("call op", _CORE_FLOW_RULES)
# A change to these tables (a plugin withdrawn, say) makes the cached plans again.
for _table in (WAITS_ON_OTHER_PROGRAMS, UNBOUNDED_LOOPS, CALLEES):
    _table.on_change(_rules_changed)

_PLANS: "weakref.WeakKeyDictionary[Operation, tuple[Any, ExecutionPlan]]" = weakref.WeakKeyDictionary()


def plan_kernel(module: Operation, kernel: Operation) -> ExecutionPlan:
    """Decide, once per kernel (and rule tables), whether it runs batched.

    It runs program by program when it, or a function it calls, has an op without a
    batched rule, or a loop of :data:`UNBOUNDED_LOOPS` holding an op of
    :data:`WAITS_ON_OTHER_PROGRAMS` (an atomic, a volatile load): in lockstep, a program
    spinning on a lock that a program of the same batch would release later never ends.
    """
    version = rules_version()
    found = _PLANS.get(kernel)
    if found is not None and found[0] == version:
        return found[1]
    plan = _make_plan(module, kernel)
    _PLANS[kernel] = (version, plan)
    return plan


def _functions(module: Operation, root: Operation) -> list[Operation]:
    """``root`` and every function it calls, directly or not."""
    lookup = getattr(module, "lookup_symbol", None)
    seen, todo = [root], [root]
    while todo:
        for op in todo.pop().walk():
            callee_of = CALLEES.get(type(op))
            if callee_of is None or lookup is None:
                continue
            callee = lookup(callee_of(op))
            if callee is not None and all(callee is not s for s in seen):
                seen.append(callee)
                todo.append(callee)
    return seen


def _make_plan(module: Operation, kernel: Operation) -> ExecutionPlan:
    largest = 1
    for function in _functions(module, kernel):
        for op in function.walk():
            if op is not function and batched_rule_for(op) is None:
                return ExecutionPlan(False, f"'{op.name}' (at {op.location}) has no batched rule", largest)
            for result in op.results:
                type_ = result.type
                shape = type_.tile.shape if isinstance(type_, t.BlockPointerType) else t.shape_of(type_)
                largest = max(largest, int(np.prod(shape, dtype=np.int64)))
            if type(op) in UNBOUNDED_LOOPS:
                for inner in _functions(module, op):
                    for nested in inner.walk():
                        waits = WAITS_ON_OTHER_PROGRAMS.get(type(nested))
                        if waits is not None and waits(nested):
                            return ExecutionPlan(
                                False, f"'{op.name}' (at {op.location}) holds '{nested.name}' (at {nested.location}), "
                                       "which may wait for another program", largest)
    return ExecutionPlan(True, "", largest)


# --------------------------------------------------------------------------------------
# Launching in batches


def run_batched(interpreter: Interpreter, arguments: list, num_programs: tuple[int, int, int], chunk: int) -> None:
    """Run every program of the grid, ``chunk`` programs at a time in program order."""
    nx, ny, nz = num_programs
    total = nx * ny * nz
    run = BatchRun(interpreter, num_programs)
    for start in range(0, total, chunk):
        linear = np.arange(start, min(start + chunk, total), dtype=np.int64)
        ids = np.stack([linear % nx, (linear // nx) % ny, linear // (nx * ny)], axis=1)
        ctx = BatchContext(run, {}, ids, np.arange(linear.size))
        try:
            ctx.call_function(interpreter.kernel, arguments)
        except InterpreterError as exc:
            failed = exc.program_id
            upto = None if failed is None else (failed[2] * ny + failed[1]) * nx + failed[0] - start
            run.flush(upto)
            raise
        run.flush()
