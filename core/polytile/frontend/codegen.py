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

import dataclasses

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from ..dialects import func as func_d
from ..dialects.builtin import ModuleOp
from ..errors import CompilationError
from ..ir import types as t
from ..ir.builder import Builder, InsertionPoint
from ..ir.operation import Block, Region
from ..language import core as lc, semantic as sem
from .calls import _is_jit
from .function import FunctionGen
from .source import FunctionSource
from .values import _RETURN

# --------------------------------------------------------------------------------------
# The module being generated (the context builtins see)


@dataclasses.dataclass(frozen=True)
class LaunchFacts:
    """What the kernel's code may know of its launch at compile time
    (``pl.extra.cuda.num_warps()``, ``num_threads()``): part of the compile's options."""

    num_warps: int
    #: Threads per warp on the target (32; 64 on AMD CDNA).
    warp_size: int = 32


class ModuleGen:
    """One kernel compilation: the module, the builder, and the noinline functions made."""

    def __init__(self, launch: LaunchFacts | None = None) -> None:
        #: The launch's facts, or None where the compile does not know them (``lower()``).
        self.launch = launch
        self.module = ModuleOp([], [], {}, [Region([Block()])])
        self.builder = Builder()
        self.generators: list[FunctionGen] = []
        self.noinline: dict[Any, Any] = {}
        self.used_globals: dict[str, Any] = {}
        self.depth = 0
        #: Compile-time side effects held back while a dry run generates code that will be
        #: thrown away (None: none is running, effects happen at once).
        self.held_effects: list[Callable[[], Any]] | None = None

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

    # -- compile-time side effects ----------------------------------------------------
    def compile_time_effect(self, action: Callable[[], Any]) -> None:
        """Run ``action`` (a ``static_print``, a compile-time ``assert``) now, or hold it
        while a dry run is generating: each source occurrence acts once per generation
        that is kept, however often a loop body is tried to infer its carried types (and a
        ``static_assert`` on a type the dry run only guessed cannot fail)."""
        if self.held_effects is None:
            action()
        else:
            self.held_effects.append(action)

    @contextmanager
    def dry_run(self) -> Iterator[list[Callable[[], Any]]]:
        """Generate code that will be discarded: its compile-time effects are collected in
        the yielded list, which the caller drops or replays with :meth:`replay`."""
        saved, self.held_effects = self.held_effects, []
        try:
            yield self.held_effects
        finally:
            self.held_effects = saved

    @contextmanager
    def kept(self) -> Iterator[None]:
        """Generate code that is kept even inside a dry run (a noinline function, made once)."""
        saved, self.held_effects = self.held_effects, None
        try:
            yield
        finally:
            self.held_effects = saved

    def replay(self, effects: list[Callable[[], Any]]) -> None:
        for action in effects:
            self.compile_time_effect(action)

    def call_function(self, fn: Any, args: list[Any], kwargs: dict | None = None) -> Any:
        """Call a @jit function from a builtin (a reduce combine function, say)."""
        if not _is_jit(fn):
            raise CompilationError(f"expected a @jit function, got {sem._describe(fn)}")
        return self.generators[-1].call_jit(fn, list(args), dict(kwargs or {}))




# --------------------------------------------------------------------------------------
# Entry point


def _read_only(src: Any, name: str, type_: t.Type) -> t.Type:
    """The type of parameter ``name`` annotated ``pl.const``: its pointer type, const."""
    if isinstance(type_, t.PointerType):
        return t.PointerType(type_.pointee, type_.address_space, const=True)
    raise src.error(src.tree, f"parameter '{name}' is annotated pl.const, which marks pointers a kernel only reads "
                              f"through, but it is passed {sem.type_name(type_)}")


def generate_kernel(jit_fn: Any, arg_types: dict[str, t.Type], constexprs: dict[str, Any],
                    adapted: dict | None = None, launch: LaunchFacts | None = None) -> tuple[Any, dict]:
    """The module for one specialization of ``jit_fn``: run-time parameters get
    ``arg_types`` (by name), constexpr parameters take ``constexprs``; an argument a
    plugin adapts (``adapted``: name -> AdaptedPiece, a tensor descriptor) becomes one
    kernel parameter per part, and its name the value the adapter builds from them;
    ``launch``: what the code may know of the launch (None: nothing).
    Returns the module and the compile-time globals the kernel read (for the cache key)."""
    from ..runtime.adapters import expand_parameters

    src = jit_fn.source()
    mod = ModuleGen(launch)
    params = [p for p in jit_fn.param_names if p in arg_types]
    const = jit_fn.const_names() if hasattr(jit_fn, "const_names") else set()
    if const:
        arg_types = {name: _read_only(src, name, type_) if name in const else type_
                     for name, type_ in arg_types.items()}
    expanded = expand_parameters(params, arg_types, ("",) * len(params), adapted)
    kernel = func_d.FuncOp.create(src.name, [type_ for _, type_, _, _ in expanded], [],
                                  arg_names=[name for name, _, _, _ in expanded],
                                  location=src.location(src.tree), kernel=True)
    mod.module.body.block.append(kernel)
    scope: dict[str, Any] = dict(constexprs)
    parts: dict[str, list] = {}
    for (_, _, _, owner), arg in zip(expanded, kernel.arguments):
        parts.setdefault(owner, []).append(lc.tensor(arg))
    mod.builder.insertion_point = InsertionPoint.at_end(kernel.entry_block)
    mod.builder.location = src.location(src.tree)
    previous = lc.set_context(mod)
    try:
        for param in params:
            piece = (adapted or {}).get(param)
            scope[param] = parts[param][0] if piece is None else piece.adapter.build(piece.key, parts[param])
        returned = mod.run_body(src, scope, in_kernel=True)
        if returned is not None:
            raise src.error(src.tree, f"kernel '{src.name}' returns a value; kernels write their results "
                                      "through pointers with pl.store")
        last = src.tree.body[-1]
        mod.builder.create(func_d.ReturnOp, [], location=src.location(last))
    finally:
        lc.set_context(previous)
    return mod.module, mod.used_globals
