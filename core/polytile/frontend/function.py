"""The generator of one function body, assembled from one visitor class per concept."""

from __future__ import annotations

import ast
from typing import Any

from ..errors import CompilationError, PolytileError
from ..ir.builder import Builder
from .calls import CallGen
from .control_flow import ControlFlowGen
from .expressions import ExpressionGen
from .source import FunctionSource
from .statements import StatementGen
from .values import _describe_node


class FunctionGen(StatementGen, ControlFlowGen, ExpressionGen, CallGen, ast.NodeVisitor):
    """Generates the body of one function (the kernel, an inlined callee, a noinline one)."""

    def __init__(self, mod: Any, src: FunctionSource, scope: dict[str, Any], in_kernel: bool = False):
        self.mod = mod
        self.src = src
        self.scope = scope
        self.terminated = False
        self.loop_depth = 0
        self.fn_globals = src.fn.__globals__
        closure = src.fn.__closure__ or ()
        self.closure = {n: c.cell_contents for n, c in zip(src.fn.__code__.co_freevars, closure)}
        self.in_kernel = in_kernel

    @property
    def builder(self) -> Builder:
        return self.mod.builder

    # -- dispatch with locations and errors -------------------------------------------
    def visit(self, node: ast.AST) -> Any:
        builder = self.builder
        saved = builder.location
        if hasattr(node, "lineno"):
            builder.location = self.src.location(node)
        try:
            method = getattr(self, "visit_" + type(node).__name__, None)
            if method is None:
                raise self.src.error(node, f"unsupported syntax in a kernel: {_describe_node(node)}")
            return method(node)
        except CompilationError as exc:
            if exc.location is None:
                raise self.src.error(node, exc.message) from None
            raise
        except PolytileError:
            raise
        except RecursionError:
            raise self.src.error(node, "recursion too deep while compiling (a @jit function calling itself?)") from None
        except Exception as exc:  # a bug in the compiler, or a Python error on constexprs
            raise self.src.error(node, f"{type(exc).__name__}: {exc}") from exc
        finally:
            builder.location = saved

    def error(self, node: ast.AST, message: str) -> CompilationError:
        return self.src.error(node, message)

