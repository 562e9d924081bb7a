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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from ..ir import types as t
from ..ir.opdef import Pure, ReadsMemory, Terminator

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


@dataclass
class Summary:
    """What one function may do, in terms of its own parameters (indices) and UNKNOWN:
    the origins of each pointer it may write through (an empty set: a pointer made
    from nothing traceable), and the origins of what it returns."""

    writes: set = field(default_factory=set)
    returns: set = field(default_factory=set)


def mutated_arguments(module: Any, kernel: Any = None) -> list[str]:
    """Names of the pointer parameters of ``kernel`` (the ``func.func`` with ``kernel =
    true`` in ``module`` when not given) that the kernel may write, in parameter order."""
    kernel = kernel if kernel is not None else find_kernel(module)
    # Only pointer parameters are origins here: an address made from an integer
    # argument alone (inttoptr) has no origin, so could be any buffer.
    summary = _Analyzer(module).summary(kernel, pointers_only=True)
    names = argument_names(kernel)
    pointers = [i for i, arg in enumerate(kernel.arguments) if _is_pointer_like(arg.type)]
    written: set = set()
    for origins in summary.writes:
        if not origins or UNKNOWN in origins:
            return [names[i] for i in pointers]
        written |= origins
    return [names[i] for i in pointers if i in written]


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
        return Summary(self.writes, self.returns)

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
    def visit(self, op: Any) -> None:
        name = op.name
        operands = op.operands
        if name in WRITE_OPS:
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
        returned = mapped(summary.returns)
        for result in op.results:
            self.add(result, returned)
