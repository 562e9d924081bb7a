"""Inline ``func.call`` sites, callees first, and drop functions nothing refers to any more.

Helpers called from a kernel become part of it, so later passes (folding, CSE, LICM,
layout assignment) see one straight-line body.  A callee marked ``noinline = true``
stays a function and its calls stay; the helpers *it* calls are inlined into it.
Afterwards, functions that nothing live refers to are removed; any ``@name`` in an
attribute is a reference, as in ``dce``.

Inlined ops keep their own source locations: an error in a helper should point at the
helper's line, which is where the user has to fix it.
"""

from __future__ import annotations

import linecache
import os
from collections import deque
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..analysis.call_graph import CallEdge, CallGraph
from ..analysis.symbols import unreachable_functions
from ..errors import CompilationError, SourceLocation, VerificationError
from ..ir.operation import Operation
from ..ir.values import OpResult, Value
from .pass_base import Pass, PassContext, PreservedAnalyses


def is_inlinable(func: Operation) -> bool:
    return func.attributes.get("noinline") is not True


def _follows_inlinable(edge: CallEdge) -> bool:
    return is_inlinable(edge.callee)


@dataclass
class Inliner(Pass):
    """Inline every call to a function not marked noinline; remove dead functions."""

    name: ClassVar[str] = "inline"
    summary: ClassVar[str] = "inline calls to functions not marked noinline, callees first; drop dead functions"

    remove_dead_functions: bool = field(
        default=True, metadata={"doc": "remove functions that are not kernels and that nothing live refers to"})

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        graph = context.analyses.get(CallGraph, module)
        self._check(graph)
        inlined = 0
        # Bottom-up over the calls we inline: when a caller is processed, each callee's
        # body is already free of inlinable calls, so one sweep per function suffices
        # and no body is inlined twice over.
        for func in graph.bottom_up(follow=_follows_inlinable):
            inlined += self._inline_calls_in(func, graph)
        removed = self._remove_dead_functions(module) if self.remove_dead_functions else 0
        context.count("inline.inlined-calls", inlined)
        context.count("inline.removed-functions", removed)
        return PreservedAnalyses.none() if inlined or removed else PreservedAnalyses.all()

    # -- checks, before anything changes ----------------------------------------------
    def _check(self, graph: CallGraph) -> None:
        cycle = graph.find_cycle(follow=_follows_inlinable)
        if cycle is not None:
            # Point at the call that closes the cycle: that is the recursive call.
            closing = graph.calls_between(cycle[-1], cycle[0])[0]
            chain = " -> ".join(cycle + [cycle[0]])
            raise _user_error(f"recursive calls are not supported: {chain}", closing.location)
        for edge in graph.edges:
            if is_inlinable(edge.callee):
                _check_inlinable_body(edge.callee, edge.call)

    # -- inlining ---------------------------------------------------------------------
    def _inline_calls_in(self, func: Operation, graph: CallGraph) -> int:
        calls = deque(op for op in func.walk() if op.name == "func.call")
        count = 0
        while calls:
            call = calls.popleft()
            callee = graph.function(call.attributes["callee"].name)
            if not is_inlinable(callee):
                continue
            new_ops = inline_call(call, callee)
            count += 1
            # Bottom-up order means none of these are inlinable; this keeps the pass
            # correct even when called on a graph order that does not guarantee it.
            calls.extendleft(reversed([op for new in new_ops for op in new.walk() if op.name == "func.call"]))
        return count

    # -- dead functions ---------------------------------------------------------------
    def _remove_dead_functions(self, module: Any) -> int:
        """Keep kernels and whatever they still refer to; remove the rest.

        The same rule as ``dce``'s (:func:`~polytile.analysis.symbols.unreachable_functions`):
        any ``@name`` in any attribute keeps a function, not only a call, so a helper
        named by, say, a kernel's ``pt.callback`` attribute survives inlining.
        """
        removed = 0
        for func in unreachable_functions(module):
            func.erase()
            removed += 1
        return removed


def inline_call(call: Operation, callee: Operation) -> list[Operation]:
    """Replace ``call`` by a copy of ``callee``'s body; return the inserted ops.

    The callee must have one block ending in ``func.return`` (see
    :func:`_check_inlinable_body`).  Arguments map to the call's operands and the
    returned values replace the call's results.
    """
    _check_inlinable_body(callee, call)
    block = callee.regions[0].blocks[0]
    arguments = block.arguments
    if len(arguments) != len(call.operands):
        raise VerificationError(f"passes {len(call.operands)} arguments to '@{callee.attributes['sym_name']}', "
                                f"which takes {len(arguments)}", call.name, call.location)
    mapping: dict[Value, Value] = dict(zip(arguments, call.operands))
    inserted: list[Operation] = []
    terminator = block.last_op
    for op in block:
        if op is terminator:
            break
        clone = op.clone(mapping)
        if call.location is not None:
            # An op the helper's source did not place is best reported at the call.
            for inner in clone.walk():
                if inner.location is None:
                    inner.location = call.location
        call.parent.insert_before(clone, call)
        inserted.append(clone)
    returned = [mapping.get(v, v) for v in terminator.operands]
    fresh = {id(op) for op in inserted}
    renamed: set[int] = set()
    for result, value in zip(call.results, returned):
        # The caller's name for the result is the one the user wrote at the call site;
        # a fresh value from the helper's body takes it.  Arguments passed straight
        # through keep the caller's own name.
        if result.name_hint and isinstance(value, OpResult) and id(value.op) in fresh and id(value) not in renamed:
            value.name_hint = result.name_hint
            renamed.add(id(value))
    call.replace_all_uses_with(returned)
    call.erase()
    return inserted


def _check_inlinable_body(callee: Operation, call: Operation) -> None:
    name = callee.attributes.get("sym_name")
    blocks = callee.regions[0].blocks if callee.regions else []
    if len(blocks) != 1:
        raise _user_error(
            f"cannot inline '@{name}': its body has {len(blocks)} blocks, and only single-block functions can be "
            "inlined (mark it noinline to keep it a function)", callee.location or call.location)
    last = blocks[0].last_op
    if last is None or last.name != "func.return":
        found = f"'{last.name}'" if last is not None else "nothing"
        raise _user_error(f"cannot inline '@{name}': its body must end with 'func.return', found {found}",
                          callee.location or call.location)


def _user_error(message: str, location: Any) -> CompilationError:
    if not isinstance(location, SourceLocation):
        return CompilationError(message if location is None else f"{message} (at {location})")
    source_line = None
    # linecache would also search sys.path for a relative name and could show a
    # stranger's file; only read the file the location names.
    if os.path.isfile(location.file):
        source_line = linecache.getline(location.file, location.line).rstrip("\n").expandtabs() or None
    return CompilationError(message, location, source_line)
