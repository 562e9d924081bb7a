"""Statements: assignments, ``return``, ``assert``, and the statement-list walk that lets
an ``if`` with an early return take over the statements after it."""

from __future__ import annotations

import ast
from typing import Any

from ..errors import CompilationError
from ..language import core as lc, semantic as sem
from ..language.debug import device_assert
from .values import _RETURN, _describe_node, _is_tensor


class StatementGen:
    """Statement visitors of :class:`~polytile.frontend.function.FunctionGen`."""

    def visit_stmts(self, stmts: list[ast.stmt]) -> None:
        for index, stmt in enumerate(stmts):
            if self.terminated:
                return  # code after a return never runs
            if isinstance(stmt, ast.If):
                saved = self.builder.location
                self.builder.location = self.src.location(stmt)
                try:
                    if self.visit_If(stmt, stmts[index + 1:]):
                        return  # the rest of the list was generated inside the if
                finally:
                    self.builder.location = saved
            else:
                self.visit(stmt)

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring
        self.visit(node.value)

    def visit_Pass(self, node: ast.Pass) -> None:
        pass

    def visit_Assign(self, node: ast.Assign) -> None:
        value = self.visit(node.value)
        for target in node.targets:
            self.assign(target, value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            return
        value = self.visit(node.value)
        annotation = self.eval_annotation(node.annotation)
        if annotation is lc.constexpr and _is_tensor(value):
            raise self.error(node, f"'{ast.unparse(node.target)}' is annotated constexpr but its value is only "
                                   "known at run time")
        self.assign(node.target, value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(node, "only plain names can be updated with an augmented assignment in a kernel")
        current = self.lookup(node.target.id, node.target)
        self.assign(node.target, self.binop(node.op, current, self.visit(node.value), node))

    def assign(self, target: ast.AST, value: Any) -> None:
        if isinstance(target, ast.Name):
            value = lc.unwrap(value)
            if _is_tensor(value) and value.handle.name_hint is None and not target.id.startswith("$"):
                value.handle.name_hint = target.id  # readable IR: %offsets = ...
            self.scope[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                if isinstance(elt, ast.Starred):
                    raise self.error(elt, f"unsupported syntax in a kernel: {_describe_node(elt)}")
            if not isinstance(value, (tuple, list)):
                raise self.error(target, f"cannot unpack {sem._describe(value)} into {len(target.elts)} names")
            if len(value) != len(target.elts):
                raise self.error(target, f"cannot unpack {len(value)} values into {len(target.elts)} names")
            for elt, item in zip(target.elts, value):
                self.assign(elt, item)
        else:
            raise self.error(target, f"cannot assign to {_describe_node(target)} in a kernel; "
                                     "tensors are values: store through a pointer with pl.store")

    def visit_Return(self, node: ast.Return) -> None:
        value = None if node.value is None else self.visit(node.value)
        if self.loop_depth:
            raise self.error(node, "'return' inside a loop is not supported")
        self.scope[_RETURN] = lc.unwrap(value)
        self.terminated = True

    def visit_Assert(self, node: ast.Assert) -> None:
        test = lc.unwrap(self.visit(node.test))
        msg = "" if node.msg is None else lc.unwrap(self.visit(node.msg))
        if _is_tensor(test):
            # As in Triton: an assert on run-time values is pl.device_assert.
            if not isinstance(msg, str):
                raise self.error(node.msg, f"the message of an 'assert' on run-time values must be a string "
                                           f"known at compile time, got {sem._describe(msg)}")
            device_assert(test, msg)
            return

        def check() -> None:
            if not test:
                raise self.error(node, f"assertion failed{': ' + str(msg) if node.msg is not None else ''}")

        self.mod.compile_time_effect(check)

    def visit_With(self, node: ast.With) -> None:
        # Each item's __enter__ where the block starts, its __exit__ where it ends (the
        # last item's first), both at compile time: a KernelContext emits what it needs.
        returns = [n for n in ast.walk(ast.Module(body=node.body, type_ignores=[])) if isinstance(n, ast.Return)]
        if returns:
            raise self.error(returns[0], "'return' inside a 'with' block is not supported: the block's exit would "
                                         "not run")
        managers = []
        for item in node.items:
            manager = lc.unwrap(self.visit(item.context_expr))
            if not isinstance(manager, lc.KernelContext):
                what = "a run-time value" if _is_tensor(manager) else sem._describe(manager)
                raise self.error(item.context_expr, f"a 'with' statement in a kernel takes a kernel context manager "
                                                    f"(a polytile.language.KernelContext, such as a plugin's "
                                                    f"scope), got {what}")
            entered = manager.__enter__()
            if item.optional_vars is not None:
                self.assign(item.optional_vars, entered)
            managers.append(manager)
        self.visit_stmts(node.body)
        for manager in reversed(managers):
            manager.__exit__(None, None, None)

    def visit_Break(self, node: ast.Break) -> None:
        # A loop rewrites its own jumps before generating its body (frontend/loop_exits.py).
        raise self.error(node, "'break' outside a loop")

    def visit_Continue(self, node: ast.Continue) -> None:
        raise self.error(node, "'continue' not properly in a loop")


    def eval_annotation(self, node: ast.AST) -> Any:
        try:
            return lc.unwrap(self.visit(node))
        except CompilationError:
            return None

