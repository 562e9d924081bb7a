"""The layers of core/polytile hold: no circle of module-level imports across its packages,
nor between any two modules of the core, the backends or the in-tree plugins; the core
never imports a backend or a plugin; and no module imports another only for what its
import registers (docs/architecture.md draws the layers).

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
import sys
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


# --------------------------------------------------------------------------------------
# Every module of the core, the in-tree backends and plugins


REPOSITORY = ROOT.parent.parent
#: Top-level package -> its folder (the core's and every in-tree distribution's).
PACKAGES = {"polytile": ROOT,
            "polytile_nvidia": REPOSITORY / "backends" / "nvidia" / "polytile_nvidia",
            "polytile_amd": REPOSITORY / "backends" / "amd" / "polytile_amd",
            "polytile_lds": REPOSITORY / "plugins" / "lds" / "polytile_lds"}


def _module_names(package: str, folder: Path) -> dict[str, Path]:
    found = {}
    for path in sorted(folder.rglob("*.py")):
        parts = [package, *path.relative_to(folder).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


EVERY_MODULE = {name: path for package, folder in PACKAGES.items() for name, path in _module_names(package, folder).items()}


def _imports_of(module: str, statement: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, str | None]]:
    """``(imported module, name it binds in module, or None)`` for each module
    ``statement`` imports: ``from x import y`` imports ``x.y`` where that is a module
    (binding ``y``), else ``x`` (binding no module)."""
    if isinstance(statement, ast.Import):
        for alias in statement.names:
            yield alias.name, alias.asname or alias.name.split(".")[0]
        return
    if statement.level:
        package = module if EVERY_MODULE[module].name == "__init__.py" else module.rpartition(".")[0]
        parts = package.split(".")
        base = ".".join(parts[:len(parts) - (statement.level - 1)] + ([statement.module] if statement.module else []))
    else:
        base = statement.module or ""
    for alias in statement.names:
        submodule = f"{base}.{alias.name}"
        if submodule in EVERY_MODULE:
            yield submodule, alias.asname or alias.name
        else:
            yield base, None


def _parsed(module: str) -> ast.Module:
    return ast.parse(EVERY_MODULE[module].read_text(encoding="utf-8"), str(EVERY_MODULE[module]))


def module_graph() -> dict[str, dict[str, int]]:
    """module -> the modules of EVERY_MODULE it imports at module level -> the line.

    A module's import of its own package (``from . import x`` runs ``__init__`` first)
    is Python's doing, not an arrow: a package's ``__init__`` naming its modules is its
    face, and a circle through it says nothing of the design."""
    graph: dict[str, dict[str, int]] = {}
    for module in EVERY_MODULE:
        for statement in top_level_imports(_parsed(module).body):
            for target, _ in _imports_of(module, statement):
                if target in EVERY_MODULE and target != module:
                    graph.setdefault(module, {}).setdefault(target, statement.lineno)
    return graph


def test_no_circle_of_module_level_imports_between_modules():
    """The interpreter's executor imported its rule modules at its end, which import it:
    a module's top level must be able to run after everything it imports is whole."""
    graph = module_graph()
    circle = find_circle({module: {target: [Import(module, target, line)] for target, line in targets.items()}
                          for module, targets in graph.items()})
    assert circle is None, (
        "modules import each other in a circle at module level (move what both need into a third "
        "module, or import inside the function that needs it):\n  "
        + "\n  ".join(f"{a} imports {b} (line {graph[a][b]})" for a, b in zip(circle, circle[1:])))


def _names_used(tree: ast.Module) -> set[str]:
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    for node in tree.body:  # a package's face hands modules on by naming them in __all__
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            used |= {element.value for element in ast.walk(node.value)
                     if isinstance(element, ast.Constant) and isinstance(element.value, str)}
    return used


def imports_for_side_effects() -> list[str]:
    """Imports, anywhere in a module (top level or function), of a module of the project
    whose name the importer never uses: what such an import is for is what the imported
    module does when it runs (registering entries, usually)."""
    found = []
    for module in EVERY_MODULE:
        tree = _parsed(module)
        used = _names_used(tree)
        for statement in ast.walk(tree):
            if not isinstance(statement, (ast.Import, ast.ImportFrom)):
                continue
            for target, bound in _imports_of(module, statement):
                if bound is not None and target.split(".")[0] in PACKAGES and bound not in used:
                    found.append(f"{module}, line {statement.lineno}: imports {target} and uses nothing of it")
    return found


def test_no_module_imports_another_only_for_what_it_registers():
    """A table names the modules that provide its entries and imports them on its first
    read (``OwnedTable(kind, providers=...)``); a backend registers its units where it
    builds its target, from names it imports; a plugin registers from its hooks."""
    found = imports_for_side_effects()
    assert not found, ("imports made only for what the imported module does when it runs (declare it as a "
                       "provider of the table it fills, or register explicitly):\n  " + "\n  ".join(found))


def test_the_checkers_see_a_circle_and_an_import_for_side_effects(monkeypatch, tmp_path):
    (tmp_path / "a.py").write_text("from polytile_fake import b\n\n\ndef f():\n    return b.X\n")
    (tmp_path / "b.py").write_text("X = 1\nfrom polytile_fake import a\nfrom . import c  # noqa: F401\n")
    (tmp_path / "c.py").write_text("import polytile_fake.a as unused\n")
    (tmp_path / "__init__.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "EVERY_MODULE", _module_names("polytile_fake", tmp_path))
    monkeypatch.setitem(PACKAGES, "polytile_fake", tmp_path)
    assert module_graph() == {"polytile_fake.a": {"polytile_fake.b": 1},
                              "polytile_fake.b": {"polytile_fake.a": 2, "polytile_fake.c": 3},
                              "polytile_fake.c": {"polytile_fake.a": 1}}
    assert find_circle({module: {target: [] for target in targets} for module, targets in module_graph().items()}) \
        == ["polytile_fake.a", "polytile_fake.b", "polytile_fake.a"]
    assert imports_for_side_effects() == ["polytile_fake.b, line 2: imports polytile_fake.a and uses nothing of it",
                                          "polytile_fake.b, line 3: imports polytile_fake.c and uses nothing of it",
                                          "polytile_fake.c, line 1: imports polytile_fake.a and uses nothing of it"]
