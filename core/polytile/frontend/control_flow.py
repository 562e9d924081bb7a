"""Run-time and compile-time control flow: ``if``, conditional expressions, ``for`` and
``while``.

A compile-time condition picks a branch here; a run-time one becomes ``scf.if`` yielding
the variables both branches assign.  A run-time loop's carried variables are found by
dry runs of its body (see :meth:`ControlFlowGen.loop`)."""

from __future__ import annotations

import ast
import builtins as _py
from typing import Any

from ..dialects import scf
from ..errors import CompilationError
from ..ir import types as t
from ..ir.operation import Block, Region
from ..ir.builder import InsertionPoint
from ..language import core as lc, semantic as sem, standard as std
from ..language.loop_options import WarpSpecialize
from .loop_exits import FLAG_PREFIX, ExitFlags, assign, flag, loop_exits, rewrite_body, unless
from .source import assigned_names
from .values import (
    _MISSING,
    _RETURN,
    PARTIAL_RETURN,
    _discard,
    _flatten,
    _flatten_types,
    _is_tensor,
    _number_fits,
    _range_args,
    _same_constant,
    _structure,
    _unflatten,
)


#: pl.range options that software-pipeline a loop (which a loop body under a condition defeats).
_PIPELINING = ("num_stages", "warp_specialize", "flatten", "disallow_acc_multi_buffer")


class ControlFlowGen:
    """Control-flow visitors of :class:`~polytile.frontend.function.FunctionGen`."""

    def visit_If(self, node: ast.If, rest: list[ast.stmt] | None = None) -> bool:
        """Returns True when it generated ``rest`` (the statements after it) itself."""
        cond = lc.unwrap(self.visit(node.test))
        if not _is_tensor(cond):
            chosen = node.body if cond else node.orelse
            if rest and _may_return(chosen):
                # A run-time if in the chosen branch may return: it must generate the
                # statements after this if on its paths that do not (see below), so they
                # go along with the branch.
                self.visit_stmts(chosen + rest)
                return True
            self.visit_stmts(chosen)
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
            lead = {_RETURN: "Inconsistent return types: ",
                    "$ifexp": "Ternary expression with dynamic condition has inconsistent type: "}.get(
                        name, f"Mismatched type for {name}: ")
            try:
                structure = _structure(a, b, what, self, node, lead)
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
        exits = loop_exits(node.body)
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
                    hints = self.check_loop_hints(iterable, getattr(made, "hints", {}))
        if kind is None:
            values = lc.unwrap(self.visit(iterable))
            if _is_tensor(values) or not isinstance(values, (tuple, list, _py.range)):
                raise self.error(iterable, "a kernel 'for' loop must iterate over range(...), pl.range(...), "
                                           "pl.static_range(...) or a compile-time tuple")
            return self.unrolled(node, list(values), exits)
        start, stop, step = _range_args(args)
        if kind == "static":
            bounds = [lc.unwrap(v) for v in (start, stop, step)]
            if any(_is_tensor(b) or not isinstance(b, int) for b in bounds):
                raise self.error(iterable, "pl.static_range needs compile-time integer bounds")
            return self.unrolled(node, list(_py.range(*bounds)), exits)
        if exits.breaks:
            return self.breaking_for(node, start, stop, step, hints)
        if exits.continues:
            pipelining = sorted(k for k in _PIPELINING if k in hints and not (k == "num_stages" and hints[k] < 2))
            if pipelining:
                raise self.error(node.iter, f"a loop that can 'continue' runs the rest of its body under a condition, "
                                            f"which cannot be software-pipelined: remove pl.range's "
                                            f"{', '.join(pipelining)} or the 'continue'")
            flags = self.exit_flags()
            body = [flag(node, flags.skip, False)] + rewrite_body(node.body, flags, self.error)
            node = ast.copy_location(ast.For(target=node.target, iter=node.iter, body=body, orelse=[]), node)
        self.dynamic_for(node, start, stop, step, hints)

    def exit_flags(self) -> ExitFlags:
        """Fresh flag names for one generated loop's break/continue (see loop_exits)."""
        self.loop_exit_count = getattr(self, "loop_exit_count", 0) + 1
        return ExitFlags.numbered(self.loop_exit_count)

    def check_loop_hints(self, node: ast.AST, hints: dict) -> dict:
        """The loop options of ``pl.range``, checked, as the loop's attributes (without
        ``pt.``): counts are compile-time integers of at least 0 (``num_stages``,
        ``loop_unroll_factor``); ``warp_specialize`` is true, false or a
        ``pl.WarpSpecialize`` (whose options become attributes of their own)."""
        checked = {}
        for key, value in hints.items():
            value = lc.unwrap(value)
            if value is None:
                continue
            if _is_tensor(value):
                raise self.error(node, f"pl.range({key}=...) must be a compile-time constant, got a run-time value")
            if key in ("num_stages", "loop_unroll_factor"):
                count = _count(value)
                if count is None or count < 0:
                    raise self.error(node, f"pl.range({key}={value!r}): use an integer of at least 0")
                value = count
            else:  # a switch: true or false (0 and 1 as Python takes them), or pl.WarpSpecialize
                if isinstance(value, WarpSpecialize) and key == "warp_specialize":
                    pass
                elif _is_bool(value) or _count(value) in (0, 1):  # NumPy's too
                    value = bool(value)
                    if not value:
                        continue
                else:
                    allowed = "True, False or a pl.WarpSpecialize" if key == "warp_specialize" else "True or False"
                    raise self.error(node, f"pl.range({key}={value!r}): use {allowed}")
            if isinstance(value, WarpSpecialize):
                checked.update({name[len("pt."):]: option for name, option in value.attributes().items()})
                value = True
            checked[key] = value
        return checked

    def unrolled(self, node: ast.For, values: list, exits=None) -> None:
        body, flags = node.body, None
        if exits:
            flags = self.exit_flags()
            body = [flag(node, flags.skip, False)] + rewrite_body(node.body, flags, self.error)
            self.scope[flags.stop] = False
        self.loop_depth += 1
        try:
            for value in values:
                stop = lc.unwrap(self.scope[flags.stop]) if flags is not None else False
                if not _is_tensor(stop):
                    if stop:
                        break  # a compile-time break: no more copies of the body
                    self.assign(node.target, value)
                    self.visit_stmts(body)
                    continue
                # A break under a run-time condition in an earlier copy: this one runs, with
                # its loop variable, only if that break did not happen.
                self.scope[flags.counter] = value
                bind = assign(node, "", ast.Name(id=flags.counter, ctx=ast.Load()))
                bind.targets = [node.target]
                self.visit_stmts([unless(node, flags.stop, [bind] + body)])
        finally:
            self.loop_depth -= 1

    def breaking_for(self, node: ast.For, start: Any, stop: Any, step: Any, hints: dict) -> None:
        """A run-time ``for`` that may ``break``: a ``while`` over its trip number (see
        loop_exits).  The trip count is computed first, in 64 bits, as Python's ``range``
        counts (a negative step counts down, a run-time one too), so the counter never
        overflows and the loop ends where ``range`` does."""
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the variable of a run-time loop must be a plain name")
        if hints:
            raise self.error(node.iter, f"a loop that can 'break' runs as a 'while' loop, which takes none of "
                                        f"pl.range's loop options: remove {', '.join(sorted(hints))} or the 'break'")
        bounds, _ = self.loop_bounds(node, start, stop, step)
        iv_type = bounds[0].type
        first, last, stride = (sem.cast_type(b, t.i64) for b in bounds)
        up = sem.compare("gt", stride, 0)
        span = sem.where(up, sem.binary("sub", last, first), sem.binary("sub", first, last))
        size = sem.where(up, stride, sem.binary("sub", 0, stride))
        size = sem.where(sem.compare("eq", size, 0), 1, size)  # a zero step: no trips (range would refuse it)
        trips = sem.binary("floordiv", sem.binary("add", span, sem.binary("sub", size, 1)), size)
        trips = sem.where(sem.compare("gt", trips, 0), trips, 0)
        flags = self.exit_flags()
        names = {part: f"{flags.counter}.{part}" for part in ("trips", "first", "step", "dtype")}
        self.scope[flags.counter] = sem.cast_type(sem.to_tensor(0), t.i64)
        self.scope[names["trips"]], self.scope[names["first"]], self.scope[names["step"]] = trips, first, stride
        self.scope[names["dtype"]] = lc.dtype_of(iv_type)
        self.scope[flags.stop] = sem.to_tensor(False)

        def name(id_: str) -> ast.Name:
            return ast.Name(id=id_, ctx=ast.Load())

        more = ast.Compare(left=name(flags.counter), ops=[ast.Lt()], comparators=[name(names["trips"])])
        test = ast.BoolOp(op=ast.And(), values=[more, ast.UnaryOp(op=ast.Not(), operand=name(flags.stop))])
        value = ast.BinOp(left=name(names["first"]), op=ast.Add(),
                          right=ast.BinOp(left=name(flags.counter), op=ast.Mult(), right=name(names["step"])))
        bind = assign(node, node.target.id, ast.Call(func=ast.Attribute(value=value, attr="to", ctx=ast.Load()),
                                                     args=[name(names["dtype"])], keywords=[]))
        advance = assign(node, flags.counter, ast.BinOp(left=name(flags.counter), op=ast.Add(),
                                                        right=ast.Constant(value=1)))
        body = [bind, advance, flag(node, flags.skip, False)] + rewrite_body(node.body, flags, self.error)
        loop = ast.copy_location(ast.While(test=test, body=body, orelse=[]), node)
        ast.fix_missing_locations(loop)
        self.visit_While(loop)

    def loop_bounds(self, node: ast.For, start: Any, stop: Any, step: Any) -> tuple[list, bool]:
        """``[start, stop, step]`` of a run-time loop as integer scalars of one type (i32,
        or i64 where a bound is), and whether the step is negative (known at compile time)."""
        step_value = lc.unwrap(step)
        if not _is_tensor(step_value) and step_value == 0:
            raise self.error(node.iter, "range() step must not be zero")
        descending = not _is_tensor(step_value) and step_value < 0
        bounds = [sem.to_tensor(lc.unwrap(v)) for v in (start, stop, step)]
        for b in bounds:
            if not t.is_integer(b.type) or b.shape:
                raise self.error(node.iter, f"loop bounds must be integer scalars, got {sem._describe(b)}")
        iv_type = t.i64 if any(b.type.width == 64 for b in bounds) else t.i32
        return [sem.cast_type(b, iv_type) for b in bounds], descending

    def dynamic_for(self, node: ast.For, start: Any, stop: Any, step: Any, hints: dict) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the variable of a run-time loop must be a plain name")
        step_value = lc.unwrap(step)
        descending = not _is_tensor(step_value) and step_value < 0
        if descending:
            # scf.for counts up: run i' over range(stop, start, -step) and use
            # i = start + stop - i', which visits start, start + step, ... > stop (as Triton).
            start, stop, step = stop, start, -step_value
        bounds, _ = self.loop_bounds(node, start, stop, step)
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
            if descending:
                low, high = bounds[0], bounds[1]
                scope[iv_name] = sem.binary("sub", sem.binary("add", low, high), head[0])
            else:
                scope[iv_name] = head[0]

        self.loop(node, node.body, make, bind)

    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.error(node, "'while ... else' is not supported in kernels")
        exits = loop_exits(node.body)
        if exits:
            # Rewritten without its jumps (see loop_exits), then generated as any while loop.
            flags = self.exit_flags()
            test = node.test
            if exits.breaks:
                # `while test and not stop`: a run-time loop even where `test` is known at
                # compile time (`while True:`), which the break ends.
                self.scope[flags.stop] = sem.to_tensor(False)
                # `test if not stop else False`: after a break the test is not evaluated
                # again (a test with effects, an atomic, runs as often as Python runs it).
                going = ast.UnaryOp(op=ast.Not(), operand=ast.Name(id=flags.stop, ctx=ast.Load()))
                test = ast.IfExp(test=going, body=node.test, orelse=ast.Constant(value=False))
            body = [flag(node, flags.skip, False)] + rewrite_body(node.body, flags, self.error)
            loop = ast.copy_location(ast.While(test=test, body=body, orelse=[]), node)
            return self.visit_While(ast.fix_missing_locations(loop))
        # Evaluated once only to tell a static condition from a run-time one: in a scratch
        # block that is thrown away, so a condition with side effects (an atomic in a spin
        # lock) runs exactly as often as written.
        probe = Block()
        with self.mod.dry_run() as effects, self.builder.at(InsertionPoint.at_end(probe)):
            test = lc.unwrap(self.visit(node.test))
        _discard(probe)
        if not _is_tensor(test):
            self.mod.replay(effects)  # a compile-time condition: the probe was its only evaluation
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

        self.loop(node, node.body, make, lambda scope, head: None, finish)

    def loop(self, node: ast.AST, body: list[ast.stmt], make, bind, finish=None) -> None:
        """A run-time loop: finds the loop-carried variables, their types, and generates it.

        Carried variables are the names the body assigns that exist before the loop.  A dry
        run of the body finds which really change and the types they take, so that
        ``acc = 0`` before ``acc += pl.load(...)`` carries the loaded type.  Dry runs hold
        back compile-time effects (``static_print``...): only the kept generation acts."""
        candidates = [n for n in sorted(assigned_names(body))
                      if n in self.scope and (not n.startswith("$") or n.startswith(FLAG_PREFIX))]
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
            with self.mod.dry_run():
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
        for name, arg in zip(carried, args):
            self.scope[name] = arg
        self.loop_depth += 1
        try:
            with self.builder.at(InsertionPoint.at_end(block)):
                bind(self.scope, head)  # inside the body: it may compute the loop variable
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


def _count(value: Any) -> int | None:
    """``value`` as a Python int where it is an integer (a NumPy one too), not a bool."""
    import operator

    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _is_bool(value: Any) -> bool:
    cls = type(value)
    return cls is bool or (cls.__module__ == "numpy" and cls.__name__ in ("bool_", "bool"))
