"""The layers of core/polytile hold: no circle of module-level imports across its packages,
and the core never imports a backend or a plugin (docs/architecture.md draws the layers).

Only imports that run when a module is imported count (its top level, including under
``if``/``try``, not under ``if TYPE_CHECKING``): an import inside a function is how a
lower layer reaches a higher one on demand, and how ``import polytile`` stays fast.  A
package is a folder of core/polytile (``polytile.gpu``) or a module at its top
(``polytile.backend``); ``polytile/__init__.py`` itself is the public facade, which
imports everything lazily, and is left out.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Iterator, NamedTuple

import polytile

ROOT = Path(polytile.__file__).parent
#: Distributions the core must never import, at any level (rule 1 of the project).
BACKEND_AND_PLUGIN_PACKAGES = ("polytile_",)


class Import(NamedTuple):
    module: str    # the importing module, "polytile.gpu.distribute"
    target: str    # the imported module, "polytile.analysis.axis_info"
    line: int

    def __str__(self) -> str:
        return f"{self.module} imports {self.target} (line {self.line})"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def top_level_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is imported."""
    for statement in body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            yield statement
        elif isinstance(statement, ast.If):
            if not _is_type_checking(statement.test):
                yield from top_level_imports(statement.body)
            yield from top_level_imports(statement.orelse)
        elif isinstance(statement, ast.Try):
            for block in (statement.body, statement.orelse, statement.finalbody,
                          *(handler.body for handler in statement.handlers)):
                yield from top_level_imports(block)
        elif isinstance(statement, ast.With):
            yield from top_level_imports(statement.body)


def imported_modules(module: str, statement: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The modules ``statement`` (in ``module``) imports: for ``from x import y``, ``x.y``
    where that is a module, else ``x``."""
    if isinstance(statement, ast.Import):
        yield from (alias.name for alias in statement.names)
        return
    if statement.level:
        package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        base = package.split(".")[:len(package.split(".")) - (statement.level - 1)]
        target = ".".join(base + ([statement.module] if statement.module else []))
    else:
        target = statement.module or ""
    for alias in statement.names:
        submodule = f"{target}.{alias.name}"
        yield submodule if submodule in MODULES else target


@functools.lru_cache(maxsize=None)
def all_imports(top_level_only: bool) -> list[Import]:
    found = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        statements = top_level_imports(tree.body) if top_level_only else \
            (node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)))
        for statement in statements:
            for target in dict.fromkeys(imported_modules(module, statement)):  # once per statement
                found.append(Import(module, target, statement.lineno))
    return found


def package_of(module: str) -> str:
    """``polytile.gpu`` for ``polytile.gpu.lowering.dot``; ``polytile.backend`` for itself."""
    return ".".join(module.split(".")[:2])


def package_graph(imports: list[Import]) -> dict[str, dict[str, list[Import]]]:
    """package -> imported package -> the imports that make that arrow."""
    graph: dict[str, dict[str, list[Import]]] = {}
    for item in imports:
        if item.target not in MODULES:
            continue
        source, target = package_of(item.module), package_of(item.target)
        if source != target and "polytile" not in (source, target):
            graph.setdefault(source, {}).setdefault(target, []).append(item)
    return graph


def find_circle(graph: dict[str, dict[str, list[Import]]]) -> list[str] | None:
    """A circle of packages (first package repeated at the end), or None."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(package: str) -> list[str] | None:
        state[package] = "open"
        path.append(package)
        for target in sorted(graph.get(package, {})):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state:
                circle = visit(target)
                if circle:
                    return circle
        state[package] = "done"
        path.pop()
        return None

    for package in sorted(graph):
        if package not in state:
            circle = visit(package)
            if circle:
                return circle
    return None


def describe_circle(circle: list[str], graph: dict[str, dict[str, list[Import]]]) -> str:
    lines = [" -> ".join(circle)]
    for source, target in zip(circle, circle[1:]):
        lines += [f"  {item}" for item in graph[source][target][:3]]
        more = len(graph[source][target]) - 3
        if more > 0:
            lines.append(f"  ... and {more} more from {source} to {target}")
    return "\n".join(lines)


def test_no_circle_of_module_level_imports_across_packages():
    graph = package_graph(all_imports(top_level_only=True))
    circle = find_circle(graph)
    assert circle is None, (
        "the packages of core/polytile import each other in a circle at module level (see "
        "docs/architecture.md for which layer may import which; a lower layer that needs a "
        "higher one imports it inside the function that needs it, or the code moves down):\n"
        + describe_circle(circle, graph))


def test_the_checker_finds_a_circle_and_names_the_imports():
    graph = package_graph([Import("polytile.dialects.gpu", "polytile.gpu.layouts", 38),
                           Import("polytile.gpu.distribute", "polytile.dialects.arith", 40)])
    circle = find_circle(graph)
    assert circle == ["polytile.dialects", "polytile.gpu", "polytile.dialects"]
    assert describe_circle(circle, graph) == (
        "polytile.dialects -> polytile.gpu -> polytile.dialects\n"
        "  polytile.dialects.gpu imports polytile.gpu.layouts (line 38)\n"
        "  polytile.gpu.distribute imports polytile.dialects.arith (line 40)")


def test_the_checker_reads_relative_and_conditional_imports():
    imports = {(item.module, item.target) for item in all_imports(top_level_only=True)}
    # `from .manager import Analysis` in polytile/analysis/axis_info.py
    assert ("polytile.analysis.axis_info", "polytile.analysis.manager") in imports
    # `from ..analysis.manager import ...` in polytile/passes/pass_base.py
    assert ("polytile.passes.pass_base", "polytile.analysis.manager") in imports
    # an import inside a function does not count: the interpreter's make_launcher
    assert not any(module == "polytile.interpreter.plugin" and target == "polytile.runtime.args"
                   for module, target in imports)


def test_the_core_never_imports_a_backend_or_a_plugin():
    offending = [str(item) for item in all_imports(top_level_only=False)
                 if item.target.startswith(BACKEND_AND_PLUGIN_PACKAGES)]
    assert not offending, "the core imports a backend or a plugin:\n  " + "\n  ".join(offending)
