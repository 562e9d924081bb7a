"""The autotuner shows the spill warning of the config it chose, not of those that lost
(compiled for NVIDIA with the assembler; the launch is recorded, no GPU runs)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile import config
from polytile.resources import SpillWarning
from polytile.runtime import Config, autotune

from tests.toolchains import ptxas_or_skip


def square(x, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    a = pl.load(x + offs[:, None] * BLOCK + offs[None, :])
    pl.store(out + offs[:, None] * BLOCK + offs[None, :], pl.dot(a, a))


@pytest.fixture
def no_gpu_launch(monkeypatch):
    ptxas_or_skip()
    from polytile_nvidia import NvidiaBackend

    monkeypatch.setattr(NvidiaBackend, "can_launch", lambda self: True)
    monkeypatch.setattr(NvidiaBackend, "make_launcher",
                        lambda self, *, compiled, kernel_name, params, options: lambda grid, args, **kw: None)


@pytest.mark.parametrize("spilling_wins", [False, True])
def test_only_the_chosen_configs_spills_are_shown(no_gpu_launch, spilling_wins):
    spills, clean = Config({}, num_warps=4, maxnreg=32), Config({}, num_warps=4)
    times = {spills: 1.0 if spilling_wins else 2.0, clean: 1.5}
    order = iter([spills, clean])
    tuned = autotune(configs=[spills, clean], key=[],
                     do_bench=lambda trial: (trial(), times[next(order)])[1])(pt.jit(square))
    x, out = np.zeros(64 * 64, np.float16), np.zeros(64 * 64, np.float32)
    with config.override(target="nvidia:sm_80", cache=False), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuned[(1,)](x, out, BLOCK=64)
    assert tuned.best_config == (spills if spilling_wins else clean)
    shown = [str(w.message) for w in caught if issubclass(w.category, SpillWarning)]
    if spilling_wins:
        assert len(shown) == 1 and "maxnreg=32" in shown[0]
    else:
        assert shown == []


def test_a_config_with_an_option_the_target_lacks_is_dropped_not_fatal():
    """Triton's configs carry maxnreg, an NVIDIA option: on the interpreter such a config
    is dropped with the reason, and the others tune."""
    from polytile.errors import NoConfigFitsError, UnsupportedOptionError

    capped, plain = Config({}, num_warps=4, maxnreg=128), Config({}, num_warps=4)
    tuned = autotune(configs=[capped, plain], key=[], do_bench=lambda trial: (trial(), 1.0)[1])(pt.jit(square))
    x, out = np.ones(16 * 16, np.float16), np.zeros(16 * 16, np.float32)
    tuned[(1,)](x, out, BLOCK=16, target="interp")
    assert tuned.best_config == plain and list(tuned.dropped_configs) == [capped]
    assert isinstance(tuned.dropped_configs[capped], UnsupportedOptionError)
    np.testing.assert_array_equal(out.reshape(16, 16), np.full((16, 16), 16.0))
    only_capped = autotune(configs=[capped, Config({}, num_warps=8, maxnreg=64)], key=[],
                           do_bench=lambda trial: (trial(), 1.0)[1])(pt.jit(square))
    with pytest.raises(NoConfigFitsError, match="launch option maxnreg=128 is not available on target 'interp'"):
        only_capped[(1,)](x, out, BLOCK=16, target="interp")
