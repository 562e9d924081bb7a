"""Python AST -> core IR.

:func:`generate_kernel` turns a ``@jit`` function and one specialization (a type for
each run-time argument, a value for each constexpr) into a ``builtin.module`` holding a
``func.func`` with ``kernel = true`` (and any ``noinline`` callees).

Values while generating are either :class:`polytile.language.tensor` (run-time values,
wrapping IR values) or plain Python values (literals, constexprs, dtypes, tuples):
Python values are folded at compile time and become IR constants only where an op needs
them.  Control flow whose condition is a compile-time value is resolved here (static
``if``, ``static_range``); the rest becomes ``scf.if`` / ``scf.for`` / ``scf.while``.
"""

from __future__ import annotations

import ast
import builtins as _py
import operator
from typing import Any

from ..dialects import func as func_d, scf
from ..dialects.builtin import ModuleOp
from ..errors import CompilationError, PolytileError, did_you_mean
from ..ir import types as t
from ..ir.builder import Builder, InsertionPoint
from ..ir.operation import Block, Region
from ..ir.types import FunctionType
from ..language import core as lc, semantic as sem, standard as std
from .source import FunctionSource, assigned_names
from .values import (
    _describe_node,
    _describe_op,
    _discard,
    _flatten,
    _flatten_types,
    _flatten_value,
    _range_args,
    _number_fits,
    _same_constant,
    _structure,
    _unflatten,
    _value_structure,
)

_MISSING = object()
_RETURN = "$return"  # the pseudo-variable a `return` assigns, merged like any other
#: ``terminated`` when some paths of the statements generated so far returned and the rest
#: fell off the end (an ``if`` with a ``return`` in one branch, nested in another).
PARTIAL_RETURN = "partial"

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
_CMPOPS = {ast.Lt: ("lt", operator.lt), ast.LtE: ("le", operator.le), ast.Gt: ("gt", operator.gt),
           ast.GtE: ("ge", operator.ge), ast.Eq: ("eq", operator.eq), ast.NotEq: ("ne", operator.ne)}


def _is_tensor(value: Any) -> bool:
    return isinstance(value, lc.tensor)


def _is_jit(value: Any) -> bool:
    return getattr(value, "__polytile_jit__", False)


# --------------------------------------------------------------------------------------
# The module being generated (the context builtins see)


class ModuleGen:
    """One kernel compilation: the module, the builder, and the noinline functions made."""

    def __init__(self) -> None:
        self.module = ModuleOp([], [], {}, [Region([Block()])])
        self.builder = Builder()
        self.generators: list[FunctionGen] = []
        self.noinline: dict[Any, Any] = {}
        self.used_globals: dict[str, Any] = {}
        self.depth = 0

    def run_body(self, src: FunctionSource, scope: dict, in_kernel: bool = False) -> Any:
        """Generate ``src``'s body at the builder's insertion point; return its return value."""
        gen = FunctionGen(self, src, scope, in_kernel)
        self.generators.append(gen)
        self.depth += 1
        try:
            gen.visit_stmts(src.tree.body)
        finally:
            self.generators.pop()
            self.depth -= 1
        return gen.scope.get(_RETURN) if gen.terminated else None

    def make_noinline(self, fn: Any, src: FunctionSource, bound: dict, constexprs: set, params: list[str],
                      types: list, key: Any) -> tuple:
        """A ``func.func`` with ``noinline = true`` for one specialization of ``fn``."""
        taken = {op.attributes.get("sym_name") for op in self.module.body.block}
        name, n = fn.__name__, 1
        while name in taken:
            name, n = f"{fn.__name__}_{n}", n + 1
        function = func_d.FuncOp.create(name, types, [], arg_names=params, location=src.location(src.tree),
                                        noinline=True)
        scope = {k: lc.unwrap(v) for k, v in bound.items() if k in constexprs}
        for param, arg in zip(params, function.arguments):
            scope[param] = lc.tensor(arg)
        saved = self.builder.insertion_point
        self.builder.insertion_point = InsertionPoint.at_end(function.entry_block)
        try:
            returned = self.run_body(src, scope)
            structure = _value_structure(returned)
            values = _flatten_value(returned, structure)
            self.builder.create(func_d.ReturnOp, [v.handle for v in values])
        finally:
            self.builder.insertion_point = saved
        function.attributes["function_type"] = FunctionType(tuple(types), tuple(v.type for v in values))
        self.module.body.block.insert_before(function, self.module.body.block.first_op)
        self.noinline[key] = (function, structure)
        return function, structure

    def call_function(self, fn: Any, args: list[Any], kwargs: dict | None = None) -> Any:
        """Call a @jit function from a builtin (a reduce combine function, say)."""
        if not _is_jit(fn):
            raise CompilationError(f"expected a @jit function, got {sem._describe(fn)}")
        return self.generators[-1].call_jit(fn, list(args), dict(kwargs or {}))


# --------------------------------------------------------------------------------------
# One function body


class FunctionGen(ast.NodeVisitor):
    """Generates the body of one function (the kernel, an inlined callee, a noinline one)."""

    def __init__(self, mod: ModuleGen, src: FunctionSource, scope: dict[str, Any], in_kernel: bool = False):
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

    # -- statements -------------------------------------------------------------------
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
        if _is_tensor(test):
            raise self.error(node, "'assert' needs a compile-time condition; for a run-time check use "
                                   "pl.device_assert(condition, message), and pl.static_assert for constexprs")
        if not test:
            msg = "" if node.msg is None else f": {lc.unwrap(self.visit(node.msg))}"
            raise self.error(node, f"assertion failed{msg}")

    def visit_Break(self, node: ast.Break) -> None:
        raise self.error(node, "'break' is not supported in kernels yet; use a 'while' loop with a condition")

    def visit_Continue(self, node: ast.Continue) -> None:
        raise self.error(node, "'continue' is not supported in kernels yet; use an 'if' around the loop body")

    # -- if ---------------------------------------------------------------------------
    def visit_If(self, node: ast.If, rest: list[ast.stmt] | None = None) -> bool:
        """Returns True when it generated ``rest`` (the statements after it) itself."""
        cond = lc.unwrap(self.visit(node.test))
        if not _is_tensor(cond):
            self.visit_stmts(node.body if cond else node.orelse)
            return False
        cond = self.condition(cond, node.test, "an 'if'")
        rest = rest or []
        before = dict(self.scope)
        # When a branch may return, the statements after the if run only on the paths
        # that did not: generate them inside each branch (after a return nothing more is
        # generated, and a nested if hands them on to its own non-returning paths).
        consumed = bool(rest) and (_may_return(node.body) or _may_return(node.orelse))
        tail = rest if consumed else []
        then_block, then_scope, then_term = self.gen_branch(node.body + tail, before)
        else_block, else_scope, else_term = self.gen_branch(node.orelse + tail, before)
        self.emit_if(node, cond, before, (then_block, then_scope, then_term), (else_block, else_scope, else_term))
        return consumed

    def condition(self, cond: Any, node: ast.AST, what: str) -> Any:
        if cond.shape:
            raise self.error(node, f"the condition of {what} must be a scalar, got a tensor of shape "
                                   f"{list(cond.shape)}; use pl.where for elementwise choices")
        return sem.to_bool(cond)

    def gen_branch(self, stmts: list[ast.stmt], before: dict) -> tuple[Block, dict, bool]:
        block = Block()
        self.scope, self.terminated = dict(before), False
        with self.builder.at(InsertionPoint.at_end(block)):
            self.visit_stmts(stmts)
        result = (block, self.scope, self.terminated)
        self.scope, self.terminated = before, False
        return result

    def emit_if(self, node: ast.AST, cond: Any, before: dict, then: tuple, other: tuple) -> None:
        (then_block, then_scope, then_term), (else_block, else_scope, else_term) = then, other
        if then_term or else_term:
            # Falling off the end of a function returns None.
            for scope, term in ((then_scope, then_term), (else_scope, else_term)):
                if not term:
                    scope[_RETURN] = None
            names = [_RETURN]
        else:
            names = [n for n in then_scope if n in else_scope and n != _RETURN]
        merged: dict[str, Any] = {}
        yields: list[tuple[str, Any, Any]] = []
        for name in names:
            a, b = then_scope[name], else_scope[name]
            if a is b:
                merged[name] = a
                continue
            if _same_constant(a, b):
                merged[name] = a
                continue
            yields.append((name, a, b))
        then_values, else_values, structures = [], [], []
        for name, a, b in yields:
            what = {_RETURN: "the return value", "$ifexp": "the conditional expression"}.get(name, f"'{name}'")
            try:
                structure = _structure(a, b, what, self, node)
            except CompilationError:
                mergeable = all(_is_tensor(v) or isinstance(v, (bool, int, float, tuple)) for v in (a, b))
                if name in before or name == _RETURN or mergeable:
                    raise
                continue  # new in both branches, but not mergeable: local to each branch
            structures.append((name, structure))
            with self.builder.at(InsertionPoint.at_end(then_block)):
                then_values += _flatten(a, structure, self, node, what, "then")
            with self.builder.at(InsertionPoint.at_end(else_block)):
                else_values += _flatten(b, structure, self, node, what, "else")
        for block, values in ((then_block, then_values), (else_block, else_values)):
            with self.builder.at(InsertionPoint.at_end(block)):
                self.builder.create(scf.YieldOp, [v.handle for v in values])
        op = scf.IfOp([cond.handle], [v.type for v in then_values], {}, [Region([then_block]), Region([else_block])],
                      self.builder.location)
        self.builder.insert(op)
        hints = [name for name, structure in structures for _ in _flatten_types(structure)]
        for result, hint in zip(op.results, hints):
            if hint != _RETURN and not hint.startswith("$"):
                result.name_hint = hint
        results = [lc.tensor(r) for r in op.results]
        for name, structure in structures:
            merged[name], results = _unflatten(structure, results)
        self.scope.update(merged)
        if then_term is True and else_term is True:
            self.terminated = True
        elif then_term or else_term:
            # Some paths returned and the statements after the if were generated on the
            # others: nothing is left to generate here, but not every path has returned.
            self.terminated = PARTIAL_RETURN

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        cond = lc.unwrap(self.visit(node.test))
        if not _is_tensor(cond):
            return self.visit(node.body if cond else node.orelse)
        cond = self.condition(cond, node.test, "a conditional expression")
        temp = "$ifexp"
        body = [ast.copy_location(ast.Assign([ast.Name(temp, ast.Store())], node.body), node.body)]
        orelse = [ast.copy_location(ast.Assign([ast.Name(temp, ast.Store())], node.orelse), node.orelse)]
        before = dict(self.scope)
        before[temp] = None
        then = self.gen_branch(body, before)
        other = self.gen_branch(orelse, before)
        self.scope = before
        self.emit_if(node, cond, before, then, other)
        return self.scope.pop(temp)

    # -- loops ------------------------------------------------------------------------
    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error(node, "'for ... else' is not supported in kernels")
        iterable = node.iter
        kind, args, hints = None, None, {}
        if isinstance(iterable, ast.Call):
            callee = lc.unwrap(self.visit(iterable.func))
            if callee is _py.range or callee is std.range or callee is std.static_range:
                call_args, call_kwargs = self.call_arguments(iterable)
                if callee is _py.range:
                    if call_kwargs or not 1 <= len(call_args) <= 3:
                        raise self.error(iterable, "range() takes 1 to 3 positional arguments")
                    kind, args = "dynamic", tuple(call_args) + (None,) * (3 - len(call_args))
                else:
                    made = callee(*call_args, **call_kwargs)
                    kind, args = ("static" if callee is std.static_range else "dynamic"), made.args
                    hints = getattr(made, "hints", {})
        if kind is None:
            values = lc.unwrap(self.visit(iterable))
            if _is_tensor(values) or not isinstance(values, (tuple, list, _py.range)):
                raise self.error(iterable, "a kernel 'for' loop must iterate over range(...), pl.range(...), "
                                           "pl.static_range(...) or a compile-time tuple")
            return self.unrolled(node, list(values))
        start, stop, step = _range_args(args)
        if kind == "static":
            bounds = [lc.unwrap(v) for v in (start, stop, step)]
            if any(_is_tensor(b) or not isinstance(b, int) for b in bounds):
                raise self.error(iterable, "pl.static_range needs compile-time integer bounds")
            return self.unrolled(node, list(_py.range(*bounds)))
        self.dynamic_for(node, start, stop, step, hints)

    def unrolled(self, node: ast.For, values: list) -> None:
        self.loop_depth += 1
        try:
            for value in values:
                self.assign(node.target, value)
                self.visit_stmts(node.body)
        finally:
            self.loop_depth -= 1

    def dynamic_for(self, node: ast.For, start: Any, stop: Any, step: Any, hints: dict) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the variable of a run-time loop must be a plain name")
        step_value = lc.unwrap(step)
        if not _is_tensor(step_value) and step_value <= 0:
            raise self.error(node.iter, f"a run-time loop needs a positive step, got {step_value}; "
                                        "use pl.static_range for other steps")
        bounds = [sem.to_tensor(lc.unwrap(v)) for v in (start, stop, step)]
        for b in bounds:
            if not t.is_integer(b.type) or b.shape:
                raise self.error(node.iter, f"loop bounds must be integer scalars, got {sem._describe(b)}")
        iv_type = t.i64 if any(b.type.width == 64 for b in bounds) else t.i32
        bounds = [sem.cast_type(b, iv_type) for b in bounds]
        iv_name = node.target.id

        def make(init_values: list, carried: list[str]):
            op = scf.ForOp.create(*[b.handle for b in bounds], [v.handle for v in init_values],
                                  location=self.builder.location, iv_name=iv_name)
            for key, value in hints.items():
                if value is not None:
                    op.set_attr(f"pt.{key}", lc.unwrap(value))
            block = op.body.block
            return op, block, [lc.tensor(block.arguments[0])], [lc.tensor(a) for a in block.arguments[1:]]

        def bind(scope: dict, head: list) -> None:
            scope[iv_name] = head[0]

        self.loop(node, node.body, make, bind, lambda op: op.body.block)

    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.error(node, "'while ... else' is not supported in kernels")
        # Evaluated once only to tell a static condition from a run-time one: in a scratch
        # block that is thrown away, so a condition with side effects (an atomic in a spin
        # lock) runs exactly as often as written.
        probe = Block()
        with self.builder.at(InsertionPoint.at_end(probe)):
            test = lc.unwrap(self.visit(node.test))
        _discard(probe)
        if not _is_tensor(test):
            if test:
                raise self.error(node.test, "this 'while' condition is always true at compile time: the loop "
                                            "would never end")
            return

        def make(init_values: list, carried: list[str]):
            types = [v.type for v in init_values]
            before_block, after_block = Block(types), Block(types)
            op = scf.WhileOp([v.handle for v in init_values], types, {},
                             [Region([before_block]), Region([after_block])], self.builder.location)
            return op, after_block, [], [lc.tensor(a) for a in after_block.arguments]

        def finish(op, carried: list[str], scope_before: dict) -> None:
            block = op.regions[0].block
            saved = self.scope
            self.scope = dict(scope_before)
            for name, arg in zip(carried, block.arguments):
                self.scope[name] = lc.tensor(arg)
            with self.builder.at(InsertionPoint.at_end(block)):
                cond = lc.unwrap(self.visit(node.test))
                if not _is_tensor(cond):
                    cond = sem.to_tensor(bool(cond))
                cond = self.condition(cond, node.test, "a 'while'")
                self.builder.create(scf.ConditionOp, cond.handle, list(block.arguments))
            self.scope = saved

        self.loop(node, node.body, make, lambda scope, head: None, None, finish)

    def loop(self, node: ast.AST, body: list[ast.stmt], make, bind, _unused, finish=None) -> None:
        """A run-time loop: finds the loop-carried variables, their types, and generates it.

        Carried variables are the names the body assigns that exist before the loop.  A dry
        run of the body finds which really change and the types they take, so that
        ``acc = 0`` before ``acc += pl.load(...)`` carries the loaded type."""
        candidates = [n for n in sorted(assigned_names(body)) if n in self.scope and not n.startswith("$")]
        before = dict(self.scope)
        inits: dict[str, Any] = {}
        for name in candidates:
            value = lc.unwrap(before[name])
            if _is_tensor(value) or (isinstance(value, (bool, int, float))):
                inits[name] = value
        types = {n: (v.type if _is_tensor(v) else sem.literal_type(v)) for n, v in inits.items()}
        carried = list(inits)
        for attempt in range(4):
            init_values = [self.materialize(inits[n], types[n]) for n in carried]
            op, block, head, args = make(init_values, carried)
            final = self.loop_body(body, block, before, head, args, carried, bind)
            _discard(block)
            for region in op.regions:  # the dry-run op itself (and a while's before region)
                for b in region.blocks:
                    _discard(b)
            op.drop_operand_uses()
            for name, value in zip(carried, init_values):
                if value is not inits[name] and not value.handle.uses and value.handle.defining_op is not None:
                    value.handle.defining_op.erase()  # a dry run's init constant nobody uses
            changed, refined = [], dict(types)
            for name, arg in zip(carried, args):
                value = lc.unwrap(final.get(name, _MISSING))
                if value is arg or value is _MISSING:
                    continue
                if not _is_tensor(value) and not _is_tensor(inits[name]) and _same_constant(value, inits[name]):
                    continue  # reassigned the same constant: nothing is carried
                changed.append(name)
                if _is_tensor(value) and value.type != types[name] and not _is_tensor(inits[name]):
                    # `acc = 0` before `acc += x`: the init takes x's type, if it fits exactly.
                    refined[name] = _number_fits(inits[name], value.type, f"'{name}'", self, node)
            for name in candidates:
                if name not in inits and not _same_constant(final.get(name), before[name]):
                    raise self.error(node, f"'{name}' is assigned a different compile-time value inside a "
                                           "run-time loop; only tensors and numbers can change in a loop")
            if changed == carried and refined == types:
                break
            carried, types = changed, refined
        else:
            raise self.error(node, "the types of the loop's variables do not settle; give them their final "
                                   "types before the loop (e.g. acc = pl.zeros(..., dtype=pl.float32))")
        # Generate for real.
        init_values = [self.materialize(inits[n], types[n]) for n in carried]
        op, block, head, args = make(init_values, carried)
        for name, arg in zip(carried, args):
            arg.handle.name_hint = name
        final = self.loop_body(body, block, before, head, args, carried, bind)
        yielded = []
        with self.builder.at(InsertionPoint.at_end(block)):
            for name, arg in zip(carried, args):
                value = lc.unwrap(final[name])
                if not _is_tensor(value) or value.type == types[name]:
                    value = self.materialize(value, types[name])
                if value.type != types[name]:
                    raise self.error(node, f"'{name}' changes type in the loop: {sem.type_name(types[name])} "
                                           f"before, {sem.type_name(value.type)} after an iteration; "
                                           "convert it with .to(...) so that both match")
                yielded.append(value.handle)
            self.builder.create(scf.YieldOp, yielded)
        if finish is not None:
            finish(op, carried, before)
        self.builder.insert(op)
        self.scope = before
        for name, result in zip(carried, op.results):
            if result.name_hint is None:
                result.name_hint = name
            self.scope[name] = lc.tensor(result)

    def loop_body(self, body, block, before, head, args, carried, bind) -> dict:
        self.scope = dict(before)
        bind(self.scope, head)
        for name, arg in zip(carried, args):
            self.scope[name] = arg
        self.loop_depth += 1
        try:
            with self.builder.at(InsertionPoint.at_end(block)):
                self.visit_stmts(body)
        finally:
            self.loop_depth -= 1
        final, self.scope = self.scope, before
        return final

    def materialize(self, value: Any, type_: t.Type) -> Any:
        value = lc.unwrap(value)
        if _is_tensor(value):
            if value.type == type_:
                return value
            if value.shape != t.shape_of(type_):
                value = sem.broadcast_to_shape(value, t.shape_of(type_))
            return sem.cast_type(value, t.element_type(type_))
        return sem.constant(value, type_)

    # -- expressions ------------------------------------------------------------------
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
            return getattr(base, node.attr)
        except AttributeError:
            raise self.error(node, f"{sem._describe(base) if not hasattr(base, '__name__') else repr(base.__name__)} "
                                   f"has no attribute '{node.attr}'") from None

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
                spec = "" if value.format_spec is None else self.visit(value.format_spec)
                parts.append(format(item, spec) if not _is_tensor(item) else repr(item))
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
        if value.shape:
            raise self.error(node, "'not' needs a scalar; use '~' (or == 0) on tensors")
        return sem.logical_not(value)

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
        is_and = isinstance(node.op, ast.And)
        result = lc.unwrap(self.visit(node.values[0]))
        for value_node in node.values[1:]:
            if not _is_tensor(result):
                if bool(result) != is_and:
                    return result  # short-circuit at compile time
                result = lc.unwrap(self.visit(value_node))
                continue
            other = lc.unwrap(self.visit(value_node))
            if result.shape or (_is_tensor(other) and other.shape):
                raise self.error(node, f"'{'and' if is_and else 'or'}' needs scalars; use "
                                       f"'{'&' if is_and else '|'}' on tensors")
            if not _is_tensor(other):
                if bool(other) == is_and:
                    result = sem.to_bool(result)
                    continue
                return other
            result = sem.binary("and" if is_and else "or", sem.to_bool(result), sem.to_bool(other))
        return result

    def visit_Compare(self, node: ast.Compare) -> Any:
        left = lc.unwrap(self.visit(node.left))
        result: Any = True
        for op, right_node in zip(node.ops, node.comparators):
            right = lc.unwrap(self.visit(right_node))
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
            left = right
        return result

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
        if lc.is_builtin(fn) or getattr(fn, "__self__", None) is not None and _is_tensor(fn.__self__):
            return fn(*args, **kwargs)
        if fn in (std.range, std.static_range, lc.constexpr) or isinstance(fn, type) and issubclass(fn, lc.dtype):
            value = fn(*args, **kwargs)
            return value.value if isinstance(value, lc.constexpr) else value
        if fn is _py.print:
            return std.static_print(*args, **kwargs)
        if fn is _py.range or any(fn is f for f in _PY_BUILTINS.values()):
            plain = [lc.unwrap(a) for a in args]
            if any(_is_tensor(a) for a in plain) or any(_is_tensor(lc.unwrap(v)) for v in kwargs.values()):
                name = getattr(fn, "__name__", "this function")
                hint = f"; use pl.{'maximum' if name == 'max' else 'minimum'}" if name in ("min", "max") else ""
                raise self.error(node, f"Python's {name}() works on compile-time values only{hint}")
            return fn(*plain, **{k: lc.unwrap(v) for k, v in kwargs.items()})
        name = getattr(fn, "__name__", None) or ast.unparse(node.func)
        raise self.error(node, f"cannot call '{name}' inside a kernel: only @jit functions, polytile.language "
                               "builtins and a few Python builtins on compile-time values can be called")

    def eval_annotation(self, node: ast.AST) -> Any:
        try:
            return lc.unwrap(self.visit(node))
        except CompilationError:
            return None

    # -- calls to other @jit functions ------------------------------------------------
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
        if fn.noinline:
            return self.call_noinline(fn, src, bound, constexprs)
        scope = {k: lc.unwrap(v) for k, v in bound.items()}
        return self.mod.run_body(src, scope)

    def call_noinline(self, fn: Any, src: FunctionSource, bound: dict, constexprs: set) -> Any:
        params, values, key_parts = [], [], []
        for name, value in bound.items():
            value = lc.unwrap(value)
            if name in constexprs:
                key_parts.append((name, repr(value)))
                continue
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
            found = self.mod.make_noinline(fn, src, bound, constexprs, params, [v.type for v in values], key)
        function, structure = found
        ftype = function.function_type
        op = self.builder.create(func_d.CallOp, [v.handle for v in values], callee=_symbol(function.sym_name),
                                 result_types=list(ftype.results))
        results = [lc.tensor(r) for r in op.results]
        return _unflatten(structure, results)[0]


def _symbol(name: str) -> Any:
    from ..ir.attributes import SymbolRef

    return SymbolRef(name)


# --------------------------------------------------------------------------------------
# Entry point


def generate_kernel(jit_fn: Any, arg_types: dict[str, t.Type], constexprs: dict[str, Any]) -> tuple[Any, dict]:
    """The module for one specialization of ``jit_fn``: run-time parameters get
    ``arg_types`` (by name), constexpr parameters take ``constexprs``.  Returns the module
    and the compile-time globals the kernel read (for the cache key)."""
    src = jit_fn.source()
    mod = ModuleGen()
    params = [p for p in jit_fn.param_names if p in arg_types]
    kernel = func_d.FuncOp.create(src.name, [arg_types[p] for p in params], [], arg_names=params,
                                  location=src.location(src.tree), kernel=True)
    mod.module.body.block.append(kernel)
    scope: dict[str, Any] = dict(constexprs)
    for param, arg in zip(params, kernel.arguments):
        scope[param] = lc.tensor(arg)
    mod.builder.insertion_point = InsertionPoint.at_end(kernel.entry_block)
    mod.builder.location = src.location(src.tree)
    previous = lc.set_context(mod)
    try:
        returned = mod.run_body(src, scope, in_kernel=True)
        if returned is not None:
            raise src.error(src.tree, f"kernel '{src.name}' returns a value; kernels write their results "
                                      "through pointers with pl.store")
        last = src.tree.body[-1]
        mod.builder.create(func_d.ReturnOp, [], location=src.location(last))
    finally:
        lc.set_context(previous)
    return mod.module, mod.used_globals


def _may_return(stmts: list[ast.stmt]) -> bool:
    """Whether a ``return`` appears in these statements (not in nested function bodies)."""
    pending: list[ast.AST] = list(stmts)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Return):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        pending.extend(ast.iter_child_nodes(node))
    return False
