"""Expressions: names and globals, operators, subscripts, f-strings.

Compile-time values are folded with Python's own operators; as soon as one operand is a
run-time tensor the operator goes to :mod:`polytile.language.semantic`."""

from __future__ import annotations

import ast
import builtins as _py
import operator
import types
from typing import Any

from ..errors import did_you_mean
from ..language import core as lc, semantic as sem
from .globals import refusal_message
from .values import _describe_op, _is_tensor

# Python builtins a kernel may call on compile-time values.
_PY_BUILTINS = {name: getattr(_py, name) for name in (
    "min", "max", "len", "int", "float", "bool", "abs", "isinstance", "tuple", "list", "zip", "enumerate",
    "getattr", "hasattr", "str", "divmod", "round", "all", "any", "reversed", "sorted", "repr", "type",
)}
_PY_NAMES = {"range": _py.range, "print": _py.print, "None": None, "True": True, "False": False,
             **_PY_BUILTINS}

_BINOPS = {ast.Add: ("add", operator.add), ast.Sub: ("sub", operator.sub), ast.Mult: ("mul", operator.mul),
           ast.Div: ("truediv", operator.truediv), ast.FloorDiv: ("floordiv", operator.floordiv),
           ast.Mod: ("mod", operator.mod), ast.BitAnd: ("and", operator.and_), ast.BitOr: ("or", operator.or_),
           ast.BitXor: ("xor", operator.xor), ast.LShift: ("lshift", operator.lshift),
           ast.RShift: ("rshift", operator.rshift), ast.Pow: (None, operator.pow),
           ast.MatMult: (None, operator.matmul)}
_CONVERSIONS = {ord("r"): repr, ord("s"): str, ord("a"): ascii}  # f"{x!r}" ...
_CMPOPS = {ast.Lt: ("lt", operator.lt), ast.LtE: ("le", operator.le), ast.Gt: ("gt", operator.gt),
           ast.GtE: ("ge", operator.ge), ast.Eq: ("eq", operator.eq), ast.NotEq: ("ne", operator.ne)}


def _is_user_namespace(base: Any) -> bool:
    """A module or class whose attributes a kernel reads as globals (polytile's own hold
    the language, never a user's data)."""
    if isinstance(base, types.ModuleType):
        return not base.__name__.startswith("polytile")
    return isinstance(base, type) and not base.__module__.startswith("polytile")


class ExpressionGen:
    """Expression visitors of :class:`~polytile.frontend.function.FunctionGen`."""

    def visit_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def visit_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def lookup(self, name: str, node: ast.AST) -> Any:
        if name in self.scope:
            return self.scope[name]
        for table in (self.closure, self.fn_globals):
            if name in table:
                return self.global_value(name, table[name], node)
        if name in _PY_NAMES:
            return _PY_NAMES[name]
        known = list(self.scope) + [n for n in self.fn_globals if not n.startswith("_")]
        raise self.error(node, f"undefined name '{name}'{did_you_mean(name, known)}")

    def global_value(self, name: str, value: Any, node: ast.AST) -> Any:
        refused = refusal_message(name, value)
        if refused is not None:
            raise self.error(node, refused)
        if isinstance(value, lc.constexpr):
            self.mod.used_globals[name] = value.value
            return value.value
        if isinstance(value, (bool, int, float, str, type(None))) or isinstance(value, tuple) \
                and all(isinstance(v, (bool, int, float, str)) for v in value):
            self.mod.used_globals[name] = value  # a compile-time global: part of the cache key
        return value

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        base = lc.unwrap(self.visit(node.value))
        try:
            value = getattr(base, node.attr)
        except AttributeError as exc:
            from ..language.extensions import BuiltinNamespace

            if type(base) in (bool, int, float) and hasattr(lc.tensor, node.attr):
                # A number used as a tensor (``acc = 0; acc.to(pl.int64)``, ``value.dtype``):
                # the scalar tensor Triton makes of it (int32, int64 or uint64 by size,
                # fp32, int1), as Triton's frontend makes an assigned literal a tensor.
                return getattr(sem.to_tensor(base), node.attr)

            if isinstance(base, BuiltinNamespace) or str(getattr(base, "__name__", "")).startswith(
                    "polytile.language.extra"):  # pl.extra.cuda: its message names the plugin, if known
                raise self.error(node, str(exc)) from None
            what = sem._describe(base) if not hasattr(base, '__name__') else repr(base.__name__)
            # The language's own message says which plugin provides a name, when one does.
            why = str(exc).partition(": ")[2] if getattr(base, "__name__", "") == "polytile.language" else ""
            raise self.error(node, f"{what} has no attribute '{node.attr}'" + (f": {why}" if why else "")) from None
        if _is_user_namespace(base):
            # helpers.SCALE or Config.SCALE: a global too, folded like one.
            refused = refusal_message(ast.unparse(node), value)
            if refused is not None:
                raise self.error(node, refused)
        return value

    def visit_Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self.starred_items(node.elts))

    def visit_List(self, node: ast.List) -> list:
        return list(self.starred_items(node.elts))

    def starred_items(self, elts: list[ast.expr]) -> list:
        items = []
        for elt in elts:
            if isinstance(elt, ast.Starred):
                items.extend(lc.unwrap(self.visit(elt.value)))
            else:
                items.append(self.visit(elt))
        return items

    def visit_Slice(self, node: ast.Slice) -> slice:
        parts = [None if p is None else lc.unwrap(self.visit(p)) for p in (node.lower, node.upper, node.step)]
        return slice(*parts)

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        base = lc.unwrap(self.visit(node.value))
        index = lc.unwrap(self.visit(node.slice))
        if _is_tensor(base):
            return sem.subscript(base, index)
        if _is_tensor(index):
            raise self.error(node.slice, "indexing a compile-time sequence needs a compile-time index")
        return base[index]

    def visit_JoinedStr(self, node: ast.JoinedStr) -> str:
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                item = lc.unwrap(self.visit(value.value))
                if _is_tensor(item):
                    # As in Triton: an f-string is made while compiling, when run-time values are unknown.
                    raise self.error(value.value, f"an f-string can only format compile-time values; "
                                                  f"'{ast.unparse(value.value)}' is known only at run time: pass it "
                                                  "to pl.device_print as a value, e.g. pl.device_print(\"x\", x)")
                item = _CONVERSIONS.get(value.conversion, lambda v: v)(item)
                spec = "" if value.format_spec is None else self.visit(value.format_spec)
                parts.append(format(item, spec))
            else:
                parts.append(str(value.value))
        return "".join(parts)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        value = lc.unwrap(self.visit(node.operand))
        if not _is_tensor(value):
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
                    ast.Invert: operator.invert}[type(node.op)](value)
        if isinstance(node.op, ast.USub):
            return sem.negate(value)
        if isinstance(node.op, ast.UAdd):
            return value
        if isinstance(node.op, ast.Invert):
            return sem.invert(value)
        return sem.logical_not(value)  # elementwise on tiles, as Triton's tensor.__not__

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        return self.binop(node.op, self.visit(node.left), self.visit(node.right), node)

    def binop(self, op: ast.operator, left: Any, right: Any, node: ast.AST) -> Any:
        left, right = lc.unwrap(left), lc.unwrap(right)
        name, fn = _BINOPS[type(op)]
        if not _is_tensor(left) and not _is_tensor(right):
            return fn(left, right)
        if name is None:
            hint = "use pl.dot" if isinstance(op, ast.MatMult) else "multiply, or use pl.exp2/pl.log2"
            raise self.error(node, f"'{_describe_op(op)}' is not supported on tensors; {hint}")
        return sem.binary(name, left, right)

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        # Triton's rule: a compile-time operand either decides the result (False for 'and',
        # True for 'or': it is the result) or drops out; run-time values combine as i1,
        # tensors element by element (Triton's logical_and / logical_or, broadcast), with
        # every operand evaluated.
        is_and = isinstance(node.op, ast.And)
        run_time: list[Any] = []
        value: Any = None
        for value_node in node.values:
            value = lc.unwrap(self.visit(value_node))
            if not _is_tensor(value):
                if bool(value) != is_and:
                    return value
                continue
            run_time.append(value)
        if not run_time:
            return value  # every operand compile-time, none decided: Python gives the last
        if len(run_time) == 1:
            return run_time[0]
        result = run_time[0]
        for other in run_time[1:]:
            result = result.logical_and(other) if is_and else result.logical_or(other)
        return result

    def visit_Compare(self, node: ast.Compare) -> Any:
        left = lc.unwrap(self.visit(node.left))
        result: Any = True
        for op, right_node in zip(node.ops, node.comparators):
            right = lc.unwrap(self.visit(right_node))
            if len(node.ops) > 1 and any(_is_tensor(v) and v.shape for v in (left, right)):
                raise self.error(node, f"a chained comparison ('{ast.unparse(node)}') needs scalars; on tensors "
                                       "compare pairwise and combine with '&', e.g. (a < b) & (b < c)")
            if isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                if isinstance(op, (ast.In, ast.NotIn)) and (_is_tensor(left) or _is_tensor(right)):
                    raise self.error(node, "'in' works on compile-time values only")
                value = {ast.Is: operator.is_, ast.IsNot: operator.is_not, ast.In: lambda a, b: a in b,
                         ast.NotIn: lambda a, b: a not in b}[type(op)](left, right)
            elif not _is_tensor(left) and not _is_tensor(right):
                value = _CMPOPS[type(op)][1](left, right)
            else:
                value = sem.compare(_CMPOPS[type(op)][0], left, right)
            if result is True:
                result = value
            elif _is_tensor(result) or _is_tensor(value):
                result = sem.binary("and", sem.to_bool(sem.to_tensor(result)), sem.to_bool(sem.to_tensor(value)))
            else:
                result = result and value
            if not _is_tensor(result) and not result:
                return result  # Python stops at the first false link (later operands are not evaluated)
            left = right
        return result
