"""@autotune drops configs the target cannot hold (OutOfResourcesError at compile time)
and fails, listing every config and why, only when none fits.

The interpreter has no shared memory, so the compile pipeline here gets one more pass
standing in for a GPU backend's memory stage: it charges each kernel for its largest
tile as if staged through shared memory, and raises what a GPU backend raises over its
limit.  Everything else (the JIT, the compile, the trials, the launches) is real."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pytest

import polytile.language as pl
from polytile.errors import OutOfResourcesError
from polytile.ir import types as t
from polytile.passes.pass_base import Pass, PassContext, PreservedAnalyses
from polytile.runtime import Config, autotune, cdiv, jit
from polytile.runtime.autotune import NoConfigFitsError

LIMIT = 1024


@dataclass
class ChargeLargestTile(Pass):
    name: ClassVar[str] = "charge-largest-tile"
    summary: ClassVar[str] = "test stand-in: a kernel needs its largest tile's bytes of shared memory"

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        for function in (op for op in module.walk() if op.name == "func.func"):
            need = max((r.type.numel * 4 for op in function.walk() for r in op.results
                        if isinstance(r.type, t.TileType)), default=0)
            if need > LIMIT:
                raise OutOfResourcesError(kernel=function.attributes["sym_name"], resource="shared memory",
                                          need=need, limit=LIMIT, target=str(context.target))
        return PreservedAnalyses.all()


@pytest.fixture(autouse=True)
def shared_memory_limit(monkeypatch):
    from polytile.passes import default_pipeline

    original = default_pipeline.build_pipeline

    def build(*args, **kwargs):
        pipeline = original(*args, **kwargs)
        pipeline.insert_after("tile", ChargeLargestTile())
        return pipeline

    monkeypatch.setattr(default_pipeline, "build_pipeline", build)


@jit
def double(x_ptr, out_ptr, n, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    pl.store(out_ptr + offs, pl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def grid(meta):
    return (cdiv(meta["n"], meta["BLOCK"]),)


def test_configs_over_the_limit_are_dropped_before_any_trial_runs(caplog):
    benched = []

    def do_bench(trial):
        trial()
        benched.append(True)
        return 1.0

    # 512 floats are 2 KB (over), 128 are 512 bytes (fit), 1024 are 4 KB (over).
    configs = [Config({"BLOCK": 512}), Config({"BLOCK": 128}), Config({"BLOCK": 1024})]
    tuned = autotune(configs=configs, key=["n"], do_bench=do_bench)(double)
    x = np.arange(1000, dtype=np.float32)
    out = np.zeros_like(x)
    with caplog.at_level(logging.DEBUG, logger="polytile.autotune"):
        tuned[grid](x, out, 1000)
    np.testing.assert_array_equal(out, 2 * x)
    assert tuned.best_config == configs[1] and list(tuned.configs_timings) == [configs[1]]
    assert len(benched) == 1  # the dropped configs never reached a timed run
    assert set(tuned.dropped_configs) == {configs[0], configs[2]}
    assert tuned.dropped_configs[configs[2]].need == 4096
    notes = [r.getMessage() for r in caplog.records if r.name == "polytile.autotune"]
    assert len(notes) == 2 and all(r.levelno == logging.DEBUG for r in caplog.records if r.name == "polytile.autotune")
    assert "config BLOCK: 512, num_warps: 4" in notes[0] and "needs 2048 bytes of shared memory" in notes[0]


def test_when_no_config_fits_the_error_lists_each_config_and_why():
    configs = [Config({"BLOCK": 512}), Config({"BLOCK": 2048}, num_warps=8)]
    tuned = autotune(configs=configs, key=["n"], warmup=0, rep=1)(double)
    x = np.arange(100, dtype=np.float32)
    with pytest.raises(NoConfigFitsError) as info:
        tuned[grid](x, np.zeros_like(x), 100)
    message = str(info.value)
    assert message.startswith("'double': none of its 2 autotuning configs fits the target:")
    assert "  BLOCK: 512, num_warps: 4, num_stages: 3, num_ctas: 1: kernel 'double' needs 2048 bytes" in message
    assert "  BLOCK: 2048, num_warps: 8, num_stages: 3, num_ctas: 1: kernel 'double' needs 8192 bytes" in message
    assert "more than the 1024 bytes interp gives a block" in message
    assert [e.need for e in info.value.failures.values()] == [2048, 8192]


def test_other_compile_errors_are_not_swallowed():
    @jit
    def broken(x_ptr, n, BLOCK: pl.constexpr):
        pl.store(x_ptr + pl.arange(0, BLOCK), undefined_name)

    tuned = autotune(configs=[Config({"BLOCK": 16}), Config({"BLOCK": 32})], key=["n"], warmup=0, rep=1)(broken)
    with pytest.raises(Exception) as info:
        tuned[(1,)](np.zeros(32, np.float32), 32)
    assert not isinstance(info.value, (OutOfResourcesError, NoConfigFitsError))
    assert "undefined_name" in str(info.value)
