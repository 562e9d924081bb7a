"""A ``@jit`` function's source: its AST, where each line lives, and error helpers."""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
from typing import Any

from ..errors import CompilationError, SourceLocation


class FunctionSource:
    """The parsed source of one Python function, with a map back to its file.

    ``inspect.getsource`` gives the function's lines; they are dedented so that a
    function defined in a class or another function parses, and node positions are
    mapped back to the file's line and column for every op location and error.
    """

    def __init__(self, fn: Any):
        self.fn = fn
        self.name = fn.__name__
        try:
            lines, start = inspect.getsourcelines(fn)
        except (OSError, TypeError) as exc:
            raise CompilationError(f"cannot read the source of '{self.name}' ({exc}); @jit functions must be "
                                   "defined in a file, not typed into an interactive prompt") from None
        self.file = inspect.getsourcefile(fn) or inspect.getfile(fn)
        self.first_line = start
        self.lines = lines
        first = lines[0]
        self.indent = len(first) - len(first.lstrip())
        source = textwrap.dedent("".join(lines))
        self.source_text = source
        try:
            module = ast.parse(source)
        except SyntaxError as exc:  # pragma: no cover - Python itself would have failed
            raise CompilationError(f"cannot parse '{self.name}': {exc.msg}") from None
        defs = [n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if not defs:
            raise CompilationError(f"'{self.name}' is not a function defined with 'def'")
        self.tree: ast.FunctionDef = defs[0]  # type: ignore[assignment]

    def location(self, node: Any) -> SourceLocation:
        line = getattr(node, "lineno", 1) + self.first_line - 1
        column = getattr(node, "col_offset", 0) + self.indent + 1
        return SourceLocation(self.file, line, column)

    def source_line(self, line: int) -> str | None:
        index = line - self.first_line
        if 0 <= index < len(self.lines):
            return self.lines[index].rstrip("\n")
        text = linecache.getline(self.file, line)
        return text.rstrip("\n") if text else None

    def error(self, node: Any, message: str) -> CompilationError:
        loc = self.location(node)
        return CompilationError(message, loc, self.source_line(loc.line))


def assigned_names(statements: list[ast.stmt]) -> set[str]:
    """Every plain name a list of statements may assign (nested blocks included)."""
    names: set[str] = set()
    for stmt in statements:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names
