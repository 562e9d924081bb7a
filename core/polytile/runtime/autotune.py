"""``@autotune``, ``@heuristics`` and ``Config``, as in Triton.

::

    @autotune(configs=[Config({"BLOCK": 64}), Config({"BLOCK": 256}, num_warps=8)], key=["n"])
    @jit
    def kernel(x_ptr, out_ptr, n, BLOCK: pl.constexpr): ...

    kernel[lambda meta: (cdiv(n, meta["BLOCK"]),)](x, out, n)

The first launch for each value of the ``key`` arguments (and the dtypes of the array
arguments) runs every config and keeps the fastest; later launches with the same key go
straight to it.  Trials run on the caller's arrays, so the tuner protects them: before
every trial it puts back the arguments the kernel may write (found by mutation analysis,
:meth:`JITFunction.mutated_args`, plus any ``restore_value`` names) and zeroes the
``reset_to_zero`` ones; after tuning the arrays hold what they held before, and the real
launch with the best config follows.  Trials are timed on the host's clock between two
waits for the device (the backend's ``synchronize``; the interpreter's launches end with
their kernel), in batches, so a GPU's kernel time is measured, not its launch time.

A config the target cannot hold (too much shared memory, LDS or registers: the compiler
raises :class:`~polytile.errors.OutOfResourcesError` on the trial's first run, which
compiles, before anything is launched or timed) is dropped with a debug-level note on
the ``polytile.autotune`` logger.  Only when every config is dropped does the launch fail,
with a :class:`NoConfigFitsError` that lists each config and why.
"""

from __future__ import annotations

import functools
import logging
import sys
import time
import warnings
import weakref
from typing import Any, Callable, Iterable

from .. import config as _config
from ..errors import LaunchError, NoConfigFitsError, OutOfResourcesError, UnsupportedOptionError
from ..resources import RESOURCES, SpillWarning, warn_if_spilling
from .jit import JITFunction

#: The module polytile.runtime.jit (its name in polytile.runtime is the decorator).
_JIT = sys.modules[JITFunction.__module__]

log = logging.getLogger("polytile.autotune")


class _NotGiven:
    """A key argument neither given nor defaulted (a config supplies it)."""

    def __repr__(self) -> str:
        return "<not given>"


_NOT_GIVEN = _NotGiven()


class Config:
    """One point of the search space: meta-parameter values and launch options.

    ``pre_hook(args)``, if given, runs before every launch with this config (trials and
    real launches), with the arguments by name, the config's values included."""

    def __init__(self, kwargs: dict, num_warps: int = 4, num_stages: int = 3, num_ctas: int = 1,
                 maxnreg: int | None = None, pre_hook: Callable | None = None):
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook

    def all_kwargs(self) -> dict:
        """The meta-parameters and the launch options, as the launch takes them."""
        options = {"num_warps": self.num_warps, "num_stages": self.num_stages, "num_ctas": self.num_ctas}
        if self.maxnreg is not None:
            options["maxnreg"] = self.maxnreg
        return {**self.kwargs, **options}

    def __repr__(self) -> str:
        parts = [f"{k}: {v}" for k, v in self.kwargs.items()]
        parts += [f"num_warps: {self.num_warps}", f"num_stages: {self.num_stages}", f"num_ctas: {self.num_ctas}"]
        if self.maxnreg is not None:
            parts.append(f"maxnreg: {self.maxnreg}")
        return ", ".join(parts)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Config) and self.all_kwargs() == other.all_kwargs() \
            and self.pre_hook is other.pre_hook

    def __hash__(self) -> int:
        return hash((tuple(sorted((k, repr(v)) for k, v in self.all_kwargs().items())), id(self.pre_hook)))


def _base_jit(fn: Any) -> JITFunction:
    while not isinstance(fn, JITFunction):
        inner = getattr(fn, "fn", None)
        if inner is None:
            raise TypeError(f"@autotune and @heuristics go above @jit, got {fn!r}")
        fn = inner
    return fn


class _Launchable:
    """``fn[grid](...)`` for the wrappers, like :class:`JITFunction`."""

    fn: Any

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return functools.partial(self.run, grid=grid)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = _base_jit(self).__name__
        raise LaunchError(f"'{name}' is a kernel: launch it with {name}[grid](...)")

    @property
    def __name__(self) -> str:  # noqa: A003 - mirrors the function's
        return _base_jit(self).__name__


class Heuristics(_Launchable):
    """Computes meta-parameters from the other arguments before each launch."""

    def __init__(self, fn: Any, values: dict[str, Callable[[dict], Any]]):
        self.fn = fn
        self.values = dict(values)
        self.arg_names = _base_jit(fn).param_names

    def _with_values(self, args: tuple, kwargs: dict) -> dict:
        named = _base_jit(self.fn).named_arguments(args, kwargs)
        kwargs = dict(kwargs)
        for name, heuristic in self.values.items():
            kwargs[name] = named[name] = heuristic(named)
        return kwargs

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn.run(*args, **self._with_values(args, kwargs))

    def mutated_args(self, *args: Any, **kwargs: Any) -> list[str]:
        return self.fn.mutated_args(*args, **self._with_values(args, kwargs))

    def warmup(self, *args: Any, grid: Any = None, **kwargs: Any) -> Any:
        """Compile what a launch would run, without launching (Triton's)."""
        return self.fn.warmup(*args, grid=grid, **self._with_values(args, kwargs))


def heuristics(values: dict[str, Callable[[dict], Any]]) -> Callable[[Any], Heuristics]:
    """``@heuristics({"BLOCK": lambda args: next_power_of_2(args["n"])})``: each value is a
    function of the arguments by name (earlier heuristics' values included)."""
    return lambda fn: Heuristics(fn, values)


#: Every live autotuner: a change of a setting the compiled code depends on forgets
#: their choices, timed on code compiled under the old value.
_TUNERS: "weakref.WeakSet[Autotuner]" = weakref.WeakSet()


def _forget_tunings() -> None:
    for tuner in list(_TUNERS):
        tuner.cache.clear()


_config.watch_recompiling(_forget_tunings)
_config.watch("disabled_plugins", _forget_tunings)  # another set of plugins compiles other code


class Autotuner(_Launchable):
    def __init__(self, fn: Any, configs: list[Config], key: Iterable[str], reset_to_zero: Iterable[str] | None = None,
                 restore_value: Iterable[str] | None = None, pre_hook: Callable | None = None,
                 post_hook: Callable | None = None, prune_configs_by: dict | None = None, warmup: float = 25,
                 rep: float = 100, do_bench: Callable | None = None):
        self.fn = fn
        self.configs = list(configs) or [Config({})]
        self._base = _base_jit(fn)
        self.arg_names = self._base.param_names
        self._params = frozenset(self.arg_names)
        self.keys = list(key)
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        for name in self.keys + self.reset_to_zero + self.restore_value:
            if name not in self.arg_names:
                from ..errors import did_you_mean

                raise LaunchError(f"@autotune of '{_base_jit(fn).__name__}' names '{name}', which is not a "
                                  f"parameter{did_you_mean(name, self.arg_names)}")
        self.user_pre_hook = pre_hook
        self.user_post_hook = post_hook
        self.early_config_prune = (prune_configs_by or {}).get("early_config_prune")
        #: Milliseconds of warm-up per trial (Triton's ``num_warmups``; ``warmup=`` when made).
        self.num_warmups = warmup
        self.rep = rep
        #: ``do_bench(trial) -> seconds``: the user's timer; None: :func:`bench`, with the
        #: launching backend's ``synchronize`` (a GPU launch returns before the kernel ends).
        self.do_bench = do_bench
        #: The best config for each key seen (forgotten when a setting the compiled code
        #: depends on changes: polytile.config's ``recompiles`` settings).
        self.cache: dict[tuple, Config] = {}
        _TUNERS.add(self)
        self.best_config: Config | None = None
        #: The timing (seconds) of each config at the last tuning.
        self.configs_timings: dict[Config, float] = {}
        #: What the last tuning restored between trials (names), for tests and curiosity.
        self.restored_args: list[str] = []
        #: The configs the last tuning dropped, with the error of each (out of resources).
        self.dropped_configs: dict[Config, OutOfResourcesError | UnsupportedOptionError] = {}

    def tuning_key(self, named: dict) -> tuple:
        """The values of the ``key`` arguments (given or defaulted: a default is a value
        like any other, where Triton leaves a defaulted argument out of the key) and the
        dtypes of the array arguments."""
        key = [named.get(k, _NOT_GIVEN) for k in self.keys]
        key += [v.dtype for k, v in named.items() if k in self._params and hasattr(v, "dtype")]
        return tuple(key)

    def warmup(self, *args: Any, grid: Any = None, **kwargs: Any) -> list:
        """Compile every config (those ``early_config_prune`` keeps) for these arguments
        without launching or timing any, as Triton's; returns the compiled kernels."""
        named = self._base.named_arguments(args, kwargs)
        configs = self.configs
        if self.early_config_prune is not None and len(configs) > 1:
            configs = list(self.early_config_prune(configs, named, **kwargs)) or configs
        return [self.fn.warmup(*args, grid=grid, **self._meta(config, kwargs)) for config in configs]

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        named = self._base.named_arguments(args, kwargs)
        key = self.tuning_key(named)
        config = self.cache.get(key)
        if config is None:
            started = _JIT._compile_generation  # a choice timed on code a setting change dropped is not kept
            configs = self.configs
            if self.early_config_prune is not None and len(configs) > 1:
                configs = list(self.early_config_prune(configs, named, **kwargs)) or configs
            if len(configs) == 1:
                config = configs[0]
            else:
                # A config that spills and loses is not worth a warning: the trials compile
                # without one, and the chosen config's is given after.
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", SpillWarning)
                    config = self._tune(configs, args, kwargs, named, grid)
                if _JIT._compile_generation == started:
                    self.cache[key] = config
                self.best_config = config
                compiled = self._launch(config, args, kwargs, grid)
                metadata = getattr(compiled, "metadata", None) or {}
                warn_if_spilling(self.__name__, getattr(compiled, "target", "?"), metadata.get(RESOURCES),
                                 ", ".join(f"{k}={v!r}" for k, v in sorted(self._meta(config, kwargs).items())
                                           if k != "target"))
                return compiled
            self.cache[key] = config
        self.best_config = config
        return self._launch(config, args, kwargs, grid)

    def mutated_args(self, *args: Any, **kwargs: Any) -> list[str]:
        """The arguments any config may write (the union over the configs)."""
        found: list[str] = []
        for config in self.configs:
            for name in self._mutated(config, args, kwargs):
                if name not in found:
                    found.append(name)
        return [n for n in self.arg_names if n in found]

    # -- internals ------------------------------------------------------------------
    def _meta(self, config: Config, kwargs: dict) -> dict:
        clash = set(config.kwargs) & set(kwargs)
        if clash:
            raise LaunchError(f"'{self.__name__}': {', '.join(sorted(clash))} given at launch and by the autotuner's "
                              "configs; remove it from the launch, the autotuner chooses it")
        return {**kwargs, **config.all_kwargs()}

    def _launch(self, config: Config, args: tuple, kwargs: dict, grid: Any) -> Any:
        meta = self._meta(config, kwargs)
        if config.pre_hook is not None:
            config.pre_hook(self._base.named_arguments(args, meta))
        return self.fn.run(*args, grid=grid, **meta)

    def _mutated(self, config: Config, args: tuple, kwargs: dict) -> list[str]:
        meta = {k: v for k, v in self._meta(config, kwargs).items() if k != "target"}
        if config.pre_hook is not None:
            # The analysis is of a launch with this config, and such a launch runs the
            # config's pre-hook first: it may set what the kernel compiles for (Triton's
            # tutorials make descriptors with a dummy block and set each config's here).
            config.pre_hook(self._base.named_arguments(args, meta))
        return self.fn.mutated_args(*args, **meta)

    def _tune(self, configs: list[Config], args: tuple, kwargs: dict, named: dict, grid: Any) -> Config:
        from ..language.core import unwrap
        from .args import SavedArgument

        # What a trial may change: the ones the user named (saved first, before any
        # config's pre-hook runs, as Triton saves them), and the written arguments of
        # every config (found by analysing a launch with it, which runs its pre-hook).
        # Saved once, put back before every trial and at the end.
        saved = {}

        def save(name: str) -> None:
            value = unwrap(named.get(name))
            if value is not None and name not in saved:
                saved[name] = SavedArgument(self.__name__, name, value, LaunchError)

        for name in self.restore_value:
            save(name)
        for config in configs:
            for name in self._mutated(config, args, kwargs):
                save(name)
        zeroed = [SavedArgument(self.__name__, name, unwrap(named[name]), LaunchError, keep=False)
                  for name in self.reset_to_zero if unwrap(named.get(name)) is not None]
        self.restored_args = [n for n in self.arg_names if n in saved]

        def restore() -> None:
            for argument in saved.values():
                argument.restore()

        launched: list = []  # the kernel the last trial launched

        def synchronize() -> None:
            backend = getattr(launched[0], "backend", None) if launched else None
            if backend is not None:
                backend.synchronize()

        measure = self.do_bench or (lambda fn: bench(fn, self.num_warmups, self.rep, synchronize=synchronize))
        timings: dict[Config, float] = {}
        dropped: dict[Config, OutOfResourcesError | UnsupportedOptionError] = {}
        try:
            for config in configs:
                def trial(config: Config = config) -> None:
                    restore()
                    for argument in zeroed:
                        argument.zero()
                    if self.user_pre_hook is not None:
                        self.user_pre_hook(named)
                    launched[:] = [self._launch(config, args, kwargs, grid)]
                    if self.user_post_hook is not None:
                        self.user_post_hook(named, None)

                try:
                    timings[config] = measure(trial)
                except (OutOfResourcesError, UnsupportedOptionError) as error:
                    # A config this target cannot hold, or one with an option it does not have
                    # (Triton's configs carry maxnreg, an NVIDIA option): dropped, with the reason.
                    dropped[config] = error
                    log.debug("autotuning '%s': config %s dropped: %s", self.__name__, config, error)
        finally:
            restore()
        self.configs_timings = timings
        self.dropped_configs = dropped
        if not timings:
            raise NoConfigFitsError(self.__name__, dropped)
        return min(timings, key=timings.get)


def bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100,
          synchronize: Callable[[], None] | None = None) -> float:
    """The median time of one ``fn()`` in seconds: about ``warmup`` ms of runs (at least
    one: the first run compiles), then about ``rep`` ms of measured runs.

    ``synchronize()`` waits for the device's work (a GPU launch returns before its kernel
    ends, so the host's clock alone would time the launches): the measured runs go in
    batches, each timed from one synchronization to the next, so the device's time is
    what is measured, and the cost of synchronizing is spread over the batch."""
    sync = synchronize or _nothing
    fn()  # compiles (on the first config's first run): not a measure of one run
    sync()
    start = time.perf_counter()
    runs = 0
    while True:
        fn()
        sync()
        runs += 1
        elapsed = time.perf_counter() - start
        if elapsed * 1e3 >= warmup:
            break
    # Batches of about a tenth of ``rep`` each (one run where a run is longer).
    batch = max(1, min(1000, int(rep / 10 / (elapsed * 1e3 / runs)))) if elapsed > 0 else 1
    times = []
    start = time.perf_counter()
    while True:
        begin = time.perf_counter()
        for _ in range(batch):
            fn()
        sync()
        end = time.perf_counter()
        times.append((end - begin) / batch)
        if (end - start) * 1e3 >= rep or len(times) >= 1000:
            break
    import statistics  # with fractions and decimal: not on every warm start

    return statistics.median(times)


def _nothing() -> None:
    pass


def autotune(configs: list[Config], key: Iterable[str], prune_configs_by: dict | None = None,
             reset_to_zero: Iterable[str] | None = None, restore_value: Iterable[str] | None = None,
             pre_hook: Callable | None = None, post_hook: Callable | None = None, warmup: float = 25,
             rep: float = 100, do_bench: Callable | None = None, **unused: Any) -> Callable[[Any], Autotuner]:
    """Tune a kernel over ``configs``, once per value of the ``key`` arguments.

    ``reset_to_zero``: arguments zeroed before each trial (accumulators).
    ``restore_value``: arguments put back after each trial; the ones the kernel may write
    are put back anyway (mutation analysis), so this is rarely needed.
    ``warmup``/``rep``: milliseconds of warm-up and of measured runs per config.
    ``prune_configs_by={"early_config_prune": f}``: ``f(configs, args, **kwargs)`` drops
    configs before any trial.  Other Triton keywords (``use_cuda_graph``...) are accepted
    and ignored."""
    return lambda fn: Autotuner(fn, configs, key, reset_to_zero, restore_value, pre_hook, post_hook,
                                prune_configs_by, warmup, rep, do_bench)
