"""``@jit``: a Python function that compiles to a kernel and launches as ``kernel[grid](...)``.

Each launch binds its arguments, makes a *specialization key* (the dtype of each array,
the IR type of each scalar, the value of each constexpr), and looks the compiled kernel
up in an in-memory cache; a miss looks in the on-disk cache (:mod:`.cache`) and then
runs the frontend and the pass pipeline for the chosen target.

Like Triton, integer arguments and pointers are also specialized on what a code
generator can exploit: an integer (or an address) divisible by 16, an integer equal to 1.
The key records it, so a kernel built for aligned data is never run on unaligned data;
the kernel's ``func.func`` carries it as hints (``pt.divisibility``, ``pt.equal_to_1``).
``@jit(do_not_specialize=[...])`` turns this off for arguments whose values vary from
launch to launch and would otherwise compile again and again.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, NamedTuple

import numpy as np

from ..errors import CompilationError, PolytileError
from ..ir import types as t
from ..language import core as lc

# Module-level on purpose: these run on every launch, where an import statement costs.
from .args import as_writable_array, data_pointer
from .cache import snapshot_is_current

#: Launch keywords that are options, not kernel arguments (unless the kernel has such a parameter).
_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "debug")


class LaunchError(PolytileError, TypeError):
    """A kernel was launched with arguments or a grid that do not fit; names the kernel and argument."""


class CompiledKernel:
    """One specialization compiled for one target: the module, its backend, and the launch."""

    def __init__(self, name: str, module: Any, target: Any, backend: Any, run_params: list[str],
                 globals_used: list, result: Any = None, cache_key: str | None = None, from_disk: bool = False):
        self.name = name
        self.module = module
        self.target = target
        self.backend = backend
        self.run_params = run_params
        self.globals_used = globals_used
        #: The ``CompileResult`` (None for a kernel read from the on-disk cache).
        self.result = result
        #: The on-disk cache key (None when the cache is off).
        self.cache_key = cache_key
        self.from_disk = from_disk
        self._launch = backend.launch

    def __repr__(self) -> str:
        return f"<CompiledKernel {self.name} for {self.target}>"

    def asm(self) -> str:
        """The kernel's IR after the pipeline, as text."""
        from ..ir import print_ir

        return print_ir(self.module)


class Specialization(NamedTuple):
    """What one launch's arguments make of the kernel."""

    key: tuple
    arg_types: dict
    constexprs: dict
    values: list
    #: Per run-time argument (in order): ``"D"`` divisible by 16, ``"1"`` equal to 1, ``""``.
    hints: tuple


class JITFunction:
    """A ``@jit`` function.  ``fn[grid](*args, **meta)`` launches it; inside another
    kernel, calling it inlines it (or calls a ``noinline`` function)."""

    __polytile_jit__ = True

    def __init__(self, fn: Callable, noinline: bool = False, do_not_specialize: Any = ()):
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
        self.do_not_specialize = _parameter_names(fn.__name__, self.param_names, do_not_specialize)
        self._constexprs: set[str] | None = None
        self._source = None
        #: Compiled kernels by specialization key (and target, options).
        self.cache: dict[Any, CompiledKernel] = {}
        #: How many times this function was compiled (tests and tooling read it).
        self.compile_count = 0
        #: How many compilations were read from the on-disk cache instead.
        self.disk_hits = 0
        self._mutated: dict[Any, list[str]] = {}
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
        spec = self.specialize(bound)
        cache_key = (spec.key, str(target) if target is not None else None, tuple(sorted(options.items())))
        compiled = self.cache.get(cache_key)
        if compiled is None or not self._globals_unchanged(compiled):
            compiled = self.compile(spec.arg_types, spec.constexprs, target, options, hints=spec.hints,
                                    key=spec.key)
            self.cache[cache_key] = compiled
        if callable(grid):
            grid = grid(dict(bound))
        grid = _normalize_grid(self.__name__, grid)
        compiled._launch(compiled.module, compiled.name, grid, spec.values)
        return compiled

    def _globals_unchanged(self, compiled: CompiledKernel) -> bool:
        return snapshot_is_current(compiled.globals_used)

    def specialize(self, bound: dict) -> Specialization:
        """The cache key, the IR type of each run-time argument, the constexpr values,
        the run-time argument values in parameter order and their hints."""
        constexpr_names = self.constexpr_names()
        key: list[Any] = []
        arg_types: dict[str, t.Type] = {}
        constexprs: dict[str, Any] = {}
        values: list[Any] = []
        hints: list[str] = []
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
            hint = "" if name in self.do_not_specialize else _hint(type_, value)
            key.append((name, str(type_), hint))
            arg_types[name] = type_
            values.append(value)
            hints.append(hint)
        return Specialization(tuple(key), arg_types, constexprs, values, tuple(hints))

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """The core-IR module the frontend makes for these arguments (before any pass)."""
        from ..frontend.codegen import generate_kernel

        spec = self.specialize(self.bind(args, kwargs))
        module, _ = generate_kernel(self, spec.arg_types, spec.constexprs)
        _attach_hints(module, list(spec.arg_types), spec.hints)
        return module

    def mutated_args(self, *args: Any, **kwargs: Any) -> list[str]:
        """Names of the pointer parameters the kernel may write when launched with these
        arguments (stores and atomics, through inlined and noinline calls; a write through
        a pointer of unknown origin counts as a write to every pointer argument).  Launch
        options (``num_warps``...) are ignored.  See :mod:`polytile.analysis.mutation`."""
        from ..analysis.mutation import mutated_arguments

        for option in _LAUNCH_OPTIONS:
            if option not in self.param_names:
                kwargs.pop(option, None)
        spec = self.specialize(self.bind(args, kwargs))
        found = self._mutated.get(spec.key)
        if found is None:
            from ..frontend.codegen import generate_kernel

            module, _ = generate_kernel(self, spec.arg_types, spec.constexprs)
            found = self._mutated[spec.key] = mutated_arguments(module)
        return list(found)

    def compile(self, arg_types: dict, constexprs: dict, target: Any = None, options: dict | None = None,
                hints: tuple | None = None, key: tuple | None = None) -> CompiledKernel:
        """Compile one specialization (or read it from the on-disk cache)."""
        from ..compiler import compile_module
        from ..frontend.codegen import generate_kernel
        from .cache import (
            KernelCache,
            cache_directory,
            cache_enabled,
            global_snapshot,
            kernel_cache_key,
        )

        options = _backend_options(dict(options or {}))
        hints = hints if hints is not None else ("",) * len(arg_types)
        resolved, backend, components = _plan(target, options)
        if getattr(backend, "launch", None) is None:
            if target is not None:
                raise LaunchError(f"kernel '{self.__name__}': backend '{backend.name}' compiles but cannot "
                                  "launch kernels yet; use target='interp'")
            # The chosen device's backend cannot run kernels yet (as in polytile.demo): run
            # on the interpreter rather than fail, since the user asked for no target.
            resolved, backend, components = _plan("interp", options)
        params = list(arg_types)
        disk_key = None
        if cache_enabled():
            if key is None:
                key = tuple((n, str(arg_types[n]), h) for n, h in zip(params, hints)) + tuple(
                    (n, type(v).__name__, repr(v)) for n, v in sorted(constexprs.items()))
            disk_key = kernel_cache_key(self, key, options, str(resolved), components)
            cache = KernelCache(cache_directory())
            entry = cache.load(disk_key, str(resolved))
            if entry is not None and entry.metadata.get("params") == params:
                module = _parse_cached(entry.ir)
                if module is not None:
                    self.disk_hits += 1
                    return CompiledKernel(entry.name, module, resolved, backend, params, global_snapshot(self),
                                          cache_key=disk_key, from_disk=True)
        module, _ = generate_kernel(self, arg_types, constexprs)
        # Taken after generation, from the same sources the cache key hashes: every
        # global of every @jit function involved, whichever module it lives in.
        globals_used = global_snapshot(self)
        _attach_hints(module, params, hints)
        result = compile_module(module, resolved, label=self.__name__, **options)
        self.compile_count += 1
        compiled = CompiledKernel(self.__name__, result.module, result.target, result.backend, params,
                                  globals_used, result=result, cache_key=disk_key)
        if disk_key is not None:
            from ..ir import print_ir
            from .cache import CacheEntry

            binaries = dict(getattr(result, "binaries", None) or {})  # GPU backends: cubin, hsaco ...
            KernelCache(cache_directory()).store(CacheEntry(disk_key, str(resolved), self.__name__,
                                                            print_ir(result.module, print_locations=True), binaries,
                                                            {"params": params, "hints": list(hints)}))
        return compiled

    def __repr__(self) -> str:
        return f"JITFunction({self.fn.__module__}:{self.fn.__qualname__})"


def _backend_options(options: dict) -> dict:
    # num_ctas and maxnreg are accepted for Triton compatibility; no backend takes them yet.
    return {k: v for k, v in options.items() if k in ("num_warps", "num_stages", "debug")}


def _plan(target: Any, options: dict) -> tuple[Any, Any, list[str]]:
    """The resolved target, its backend and the cache-key components a compilation for
    them will have: what ``compile_module`` computes, needed *before* compiling to look
    in the on-disk cache."""
    from ..plugins.manager import get_plugin_manager

    manager = get_plugin_manager()
    choice = manager.choose_target(target)
    backend, resolved = manager.backends.resolve(choice.target)
    parsed = backend.parse_options(options)
    components = manager.cache_key_components(resolved, parsed) + [
        f"{k}=={v}" for k, v in sorted(backend.versions().items())]
    return resolved, backend, components


def _parse_cached(text: str) -> Any:
    """The module of a cache entry, or None when it does not parse or verify (an entry
    from an older IR syntax, say): recompiled then, never trusted."""
    from ..ir import parse_module, verify

    try:
        module = parse_module(text, "<kernel cache>")
        verify(module)
        return module
    except PolytileError:
        return None


def _hint(type_: t.Type, value: Any) -> str:
    """``"D"`` for an integer or an address divisible by 16, ``"1"`` for an integer 1."""
    if isinstance(type_, t.PointerType):
        return "D" if data_pointer(value) % 16 == 0 else ""
    if isinstance(type_, t.IntType) and type_ != t.i1:
        if value == 1:
            return "1"
        return "D" if value % 16 == 0 else ""
    return ""


def _attach_hints(module: Any, params: list[str], hints: tuple) -> None:
    """Record the specialization on the kernel as discardable attributes, one entry per
    run-time parameter: ``pt.divisibility`` (16 or 1) and ``pt.equal_to_1``."""
    if not any(hints):
        return
    for op in module.body.block:
        if op.name == "func.func" and op.attributes.get("kernel"):
            op.attributes["pt.divisibility"] = tuple(16 if h == "D" else 1 for h in hints)
            op.attributes["pt.equal_to_1"] = tuple(h == "1" for h in hints)
            return


def _parameter_names(kernel: str, params: list[str], given: Any) -> frozenset:
    """``do_not_specialize`` entries (names or positions) as parameter names."""
    if isinstance(given, (str, int)):
        given = (given,)
    names = set()
    for item in given or ():
        if isinstance(item, int) and not isinstance(item, bool):
            if not 0 <= item < len(params):
                raise LaunchError(f"@jit '{kernel}': do_not_specialize position {item} is out of range; "
                                  f"the function has {len(params)} parameters")
            names.add(params[item])
        elif isinstance(item, str) and item in params:
            names.add(item)
        else:
            from ..errors import did_you_mean

            raise LaunchError(f"@jit '{kernel}': do_not_specialize names {item!r}, which is not a parameter"
                              f"{did_you_mean(str(item), params)}")
    return frozenset(names)


def _argument_type(kernel: str, name: str, value: Any) -> tuple[t.Type, Any]:
    """The IR type a launch argument specializes to, and the value to pass."""
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
    if not isinstance(value, np.ndarray):
        # Shares memory: the kernel writes the caller's buffer.
        converted = as_writable_array(kernel, name, value, LaunchError)
        if converted is not None:
            value = converted
    if isinstance(value, np.ndarray):
        element = lc.NUMPY_TO_DTYPE.get(value.dtype.name)
        if element is None:
            raise LaunchError(f"kernel '{kernel}': argument '{name}' is an array of {value.dtype}, "
                              "which kernels cannot take")
        return t.PointerType(element.ir), value
    raise LaunchError(f"kernel '{kernel}': argument '{name}' is {type(value).__name__} {value!r}; kernels take "
                      "NumPy arrays (or torch CPU tensors, objects with __array_interface__ or DLPack), "
                      "Python numbers and bools (or constexpr parameters)")


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


def jit(fn: Callable | None = None, *, noinline: bool = False, do_not_specialize: Any = (),
        **unused: Any) -> Any:
    """Make a kernel (or a helper other kernels call) from a Python function.

    ``@jit`` or ``@jit(noinline=True)``: a ``noinline`` helper stays a function in the IR.
    ``do_not_specialize=["n", 2]`` (names or positions): these integer and pointer
    arguments are not specialized on divisibility by 16 or on being 1.  Other Triton
    keywords (``debug``, ``repr``, ...) are accepted and ignored."""
    if fn is None:
        return lambda f: JITFunction(f, noinline=noinline, do_not_specialize=do_not_specialize)
    return JITFunction(fn, noinline=noinline, do_not_specialize=do_not_specialize)
