"""Helpers for values that flow out of branches, loops and functions.

A run-time ``if`` or a call yields Python structures (tuples of tensors and numbers);
these flatten them to IR values and back, and decide what must be yielded at all."""

from __future__ import annotations

import ast
from typing import Any

from ..ir import types as t
from ..ir.operation import Block
from ..language import core as lc, semantic as sem


_MISSING = object()
_RETURN = "$return"  # the pseudo-variable a `return` assigns, merged like any other
#: ``terminated`` when some paths of the statements generated so far returned and the rest
#: fell off the end (an ``if`` with a ``return`` in one branch, nested in another).
PARTIAL_RETURN = "partial"


def _is_tensor(value: Any) -> bool:
    return isinstance(value, lc.tensor)


def _same_constant(a: Any, b: Any) -> bool:
    a, b = lc.unwrap(a), lc.unwrap(b)
    if _is_tensor(a) or _is_tensor(b):
        return a is b
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same_constant(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _structure(a: Any, b: Any, what: str, gen: Any, node: ast.AST, lead: str = "") -> Any:
    """How two branch values line up: a type for a leaf, a tuple of structures, or a constant.
    ``lead`` opens the message of a mismatch (Triton's words for it, which ports check)."""
    a, b = lc.unwrap(a), lc.unwrap(b)
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(_structure(x, y, what, gen, node, lead) for x, y in zip(a, b))
    if _same_constant(a, b):
        return ("const", a)
    numbers = (bool, int, float)
    if (_is_tensor(a) or isinstance(a, numbers)) and (_is_tensor(b) or isinstance(b, numbers)):
        if _is_tensor(a) and _is_tensor(b):
            if a.type != b.type:
                fix = ("convert one with .to(...) so that both match" if t.shape_of(a.type) == t.shape_of(b.type)
                       else "give both the same shape (pl.broadcast_to, pl.reshape)")
                raise gen.error(node, f"{lead}{what} is {sem.type_name(a.type)} on one path and "
                                      f"{sem.type_name(b.type)} on the other; {fix}")
            return a.type
        if _is_tensor(a) or _is_tensor(b):
            tensor_value, number = (a, b) if _is_tensor(a) else (b, a)
            return _number_fits(number, tensor_value.type, what, gen, node)
        # Two different numbers: the type that holds both (i32, i64, or f32 with a float).
        if isinstance(a, float) or isinstance(b, float):
            return t.f32
        if isinstance(a, bool) and isinstance(b, bool):
            return t.i1
        types = [sem.literal_type(int(v)) for v in (a, b)]
        return t.i64 if t.i64 in types else (t.u64 if t.u64 in types else t.i32)
    raise gen.error(node, f"{what} is {sem._describe(a)} on one path and {sem._describe(b)} on the other; "
                          "values that differ between the branches of a run-time 'if' must be tensors or numbers")


def _number_fits(number: Any, type_: t.Type, what: str, gen: Any, node: ast.AST) -> t.Type:
    """The tensor's type, when the Python number on the other path fits in it exactly;
    otherwise an error, never a silently changed value (0.5 stored as 0, 2**40 as 0)."""
    element = t.element_type(type_)
    exact = True
    if isinstance(number, float) and not isinstance(element, t.FloatType):
        exact = False
    elif isinstance(number, int) and not isinstance(number, bool) and isinstance(element, t.IntType) \
            and element != t.i1:
        low = -(1 << (element.width - 1)) if element.signed else 0
        high = (1 << (element.width - (1 if element.signed else 0))) - 1
        exact = low <= number <= high
    if not exact:
        raise gen.error(node, f"{what} is {sem.type_name(type_)} on one path and the number {number!r} on the "
                              f"other, which {sem.type_name(type_)} cannot hold; convert the tensor with .to(...) "
                              "or make both paths the same type")
    return type_


def _flatten(value: Any, structure: Any, gen: Any, node: ast.AST, what: str, side: str) -> list:
    value = lc.unwrap(value)
    if isinstance(structure, tuple) and structure and structure[0] == "const":
        return []
    if isinstance(structure, tuple):
        return [v for item, s in zip(value, structure) for v in _flatten(item, s, gen, node, what, side)]
    return [gen.materialize(value, structure)]


def _flatten_types(structure: Any) -> list:
    if isinstance(structure, tuple) and structure and structure[0] == "const":
        return []
    if isinstance(structure, tuple):
        return [x for s in structure for x in _flatten_types(s)]
    return [structure]


def _unflatten(structure: Any, values: list) -> tuple[Any, list]:
    if isinstance(structure, tuple) and structure and structure[0] == "const":
        return structure[1], values
    if isinstance(structure, tuple):
        items = []
        for s in structure:
            item, values = _unflatten(s, values)
            items.append(item)
        return tuple(items), values
    return values[0], values[1:]


def _value_structure(value: Any) -> Any:
    value = lc.unwrap(value)
    if _is_tensor(value):
        return value.type
    if isinstance(value, (bool, int, float)):
        return sem.literal_type(value)
    if isinstance(value, tuple):
        return tuple(_value_structure(v) for v in value)
    return ("const", value)


def _flatten_value(value: Any, structure: Any) -> list:
    value = lc.unwrap(value)
    if isinstance(structure, tuple) and structure and structure[0] == "const":
        return []
    if isinstance(structure, tuple):
        return [v for item, s in zip(value, structure) for v in _flatten_value(item, s)]
    return [sem.to_tensor(value, structure)]


def _discard(block: Block) -> None:
    """Forget a block generated on trial (its ops' uses of outer values included)."""
    for op in list(block):
        for inner in op.walk(post_order=True):
            inner.drop_operand_uses()


def _range_args(args: tuple) -> tuple:
    arg1, arg2, step = args
    if arg2 is None:
        return 0, arg1, 1 if step is None else step
    return arg1, arg2, 1 if step is None else step


def _describe_node(node: ast.AST) -> str:
    names = {"With": "'with' statements", "Try": "'try' statements", "Raise": "'raise'", "Lambda": "lambdas",
             "FunctionDef": "nested function definitions", "ClassDef": "class definitions",
             "ListComp": "list comprehensions", "GeneratorExp": "generator expressions", "Dict": "dicts",
             "Set": "sets", "Import": "imports", "ImportFrom": "imports", "Global": "'global'",
             "Nonlocal": "'nonlocal'", "Delete": "'del'", "Yield": "'yield'", "Await": "'await'",
             "NamedExpr": "':=' expressions", "DictComp": "dict comprehensions", "Match": "'match' statements",
             "SetComp": "set comprehensions", "TryStar": "'try' statements", "AsyncFor": "'async for'",
             "AsyncWith": "'async with'", "AsyncFunctionDef": "nested function definitions",
             "Starred": "starred assignment (a, *b = ...)", "YieldFrom": "'yield from'"}
    kind = type(node).__name__
    return names.get(kind, f"'{kind}'")


def _describe_op(op: ast.operator) -> str:
    return {ast.Pow: "**", ast.MatMult: "@"}.get(type(op), type(op).__name__)
