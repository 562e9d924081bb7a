"""@autotune, @heuristics and Config."""

import numpy as np
import pytest

import polytile.language as pl
from polytile.runtime import Config, LaunchError, autotune, cdiv, heuristics, jit, next_power_of_2

CONFIGS = [Config({"BLOCK": 16}), Config({"BLOCK": 64}, num_warps=8), Config({"BLOCK": 32}, num_stages=2)]


def test_config_all_kwargs_and_repr():
    config = Config({"BLOCK": 64}, num_warps=8, num_stages=2, maxnreg=128)
    assert config.all_kwargs() == {"BLOCK": 64, "num_warps": 8, "num_stages": 2, "num_ctas": 1, "maxnreg": 128}
    assert "BLOCK: 64" in repr(config) and "num_warps: 8" in repr(config)


def test_accumulating_kernel_is_restored_between_trials_without_being_told():
    # out += x: every trial would add once more if the tuner did not put `out` back.
    @autotune(configs=CONFIGS, key=["n"], warmup=0, rep=1)
    @jit
    def accumulate(x_ptr, out_ptr, n, BLOCK: pl.constexpr):
        offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
        mask = offs < n
        pl.store(out_ptr + offs, pl.load(out_ptr + offs, mask=mask) + pl.load(x_ptr + offs, mask=mask), mask=mask)

    x = np.arange(100, dtype=np.float32)
    out = np.ones(100, np.float32)
    accumulate[lambda meta: (cdiv(meta["n"], meta["BLOCK"]),)](x, out, 100)
    np.testing.assert_array_equal(out, 1 + x)     # exactly one real launch's worth
    assert accumulate.restored_args == ["out_ptr"]
    assert set(accumulate.configs_timings) == set(CONFIGS)
    assert accumulate.best_config in CONFIGS
    assert accumulate.mutated_args(x, out, 100) == ["out_ptr"]

    # Same key: no tuning, the cached config runs once.
    accumulate.configs_timings = {}
    accumulate[lambda meta: (cdiv(meta["n"], meta["BLOCK"]),)](x, out, 100)
    np.testing.assert_array_equal(out, 1 + 2 * x)
    assert accumulate.configs_timings == {}
    # A new key value tunes again.
    small = np.ones(10, np.float32)
    accumulate[lambda meta: (cdiv(meta["n"], meta["BLOCK"]),)](x[:10].copy(), small, 10)
    assert len(accumulate.cache) == 2 and accumulate.configs_timings
    # A setting the compiled code depends on changes: the choices timed on the old code go.
    pytest.importorskip("polytile_nvidia")
    from polytile import config

    with config.override(nvidia_assembler="ptxas"):
        assert accumulate.cache == {}


def test_reset_to_zero_zeroes_before_each_trial():
    seen = []

    @autotune(configs=CONFIGS, key=["n"], reset_to_zero=["total_ptr"], warmup=0, rep=1)
    @jit
    def total(x_ptr, total_ptr, n, BLOCK: pl.constexpr):
        offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
        pl.atomic_add(total_ptr, pl.sum(pl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))

    def do_bench(trial):
        trial()
        seen.append(float(total_buffer[0]))
        return 1.0

    total.do_bench = do_bench
    x = np.ones(50, np.float32)
    total_buffer = np.full(1, 7.0, np.float32)
    total[lambda meta: (cdiv(50, meta["BLOCK"]),)](x, total_buffer, 50)
    assert seen == [50.0, 50.0, 50.0]           # each trial started from zero
    assert total_buffer[0] == 7.0 + 50.0         # the real launch adds to the caller's value


def test_config_clash_and_unknown_key_are_errors():
    @jit
    def k(out_ptr, BLOCK: pl.constexpr):
        pl.store(out_ptr + pl.arange(0, BLOCK), 1.0)

    tuned = autotune(configs=CONFIGS, key=[])(k)
    with pytest.raises(LaunchError, match="BLOCK given at launch and by the autotuner"):
        tuned[(1,)](np.zeros(64, np.float32), BLOCK=16)
    with pytest.raises(LaunchError, match="'sise', which is not a parameter"):
        autotune(configs=CONFIGS, key=["sise"])(k)


def test_config_pre_hook_and_prune():
    calls = []

    @autotune(configs=[Config({"BLOCK": 8}, pre_hook=lambda args: calls.append(args["BLOCK"])),
                       Config({"BLOCK": 16})],
              key=["n"], prune_configs_by={"early_config_prune": lambda configs, args, **kw: configs[:1]})
    @jit
    def k(out_ptr, n, BLOCK: pl.constexpr):
        offs = pl.arange(0, BLOCK)
        pl.store(out_ptr + offs, 2.0, mask=offs < n)

    out = np.zeros(8, np.float32)
    k[(1,)](out, 8)
    assert calls == [8] and (out == 2).all() and k.best_config.kwargs == {"BLOCK": 8}


def test_a_config_pre_hook_runs_before_the_tuner_analyses_a_launch_with_it():
    # A pre-hook may set what the kernel compiles for (Triton's descriptor tutorials set
    # each config's block shape on descriptors made with a dummy one): the analysis of
    # what a trial writes must see the launch as the hook leaves it.
    events = []

    def hook(block):
        return lambda args: events.append(("hook", block, args["BLOCK"]))

    @autotune(configs=[Config({"BLOCK": 8}, pre_hook=hook(8)), Config({"BLOCK": 16}, pre_hook=hook(16))], key=["n"],
              warmup=0, rep=1)
    @jit
    def k(out_ptr, n, BLOCK: pl.constexpr):
        offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
        pl.store(out_ptr + offs, 2.0, mask=offs < n)

    analyse = k.fn.mutated_args
    k.fn.mutated_args = lambda *args, **kwargs: events.append(("analysis", kwargs["BLOCK"])) or analyse(*args, **kwargs)
    out = np.zeros(16, np.float32)
    k[lambda meta: (cdiv(16, meta["BLOCK"]),)](out, 16)
    assert events[:4] == [("hook", 8, 8), ("analysis", 8), ("hook", 16, 16), ("analysis", 16)]
    assert (out == 2).all()


def test_arguments_named_in_restore_value_are_saved_before_any_pre_hook_runs():
    # A hook that changes data: the launch the tuner finally makes sees the arguments as
    # they were before tuning, changed by that launch's hook once.
    def bump(args):
        args["x_ptr"][0] += 1

    @autotune(configs=[Config({"BLOCK": 8}, pre_hook=bump), Config({"BLOCK": 16}, pre_hook=bump)], key=["n"],
              restore_value=["x_ptr"], warmup=0, rep=1)
    @jit
    def copy(x_ptr, out_ptr, n, BLOCK: pl.constexpr):
        offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
        pl.store(out_ptr + offs, pl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    x = np.zeros(16, np.float32)
    out = np.zeros(16, np.float32)
    copy[lambda meta: (cdiv(16, meta["BLOCK"]),)](x, out, 16)
    assert x[0] == 1 and out[0] == 1


def test_heuristics_compute_meta_parameters():
    @heuristics({"BLOCK": lambda args: next_power_of_2(args["n"]), "EVEN": lambda args: args["n"] == args["BLOCK"]})
    @jit
    def k(out_ptr, n, BLOCK: pl.constexpr, EVEN: pl.constexpr):
        offs = pl.arange(0, BLOCK)
        if EVEN:
            pl.store(out_ptr + offs, 1.0)
        else:
            pl.store(out_ptr + offs, 2.0, mask=offs < n)

    out = np.zeros(16, np.float32)
    k[(1,)](out, 16)
    assert (out == 1).all()
    out = np.zeros(10, np.float32)
    k[(1,)](out, 10)
    assert (out == 2).all()
    assert k.mutated_args(out, 10) == ["out_ptr"]


def test_autotune_over_heuristics():
    @autotune(configs=[Config({"SCALE": 2}), Config({"SCALE": 3})], key=["n"], warmup=0, rep=1)
    @heuristics({"BLOCK": lambda args: next_power_of_2(args["n"])})
    @jit
    def k(out_ptr, n, BLOCK: pl.constexpr, SCALE: pl.constexpr):
        offs = pl.arange(0, BLOCK)
        pl.store(out_ptr + offs, pl.load(out_ptr + offs, mask=offs < n) * SCALE, mask=offs < n)

    out = np.ones(12, np.float32)
    k[(1,)](out, 12)
    assert (out == k.best_config.kwargs["SCALE"]).all()


def test_key_arguments_left_at_their_default_are_part_of_the_key():
    # Triton builds the key from the arguments given only, so a key argument left at its
    # default drops out and a tuning for one value serves another.  Here a default is a
    # value like any other.
    tunings = []

    @autotune(configs=CONFIGS, key=["n", "MODE"], warmup=0, rep=1,
              do_bench=lambda trial: (tunings.append(1), trial(), 1.0)[-1])
    @jit
    def k(out_ptr, n, MODE: pl.constexpr = 0, BLOCK: pl.constexpr = 16):
        offs = pl.arange(0, BLOCK)
        pl.store(out_ptr + offs, MODE * 1.0, mask=offs < n)

    out = np.zeros(64, np.float32)
    k[(1,)](out, 8)
    assert len(k.cache) == 1
    k[(1,)](out, 8, MODE=0)            # the default, given: the same key
    k[(1,)](out, 8, 0)
    assert len(k.cache) == 1 and len(tunings) == len(CONFIGS)
    k[(1,)](out, 8, MODE=1)            # another value of a defaulted key argument tunes again
    assert len(k.cache) == 2 and len(tunings) == 2 * len(CONFIGS)
    assert (out[:8] == 1).all()


def test_heuristics_and_config_hooks_see_defaulted_arguments():
    seen = []

    @heuristics({"BLOCK": lambda args: 8 * args["FACTOR"]})
    @jit
    def k(out_ptr, n, FACTOR: pl.constexpr = 2, BLOCK: pl.constexpr = 1):
        offs = pl.arange(0, BLOCK)
        pl.store(out_ptr + offs, BLOCK * 1.0, mask=offs < n)

    out = np.zeros(32, np.float32)
    k[(1,)](out, 32)
    assert out[0] == 16 and out[16] == 0
    tuned = autotune(configs=[Config({}, pre_hook=lambda args: seen.append(args))], key=["n"])(k)
    tuned[(1,)](out, 32)
    assert seen[0]["FACTOR"] == 2 and seen[0]["n"] == 32 and seen[0]["num_warps"] == 4


class _AsyncDevice:
    """A device whose launches return at once and whose kernels run until synchronize():
    a fake clock advances 1 us per launch on the host and 10 us per kernel on the device."""

    def __init__(self):
        self.now = 0.0
        self.queued = 0.0
        self.synchronized = 0

    def clock(self) -> float:
        return self.now

    def launch(self) -> None:
        self.now += 1e-6
        self.queued += 1e-5

    def synchronize(self) -> None:
        self.now += self.queued
        self.queued = 0.0
        self.synchronized += 1


def test_bench_times_the_device_when_launches_return_before_the_kernel_ends(monkeypatch):
    import importlib

    autotune_module = importlib.import_module("polytile.runtime.autotune")
    device = _AsyncDevice()
    monkeypatch.setattr(autotune_module.time, "perf_counter", device.clock)
    # Synchronized: one run is its launch and its kernel, measured in batches (a few
    # dozen waits for 200 ms of 11 us runs, not one per run).
    assert autotune_module.bench(device.launch, warmup=0, rep=200, synchronize=device.synchronize) == \
        pytest.approx(1.1e-5)
    assert device.synchronized < 50
    # A first run that compiles (200 ms here) is not taken for the length of one run:
    # the batches stay long.
    compiled = []

    def launch_compiling_first() -> None:
        if not compiled:
            compiled.append(True)
            device.now += 0.200
        device.launch()

    device.synchronized = 0
    assert autotune_module.bench(launch_compiling_first, warmup=0, rep=200, synchronize=device.synchronize) == \
        pytest.approx(1.1e-5)
    assert device.synchronized < 50
    # The host's clock alone times the launches only (what a GPU autotuner must not do).
    assert autotune_module.bench(device.launch, warmup=5, rep=20) == pytest.approx(1e-6)


def test_the_tuner_waits_for_the_backend_that_launched_each_trial(monkeypatch):
    from polytile.interpreter.plugin import InterpreterBackend

    waits = []
    monkeypatch.setattr(InterpreterBackend, "synchronize", lambda self: waits.append(self.name), raising=False)

    @autotune(configs=CONFIGS, key=["n"], warmup=0, rep=1)
    @jit
    def double(x_ptr, out_ptr, n, BLOCK: pl.constexpr):
        offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
        pl.store(out_ptr + offs, 2 * pl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    x, out = np.arange(40, dtype=np.float32), np.zeros(40, np.float32)
    double[lambda meta: (cdiv(40, meta["BLOCK"]),)](x, out, 40, target="interp")
    np.testing.assert_array_equal(out, 2 * x)
    assert waits and set(waits) == {"interp"}
