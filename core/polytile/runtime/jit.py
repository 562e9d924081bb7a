"""``@jit``: a Python function that compiles to a kernel and launches as ``kernel[grid](...)``.

Each launch makes a *specialization key* (the dtype of each array, the IR type of each
scalar, the value of each constexpr) and looks the compiled kernel up; a miss looks in
the on-disk cache (:mod:`.cache`) and then runs the frontend and the pass pipeline for
the chosen target.

Like Triton, integer arguments and pointers are also specialized on what a code
generator can exploit: an integer (or an address) divisible by 16, an integer equal to 1.
The key records it, so a kernel built for aligned data is never run on unaligned data;
the kernel's ``func.func`` carries it as hints (``pt.divisibility``, ``pt.equal_to_1``).
``@jit(do_not_specialize=[...])`` turns this off for arguments whose values vary from
launch to launch and would otherwise compile again and again.

The launch path is built for speed (it is host time spent on every launch).  Each
``@jit`` function generates, once, an entry point with the kernel's own signature
(:func:`.binder.make_entry`): Python binds the arguments, one probe per argument makes
a flat key tuple, one dict get finds the ``CompiledKernel``, whose launcher the backend
built once (:meth:`polytile.backend.Backend.make_launcher`).  Everything else (checking
the arguments' types, resolving the target and the options, compiling) happens on a
miss, in :meth:`JITFunction._miss`, which also keeps the kernels under a canonical key
(``kernel.cache``) so that two launches spelling the same specialization differently
(``num_warps=4`` given or left to its default) share one compilation.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import threading
import weakref
from typing import Any, Callable

from .. import config as _config
from ..backend import LaunchParam
from ..errors import CompilationError, ConfigError, LaunchError, UnsupportedOptionError
from ..ir import types as t
from ..resources import RESOURCES, warn_if_spilling
from ..warp_specialize import WARP_SPECIALIZE, note_unspecialised
from ..language import core as lc
from .adapters import AdaptedPiece, expand_parameters
from .binder import (MISSING, Unkeyed, adapter_of, constexpr_piece, describe_argument, forget_adapted_kinds,
                     make_entry, make_grid3, make_namer)
from .compiled import CompiledKernel, MockTensor, Specialization, parse_cached

#: Launch keywords that are options, not kernel arguments (unless the kernel has such a parameter).
_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "debug", "launch_cooperative_grid",
                   "enable_fp_fusion")
#: How many calls of one @jit function may make a dispatcher plan (:mod:`.dispatch`).
_PLAN_BUDGET = 64


#: Every live @jit function, so that a change of the configured target reaches their hot caches.
_LIVE: "weakref.WeakSet[JITFunction]" = weakref.WeakSet()


#: Bumped whenever the hot caches are dropped: a plan made from a launch that started
#: before is not learned (it could name the kernel of the old target).
_generation = 0


def _target_setting_changed() -> None:
    # The hot key holds the target as given at the launch (usually None: "configured");
    # the canonical cache keeps the kernels, so switching back costs no compilation.
    global _generation
    _generation += 1
    for fn in list(_LIVE):
        fn._hot.clear()
        fn._plan_budget = _PLAN_BUDGET
        if fn._dispatcher is not None:
            fn._dispatcher.forget()


#: Bumped whenever the kernels compiled in this process are dropped: a compilation that
#: started before (in another thread) neither stores its kernel in memory nor on disk.
_compile_generation = 0


#: Held while the generation moves and the kernels are dropped, and while a compiled
#: kernel is kept after its generation is checked: no stale kernel slips in between.
_COMPILED_LOCK = threading.Lock()


def _compiled_code_changed() -> None:
    # A setting the compiled code depends on (a toolchain path, a register budget): the
    # kernels compiled in this process under the old value are dropped; the on-disk cache
    # keys the value, so switching back reads them from there.
    global _compile_generation
    with _COMPILED_LOCK:
        _compile_generation += 1
        for fn in list(_LIVE):
            fn.cache.clear()
            fn._hot.clear()
            fn._mutated.clear()  # what a kernel writes was read from the old code
    _target_setting_changed()


def _plugin_setting_changed() -> None:
    # Another set of plugins compiles other code (a pass plugin disabled, say), and the
    # adapters of argument types came from the plugins: ask the new set again.
    forget_adapted_kinds()
    _compiled_code_changed()


_config.watch("target", _target_setting_changed)
_config.watch("disabled_plugins", _plugin_setting_changed)
_config.watch_recompiling(_compiled_code_changed)


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
        if fn.__code__.co_filename.startswith("<"):  # exec() of a string, say: no file to read later
            from ..frontend.source import FunctionSource, exec_source_text, has_source_file

            if not has_source_file(fn):  # its text may still be in a caller's frame
                text = exec_source_text(fn, inspect.currentframe())
                if text is not None:
                    self._source = FunctionSource(fn, text=text)
        #: Compiled kernels by canonical key: (specialization key, resolved target, parsed options).
        self.cache: dict[Any, CompiledKernel] = {}
        #: The launch path's cache: the entry point's flat key -> compiled kernel.
        self._hot: dict[tuple, CompiledKernel] = {}
        #: How many times this function was compiled (tests and tooling read it).
        self.compile_count = 0
        #: How many compilations were read from the on-disk cache instead.
        self.disk_hits = 0
        self._mutated: dict[Any, Any] = {}  # key -> MutationReport
        #: Launch keywords this kernel takes as options (a parameter of that name wins).
        self._option_names = tuple(o for o in (*_LAUNCH_OPTIONS, "target") if o not in self.param_names)
        self._entry_fn: Callable | None = None
        self._namer: Callable[..., dict] | None = None
        self._specialized_entry = False
        #: The backend's native dispatcher (:mod:`.dispatch`), once a launcher offered one.
        self._dispatcher: Any = None
        #: A launcher that may offer a dispatcher (asked again at the next launch).
        self._dispatch_source: Any = None
        #: Plans still worth making: calls cycling through more specializations than a
        #: dispatcher keeps would otherwise pay for a new plan at every launch.
        self._plan_budget = _PLAN_BUDGET
        functools.update_wrapper(self, fn)
        _LIVE.add(self)

    # -- what the frontend needs ------------------------------------------------------
    def source(self) -> Any:
        source = self._source
        if source is None:
            from ..frontend.source import FunctionSource

            source = FunctionSource(self.fn)
            with _COMPILED_LOCK:  # a text set meanwhile (_unsafe_update_src) wins
                if self._source is None:
                    self._source = source
                source = self._source
        return source

    @property
    def src(self) -> str:
        """The function's source text from its ``def`` (Triton's ``JITFunction.src``)."""
        text = self.source().source_text
        match = re.search(r"^def\s", text, re.MULTILINE)
        return text[match.start():] if match else text

    def _unsafe_update_src(self, new_src: str) -> None:
        """Compile from ``new_src`` from now on (Triton's name, and what its tests and code
        generators do: a template's source with parts replaced).  It must define one
        function with the parameters this one has.  Every kernel compiled in this process
        is dropped (another may have inlined this one); the on-disk cache keys the
        source, so it finds nothing stale."""
        from ..frontend.source import FunctionSource

        source = FunctionSource(self.fn, text=new_src)
        names = [a.arg for a in (*source.tree.args.posonlyargs, *source.tree.args.args, *source.tree.args.kwonlyargs)]
        if names != self.param_names:
            raise ValueError(f"_unsafe_update_src: the new source of '{self.__name__}' takes ({', '.join(names)}), "
                             f"the function takes ({', '.join(self.param_names)}); keep the parameters")
        with _COMPILED_LOCK:
            self._source = source
        _compiled_code_changed()
        from .autotune import _forget_tunings

        _forget_tunings()  # the configs were chosen by timing the old code

    def constexpr_names(self) -> set[str]:
        """Parameters annotated ``pl.constexpr`` (the annotation may be a string)."""
        if self._constexprs is None:
            self._constexprs = {name for name, annotation in self._annotations().items()
                                if annotation is lc.constexpr or isinstance(annotation, lc.constexpr)
                                or annotation == "constexpr"}
        return self._constexprs

    def const_names(self) -> set[str]:
        """Pointer parameters annotated ``pl.const`` (Triton's ``tl.const``): read only."""
        return {name for name, annotation in self._annotations().items() if annotation is lc.const
                or annotation == "const"}

    def _annotations(self) -> dict[str, Any]:
        """Each parameter's annotation, a string one evaluated (or its last name)."""
        found = {}
        for name, param in self.signature.parameters.items():
            annotation = param.annotation
            if isinstance(annotation, str):
                try:
                    annotation = eval(annotation, self.fn.__globals__)  # noqa: S307 - the user's own annotation
                except Exception:
                    annotation = annotation.rsplit(".", 1)[-1]
            found[name] = annotation
        return found

    def bind(self, args: list | tuple, kwargs: dict, error: Callable[[str], Exception] | None = None) -> dict:
        """Arguments by parameter name, defaults filled in."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            make = error or (lambda message: LaunchError(message))
            raise make(f"'{self.__name__}': {exc}") from None
        bound.apply_defaults()
        return dict(bound.arguments)

    def named_arguments(self, args: tuple, kwargs: dict) -> dict:
        """The arguments given, by name, with the defaults of the parameters not given
        (a parameter without a default that was not given is left out) and any other
        keywords (launch options): what ``@autotune`` keys, ``@heuristics`` functions and
        config hooks see."""
        namer = self._namer
        if namer is None:
            namer = self._namer = make_namer(self.__name__, self.signature, LaunchError)
        return namer(*args, **kwargs)

    # -- launching --------------------------------------------------------------------
    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        dispatcher = self._dispatcher
        if dispatcher is not None:
            return dispatcher.bind(grid)
        source = self._dispatch_source
        if source is not None:
            self._adopt_dispatcher(source)
            dispatcher = self._dispatcher
            if dispatcher is not None:  # this call already: it is planned, and the next one native
                return dispatcher.bind(grid)
        entry = self._entry_fn
        return functools.partial(self._launch, entry if entry is not None else self._entry(), grid)

    def _launch(self, entry: Callable, grid: Any, /, *args: Any, **kwargs: Any) -> CompiledKernel:
        """``kernel[grid](...)`` without a native dispatcher: the entry point, with Python's
        own binding errors (an argument given twice) said in the runtime's words."""
        try:
            return entry(grid, *args, **kwargs)
        except TypeError as error:
            if error.__traceback__ is not None and error.__traceback__.tb_next is None:
                raise self._binding_error(args, kwargs, error) from None
            raise

    def _binding_error(self, args: tuple, kwargs: dict, error: TypeError) -> LaunchError:
        """The LaunchError for a call the entry point could not even bind (Python raised
        ``error`` before running it): an argument given by position and by keyword."""
        for index, name in enumerate(self.param_names[:len(args)]):
            if name in kwargs:
                return LaunchError(f"'{self.__name__}': argument '{name}' is given twice, by position (argument "
                                   f"{index + 1} of the call) and by keyword ({name}=...); pass it once")
        return LaunchError(f"'{self.__name__}': {error}")

    def _adopt_dispatcher(self, source: Any) -> None:
        dispatcher = source.make_dispatcher(self._dispatch_slow)
        if dispatcher is not None and self._dispatcher is None:
            self._dispatcher = dispatcher
        if dispatcher is not None or not source.dispatcher_pending():
            self._dispatch_source = None

    def _dispatch_slow(self, grid: Any, args: tuple, kwargs: dict | None, grid_was_called: bool = False,
                       planned: bool = False) -> CompiledKernel:
        """A call the dispatcher launched no kernel for: launched by the Python entry
        point, then planned (see :mod:`.dispatch`) so that the next such call is not
        slow.  ``grid_was_called``: ``grid`` is what a callable grid returned (it is not
        called again); ``planned``: a plan matched and only this call needed Python (an
        empty grid, a device the kernel is not loaded on yet), so no plan is made."""
        generation = _generation
        entry = self._entry_fn
        if entry is None:
            entry = self._entry()
        if grid_was_called:
            grid = make_grid3(self.__name__, LaunchError)(grid)
        compiled = self._launch(entry, grid, *args, **kwargs) if kwargs else self._launch(entry, grid, *args)
        dispatcher = self._dispatcher
        if planned or self._plan_budget <= 0 or generation != _generation or dispatcher is None:
            return compiled
        self._plan_budget -= 1
        make_plan = getattr(getattr(compiled, "backend_launcher", None), "dispatch_plan", None)
        native = None
        if make_plan is not None:  # (a kernel of another backend, the interpreter's, has none)
            from .dispatch import plan_call  # its dataclasses cost a warm start nothing until a plan is made

            plan = plan_call(self, compiled, args, kwargs)
            native = make_plan(plan) if plan is not None else None
        if native is not None:
            dispatcher.learn(native)
        elif self._plan_budget == 0 and not dispatcher.results:
            # Nothing here can be planned: plain Python launches are cheaper than trying.
            self._dispatcher = None
        return compiled

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise LaunchError(f"'{self.__name__}' is a @jit kernel: launch it with {self.__name__}[grid](...), "
                          "or call it from inside another @jit function")

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> CompiledKernel:
        """Launch over ``grid`` (a tuple, or a callable of the arguments by name, launch
        options included, returning one).  ``target=`` and the launch options
        (``num_warps``...) go with the arguments.  Returns the compiled kernel."""
        return self._launch(self._entry(), grid, *args, **kwargs)

    def _entry(self, seen: dict[str, type] | None = None) -> Callable:
        entry = self._entry_fn
        if entry is None or seen is not None:
            # Built on first launch, not at decoration (annotations may name what the
            # module defines after the kernel), and again after the first compilation,
            # with the probes of the argument types seen written out.
            entry = self._entry_fn = make_entry(
                self.__name__, self.signature, self.constexpr_names(), self.do_not_specialize, hot=self._hot,
                miss=self._miss, fail=self._bind_error,
                grid3=make_grid3(self.__name__, LaunchError), seen=seen)
        return entry

    def _bind_error(self, extra: tuple, values: tuple, given: dict) -> None:
        if extra:
            raise LaunchError(f"'{self.__name__}': too many positional arguments (it takes at most "
                              f"{len(self.param_names)}, got {len(self.param_names) + len(extra)})")
        for name in given:
            if name not in self._option_names and name not in self.param_names:
                # A misspelled keyword leaves its parameter missing: name the misspelling.
                from ..errors import did_you_mean

                raise LaunchError(f"'{self.__name__}': got an unexpected keyword argument '{name}'"
                                  f"{did_you_mean(name, self.param_names + list(self._option_names))}")
        missing = next(name for name, value in zip(self.param_names, values) if value is MISSING)
        if missing in given:  # Python puts a positional-only parameter given by name there
            raise LaunchError(f"'{self.__name__}': '{missing}' is positional-only: pass it by position")
        raise LaunchError(f"'{self.__name__}': missing a required argument: '{missing}'")

    def _miss(self, key: tuple, values: tuple, given: dict) -> tuple[CompiledKernel, tuple]:
        """The slow path of a launch: check the arguments, find or compile the kernel,
        remember it under ``key``.  Returns it and the run-time values to pass."""
        options = {}
        target = None
        for name, value in given.items():
            if name not in self._option_names:
                from ..errors import did_you_mean

                raise LaunchError(f"'{self.__name__}': got an unexpected keyword argument '{name}'"
                                  f"{did_you_mean(name, self.param_names + list(self._option_names))}")
            if name == "target":
                target = value
            else:
                options[name] = value
        spec = self.specialize(dict(zip(self.param_names, values)))
        started = _compile_generation
        try:
            compiled = self._find_or_compile(spec, target, options)
        except CompilationError as error:
            if error.__cause__ is not None:
                raise  # made from an unexpected exception: the frames may show a compiler bug
            # A mistake in the kernel: the message shows its line with a caret, and the
            # compiler's frames would only bury it (the launch line stays on top).
            raise error.with_traceback(None) from None
        except ConfigError as error:
            # A setting that cannot work (dump_ir_dir naming a file, say): the user's to fix,
            # and the message names it; the compiler's frames would only bury it.
            raise error.with_traceback(None) from None
        if self._dispatcher is None and self._plan_budget > 0 \
                and hasattr(getattr(compiled, "backend_launcher", None), "make_dispatcher"):
            self._dispatch_source = compiled.backend_launcher
        if not any(type(piece) is Unkeyed for piece in key):
            with _COMPILED_LOCK:
                if _compile_generation == started:
                    self._hot[key] = compiled
            if not self._specialized_entry:
                self._specialized_entry = True
                self._entry({n: type(v) for n, v in zip(self.param_names, values)})
        constexprs = self.constexpr_names()
        run_values = tuple(lc.unwrap(v) for n, v in zip(self.param_names, values) if n not in constexprs)
        return compiled, run_values

    def _find_or_compile(self, spec: Specialization, target: Any, options: dict) -> CompiledKernel:
        resolved, backend, parsed = _resolve(self.__name__, target, _backend_options(options))
        canonical = (spec.key, resolved, parsed)
        compiled = self.cache.get(canonical)
        if compiled is None or (compiled.guard is not None and not compiled.guard()):
            for _ in range(3):
                started = _compile_generation
                compiled = self._compile(spec.arg_types, spec.constexprs, resolved, backend, parsed, options,
                                         spec.hints, spec.key, spec.adapted)
                with _COMPILED_LOCK:
                    if _compile_generation == started:
                        self.cache[canonical] = compiled
                        break
                # A setting the code depends on changed meanwhile: compiled again under it
                # (after three such changes in a row, this launch runs the last one, unkept).
        return compiled

    def specialize(self, bound: dict) -> Specialization:
        """The cache key, the IR type of each run-time argument, the constexpr values,
        the run-time argument values in parameter order and their hints."""
        constexpr_names = self.constexpr_names()
        key: list[Any] = []
        adapted: dict[str, Any] = {}
        arg_types: dict[str, t.Type] = {}
        constexprs: dict[str, Any] = {}
        values: list[Any] = []
        hints: list[str] = []
        for name, value in bound.items():
            value = lc.unwrap(value)
            if name in constexpr_names or value is None:
                # bool and int are distinct constexprs: True must not reuse the kernel for 1
                # (nor (True,) the kernel for (1,)).
                if isinstance(value, (tuple, list)):
                    marker = constexpr_piece(value)
                else:
                    try:
                        hash(value)
                        marker = value
                    except TypeError:
                        marker = repr(value)
                key.append((name, type(value).__name__, marker))
                constexprs[name] = value
                continue
            adapter = adapter_of(value)
            if adapter is not None:  # checked first: a value that breaks its rules has no type
                adapter.check(self.__name__, name, value)
            type_, hint = describe_argument(self.__name__, name, value, name not in self.do_not_specialize)
            if adapter is not None:
                piece = AdaptedPiece(adapter, adapter.key(value))
                adapted[name] = piece
                self._check_part_names(name, adapter, piece.key)
                key.append((name, str(type_), type(adapter).__qualname__, piece.key))
            else:
                key.append((name, str(type_), hint))
            arg_types[name] = type_
            values.append(value)
            hints.append(hint)
        return Specialization(tuple(key), arg_types, constexprs, values, tuple(hints), adapted)

    def _check_part_names(self, name: str, adapter: Any, key: Any) -> None:
        """The kernel parameters an adapted argument passes as must not take another
        parameter's name (``a`` as ``a_base`` next to a parameter ``a_base``)."""
        for part in adapter.parts(key):
            if name + part.suffix in self.param_names:
                raise LaunchError(f"kernel '{self.__name__}': argument '{name}' (a {adapter.name}) passes as the "
                                  f"kernel parameter '{name + part.suffix}', which is also the name of a parameter "
                                  f"of '{self.__name__}': rename that parameter")

    def warmup(self, *args: Any, grid: Any = None, **kwargs: Any) -> CompiledKernel:
        """Compile the kernel that ``kernel[grid](*args, **kwargs)`` would launch (or find
        it in the caches), without launching it, and return it (Triton's ``warmup``; the
        grid is accepted and not needed).  The next launch with such arguments runs it."""
        options = {name: kwargs.pop(name) for name in list(kwargs) if name in self._option_names}
        target = options.pop("target", None)
        constexprs = self.constexpr_names()
        bound = {name: value if name in constexprs else MockTensor.wrap_dtype(value)
                 for name, value in self.bind(args, kwargs).items()}
        try:  # as a launch does (_miss): the user's mistakes without the compiler's frames
            return self._find_or_compile(self.specialize(bound), target, options)
        except CompilationError as error:
            if error.__cause__ is not None:
                raise
            raise error.with_traceback(None) from None
        except ConfigError as error:
            raise error.with_traceback(None) from None

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """The core-IR module the frontend makes for these arguments (before any pass)."""
        return self.lower_for(None, *args, **kwargs)

    def lower_for(self, target: Any, *args: Any, **kwargs: Any) -> Any:
        """:meth:`lower` as a compile for ``target`` (``"nvidia:sm_90a"``, a
        :class:`~polytile.Target`, or None: target-neutral) starts: arguments a plugin
        adapts pass as that target's adapter passes them (a Hopper tensor descriptor
        with its tensor map)."""
        from ..frontend.codegen import LaunchFacts, generate_kernel
        from ..target import Target

        num_warps = kwargs.pop("num_warps", None)  # what pl.extra.cuda.num_warps() answers
        spec = self.specialize(self.bind(args, kwargs))
        adapted = spec.adapted
        if target is not None:
            target = Target.parse(target) if isinstance(target, str) else target
        if target is not None and adapted:
            adapted = {n: AdaptedPiece(p.adapter.for_target(target), p.key) for n, p in adapted.items()}
        launch = None
        if num_warps is not None:
            launch = (launch_facts(target, {"num_warps": num_warps}) if target is not None
                      else LaunchFacts(int(num_warps)))
        module, _ = generate_kernel(self, spec.arg_types, spec.constexprs, adapted, launch)
        attach_hints(module, [h for _, _, h, _ in expand_parameters(list(spec.arg_types), spec.arg_types,
                                                                    spec.hints, adapted)])
        return module

    def mutated_args(self, *args: Any, **kwargs: Any) -> list[str]:
        """Names of the pointer parameters the kernel may write when launched with these
        arguments (stores and atomics, through inlined and noinline calls; a write through
        a pointer of unknown origin counts as a write to every pointer argument).  Launch
        options (``num_warps``...) are ignored.  See :mod:`polytile.analysis.mutation`."""
        return list(self.mutation_report(*args, **kwargs).written)

    def mutation_report(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`mutated_args` with its reasons: a
        :class:`~polytile.analysis.mutation.MutationReport` whose ``written`` are the
        arguments and ``reasons`` say, for every write through an address recorded in
        memory (a tensor map in a workspace) and every decision the analysis could not
        make exactly, what it found and why it counts."""
        from ..analysis.mutation import MutationReport, mutation_report

        for option in self._option_names:
            kwargs.pop(option, None)
        spec = self.specialize(self.bind(args, kwargs))
        found = self._mutated.get(spec.key)
        if found is None:
            from ..frontend.codegen import generate_kernel

            module, _ = generate_kernel(self, spec.arg_types, spec.constexprs, spec.adapted)
            # A write through a part of an adapted argument (a descriptor's base) is a
            # write to the argument.
            owners = {name: owner for name, _, _, owner in expand_parameters(
                list(spec.arg_types), spec.arg_types, spec.hints, spec.adapted)}
            report = mutation_report(module)
            written = list(dict.fromkeys(owners.get(n, n) for n in report.written))
            found = self._mutated[spec.key] = MutationReport(written, list(report.reasons))
        return MutationReport(list(found.written), list(found.reasons))

    def compile(self, arg_types: dict, constexprs: dict, target: Any = None, options: dict | None = None,
                hints: tuple | None = None, key: tuple | None = None) -> CompiledKernel:
        """Compile one specialization (or read it from the on-disk cache); a constexpr
        parameter with a default that ``constexprs`` leaves out takes its default, as in a
        launch."""
        options = dict(options or {})
        constexpr_names = self.constexpr_names()
        defaults = {name: parameter.default for name, parameter in self.signature.parameters.items()
                    if name in constexpr_names and name not in constexprs
                    and parameter.default is not inspect.Parameter.empty}
        constexprs = {**defaults, **constexprs} if defaults else constexprs
        resolved, backend, parsed = _resolve(self.__name__, target, _backend_options(options))
        hints = hints if hints is not None else ("",) * len(arg_types)
        return self._compile(arg_types, constexprs, resolved, backend, parsed, options, hints, key)

    def _compile(self, arg_types: dict, constexprs: dict, resolved: Any, backend: Any, parsed: Any, options: dict,
                 hints: tuple, key: tuple | None, adapted: dict | None = None) -> CompiledKernel:
        from ..plugins.manager import get_plugin_manager
        from .cache import EntryProblem, KernelCache, cache_directory, cache_enabled, global_snapshot, kernel_cache_key

        options = _backend_options(options)
        params = list(arg_types)
        # Each adapted argument passes as its adapter for this target says (a Hopper
        # tensor descriptor adds its tensor map).
        adapted = {name: AdaptedPiece(piece.adapter.for_target(resolved), piece.key)
                   for name, piece in (adapted or {}).items()}
        # A plugin's argument (a tensor descriptor) passes as its parts.
        launch_params = tuple(LaunchParam(name, type_, 16 if hint == "D" else 1, hint == "1")
                              for name, type_, hint, _ in expand_parameters(params, arg_types, hints, adapted))
        adapters = [adapted[n].adapter if n in adapted else None for n in params] if adapted else None
        constexpr_names = self.constexpr_names()
        runtime_names = [n for n in self.param_names if n not in constexpr_names]
        select = None if runtime_names == params else tuple(runtime_names.index(n) for n in params)

        def make(name: str, module: Any, globals_used: list, **more: Any) -> CompiledKernel:
            compiled = CompiledKernel(name, module, resolved, backend, params, globals_used, options=parsed,
                                      params=launch_params, select=select, adapters=adapters, **more)
            compiled.grid_defaults = {k: v for k, v in compiled.grid_defaults.items() if k not in self.param_names}
            return compiled

        started = _compile_generation

        # What the kernel's code may know of the launch (num_warps, threads per warp); the
        # frontend makes its LaunchFacts only when it compiles (a disk-cache hit imports none).
        launch = (parsed.num_warps, backend.threads_per_warp(resolved))

        def build(disk_key: str | None) -> tuple[CompiledKernel, Any]:
            compiled, entry = self._build(arg_types, constexprs, resolved, options, hints, params, make, disk_key,
                                          adapted, launch)
            # A setting the code depends on changed while it compiled (another thread):
            # the key was taken under the old value, the passes may have read the new one.
            return compiled, (entry if _compile_generation == started else None)

        disk_key = None
        if cache_enabled():
            if key is None:
                key = tuple((n, str(arg_types[n]), h) for n, h in zip(params, hints)) + tuple(
                    (n, type(v).__name__, repr(v)) for n, v in sorted(constexprs.items()))
            # The plugins' pass registrations run first (the compile needs them anyway): a
            # plugin that fails there (polytile-lds without polytile-amd, say) is disabled
            # before the key is taken, which then leaves it out, and the kernel is stored
            # as usual, instead of every compile of the process counting as one it failed in.
            from ..passes.registry import pass_registry

            pass_registry()
            components = get_plugin_manager().cache_key_components(resolved, parsed) + [
                f"{k}=={v}" for k, v in sorted(backend.versions().items())]
            disk_key = kernel_cache_key(self, key, options, str(resolved), components)

            def use(entry: Any) -> CompiledKernel:
                if entry.name != self.__name__ or entry.metadata.get("params") != params:
                    raise EntryProblem(f"it holds kernel '{entry.name}' with parameters "
                                       f"{entry.metadata.get('params')}, not '{self.__name__}' with {params}")
                # A kernel with a binary launches from it: its IR waits until asked for
                # (CompiledKernel.module); the interpreter's launcher runs the IR itself.
                module = None if entry.binaries else parse_cached(entry.ir)
                if module is None and not entry.binaries:
                    raise EntryProblem("its IR does not parse or verify")
                compiled = make(entry.name, module, global_snapshot(self), cache_key=disk_key, from_disk=True,
                                binaries=entry.binaries, metadata=entry.metadata.get("kernel"), ir_text=entry.ir,
                                rebuild=lambda: build(None)[0].result)
                self.disk_hits += 1
                return compiled

            compiled = KernelCache(cache_directory()).fetch(disk_key, str(resolved), kernel=self.__name__, use=use,
                                                            build=lambda: build(disk_key))
        else:
            compiled = build(None)[0]
        # Once per specialization and process (this runs once per specialization: the
        # in-memory cache serves the next launches), compiled or read from disk alike.
        warn_if_spilling(self.__name__, resolved, compiled.metadata.get(RESOURCES),
                         ", ".join([*(f"{k}={v!r}" for k, v in sorted(constexprs.items())),
                                    *(f"{k}={v!r}" for k, v in sorted(options.items()))]))
        if WARP_SPECIALIZE in compiled.metadata:
            note_unspecialised(self.__name__, compiled.metadata)
        return compiled

    def _build(self, arg_types: dict, constexprs: dict, resolved: Any, options: dict, hints: tuple,
               params: list, make: Callable, disk_key: str | None,
               adapted: dict | None = None, launch: tuple | None = None) -> tuple[CompiledKernel, Any]:
        """Compile one specialization: the kernel, and the cache entry to store."""
        # Imported only now: a kernel found in the disk cache needs neither.
        from ..compiler import compile_module
        from ..frontend.codegen import generate_kernel
        from .cache import global_snapshot

        from ..frontend.codegen import LaunchFacts

        facts = LaunchFacts(*launch) if launch is not None else None
        module, _ = generate_kernel(self, arg_types, constexprs, adapted, facts)
        # Taken after generation, from the same sources the cache key hashes: every
        # global of every @jit function involved, whichever module it lives in.
        globals_used = global_snapshot(self)
        attach_hints(module, [h for _, _, h, _ in expand_parameters(params, arg_types, hints, adapted)])
        result = compile_module(module, resolved, label=self.__name__, **options)
        self.compile_count += 1
        binaries = dict(getattr(result, "binaries", None) or {})  # GPU backends: cubin, hsaco ...
        metadata = dict(getattr(result, "metadata", None) or {})
        compiled = make(self.__name__, result.module, globals_used, result=result, cache_key=disk_key,
                        binaries=binaries, metadata=metadata)
        entry = None
        # A plugin that failed during the compile is missing from the code but named by
        # the key (computed before): such a kernel is not stored.
        if disk_key is not None and not getattr(result, "plugins_failed", None):
            from ..ir import print_ir
            from .cache import CacheEntry

            entry = CacheEntry(disk_key, str(resolved), self.__name__, print_ir(result.module, print_locations=True),
                               binaries, {"params": params, "hints": list(hints), "kernel": metadata})
        return compiled, entry

    def __repr__(self) -> str:
        return f"JITFunction({self.fn.__module__}:{self.fn.__qualname__})"


#: Triton's launch options that only some backends have, and the value that asks for
#: nothing (what every backend does anyway): ``maxnreg`` caps NVIDIA's registers per
#: thread, ``num_ctas`` asks for thread block clusters, ``launch_cooperative_grid`` for
#: a cooperative launch.
_NEUTRAL_OPTIONS = {"maxnreg": None, "num_ctas": 1, "launch_cooperative_grid": False}
_OPTION_MEANING = {"maxnreg": "caps the registers per thread", "num_ctas": "asks for thread block clusters",
                   "launch_cooperative_grid": "launches every program of the grid at once (cuLaunchCooperativeKernel), "
                                              "so that they may wait for each other"}


def _backend_options(options: dict) -> dict:
    """The launch options that go to the backend: all but those at their neutral value."""
    return {k: v for k, v in options.items() if k in _LAUNCH_OPTIONS
            and not (k in _NEUTRAL_OPTIONS and v == _NEUTRAL_OPTIONS[k])}


def launch_facts(target: Any, options: dict, where: str = "") -> Any:
    """What a kernel compiled for ``target`` with the launch ``options`` may know of its
    launch (:class:`~polytile.frontend.codegen.LaunchFacts`: num_warps, threads per warp);
    ``where``: where the target came from, for the error a bad one gives."""
    from ..frontend.codegen import LaunchFacts
    from ..plugins.manager import get_plugin_manager

    manager = get_plugin_manager()
    choice = manager.choose_target(target, source=where) if where else None
    backend, resolved = manager.backends.resolve(choice.target if choice is not None else target)
    parsed = backend.parse_options(_backend_options(dict(options)))
    return LaunchFacts(parsed.num_warps, backend.threads_per_warp(resolved))


def _resolve(kernel: str, target: Any, options: dict) -> tuple[Any, Any, Any]:
    """The resolved target, its backend and the parsed options for a launch (a backend
    that cannot launch yet gives way to the interpreter when no target was asked for)."""
    from ..plugins.manager import get_plugin_manager

    manager = get_plugin_manager()
    choice = manager.choose_target(target)
    backend, resolved = manager.backends.resolve(choice.target)
    if not backend.can_launch():
        if target is not None:
            raise LaunchError(f"kernel '{kernel}': backend '{backend.name}' compiles but cannot launch kernels "
                              "yet; use target='interp'")
        # The chosen device's backend cannot run kernels yet (as in polytile.demo): run
        # on the interpreter rather than fail, since the user asked for no target.
        backend, resolved = manager.backends.resolve(manager.choose_target("interp").target)
    declared = {f.name for f in dataclasses.fields(backend.options_class)}
    for name in _NEUTRAL_OPTIONS:
        if name in options and name not in declared:
            raise UnsupportedOptionError(f"kernel '{kernel}': launch option {name}={options[name]!r} is not available on "
                              f"target '{resolved}' (backend '{backend.name}' has no such option; on NVIDIA "
                              f"targets {name} {_OPTION_MEANING[name]}): leave it out, or set it to "
                              f"{_NEUTRAL_OPTIONS[name]!r}, for this target")
    return resolved, backend, backend.parse_options(options)


def attach_hints(module: Any, hints: Any) -> None:
    """Record the specialization on the kernel as discardable attributes, one entry per
    run-time parameter (``hints``: ``"D"`` divisible by 16, ``"1"`` equal to 1, ``""``):
    ``pt.divisibility`` (16 or 1) and ``pt.equal_to_1``.  The JIT and ``polytile compile``
    both call it, so an ahead-of-time kernel is the specialization a launch compiles."""
    if not any(hints):
        return
    for op in module.body.block:
        if op.name == "func.func" and op.attributes.get("kernel"):
            op.set_attr("pt.divisibility", tuple(16 if h == "D" else 1 for h in hints))
            op.set_attr("pt.equal_to_1", tuple(h == "1" for h in hints))
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
