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

    def __init__(self, fn: Any, text: str | None = None):
        self.fn = fn
        self.name = fn.__name__
        if text is not None:
            # Source given as text (JITFunction._unsafe_update_src, code generators): its
            # lines live under a name of their own, for messages and tracebacks.
            lines, start = text.splitlines(keepends=True) or [""], 1
            self.file = f"<source of {self.name}, {_text_id(text)}>"
            linecache.cache[self.file] = (len(text), None, lines, self.file)
        else:
            try:
                lines, start = _source_lines(fn) or inspect.getsourcelines(fn)
            except (OSError, TypeError) as exc:
                raise CompilationError(f"cannot read the source of '{self.name}' ({exc}); @jit functions must be "
                                       "defined in a file, or given their source text with "
                                       "JITFunction(fn)._unsafe_update_src(text)") from None
            self.file = inspect.getsourcefile(fn) or inspect.getfile(fn)
        self.first_line = start
        self.lines = lines
        first = next((line for line in lines if line.strip()), lines[0])  # dedent ignores blank lines too
        self.indent = len(first) - len(first.lstrip())
        source = textwrap.dedent("".join(lines))
        self.source_text = source
        try:
            module = ast.parse(source)
        except SyntaxError as exc:  # only for source given as text: Python parsed the file
            line = (exc.lineno or 1) + start - 1
            raise CompilationError(f"cannot parse '{self.name}': {exc.msg}",
                                   SourceLocation(self.file, line, (exc.offset or 0) + self.indent),
                                   self.source_line(line)) from None
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


def _text_id(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _source_lines(fn: Any) -> tuple[list[str], int] | None:
    """What ``inspect.getsourcelines(fn)`` returns, read from the lines the code object
    spans, or None where that cannot be relied on (then the caller asks inspect).

    inspect tokenizes the file from the ``def`` to find where the block ends, which
    costs about 10 ms the first time in a process (tokenize compiles its regular
    expressions): a tenth of a launch from a warm disk cache.  The code object already
    knows its first line (the first decorator's) and the positions of every instruction,
    nested functions included, so the last line is their largest end line.
    """
    code = getattr(fn, "__code__", None)
    if code is None or not hasattr(code, "co_positions"):  # Python 3.10
        return None
    try:
        file = inspect.getsourcefile(fn)
    except TypeError:
        return None
    if not file:
        return None
    linecache.checkcache(file)
    text = linecache.getlines(file, fn.__globals__)
    first, last = code.co_firstlineno, _last_line(code)
    if not text or last < first or last > len(text):
        return None
    # Statements that make no instructions ('global', 'pass', a bare string) may follow
    # the last one that does: the block goes on while lines are indented deeper than
    # the def (blank and comment lines do not end it, nor count).
    indent = len(text[first - 1]) - len(text[first - 1].lstrip())
    for number in range(last + 1, len(text) + 1):
        line = text[number - 1]
        stripped = line.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        if len(line) - len(stripped) <= indent:
            break
        last = number
    lines = text[first - 1:last]
    try:  # the lines must hold the whole function, or inspect's answer is needed
        body = ast.parse(textwrap.dedent("".join(lines))).body
    except SyntaxError:
        return None
    if len(body) != 1 or not isinstance(body[0], (ast.FunctionDef, ast.AsyncFunctionDef)) \
            or body[0].name != fn.__name__:
        return None
    return lines, first


def _last_line(code: Any) -> int:
    last = max((end for _, end, _, _ in code.co_positions() if end is not None), default=code.co_firstlineno)
    for constant in code.co_consts:
        if hasattr(constant, "co_positions"):
            last = max(last, _last_line(constant))
    return last


def assigned_names(statements: list[ast.stmt]) -> set[str]:
    """Every plain name a list of statements may assign (nested blocks included)."""
    names: set[str] = set()
    for stmt in statements:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names


#: How many frames above ``@jit`` to look for the text an ``exec`` ran (see below).
_EXEC_FRAMES = 8


def exec_source_text(fn: Any, frame: Any) -> str | None:
    """The source text of ``fn`` when it was defined by ``exec`` of a string (Triton's
    tests and code generators do this: ``exec(template_source.replace(...))``), found
    among the string variables of the frames calling ``frame``, else None.

    A string is taken only if compiling it gives ``fn``'s own code: a function of that
    name at that line with the same bytecode, so the text is the one that ran.  Only
    functions with no file are asked about (``inspect`` finds every other one)."""
    code = fn.__code__
    marker = f"def {fn.__name__}("
    for _ in range(_EXEC_FRAMES):
        if frame is None:
            return None
        for value in list(frame.f_locals.values()):
            if isinstance(value, str) and marker in value:
                text = _function_text(value, code)
                if text is not None:
                    return text
        frame = frame.f_back
    return None


def _function_text(module_text: str, code: Any) -> str | None:
    try:
        compiled = compile(module_text, code.co_filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
    pending = [compiled]
    while pending:
        candidate = pending.pop()
        if candidate.co_firstlineno == code.co_firstlineno and _same_code(candidate, code):
            break
        pending.extend(c for c in candidate.co_consts if inspect.iscode(c))
    else:
        return None
    tree = ast.parse(module_text)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if first == code.co_firstlineno:
                lines = module_text.splitlines(keepends=True)
                return "".join(lines[node.lineno - 1:node.end_lineno])  # without its decorators
    return None


def _same_code(a: Any, b: Any) -> bool:
    """Whether two code objects are the same code: bytecode, names and constants (nested
    functions' code compared the same way)."""
    if (a.co_name, a.co_code, a.co_names, a.co_varnames) != (b.co_name, b.co_code, b.co_names, b.co_varnames):
        return False
    if len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if inspect.iscode(x) and inspect.iscode(y):
            if not _same_code(x, y):
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


def has_source_file(fn: Any) -> bool:
    """Whether ``inspect`` can read ``fn``'s source (a file, or text linecache holds)."""
    filename = fn.__code__.co_filename
    return not (filename.startswith("<") and filename.endswith(">")) or bool(linecache.getlines(filename))
