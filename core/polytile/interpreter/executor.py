"""The interpreter: runs a kernel of the core IR with NumPy.

Entry point: :func:`run_kernel`.  A kernel runs for a whole batch of programs at once
(:mod:`polytile.interpreter.batch`) when every op it reaches has a *batched rule* and
lockstep execution cannot deadlock it; otherwise it runs one program at a time.  This
module holds the per-program executor, the two rule tables and the launch.

Each op is executed by a *rule* looked up by the op's class in :data:`RULES` (one
program) or :data:`BATCHED_RULES` (a batch); ops that carry NumPy ``semantics`` and the
``Elementwise`` trait (most of ``arith`` and ``math``, and any plugin op defined the same
way) need neither.

Values
    Every SSA value is a NumPy array of the dtype of its IR type
    (:func:`polytile.dialects.semantics.numpy_dtype`): a 0-d array for a scalar, an array
    of the tile's shape for a tile.  Pointers are int64 byte addresses into a simulated
    flat address space (:mod:`polytile.interpreter.memory`).  bf16 and the 8-bit floats,
    which NumPy lacks, are float32 arrays holding the type's values: every result of
    such a type is rounded to it, and memory holds their bits
    (:mod:`polytile.dialects.emulated_floats`, :func:`memory_element`).

Rules
    A rule is ``rule(op, operands, ctx)``: ``operands`` are the NumPy values of
    ``op.operands`` in order, ``ctx`` is the :class:`ProgramContext` of the running
    program.  It returns the op's results: a list or tuple of values (one per result),
    or for an op with one result the value itself, or None for an op without results; a
    terminator returns :class:`BlockExit`.  Results are converted to their IR type's
    dtype (integers wrap).  Rules get program ids from ``ctx`` only, run nested regions with
    ``ctx.run_block`` and report problems with ``ctx.error``, so they do not depend on
    how the grid is walked.

Extending
    A plugin that adds an op gives the interpreter its meaning in one of two ways:

    * an elementwise op: define ``semantics`` (a static NumPy function of the operand
      arrays) and the ``Elementwise`` trait on the op class; nothing else is needed;
    * any other op: ``register_rule(MyOp, rule)``, typically from the plugin's
      ``polytile_register_dialects`` hook, next to registering the dialect.  A rule
      registered for a core op replaces the core's.  Kernels using the op then run one
      program at a time, unless the plugin also registers a batched rule
      (:func:`register_batched_rule`, contract in :mod:`polytile.interpreter.batch`).
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence

import numpy as np

from ..dialects import semantics as sem
from ..dialects.emulated_floats import EMULATED_FLOATS, EmulatedFloat
from ..errors import InterpreterArgumentError, InterpreterError, InterpreterUnsupportedError
from ..ir import types as t
from ..ir.opdef import Elementwise
from ..ir.operation import Block, Operation
from ..plugins.registry import CORE_OWNER
from ..plugins.tables import OwnedTable
from .memory import Memory


# --------------------------------------------------------------------------------------
# The rule table


Rule = Callable[[Operation, list, "ProgramContext"], Any]

#: Interpretation rules by op class.  Extend with :func:`register_rule`.  Each rule is
#: owned by who registered it: a plugin's rules leave with it, and a core rule it had
#: replaced comes back (:class:`~polytile.plugins.tables.OwnedTable`).
#: The core's rules are in the modules named here, imported on the table's first read.
RULES: OwnedTable[Rule] = OwnedTable("interpreter rule", providers=(
    "polytile.interpreter.rules",        # the core ops
    "polytile.interpreter.rules_shape",  # scans, join, split, cat
    "polytile.interpreter.rules_debug",  # print, assert, barrier
    "polytile.interpreter.rules_block",  # block pointers
))


def register_rule(op_class: type, rule: Rule | None = None):
    """Make ``rule(op, operands, ctx)`` interpret ops of ``op_class`` (see the module doc).

    Usable as a decorator: ``@register_rule(MyOp)``.  Registering again replaces the rule.
    """
    if not (isinstance(op_class, type) and issubclass(op_class, Operation)):
        raise TypeError(f"register_rule() needs an op class, got {op_class!r}")
    if rule is None:
        def decorator(fn: Rule) -> Rule:
            register_rule(op_class, fn)
            return fn
        return decorator
    # A new meaning of the op: a batched rule written for the old one no longer applies.
    # The owner's own is dropped; another owner's is ignored while this rule is in force
    # (batched_rule_for takes a batched rule only from the owner of the rule in force).
    RULES.add(op_class, rule)
    BATCHED_RULES.remove(op_class, RULES.owner_of(op_class))
    return rule


#: Batched rules by op class: ``rule(op, operands, ctx)`` with values for a batch of
#: programs (see :mod:`polytile.interpreter.batch`).  Extend with :func:`register_batched_rule`.
BATCHED_RULES: OwnedTable[Rule] = OwnedTable("batched interpreter rule", providers=(
    "polytile.interpreter.rules_batched",       # the core data ops
    "polytile.interpreter.rules_batched_flow",  # control flow, calls, debugging, block pointers
))


def register_batched_rule(op_class: type, rule: Rule | None = None):
    """Make ``rule(op, operands, ctx)`` interpret ops of ``op_class`` for a batch of
    programs, ``ctx`` being a :class:`~polytile.interpreter.batch.BatchContext`.

    Register it after the per-program rule (:func:`register_rule` drops the batched rule
    of the class it registers).  Usable as a decorator.
    """
    if not (isinstance(op_class, type) and issubclass(op_class, Operation)):
        raise TypeError(f"register_batched_rule() needs an op class, got {op_class!r}")
    if rule is None:
        def decorator(fn: Rule) -> Rule:
            register_batched_rule(op_class, fn)
            return fn
        return decorator
    BATCHED_RULES.add(op_class, rule)
    return rule


#: Rules found for classes not in RULES (through a base class, or elementwise semantics).
_DERIVED_RULES: dict[type, Rule] = {}
_DERIVED_BATCHED: dict[type, Rule | None] = {}
#: Bumped on every registration, so that cached execution plans are made again.
_RULES_VERSION = [0]


@RULES.on_change
@BATCHED_RULES.on_change
def _rules_changed() -> None:
    _DERIVED_RULES.clear()
    _DERIVED_BATCHED.clear()
    _RULES_VERSION[0] += 1


def rules_version() -> tuple[int, int, int]:
    """Changes whenever a rule table changes: a registration, or a plugin withdrawn."""
    return (_RULES_VERSION[0], RULES.version, BATCHED_RULES.version)


class BlockExit:
    """What a terminator's rule returns: the values it hands to the enclosing op."""

    __slots__ = ("values",)

    def __init__(self, values: Sequence[Any]):
        self.values = list(values)


def exit_rule(op: Operation, operands: list, ctx: Any) -> BlockExit:
    """The rule of terminators that hand their operands to the enclosing op (either mode)."""
    return BlockExit(operands)


#: Messages for elementwise ops whose ``semantics`` return None (undefined results).
UNDEFINED_RESULT_MESSAGES: dict[type, str] = {}


def elementwise_rule(op: Operation, operands: list, ctx: "ProgramContext") -> Any:
    """The rule of every op with ``semantics`` and the ``Elementwise`` trait."""
    result = type(op).semantics(*operands)
    if result is None:
        message = UNDEFINED_RESULT_MESSAGES.get(type(op), "has no defined result for these operands")
        raise ctx.error(op, message)
    return result


def rule_for(op: Operation) -> Rule:
    """The rule interpreting ``op``; raises :class:`InterpreterUnsupportedError` if none."""
    cls = type(op)
    rule = RULES.get(cls) or _DERIVED_RULES.get(cls)
    if rule is not None:
        return rule
    for base in cls.__mro__[1:]:
        rule = RULES.get(base)
        if rule is not None:
            break
    else:
        if getattr(cls, "semantics", None) is not None and cls.has_trait(Elementwise):
            rule = elementwise_rule
    if rule is not None:
        _DERIVED_RULES[cls] = rule
        return rule
    raise InterpreterUnsupportedError(
        "is not supported by the interpreter: no interpretation rule is registered for it "
        "(a plugin adds one with polytile.interpreter.register_rule)",
        op_name=op.name, location=op.location)


def batched_rule_for(op: Operation) -> Rule | None:
    """The batched rule of ``op``, or None: then kernels using it run program by program.

    A per-program rule registered for the class (or a nearer base class) without a
    batched one hides batched rules of base classes and the automatic elementwise rule:
    its meaning may differ from theirs.
    """
    cls = type(op)
    try:
        return _DERIVED_BATCHED[cls]
    except KeyError:
        pass
    rule: Rule | None = None
    for base in cls.__mro__:
        if base in RULES:
            # Over the core's per-program rule, the batched rule in force (a plugin's
            # speeds a core op up); over a plugin's, only that plugin's own batched rule.
            owner = RULES.owner_of(base)
            rule = BATCHED_RULES.get(base) if owner == CORE_OWNER else BATCHED_RULES.entry_of(base, owner)
            break
        if base in BATCHED_RULES:
            rule = BATCHED_RULES[base]
            break
    else:
        if getattr(cls, "semantics", None) is not None and cls.has_trait(Elementwise):
            from .batch import batched_elementwise_rule

            rule = batched_elementwise_rule
    _DERIVED_BATCHED[cls] = rule
    return rule


# --------------------------------------------------------------------------------------
# Values


def unsupported_type_message(type_: t.Type) -> str:
    element = t.element_type(type_)
    while isinstance(element, t.PointerType):
        element = element.pointee
    return f"type {element} is not supported by the interpreter yet (NumPy has no such dtype)"


_DTYPES: dict[t.Type, np.dtype | None] = {}
_OBJECT = np.dtype(object)


_EMULATED: dict[t.Type, EmulatedFloat | None] = {}


def emulated_of(type_: t.Type) -> EmulatedFloat | None:
    """The emulation of ``type_``'s elements when NumPy has no dtype for them (bf16, fp8)."""
    try:
        return _EMULATED[type_]
    except (KeyError, TypeError):
        pass
    element = t.element_type(type_)
    found = EMULATED_FLOATS.get(element.kind) if isinstance(element, t.FloatType) else None
    try:
        _EMULATED[type_] = found
    except TypeError:  # an unhashable plugin type
        pass
    return found


#: The dtype of an emulated type's values: float32, marked with the type's kind, so that
#: binding a result knows it must round without looking the type up (every op binds one).
_EMULATED_DTYPES = {kind: np.dtype(np.float32, metadata={"polytile_emulated": kind}) for kind in EMULATED_FLOATS}


def _numpy_dtype(type_: t.Type) -> np.dtype | None:
    dtype = sem.numpy_dtype(type_)
    if dtype is not None:
        return np.dtype(dtype)
    emulated = emulated_of(type_)
    return None if emulated is None else _EMULATED_DTYPES[emulated.name]


def dtype_of(type_: t.Type) -> np.dtype | None:
    """The NumPy dtype of ``type_``'s values (int64 for pointers; float32 for bf16 and
    the 8-bit floats, holding their values), or None for a type the interpreter lacks."""
    if isinstance(type_, t.BlockPointerType):
        return _OBJECT  # a block pointer is a Python object (rules_block.BlockPointer)
    try:
        return _DTYPES[type_]
    except KeyError:
        found = _DTYPES[type_] = _numpy_dtype(type_)
        return found
    except TypeError:  # an unhashable plugin type
        return _numpy_dtype(type_)


def as_value(value: Any, dtype: np.dtype) -> np.ndarray:
    """``value`` as an array of ``dtype`` (0-d for a scalar).  Integers wrap."""
    array = np.asarray(value)
    if array.dtype != dtype:
        array = array.astype(dtype)
    return array


def value_of(type_: t.Type, value: Any, dtype: np.dtype) -> np.ndarray:
    """``value`` as a value of ``type_`` (whose :func:`dtype_of` is ``dtype``): converted,
    and rounded to the type where it is emulated."""
    marked = dtype.metadata
    if marked is not None and "polytile_emulated" in marked:
        return EMULATED_FLOATS[marked["polytile_emulated"]].round(np.asarray(value))
    return as_value(value, dtype)


class MemoryElement:
    """How elements of one type sit in memory: ``storage``, the dtype of their bytes
    there, and ``value``, the dtype of the values loads give and stores take (the same,
    except for the emulated floats, whose bits are stored)."""

    __slots__ = ("value", "storage", "emulated")

    def __init__(self, value: np.dtype, storage: np.dtype, emulated: EmulatedFloat | None):
        self.value, self.storage, self.emulated = value, storage, emulated

    @property
    def itemsize(self) -> int:
        return self.storage.itemsize

    def read(self, stored: np.ndarray) -> np.ndarray:
        """Values from elements read from memory (a view of ``storage``)."""
        return stored if self.emulated is None else self.emulated.decode(stored)

    def write(self, values: np.ndarray) -> np.ndarray:
        """What memory holds for ``values`` (of ``value``)."""
        return values if self.emulated is None else self.emulated.encode(values)


_ELEMENTS: dict[t.Type, MemoryElement | None] = {}


def memory_element(type_: t.Type) -> MemoryElement | None:
    """How ``type_``'s elements are stored (None: a type the interpreter lacks)."""
    try:
        return _ELEMENTS[type_]
    except (KeyError, TypeError):
        pass
    dtype = dtype_of(type_)
    emulated = emulated_of(type_) if dtype is not None else None
    found = None if dtype is None else MemoryElement(dtype, emulated.storage if emulated else dtype, emulated)
    try:
        _ELEMENTS[type_] = found
    except TypeError:  # an unhashable plugin type
        pass
    return found


# --------------------------------------------------------------------------------------
# Execution


class ProgramContext:
    """What a rule may know about the running program and launch.

    ``program_id`` and ``num_programs`` are 3-tuples of ints; ``memory`` is the launch's
    :class:`~polytile.interpreter.memory.Memory`; ``bounds_check`` says whether accesses
    are checked.
    """

    __slots__ = ("interpreter", "program_id", "num_programs", "frames", "clock")

    def __init__(self, interpreter: "Interpreter", program_id: tuple[int, int, int], num_programs: tuple[int, int, int]):
        self.interpreter = interpreter
        self.program_id = program_id
        self.num_programs = num_programs
        #: One value environment per active function call; nested regions share their
        #: function's environment (SSA values are unique objects).
        self.frames: list[dict] = []
        #: The program's virtual clock (``tile.read_clock``): readings so far.
        self.clock = 0

    @property
    def kernel_name(self) -> str:
        return self.interpreter.kernel_name

    @property
    def memory(self) -> Memory:
        return self.interpreter.memory

    @property
    def bounds_check(self) -> bool:
        return self.interpreter.bounds_check

    def error(self, op: Operation | None, message: str, cls: type[InterpreterError] = InterpreterError) -> InterpreterError:
        """An error naming the kernel, this program, ``op`` and its source location."""
        return cls(message, kernel=self.kernel_name, op_name=None if op is None else op.name,
                   location=None if op is None else op.location, program_id=self.program_id)

    def run_block(self, block: Block, arguments: Sequence[Any]) -> list:
        """Run ``block`` (of a region nested in the running function) with ``arguments``
        bound to its arguments; return the values its terminator hands back."""
        return self.interpreter.run_block(block, arguments, self)

    def call_function(self, function: Operation, arguments: Sequence[Any]) -> list:
        """Run ``function`` (a ``func.func``) in a fresh environment; return its results."""
        self.frames.append({})
        try:
            return self.interpreter.run_block(function.regions[0].blocks[0], arguments, self)
        finally:
            self.frames.pop()

    def lookup_function(self, name: str) -> Operation | None:
        return self.interpreter.lookup_function(name)


class Interpreter:
    """Runs one kernel of a module over a memory; one instance per launch."""

    def __init__(self, module: Operation, kernel: Operation, memory: Memory, bounds_check: bool):
        self.module = module
        self.kernel = kernel
        self.kernel_name: str = kernel.attributes["sym_name"]
        self.memory = memory
        self.bounds_check = bounds_check

    def lookup_function(self, name: str) -> Operation | None:
        lookup = getattr(self.module, "lookup_symbol", None)
        return None if lookup is None else lookup(name)

    def run_program(self, arguments: Sequence[np.ndarray], program_id: tuple[int, int, int],
                    num_programs: tuple[int, int, int]) -> list:
        ctx = ProgramContext(self, program_id, num_programs)
        return ctx.call_function(self.kernel, arguments)

    def run_block(self, block: Block, arguments: Sequence[Any], ctx: ProgramContext) -> list:
        env = ctx.frames[-1]
        if len(arguments) != len(block.arguments):
            parent = block.parent.parent if block.parent is not None else None
            raise ctx.error(parent, f"internal error: region takes {len(block.arguments)} values, got {len(arguments)}")
        for argument, value in zip(block.arguments, arguments):
            env[argument] = value
        for op in block:
            try:
                operands = [env[v] for v in op._operands]
            except KeyError:
                raise ctx.error(op, "internal error: an operand is used before it is defined") from None
            try:
                result = rule_for(op)(op, operands, ctx)
            except InterpreterError as exc:
                if exc.kernel is None:  # raised without context (rule_for): add it
                    raise ctx.error(op, exc.message, type(exc)) from None
                raise
            except Exception as exc:
                raise ctx.error(op, f"failed in the interpreter: {type(exc).__name__}: {exc}") from exc
            if isinstance(result, BlockExit):
                return result.values
            results = op.results
            if results:
                self._bind_results(op, results, result, env, ctx)
        return []

    def _bind_results(self, op: Operation, results: tuple, result: Any, env: dict, ctx: ProgramContext) -> None:
        values = list(result) if isinstance(result, (list, tuple)) else [result]
        if len(values) != len(results):
            raise ctx.error(op, f"internal error: its rule returned {len(values)} values for {len(results)} results")
        for value_ir, value in zip(results, values):
            dtype = dtype_of(value_ir.type)
            if dtype is None:
                raise ctx.error(op, unsupported_type_message(value_ir.type), InterpreterUnsupportedError)
            env[value_ir] = value_of(value_ir.type, value, dtype)


# --------------------------------------------------------------------------------------
# Launching


def find_kernel(module: Operation, kernel_name: str) -> Operation:
    """The ``func.func`` named ``kernel_name`` in ``module``, which must be a kernel."""
    lookup = getattr(module, "lookup_symbol", None)
    if lookup is None:
        raise InterpreterArgumentError(f"expected a module, got {type(module).__name__}", kernel=kernel_name)
    function = lookup(kernel_name)
    if function is None or function.name != "func.func":
        kernels = [op.attributes["sym_name"] for op in module.regions[0].blocks[0]
                   if op.name == "func.func" and op.attributes.get("kernel")]
        known = ", ".join(f"'{k}'" for k in kernels) or "none"
        raise InterpreterArgumentError(f"the module has no function '@{kernel_name}' (its kernels: {known})",
                                       kernel=kernel_name)
    if not function.attributes.get("kernel"):
        raise InterpreterArgumentError(f"'@{kernel_name}' is not a kernel: it lacks the attribute 'kernel = true'",
                                       kernel=kernel_name)
    return function


def normalize_grid(kernel_name: str, grid: Any) -> tuple[int, int, int]:
    """``grid`` (an int, or a tuple of 1 to 3 non-negative ints) as a 3-tuple."""
    items = (grid,) if isinstance(grid, (int, np.integer)) and not isinstance(grid, bool) else grid
    try:
        items = tuple(items)
    except TypeError:
        items = None
    if (items is None or not 1 <= len(items) <= 3
            or any(isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 0 for g in items)):
        raise InterpreterArgumentError(f"the grid must be a tuple of 1 to 3 non-negative integers, got {grid!r}",
                                       kernel=kernel_name)
    padded = tuple(int(g) for g in items) + (1,) * (3 - len(items))
    return padded  # type: ignore[return-value]


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of {value.dtype} with shape {value.shape}"
    if isinstance(value, np.generic):
        return f"a NumPy {value.dtype} scalar {value!r}"
    return f"{type(value).__name__} {value!r}"


def parameter_names(kernel: Operation) -> list[str]:
    return [a.name_hint or f"#{i}" for i, a in enumerate(kernel.regions[0].blocks[0].arguments)]


def bind_arguments(kernel: Operation, args: Sequence[Any], memory: Memory) -> list[np.ndarray]:
    """Check ``args`` against the kernel's parameters and turn them into values:
    arrays for pointer parameters are added to ``memory`` and become their addresses."""
    name = kernel.attributes["sym_name"]
    params = kernel.regions[0].blocks[0].arguments
    names = parameter_names(kernel)
    if len(args) != len(params):
        signature = ", ".join(f"{n}: {p.type}" for n, p in zip(names, params))
        raise InterpreterArgumentError(f"takes {len(params)} arguments ({signature}), got {len(args)}", kernel=name)
    values = []
    for index, (param, arg_name, arg) in enumerate(zip(params, names, args)):
        def fail(expected: str, cls: type[InterpreterError] = InterpreterArgumentError) -> InterpreterError:
            return cls(f"argument '{arg_name}' (parameter {index}, of type {param.type}) expects {expected}, "
                       f"got {_describe(arg)}", kernel=name)

        values.append(_bind_one(param.type, arg, arg_name, memory, fail))
    return values


def _bind_one(type_: t.Type, arg: Any, arg_name: str, memory: Memory, fail: Callable[..., InterpreterError]) -> np.ndarray:
    if isinstance(type_, t.PointerType):
        pointee = type_.pointee
        dtype = None if isinstance(pointee, t.PointerType) else dtype_of(pointee)
        if dtype is None:
            what = "pointers to pointers are" if isinstance(pointee, t.PointerType) else f"type {pointee} is"
            raise fail(f"a NumPy array, but {what} not supported by the interpreter yet", InterpreterUnsupportedError)
        if arg is None:
            return np.asarray(0, dtype=np.int64)  # the null pointer
        emulated = emulated_of(pointee)
        if emulated is not None:
            # NumPy has no such dtype: an array of the type's bits, or of a NumPy extension
            # dtype of that name and size (ml_dtypes' bfloat16, float8_e4m3fn, ...).
            wanted = f"a NumPy array of {pointee}'s bits ({emulated.storage})"
            if not isinstance(arg, np.ndarray):
                raise fail(wanted)
            if arg.dtype.itemsize != emulated.storage.itemsize or arg.dtype.kind not in "uiV":
                raise fail(f"{wanted}, or one viewed as {pointee} with polytile.reinterpret")
            dtype = arg.dtype
        if not isinstance(arg, np.ndarray):
            raise fail(f"a NumPy array of {dtype}")
        if arg.dtype != dtype:
            raise fail(f"a NumPy array of {dtype} (the interpreter maps {type_} to {dtype})")
        try:
            return np.asarray(memory.add(arg, arg_name), dtype=np.int64)
        except ValueError as exc:
            raise fail(f"a NumPy array of {dtype} whose strides are whole elements ({exc})") from None
    if isinstance(type_, t.IntType):
        dtype = dtype_of(type_)
        if type_ == t.i1:
            if isinstance(arg, (bool, np.bool_)) or (isinstance(arg, (int, np.integer)) and arg in (0, 1)):
                return np.asarray(bool(arg))
            raise fail("a bool")
        if isinstance(arg, (bool, np.bool_)) or not isinstance(arg, (int, np.integer)):
            raise fail(f"an integer scalar ({type_})")
        lo = -(1 << (type_.width - 1)) if type_.signed else 0
        hi = (1 << (type_.width - 1)) - 1 if type_.signed else (1 << type_.width) - 1
        if not lo <= int(arg) <= hi:
            raise fail(f"an integer in [{lo}, {hi}]")
        return np.asarray(int(arg), dtype=dtype)
    if isinstance(type_, t.FloatType):
        dtype = dtype_of(type_)
        if dtype is None:
            raise fail(f"a float, but type {type_} is not supported by the interpreter yet", InterpreterUnsupportedError)
        if isinstance(arg, (bool, np.bool_)) or not isinstance(arg, (int, float, np.integer, np.floating)):
            raise fail(f"a float scalar ({type_})")
        return value_of(type_, np.float64(arg), dtype)
    raise fail("a value the interpreter can pass, but parameters of this type are not supported yet",
               InterpreterUnsupportedError)


MODES = ("auto", "per_program")


def run_kernel(module: Operation, kernel_name: str, grid: Any, args: Sequence[Any], *,
               bounds_check: bool = True, mode: str | None = None, batch_elements: int | None = None) -> None:
    """Run kernel ``kernel_name`` of ``module`` once per program of ``grid``.

    :param module: a parsed or built ``builtin.module`` holding the kernel (and any
        ``noinline`` functions it calls).
    :param grid: the number of programs along each axis: an int or a tuple of 1 to 3
        ints.  Programs are numbered axis 0 fastest; batches and the per-program loop
        take them in that order.
    :param args: one per kernel parameter: a NumPy array for a pointer parameter (its
        dtype must match the pointee: ``ptr<f32>`` takes float32; the kernel writes it in
        place; None passes the null pointer), a Python or NumPy scalar for a scalar
        parameter (it must fit the type).
    :param bounds_check: report an access outside its array (or misaligned) as an
        :class:`InterpreterError`.  Without, such lanes are skipped as if masked off.
    :param mode: ``"auto"`` runs whole batches of programs at once when the kernel
        allows (see :func:`polytile.interpreter.batch.plan_kernel`), ``"per_program"``
        one program after the other.  Default: the setting ``interpreter_mode``.
    :param batch_elements: at most this many tile elements per value in one batch
        (programs per batch = this / the kernel's largest tile).  Default: the setting
        ``interpreter_batch_elements``.
    :raises InterpreterArgumentError: an argument or the grid does not fit.
    :raises InterpreterUnsupportedError: an op or type the interpreter cannot run.
    :raises InterpreterError: the kernel went wrong (naming the op, its source location
        and the program).
    """
    kernel = find_kernel(module, kernel_name)
    num_programs = normalize_grid(kernel_name, grid)
    if mode is None or batch_elements is None:
        from .. import config

        mode = config.get("interpreter_mode") if mode is None else mode
        batch_elements = config.get("interpreter_batch_elements") if batch_elements is None else batch_elements
    if mode not in MODES:
        raise InterpreterArgumentError(f"mode must be one of {', '.join(map(repr, MODES))}, got {mode!r}",
                                       kernel=kernel_name)
    if isinstance(batch_elements, bool) or not isinstance(batch_elements, (int, np.integer)) or batch_elements < 1:
        raise InterpreterArgumentError(f"batch_elements must be a positive integer, got {batch_elements!r}",
                                       kernel=kernel_name)
    memory = Memory()
    values = bind_arguments(kernel, list(args), memory)
    interpreter = Interpreter(module, kernel, memory, bool(bounds_check))
    nx, ny, nz = num_programs
    with np.errstate(all="ignore"):
        if mode == "auto" and nx * ny * nz > 1:
            from .batch import plan_kernel, run_batched

            plan = plan_kernel(module, kernel)
            if plan.batched:
                run_batched(interpreter, values, num_programs, max(1, int(batch_elements) // plan.tile_elements))
                return
        for z, y, x in itertools.product(range(nz), range(ny), range(nx)):
            interpreter.run_program(values, (x, y, z), num_programs)

