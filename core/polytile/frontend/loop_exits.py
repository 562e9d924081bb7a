"""``break`` and ``continue`` in kernel loops, written as flags the loop machinery already
handles (Triton refuses both; polytile takes them as Python means them).

A kernel's loops are structured (``scf.for``/``scf.while``: one way in, one way out), so a
jump is rewritten before the loop's body is generated:

* ``continue`` sets the iteration's *skip* flag; every statement after a statement that may
  set it runs under ``if not skip:``;
* ``break`` sets the skip flag and the loop's *stop* flag; the loop runs while its
  condition holds ``and not stop``.  A run-time ``for`` that may break therefore becomes a
  ``while`` loop over its counter (it can no longer be software-pipelined, and
  ``pl.range``'s pipelining options are refused for it with a message saying so).

Flags decided at compile time (a jump under a compile-time ``if``, or in an unrolled
``pl.static_range`` loop) stay Python booleans, so the guarded code is dropped at compile
time and an unrolled loop stops unrolling at its ``break``.  Run-time flags are ``i1``
scalars: scalar conditions, so every target runs them as ordinary branches.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

#: Names of the flags and counters, which no Python identifier can take; the loop
#: machinery carries names with this prefix across iterations like the user's variables.
FLAG_PREFIX = "$loop."


@dataclass(frozen=True)
class LoopExits:
    """What one loop's body does with jumps that belong to it (not to loops nested in it)."""

    breaks: bool
    continues: bool

    def __bool__(self) -> bool:
        return self.breaks or self.continues


@dataclass(frozen=True)
class ExitFlags:
    """The names of one loop's flags (unique per generated loop)."""

    skip: str  # set by 'break' and 'continue': the rest of this iteration does not run
    stop: str  # set by 'break': no further iteration runs
    counter: str  # the counter of a run-time 'for' rewritten as a 'while'

    @classmethod
    def numbered(cls, number: int) -> "ExitFlags":
        return cls(f"{FLAG_PREFIX}skip{number}", f"{FLAG_PREFIX}stop{number}", f"{FLAG_PREFIX}counter{number}")


def _own_jumps(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """The ``break``/``continue`` statements among ``stmts`` that belong to the loop whose
    body they are: not those of nested loops or nested function definitions."""
    found: list[ast.stmt] = []
    pending: list[ast.AST] = list(stmts)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Break, ast.Continue)):
            found.append(node)
        elif isinstance(node, (ast.For, ast.While)):
            pending.extend(node.orelse)  # a loop's else belongs to the enclosing loop
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        elif isinstance(node, ast.stmt):
            pending.extend(ast.iter_child_nodes(node))
    return found


def loop_exits(body: list[ast.stmt]) -> LoopExits:
    """Whether this loop body breaks and whether it continues (its own jumps only)."""
    jumps = _own_jumps(body)
    return LoopExits(breaks=any(isinstance(j, ast.Break) for j in jumps),
                     continues=any(isinstance(j, ast.Continue) for j in jumps))


def _at(node: ast.AST, made: ast.AST) -> ast.AST:
    return ast.fix_missing_locations(ast.copy_location(made, node))


def assign(node: ast.AST, name: str, value: ast.expr) -> ast.stmt:
    """``name = value``, located at ``node`` (errors in generated code point at the jump)."""
    return _at(node, ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=value))


def flag(node: ast.AST, name: str, value: bool) -> ast.stmt:
    return assign(node, name, ast.Constant(value=value))


def unless(node: ast.AST, name: str, body: list[ast.stmt]) -> ast.stmt:
    """``if not name: body``."""
    test = ast.UnaryOp(op=ast.Not(), operand=ast.Name(id=name, ctx=ast.Load()))
    return _at(node, ast.If(test=test, body=body, orelse=[]))


def always_jumps(stmts: list[ast.stmt]) -> bool:
    """Whether every path through ``stmts`` ends in a ``break`` or ``continue``."""
    for stmt in stmts:
        if isinstance(stmt, (ast.Break, ast.Continue)):
            return True
        if isinstance(stmt, ast.If) and always_jumps(stmt.body) and always_jumps(stmt.orelse):
            return True
        if isinstance(stmt, ast.With) and always_jumps(stmt.body):
            return True
    return False


def rewrite_body(body: list[ast.stmt], flags: ExitFlags, error) -> list[ast.stmt]:
    """``body`` with its own jumps written as flags.  After an ``if`` one of whose branches
    always jumps (``if c: continue``), the rest of the body moves into the other branch,
    as Python runs it (what that branch defines stays defined); after any other statement
    that may jump, the rest runs under ``if not skip``.  ``error(node, message)`` makes the
    CompilationError for a jump where it cannot be rewritten."""
    out: list[ast.stmt] = []
    for index, stmt in enumerate(body):
        if isinstance(stmt, ast.Continue):
            out.append(flag(stmt, flags.skip, True))
            return out  # the rest of this list never runs
        if isinstance(stmt, ast.Break):
            out += [flag(stmt, flags.stop, True), flag(stmt, flags.skip, True)]
            return out
        if not _own_jumps([stmt]):
            out.append(stmt)
            continue
        if isinstance(stmt, ast.With):
            # The jump skips the rest of the block, whose exit still runs (it is emitted
            # after the block), then the rest of the loop body as after any jump.
            block = ast.With(items=stmt.items, body=rewrite_body(stmt.body, flags, error) or [ast.Pass()])
            out.append(_at(stmt, block))
            rest = body[index + 1:]
            if rest:
                out.append(unless(rest[0], flags.skip, rewrite_body(rest, flags, error)))
            return out
        if not isinstance(stmt, ast.If):
            jump = _own_jumps([stmt])[0]
            word = "break" if isinstance(jump, ast.Break) else "continue"
            raise error(jump, f"'{word}' inside a '{type(stmt).__name__.lower()}' statement is not supported in "
                              f"kernels; use it directly in the loop body or in an 'if'")
        rest = body[index + 1:]
        then, other = stmt.body, stmt.orelse
        if always_jumps(then) and not always_jumps(other):
            other, rest = other + rest, []
        elif always_jumps(other) and not always_jumps(then):
            then, rest = then + rest, []
        elif always_jumps(then):
            rest = []  # both branches jump: what follows never runs
        branch = ast.If(test=stmt.test, body=rewrite_body(then, flags, error) or [ast.Pass()],
                        orelse=rewrite_body(other, flags, error))
        out.append(_at(stmt, branch))
        if rest:
            out.append(unless(rest[0], flags.skip, rewrite_body(rest, flags, error)))
        return out
    return out
