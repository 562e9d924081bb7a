"""Which pointer arguments of a kernel may be written.

The autotuner runs a kernel several times on the user's buffers; a kernel that writes
(or accumulates into) an argument would see the previous trial's result.  This analysis
tells it which arguments to save and restore, without the user listing them.

It is a *may* analysis: an argument it does not report is never written; one it reports
may be.  Every value gets the set of *origins* it may derive from (a kernel parameter's
index, or :data:`UNKNOWN`).  Origins flow through every op (pointer arithmetic, splat,
broadcast, select, casts, block pointers, ptrtoint/inttoptr round trips), through
loop-carried values and region results, and across ``func.call`` into noinline
functions through a per-function summary.  A write (``tile.store``, ``tile.atomic_rmw``,
``tile.atomic_cas``, or any op the IR does not know to be free of writes) through a
pointer marks its origins.  A pointer of unknown origin (``inttoptr`` of an integer that
is not derived from a pointer, a pointer loaded from memory) could point anywhere, so a
write through it marks every pointer argument.

Plugins describe their ops' effects with :func:`register_mutation_effects`: besides
plain writes through a pointer (:class:`Writes`), an op may *record* an address in
memory (:class:`Records`: a TMA tensor map created in a workspace at ``W`` for the
array ``A``) and another may write through the address recorded at a location
(:class:`WritesRecorded`: a store through the tensor map at ``W``).  A location is the
origins of its pointer and its byte offset from them: a constant where the pointer is
a parameter plus constants (``W + 128`` computed anywhere, in the kernel or a helper it
calls), else the expression that computes it.  A write through a location marks what
was recorded at the same location; where a record may or may not be at that location
(offsets the analysis cannot compare) it counts too, and where nothing was recorded
there every pointer argument does.  :func:`mutation_report` says why, for each such
decision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..ir import types as t
from ..ir.opdef import Pure, ReadsMemory, Terminator
from ..plugins.tables import OwnedTable

#: The origin of a pointer the analysis cannot trace to a parameter.
UNKNOWN = "?"

#: Ops that write memory through their first operand.
WRITE_OPS = frozenset({"tile.store", "tile.atomic_rmw", "tile.atomic_cas"})

#: Ops whose results are values read from memory: they carry no origin of their operands
#: (a loaded pointer is of unknown origin, a loaded number of none).
_LOAD_OPS = frozenset({"tile.load", "tile.atomic_rmw", "tile.atomic_cas"})

#: Ops known to write nothing even though they are neither Pure nor ReadsMemory.
#: Casts: the integer operand of inttoptr is the address.
_CASTS = frozenset({"arith.inttoptr", "arith.bitcast"})

_NO_WRITE_OPS = frozenset({"func.return", "func.call", "func.func", "scf.yield", "scf.condition", "scf.for",
                           "scf.if", "scf.while", "tile.reduce_return", "builtin.module"})


@dataclass(frozen=True)
class Writes:
    """The op writes memory through ``pointer``."""

    pointer: Any


@dataclass(frozen=True)
class Records:
    """The op stores the address ``pointer`` in memory at ``location`` (a pointer)."""

    location: Any
    pointer: Any


@dataclass(frozen=True)
class WritesRecorded:
    """The op writes memory through the address recorded at ``location``."""

    location: Any


#: Op class -> ``fn(op) -> [Writes | Records | WritesRecorded, ...]``: what a plugin's op
#: does to memory, in place of the default (an op of no known effect may write through
#: every pointer it takes).  Each entry owned by who registered it.
MUTATION_EFFECTS: OwnedTable[Callable[[Any], list]] = OwnedTable("mutation effects")


def register_mutation_effects(*op_classes: type) -> Callable[[Callable[[Any], list]], Callable[[Any], list]]:
    """Decorator: ``@register_mutation_effects(MyOp)`` says what ``MyOp`` writes (see
    the module docstring)."""
    def register(fn: Callable[[Any], list]) -> Callable[[Any], list]:
        for cls in op_classes:
            MUTATION_EFFECTS.add(cls, fn)
        return fn
    return register


#: A location: the origins of a pointer and its byte offset from them (an int, or a
#: hashable key of the expression that computes it).
Location = tuple


@dataclass
class Summary:
    """What one function may do, in terms of its own parameters (indices) and UNKNOWN:
    the origins of each pointer it may write through (an empty set: a pointer made
    from nothing traceable), the origins of what it returns, the addresses it records
    (``(location, pointer origins, where)``) and the writes through recorded addresses
    (``(location, where)``)."""

    writes: set = field(default_factory=set)
    returns: set = field(default_factory=set)
    records: list = field(default_factory=list)
    recorded_writes: list = field(default_factory=list)


@dataclass
class MutationReport:
    """Which pointer arguments a kernel may write, and why where it is not plain: each
    write through a recorded address (what it found recorded there) and each decision
    the analysis could not make exactly."""

    written: list
    reasons: list

    def __str__(self) -> str:
        lines = [f"written: {', '.join(self.written) or 'nothing'}"]
        lines += [f"- {reason}" for reason in self.reasons]
        return "\n".join(lines)


def mutated_arguments(module: Any, kernel: Any = None) -> list[str]:
    """Names of the pointer parameters of ``kernel`` (the ``func.func`` with ``kernel =
    true`` in ``module`` when not given) that the kernel may write, in parameter order."""
    return mutation_report(module, kernel).written


def mutation_report(module: Any, kernel: Any = None) -> MutationReport:
    """:func:`mutated_arguments` with the reasons behind what is not a plain write."""
    kernel = kernel if kernel is not None else find_kernel(module)
    # Only pointer parameters are origins here: an address made from an integer
    # argument alone (inttoptr) has no origin, so could be any buffer.
    summary = _Analyzer(module).summary(kernel, pointers_only=True)
    names = argument_names(kernel)
    pointers = [i for i, arg in enumerate(kernel.arguments) if _is_pointer_like(arg.type)]
    reasons: list[str] = []
    writes = list(summary.writes)
    for location, where in summary.recorded_writes:
        found, notes = _recorded_at(location, summary.records, names)
        reasons += [f"{where}: {note}" for note in notes]
        writes.append(found)
    written: set = set()
    for origins in writes:
        if not origins or UNKNOWN in origins:
            return MutationReport([names[i] for i in pointers], reasons)
        written |= origins
    return MutationReport([names[i] for i in pointers if i in written], reasons)


def _describe_location(location: Location, names: list) -> str:
    origins, offset = location
    base = " or ".join(f"'{names[i]}'" if i != UNKNOWN else "an unknown pointer" for i in sorted(origins, key=str)) \
        or "a pointer of no origin"
    if offset == 0:
        return base
    return f"{base} + {offset} bytes" if isinstance(offset, int) else f"{base} + an offset computed at run time"


def _recorded_at(location: Location, records: list, names: list) -> tuple[frozenset, list]:
    """The origins of the addresses recorded at ``location`` (every candidate where the
    analysis cannot tell), and what it found, in words."""
    origins, offset = location
    at = _describe_location(location, names)
    if UNKNOWN in origins or not origins:
        return frozenset({UNKNOWN}), [f"writes through an address recorded at {at}, which this analysis cannot "
                                      "trace to a parameter: every pointer argument counts as written"]
    exact, maybe = [], []
    for (r_origins, r_offset), pointer, where in records:
        if not (r_origins & origins) and UNKNOWN not in r_origins | origins:
            continue
        same = r_offset == offset and UNKNOWN not in r_origins | origins
        if same:
            exact.append((pointer, where))
        elif not (isinstance(r_offset, int) and isinstance(offset, int)):
            maybe.append((pointer, where))
    notes = []
    found: frozenset = frozenset()
    for pointer, where in exact:
        found |= pointer
        notes.append(f"writes through the address recorded at {at} by {where} "
                     f"({_describe_location((pointer, 0), names)})")
    for pointer, where in maybe:
        found |= pointer
        notes.append(f"may write through the address recorded by {where} ({_describe_location((pointer, 0), names)}): "
                     f"whether that record is at {at} is not known at compile time, so it counts")
    if not exact and not maybe:
        notes.append(f"writes through an address recorded at {at}, where this kernel records none it can see: "
                     "every pointer argument counts as written")
        found = frozenset({UNKNOWN})
    return found, notes


def find_kernel(module: Any) -> Any:
    for op in module.body.block:
        if op.name == "func.func" and op.attributes.get("kernel"):
            return op
    raise ValueError("the module has no kernel (a func.func with kernel = true)")


def argument_names(function: Any) -> list[str]:
    names = []
    for i, arg in enumerate(function.arguments):
        names.append(getattr(arg, "name_hint", None) or f"arg{i}")
    return names


class _Analyzer:
    def __init__(self, module: Any):
        self.functions = {op.attributes.get("sym_name"): op for op in module.body.block if op.name == "func.func"}
        self.summaries: dict[int, Summary] = {}
        self.in_progress: set[int] = set()

    def summary(self, function: Any, pointers_only: bool = False) -> Summary:
        key = (id(function), pointers_only)
        if key in self.summaries:
            return self.summaries[key]
        if key in self.in_progress:
            # Recursion (the frontend forbids it, the IR does not): assume the worst
            # rather than iterate summaries to a fixpoint.
            return Summary({frozenset({UNKNOWN})}, {UNKNOWN})
        self.in_progress.add(key)
        try:
            result = _FunctionAnalysis(self, function, pointers_only).run()
        finally:
            self.in_progress.discard(key)
        self.summaries[key] = result
        return result

    def callee(self, op: Any) -> Any:
        ref = op.attributes.get("callee")
        return self.functions.get(getattr(ref, "name", ref))


def _has_trait(op: Any, trait: type) -> bool:
    # An op parsed from text for an unregistered dialect has no definition: no traits.
    return getattr(type(op), "definition", None) is not None and op.has_trait(trait)


def _is_pointer_like(type_: Any) -> bool:
    return t.is_pointer(type_) or isinstance(type_, t.BlockPointerType) or getattr(type_, "refers_to_memory", False)


class _FunctionAnalysis:
    """Origins of every value of one function, iterated to a fixpoint (loops carry
    values backwards, so one pass in program order is not enough)."""

    def __init__(self, analyzer: _Analyzer, function: Any, pointers_only: bool):
        self.analyzer = analyzer
        # A callee's integer parameters are origins too, so that a caller passing
        # ptrtoint of its pointer is traced through inttoptr in the callee.
        self.pointers_only = pointers_only
        self.function = function
        self.origins: dict[Any, frozenset] = {}
        self.writes: set = set()
        self.returns: set = set()
        self.records: list = []
        self.recorded_writes: list = []
        self.changed = False
        # Writes are recorded only once origins are final: a pointer seen before the
        # values it derives from (a loop-carried one) would look of unknown origin.
        self.final = False

    def run(self) -> Summary:
        for index, arg in enumerate(self.function.arguments):
            if _is_pointer_like(arg.type) or not self.pointers_only:
                self.origins[arg] = frozenset({index})
        ops = [op for op in self.function.walk() if op is not self.function]
        for _ in range(1000):  # a fixpoint comes quickly: the lattice is small sets of indices
            self.changed = False
            for op in ops:
                self.visit(op)
            if not self.changed:
                break
        else:  # pragma: no cover - guards against a bug, never expected
            return Summary({frozenset({UNKNOWN})}, {UNKNOWN})
        self.final = True
        for op in ops:
            self.visit(op)
        return Summary(self.writes, self.returns, self.records, self.recorded_writes)

    # -- the lattice ------------------------------------------------------------------
    def of(self, values: Iterable[Any]) -> frozenset:
        result: frozenset = frozenset()
        for value in values:
            result |= self.origins.get(value, frozenset())
        return result

    def add(self, value: Any, origins: frozenset) -> None:
        old = self.origins.get(value, frozenset())
        new = old | origins
        if new != old:
            self.origins[value] = new
            self.changed = True

    def write_through(self, pointer: Any) -> None:
        if not self.final:
            return
        # No origin at all (a pointer made from a constant, say) stays an empty set:
        # the kernel treats it as a write to anything.
        self.writes.add(self.origins.get(pointer, frozenset()))

    # -- transfer functions -------------------------------------------------------------
    def location(self, pointer: Any) -> Location:
        """Where ``pointer`` points: its origins and its offset from them."""
        return self.origins.get(pointer, frozenset()), byte_offset(pointer)

    def apply(self, op: Any, effects: list) -> None:
        if not self.final:
            return
        where = _where(op)
        for effect in effects:
            if isinstance(effect, Writes):
                self.write_through(effect.pointer)
            elif isinstance(effect, Records):
                self.records.append((self.location(effect.location), self.origins.get(effect.pointer, frozenset()),
                                     where))
            elif isinstance(effect, WritesRecorded):
                self.recorded_writes.append((self.location(effect.location), where))

    def visit(self, op: Any) -> None:
        name = op.name
        operands = op.operands
        effects = MUTATION_EFFECTS.get(type(op))
        if effects is not None:
            self.apply(op, effects(op))
        elif name in WRITE_OPS:
            if operands:
                self.write_through(operands[0])
        elif name == "func.call":
            self.visit_call(op)
            return
        elif not (name in _NO_WRITE_OPS or _has_trait(op, Pure) or _has_trait(op, ReadsMemory)
                  or _has_trait(op, Terminator) or op.regions):
            # An op the analysis does not know (a plugin's, say) that may have side
            # effects: it may write through any pointer it is given.
            for value in operands:
                if _is_pointer_like(value.type):
                    self.write_through(value)
        if name == "func.return":
            self.returns |= self.of(operands)
            return
        if _has_trait(op, Terminator) or name in ("scf.yield", "scf.condition"):
            # What a region yields becomes the parent's results and, for loops, the
            # next iteration's block arguments.
            parent = op.parent_op
            if parent is not None and parent is not self.function:
                origins = self.of(operands)
                for result in parent.results:
                    self.add(result, origins)
                for region in parent.regions:
                    for block in region.blocks:
                        for arg in block.arguments:
                            self.add(arg, origins)
            return
        if name in _LOAD_OPS:
            for result in op.results:
                if _is_pointer_like(result.type):
                    self.add(result, frozenset({UNKNOWN}))
            return
        origins = self.of(operands)
        if name == "arith.inttoptr" and not origins:
            origins = frozenset({UNKNOWN})  # an address from nowhere: could be any buffer
        # A pointer derives from the pointers it is computed from (the offset of an
        # addptr, the condition of a select are not where it points), except through
        # casts, where the integer is the address.
        pointer_origins = origins if name in _CASTS else self.of(
            v for v in operands if _is_pointer_like(v.type))
        for result in op.results:
            self.add(result, pointer_origins if _is_pointer_like(result.type) else origins)
        if op.regions:
            for region in op.regions:
                for block in region.blocks:
                    for arg in block.arguments:
                        self.add(arg, origins)

    def visit_call(self, op: Any) -> None:
        operands = op.operands
        callee = self.analyzer.callee(op)
        if callee is None:
            # An external function: it may write through every pointer it receives and
            # return anything.
            for value in operands:
                if _is_pointer_like(value.type):
                    self.write_through(value)
            for result in op.results:
                self.add(result, frozenset({UNKNOWN}) | self.of(operands))
            return
        summary = self.analyzer.summary(callee)

        def mapped(indices: Iterable) -> frozenset:
            out: set = set()
            for index in indices:
                if index == UNKNOWN:
                    out.add(UNKNOWN)
                elif index < len(operands):
                    out |= self.origins.get(operands[index], frozenset())
            return frozenset(out)

        if self.final:
            for origins in summary.writes:
                self.writes.add(mapped(origins))
            where = _where(op)

            def located(location: Location) -> Location:
                # A location relative to one parameter is relative to that argument here.
                origins, offset = location
                if len(origins) == 1 and next(iter(origins)) != UNKNOWN and next(iter(origins)) < len(operands):
                    argument = operands[next(iter(origins))]
                    return self.origins.get(argument, frozenset()), _add_offsets(byte_offset(argument), offset)
                return mapped(origins), ("unknown", where)

            for location, pointer, made in summary.records:
                self.records.append((located(location), mapped(pointer), f"{made} (called at {where})"))
            for location, made in summary.recorded_writes:
                self.recorded_writes.append((located(location), f"{made} (called at {where})"))
        returned = mapped(summary.returns)
        for result in op.results:
            self.add(result, returned)


# --------------------------------------------------------------------------------------
# Locations: byte offsets of pointers from their origins


def _where(op: Any) -> str:
    location = getattr(op, "location", None)
    return f"'{op.name}' at {location}" if location is not None and getattr(location, "line", None) \
        else f"'{op.name}'"


def _add_offsets(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if a == 0:
        return b
    if b == 0:
        return a
    return ("+", a, b)


def byte_offset(pointer: Any, depth: int = 0) -> Any:
    """The byte offset of ``pointer`` from the parameter it derives from: an int where
    it is the parameter plus constants, else a key of the expression (equal keys: the
    same offset, whichever ops computed it)."""
    from ..passes.rewrite import constant_value

    op = pointer.defining_op
    if op is None:
        # A function's parameter is its own origin (offset 0); any other block argument (a
        # loop-carried pointer, p += 128 each iteration) is somewhere unknown from it.
        owner = getattr(getattr(pointer, "block", None), "parent_op", None)
        return 0 if owner is not None and owner.name == "func.func" else ("value", id(pointer))
    if depth > 16:
        return ("value", id(pointer))
    if op.name == "tile.addptr" and t.is_pointer(op.operands[0].type):
        base = byte_offset(op.operands[0], depth + 1)
        offset = constant_value(op.operands[1])
        size = _element_bytes(op.operands[0].type)
        step = offset * size if isinstance(offset, int) and size else ("*", _expression_key(op.operands[1]), size)
        return _add_offsets(base, step)
    if op.name in _CASTS or op.name == "arith.ptrtoint":
        return byte_offset(op.operands[0], depth + 1)
    return ("value", _expression_key(pointer))


def _element_bytes(pointer_type: Any) -> int:
    pointee = getattr(pointer_type, "pointee", None)
    width = getattr(pointee, "width", None)
    return max(width // 8, 1) if isinstance(width, int) else 0


def _expression_key(value: Any, depth: int = 0) -> Any:
    """A key equal for values computed alike (the same ops on the same operands, or the
    same constants), so ``ws + pid * 128`` written twice is one location."""
    from ..passes.rewrite import attribute_key, constant_value

    constant = constant_value(value)
    if constant is not None:
        return ("const", constant)
    op = value.defining_op
    if op is None or depth > 8 or op.regions or not _has_trait(op, Pure):
        return ("value", id(value))
    attributes = tuple(sorted((k, attribute_key(v)) for k, v in op.attributes.items()))
    return (op.name, attributes, op.results.index(value) if len(op.results) > 1 else 0,
            tuple(_expression_key(v, depth + 1) for v in op.operands))
