"""Calls: Python builtins on compile-time values, language builtins, and other ``@jit``
functions, inlined or (``noinline=True``) made into one ``func.func`` per
specialization."""

from __future__ import annotations

import ast
import builtins as _py
from typing import Any

from ..dialects import func as func_d
from ..errors import CompilationError
from ..ir.builder import InsertionPoint
from ..ir import types as t
from ..ir.types import FunctionType
from ..language import core as lc, semantic as sem, standard as std
from ..language.loop_options import WarpSpecialize
from ..language.debug import device_print
from .expressions import _PY_BUILTINS
from .source import FunctionSource
from .values import _flatten_value, _is_tensor, _unflatten, _value_structure


def _is_jit(value: Any) -> bool:
    return getattr(value, "__polytile_jit__", False)


def _one_of(fn: Any, functions: Any) -> bool:
    # By identity: `in` would compare with ==, which on a tensor builds a comparison.
    return any(fn is f for f in functions)


# Callables that make compile-time values (a range, a constexpr).
_COMPILE_TIME_VALUES = (std.range, std.static_range, lc.constexpr, WarpSpecialize)

# Builtins that act on the compiler, not on the kernel: held back during dry runs.
_COMPILE_TIME_EFFECTS = (std.static_print, std.static_assert)


def _print(gen: Any, node: ast.Call, args: list, kwargs: dict) -> None:
    # As in Triton, print() in a kernel prints at run time (pl.static_print prints while compiling).
    if not args or not isinstance(args[0], str):
        first = sem._describe(args[0]) if args else "nothing"
        raise gen.error(node, "print() in a kernel prints at run time, as pl.device_print(prefix, *values): its "
                              f"first argument must be a prefix string, got {first}; use pl.static_print to print "
                              "while compiling")
    unknown = sorted(set(kwargs) - {"hex"})
    if unknown:
        raise gen.error(node, f"print() in a kernel takes no '{unknown[0]}' argument (it is pl.device_print: "
                              "prefix, values, hex=)")
    return device_print(*args, **kwargs)


def _min_max(combine: Any) -> Any:
    def call(gen: Any, node: ast.Call, args: list, kwargs: dict) -> Any:
        # As in Triton, min/max of run-time values are pl.minimum/pl.maximum, folded left.
        if len(args) < 2 or kwargs:
            raise gen.error(node, f"{combine.__name__.replace('imum', '')}() of run-time values takes two or more "
                                  f"values (it is pl.{combine.__name__})")
        result = args[0]
        for value in args[1:]:
            result = combine(result, value)
        return result

    return call


#: Python builtins whose meaning in a kernel is Triton's, not Python's, on run-time values
#: (and for print(), always).
_PYTHON_CALLS = ((_py.print, _print), (_py.min, _min_max(std.minimum)), (_py.max, _min_max(std.maximum)))


def add_call_site(exc: CompilationError, callee: str, site: Any, source_line: str | None) -> CompilationError:
    """``exc`` (located in ``callee``'s body) with the call that led there appended, as a
    traceback of kernel frames: innermost error first, then each call site outwards."""
    frames = getattr(exc, "call_sites", [])
    if frames and frames[-1][:2] == [callee, site]:
        frames[-1][3] += 1  # recursion: one frame, counted
    else:
        frames.append([callee, site, source_line, 1])
    exc.call_sites = frames  # type: ignore[attr-defined]
    base = getattr(exc, "text_without_calls", None)
    if base is None:
        base = exc.text_without_calls = str(exc)  # type: ignore[attr-defined]
    lines = [base]
    for name, where, text, count in frames:
        lines.append(f"  in helper '{name}' called from {where}")
        if text is not None:
            lines += [f"    {text}", "    " + " " * max(where.column - 1, 0) + "^"]
        if count > 1:
            lines.append(f"  [the same call {count - 1} more times]")
    exc.args = ("\n".join(lines),)
    return exc


class CallGen:
    """Call visitors of :class:`~polytile.frontend.function.FunctionGen`."""

    def call_arguments(self, node: ast.Call) -> tuple[list, dict]:
        args = self.starred_items(node.args)
        kwargs = {}
        for keyword in node.keywords:
            if keyword.arg is None:
                kwargs.update(lc.unwrap(self.visit(keyword.value)))
            else:
                kwargs[keyword.arg] = self.visit(keyword.value)
        return args, kwargs

    def visit_Call(self, node: ast.Call) -> Any:
        fn = lc.unwrap(self.visit(node.func))
        args, kwargs = self.call_arguments(node)
        if _is_jit(fn):
            return self.call_jit(fn, args, kwargs)
        if _one_of(fn, _COMPILE_TIME_EFFECTS):
            self.mod.compile_time_effect(lambda: fn(*args, **kwargs))
            return None
        if lc.is_builtin(fn) or isinstance(getattr(fn, "__self__", None), (lc.tensor, lc.dtype)):
            return fn(*args, **kwargs)
        if isinstance(fn, type) and issubclass(fn, lc.KernelContext):  # made for a 'with' (a plugin's scope)
            return fn(*args, **kwargs)
        if _one_of(fn, _COMPILE_TIME_VALUES) or isinstance(fn, type) and issubclass(fn, lc.dtype):
            value = fn(*args, **kwargs)
            return value.value if isinstance(value, lc.constexpr) else value
        plain = [lc.unwrap(a) for a in args]
        plain_kwargs = {k: lc.unwrap(v) for k, v in kwargs.items()}
        run_time = any(_is_tensor(a) for a in [*plain, *plain_kwargs.values()])
        kernel_meaning = next((meaning for f, meaning in _PYTHON_CALLS if f is fn), None)
        if kernel_meaning is not None and (run_time or fn is _py.print):
            return kernel_meaning(self, node, plain, plain_kwargs)
        if fn is _py.isinstance and len(plain) == 2 and not plain_kwargs and not _is_tensor(plain[1]):
            # What a value is, is known while compiling, a run-time value's too
            # (``isinstance(z, pl.tensor)``, as Triton allows).
            return isinstance(plain[0], plain[1])
        if fn is _py.range or _one_of(fn, _PY_BUILTINS.values()):
            if run_time:
                raise self.error(node, f"Python's {fn.__name__}() works on compile-time values only")
            return fn(*plain, **plain_kwargs)
        name = getattr(fn, "__name__", None) or ast.unparse(node.func)
        raise self.error(node, f"cannot call '{name}' inside a kernel: only @jit functions, polytile.language "
                               "builtins and a few Python builtins on compile-time values can be called")

    def call_jit(self, fn: Any, args: list, kwargs: dict) -> Any:
        src = fn.source()
        bound = fn.bind(args, kwargs, error=lambda message: CompilationError(message))
        constexprs = fn.constexpr_names()
        for name, value in bound.items():
            if name in constexprs and _is_tensor(lc.unwrap(value)):
                raise CompilationError(f"argument '{name}' of '{fn.__name__}' is a constexpr, but the value passed "
                                       "is only known at run time")
        if self.mod.depth > 64:
            raise CompilationError(f"calls nest too deeply at '{fn.__name__}' (is it recursive?)")
        site = self.builder.location
        try:
            if fn.noinline:
                return self.call_noinline(fn, src, bound, constexprs)
            scope = {k: lc.unwrap(v) for k, v in bound.items()}
            return self.mod.run_body(src, scope)
        except CompilationError as exc:
            if exc.location is None or site is None:
                raise  # about the call itself: the caller puts it at the call's line
            raise add_call_site(exc, fn.__name__, site, self.src.source_line(site.line)) from None

    def call_noinline(self, fn: Any, src: FunctionSource, bound: dict, constexprs: set) -> Any:
        params, values, key_parts = [], [], []
        for name, value in bound.items():
            value = lc.unwrap(value)
            if name in constexprs:
                key_parts.append((name, repr(value)))
                continue
            if _is_tensor(value) and isinstance(value.type, t.DialectType):
                raise CompilationError(f"noinline function '{fn.__name__}' takes scalars (pointers, integers, floats); "
                                       f"argument '{name}' is a {value.type} value: pass it to a @jit helper that "
                                       "is inlined (the default), or pass what it is made from")
            if _is_tensor(value) and value.shape:
                raise CompilationError(f"noinline function '{fn.__name__}' takes scalars (pointers, integers, floats); "
                                       f"argument '{name}' is a tensor of shape {list(value.shape)}")
            value = sem.to_tensor(value)
            params.append(name)
            values.append(value)
            key_parts.append((name, str(value.type)))
        key = (fn, tuple(key_parts))
        found = self.mod.noinline.get(key)
        if found is None:
            found = _make_noinline(self.mod, fn, src, bound, constexprs, params, [v.type for v in values], key)
        function, structure = found
        ftype = function.function_type
        op = self.builder.create(func_d.CallOp, [v.handle for v in values], callee=_symbol(function.sym_name),
                                 result_types=list(ftype.results))
        results = [lc.tensor(r) for r in op.results]
        return _unflatten(structure, results)[0]


def _symbol(name: str) -> Any:
    from ..ir.attributes import SymbolRef

    return SymbolRef(name)


def _make_noinline(mod: Any, fn: Any, src: FunctionSource, bound: dict, constexprs: set, params: list[str],
                   types: list, key: Any) -> tuple:
    """A ``func.func`` with ``noinline = true`` for one specialization of ``fn``."""
    taken = {op.attributes.get("sym_name") for op in mod.module.body.block}
    name, n = fn.__name__, 1
    while name in taken:
        name, n = f"{fn.__name__}_{n}", n + 1
    function = func_d.FuncOp.create(name, types, [], arg_names=params, location=src.location(src.tree),
                                    noinline=True)
    scope = {k: lc.unwrap(v) for k, v in bound.items() if k in constexprs}
    for param, arg in zip(params, function.arguments):
        scope[param] = lc.tensor(arg)
    saved = mod.builder.insertion_point
    mod.builder.insertion_point = InsertionPoint.at_end(function.entry_block)
    try:
        with mod.kept():  # made once and kept, even when first called from a dry run
            returned = mod.run_body(src, scope)
        structure = _value_structure(returned)
        values = _flatten_value(returned, structure)
        mod.builder.create(func_d.ReturnOp, [v.handle for v in values])
    finally:
        mod.builder.insertion_point = saved
    function.attributes["function_type"] = FunctionType(tuple(types), tuple(v.type for v in values))
    mod.module.body.block.insert_before(function, mod.module.body.block.first_op)
    mod.noinline[key] = (function, structure)
    return function, structure

