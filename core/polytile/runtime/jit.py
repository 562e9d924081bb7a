"""``@jit``: a Python function that compiles to a kernel and launches as ``kernel[grid](...)``.

Each launch binds its arguments, makes a *specialization key* (the dtype of each array,
the IR type of each scalar, the value of each constexpr), and looks the compiled kernel
up in an in-memory cache; a miss runs the frontend and the pass pipeline for the chosen
target.  (The on-disk cache and the autotuner build on this and come later.)
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from ..errors import CompilationError, PolytileError
from ..ir import types as t
from ..language import core as lc

#: Launch keywords that are options, not kernel arguments (unless the kernel has such a parameter).
_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "debug")


class LaunchError(PolytileError, TypeError):
    """A kernel was launched with arguments or a grid that do not fit; names the kernel and argument."""


class CompiledKernel:
    """One specialization compiled for one target: the module, its backend, and the launch."""

    def __init__(self, name: str, result: Any, run_params: list[str], globals_used: dict):
        self.name = name
        self.result = result
        self.module = result.module
        self.target = result.target
        self.backend = result.backend
        self.run_params = run_params
        self.globals_used = globals_used
        self._launch = result.backend.launch

    def __repr__(self) -> str:
        return f"<CompiledKernel {self.name} for {self.target}>"

    def asm(self) -> str:
        """The kernel's IR after the pipeline, as text."""
        from ..ir import print_ir

        return print_ir(self.module)


class JITFunction:
    """A ``@jit`` function.  ``fn[grid](*args, **meta)`` launches it; inside another
    kernel, calling it inlines it (or calls a ``noinline`` function)."""

    __polytile_jit__ = True

    def __init__(self, fn: Callable, noinline: bool = False):
        if not inspect.isfunction(fn):
            raise TypeError(f"@jit needs a Python function, got {fn!r}")
        self.fn = fn
        self.noinline = bool(noinline)
        self.signature = inspect.signature(fn)
        self.param_names = list(self.signature.parameters)
        for name, param in self.signature.parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise CompilationError(f"@jit function '{fn.__name__}' has '*{name}': kernels take a fixed "
                                       "list of parameters")
        self._constexprs: set[str] | None = None
        self._source = None
        #: Compiled kernels by specialization key (and target, options).
        self.cache: dict[Any, CompiledKernel] = {}
        #: How many times this function was compiled (tests and tooling read it).
        self.compile_count = 0
        functools.update_wrapper(self, fn)

    # -- what the frontend needs ------------------------------------------------------
    def source(self) -> Any:
        if self._source is None:
            from ..frontend.source import FunctionSource

            self._source = FunctionSource(self.fn)
        return self._source

    def constexpr_names(self) -> set[str]:
        """Parameters annotated ``pl.constexpr`` (the annotation may be a string)."""
        if self._constexprs is None:
            names = set()
            for name, param in self.signature.parameters.items():
                annotation = param.annotation
                if isinstance(annotation, str):
                    try:
                        annotation = eval(annotation, self.fn.__globals__)  # noqa: S307 - the user's own annotation
                    except Exception:
                        annotation = annotation.rsplit(".", 1)[-1]
                if annotation is lc.constexpr or isinstance(annotation, lc.constexpr) or annotation == "constexpr":
                    names.add(name)
            self._constexprs = names
        return self._constexprs

    def bind(self, args: list | tuple, kwargs: dict, error: Callable[[str], Exception] | None = None) -> dict:
        """Arguments by parameter name, defaults filled in."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            make = error or (lambda message: LaunchError(message))
            raise make(f"'{self.__name__}': {exc}") from None
        bound.apply_defaults()
        return dict(bound.arguments)

    # -- launching --------------------------------------------------------------------
    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return functools.partial(self.run, grid=grid)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise LaunchError(f"'{self.__name__}' is a @jit kernel: launch it with {self.__name__}[grid](...), "
                          "or call it from inside another @jit function")

    def run(self, *args: Any, grid: Any, target: Any = None, **kwargs: Any) -> CompiledKernel:
        """Launch over ``grid`` (a tuple, or a callable of the bound arguments returning one)."""
        options = {k: kwargs.pop(k) for k in _LAUNCH_OPTIONS if k in kwargs and k not in self.param_names}
        bound = self.bind(args, kwargs)
        key, arg_types, constexprs, values = self.specialize(bound)
        cache_key = (key, str(target) if target is not None else None, tuple(sorted(options.items())))
        compiled = self.cache.get(cache_key)
        if compiled is None or not self._globals_unchanged(compiled):
            compiled = self.compile(arg_types, constexprs, target, options)
            self.cache[cache_key] = compiled
        if callable(grid):
            grid = grid(dict(bound))
        grid = _normalize_grid(self.__name__, grid)
        compiled._launch(compiled.module, compiled.name, grid, values)
        return compiled

    def _globals_unchanged(self, compiled: CompiledKernel) -> bool:
        scope = self.fn.__globals__
        for name, value in compiled.globals_used.items():
            current = lc.unwrap(scope.get(name))
            if type(current) is not type(value) or current != value:
                return False
        return True

    def specialize(self, bound: dict) -> tuple[tuple, dict, dict, list]:
        """The cache key, the IR type of each run-time argument, the constexpr values,
        and the run-time argument values in parameter order."""
        constexpr_names = self.constexpr_names()
        key: list[Any] = []
        arg_types: dict[str, t.Type] = {}
        constexprs: dict[str, Any] = {}
        values: list[Any] = []
        for name, value in bound.items():
            value = lc.unwrap(value)
            if name in constexpr_names or value is None:
                # bool and int are distinct constexprs: True must not reuse the kernel for 1.
                try:
                    hash(value)
                    marker = value
                except TypeError:
                    marker = repr(value)
                key.append((name, type(value).__name__, marker))
                constexprs[name] = value
                continue
            type_, value = _argument_type(self.__name__, name, value)
            key.append((name, str(type_)))
            arg_types[name] = type_
            values.append(value)
        return tuple(key), arg_types, constexprs, values

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """The core-IR module the frontend makes for these arguments (before any pass)."""
        from ..frontend.codegen import generate_kernel

        bound = self.bind(args, kwargs)
        _, arg_types, constexprs, _ = self.specialize(bound)
        module, _ = generate_kernel(self, arg_types, constexprs)
        return module

    def compile(self, arg_types: dict, constexprs: dict, target: Any = None, options: dict | None = None) -> CompiledKernel:
        from ..compiler import compile_module
        from ..frontend.codegen import generate_kernel

        options = dict(options or {})
        module, globals_used = generate_kernel(self, arg_types, constexprs)
        result = compile_module(module, target, label=self.__name__, **_backend_options(options))
        self.compile_count += 1
        if getattr(result.backend, "launch", None) is None:
            if target is not None:
                raise LaunchError(f"kernel '{self.__name__}': backend '{result.backend.name}' compiles but cannot "
                                  "launch kernels yet; use target='interp'")
            # The chosen device's backend cannot run kernels yet (as in polytile.demo): run
            # on the interpreter rather than fail, since the user asked for no target.
            module, globals_used = generate_kernel(self, arg_types, constexprs)
            result = compile_module(module, "interp", label=self.__name__, **_backend_options(options))
        return CompiledKernel(self.__name__, result, list(arg_types), globals_used)

    def __repr__(self) -> str:
        return f"JITFunction({self.fn.__module__}:{self.fn.__qualname__})"


def _backend_options(options: dict) -> dict:
    # num_ctas and maxnreg are accepted for Triton compatibility; no backend takes them yet.
    return {k: v for k, v in options.items() if k in ("num_warps", "num_stages", "debug")}


def _argument_type(kernel: str, name: str, value: Any) -> tuple[t.Type, Any]:
    """The IR type a launch argument specializes to, and the value to pass."""
    import numpy as np

    if isinstance(value, bool) or isinstance(value, np.bool_):
        return t.i1, bool(value)
    if isinstance(value, int):
        if -(1 << 31) <= value < (1 << 31):
            return t.i32, value
        if -(1 << 63) <= value < (1 << 63):
            return t.i64, value
        if 0 <= value < (1 << 64):
            return t.u64, value
        raise LaunchError(f"kernel '{kernel}': argument '{name}' = {value} does not fit in 64 bits")
    if isinstance(value, float):
        return t.f32, value
    if isinstance(value, np.generic):
        element = lc.NUMPY_TO_DTYPE.get(value.dtype.name)
        if element is None:
            raise LaunchError(f"kernel '{kernel}': argument '{name}' has NumPy type {value.dtype}, "
                              "which kernels cannot take")
        return element.ir, value
    if not isinstance(value, np.ndarray) and hasattr(value, "__array_interface__"):
        value = np.asarray(value)  # shares memory: the kernel writes the caller's buffer
    if isinstance(value, np.ndarray):
        element = lc.NUMPY_TO_DTYPE.get(value.dtype.name)
        if element is None:
            raise LaunchError(f"kernel '{kernel}': argument '{name}' is an array of {value.dtype}, "
                              "which kernels cannot take")
        return t.PointerType(element.ir), value
    raise LaunchError(f"kernel '{kernel}': argument '{name}' is {type(value).__name__} {value!r}; kernels take "
                      "NumPy arrays, Python numbers and bools (or constexpr parameters)")


def _normalize_grid(kernel: str, grid: Any) -> tuple[int, ...]:
    items = (grid,) if isinstance(grid, int) else grid
    try:
        items = tuple(int(g) for g in items)
    except (TypeError, ValueError):
        raise LaunchError(f"kernel '{kernel}': the grid must be a tuple of 1 to 3 integers "
                          f"(or a callable returning one), got {grid!r}") from None
    if not 1 <= len(items) <= 3 or any(g < 0 for g in items):
        raise LaunchError(f"kernel '{kernel}': the grid must be a tuple of 1 to 3 non-negative integers, got {grid!r}")
    return items


def jit(fn: Callable | None = None, *, noinline: bool = False, **unused: Any) -> Any:
    """Make a kernel (or a helper other kernels call) from a Python function.

    ``@jit`` or ``@jit(noinline=True)``: a ``noinline`` helper stays a function in the IR.
    Other Triton keywords (``debug``, ``do_not_specialize``, ...) are accepted and ignored."""
    if fn is None:
        return lambda f: JITFunction(f, noinline=noinline)
    return JITFunction(fn, noinline=noinline)
