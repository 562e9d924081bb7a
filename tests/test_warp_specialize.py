"""``pl.range(..., warp_specialize=True)`` without polytile-warpspec (polytile.warp_specialize):
the loop runs unspecialised on every target with the same results, the compile metadata
says so per loop, and one note per process names the plugin.  The plugin is disabled
here (it is installed in the test environment); a child process that does not see it
installed at all checks the words for that (the last test)."""

from __future__ import annotations

import inspect
import subprocess
import sys
import warnings

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile import warp_specialize as ws
from polytile.compiler import compile_module
from polytile.plugins.records import DISABLED, FAILED, LOADED
from polytile.plugins.registry import PluginInfo


@pt.jit
def summed(x_ptr, out_ptr, n, BLOCK: pl.constexpr, SPECIALIZE: pl.constexpr):
    acc = pl.zeros((BLOCK,), pl.float32)
    for start in pl.range(0, n, BLOCK, warp_specialize=SPECIALIZE):
        offs = start + pl.arange(0, BLOCK)
        acc += pl.load(x_ptr + offs, mask=offs < n, other=0.0)
    for start in pl.range(0, n, BLOCK, num_stages=2):  # no hint: no entry
        offs = start + pl.arange(0, BLOCK)
        acc += pl.load(x_ptr + offs, mask=offs < n, other=0.0)
    pl.store(out_ptr + pl.arange(0, BLOCK), acc)


def _loop_line() -> str:
    source, first = inspect.getsourcelines(summed.fn)
    line = first + next(i for i, text in enumerate(source) if "warp_specialize=" in text)
    return f"{__file__}:{line}"


#: What the metadata says while the plugin is disabled (as every test here has it).
DISABLED_WHY = "polytile-warpspec is disabled (disabled by the setting 'disabled_plugins' (entry 'polytile-warpspec'))"


@pytest.fixture(autouse=True)
def without_the_plugin():
    from polytile import config

    disabled = [name for name in config.get("disabled_plugins") if name != "polytile-warpspec"]
    with config.override(disabled_plugins=[*disabled, "polytile-warpspec"]):
        yield


@pytest.fixture
def fresh_note():
    ws._forget_note()
    yield
    ws._forget_note()


@pytest.mark.parametrize("target", ["interp", "nvidia:sm_80", "nvidia:sm_90a", "amd:gfx942"])
@pytest.mark.parametrize("specialize", [True, pl.WarpSpecialize(producer_registers=24, pingpong=True)])
def test_every_target_reports_the_loop_unspecialised_naming_the_plugin(target, specialize):
    if target.startswith("nvidia"):
        pytest.importorskip("polytile_nvidia")
    if target.startswith("amd"):
        pytest.importorskip("polytile_amd")
    x = np.zeros(100, np.float32)
    module = summed.lower(x, np.zeros(32, np.float32), 100, BLOCK=32, SPECIALIZE=specialize)
    metadata = compile_module(module, target).metadata
    assert metadata[ws.WARP_SPECIALIZE] == [{"loop": metadata[ws.WARP_SPECIALIZE][0]["loop"], "specialised": False,
                                             "why": DISABLED_WHY, "plugin_missing": True}]
    assert metadata[ws.WARP_SPECIALIZE][0]["loop"].startswith(_loop_line())
    # Without the hint (or with warp_specialize=False), nothing is said.
    module = summed.lower(x, np.zeros(32, np.float32), 100, BLOCK=32, SPECIALIZE=False)
    assert ws.WARP_SPECIALIZE not in compile_module(module, target).metadata


def test_the_loop_runs_unspecialised_with_one_note_per_process(fresh_note):
    x = np.arange(100, dtype=np.float32)
    expected = np.zeros(32, np.float32)
    for start in range(0, 100, 32):
        chunk = x[start:start + 32]
        expected[:len(chunk)] += 2 * chunk
    out = np.zeros(32, np.float32)
    with pytest.warns(ws.WarpSpecializationNote) as notes:
        summed[(1,)](x, out, 100, BLOCK=32, SPECIALIZE=True)
    np.testing.assert_array_equal(out, expected)
    message = str(notes[0].message)
    assert "kernel 'summed'" in message and _loop_line() in message
    assert "polytile-warpspec is disabled" in message and "the plugin polytile-warpspec" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error", ws.WarpSpecializationNote)
        summed[(1,)](x, out, 99, BLOCK=32, SPECIALIZE=True)  # another specialization: no second note
        summed[(1,)](x, out, 100, BLOCK=32, SPECIALIZE=False)


class _Record:
    def __init__(self, name, status, reason=""):
        self.info, self.status, self.reason = PluginInfo(name, name), status, reason


@pytest.mark.parametrize("status, reason, why", [
    (DISABLED, "disabled by the setting 'disabled_plugins' (entry 'polytile-warpspec')",
     "polytile-warpspec is disabled (disabled by the setting 'disabled_plugins' (entry 'polytile-warpspec'))"),
    (FAILED, "ImportError: no module named x", "polytile-warpspec failed to load (ImportError: no module named x)"),
    (LOADED, "", None),
])
def test_a_disabled_or_failed_plugin_is_named_and_a_loaded_one_reports_itself(monkeypatch, status, reason, why):
    from polytile.plugins import manager

    records = [_Record("core", LOADED), _Record("polytile_warpspec", status, reason)]
    monkeypatch.setattr(manager.get_plugin_manager(), "plugins", lambda: records)
    assert ws.plugin_unavailable() == why
    x = np.zeros(100, np.float32)
    artifacts: dict = {}
    ws.record_unspecialised(ws.hinted_loops(summed.lower(x, x, 100, BLOCK=32, SPECIALIZE=True)), artifacts)
    if why is None:
        assert artifacts == {}  # the plugin writes its own entries
    else:
        assert artifacts[ws.WARP_SPECIALIZE][0]["why"] == why


def test_a_plugin_report_is_left_as_it_is():
    x = np.zeros(100, np.float32)
    report = [{"loop": "k.py:3", "specialised": True}]
    artifacts = {ws.WARP_SPECIALIZE: report}
    ws.record_unspecialised(ws.hinted_loops(summed.lower(x, x, 100, BLOCK=32, SPECIALIZE=True)), artifacts)
    assert artifacts[ws.WARP_SPECIALIZE] is report


#: ``polytile compile`` in a process that does not see polytile-warpspec installed.
UNINSTALLED_COMPILE = """
import runpy
import sys

from polytile.plugins import distributions
everything = distributions.distributions
distributions.distributions = lambda: [d for d in everything() if d.key != "polytile-warpspec"]
sys.modules["polytile_warpspec"] = None
sys.argv = ["polytile", *sys.argv[1:]]
runpy.run_module("polytile", run_name="__main__")
"""


def test_polytile_compile_says_it_per_loop(tmp_path):
    pytest.importorskip("polytile_nvidia")
    result = subprocess.run(
        [sys.executable, "-c", UNINSTALLED_COMPILE, "compile", f"{__file__}:summed", "-t", "nvidia:sm_90a",
         "-s", "*fp32:16,*fp32:16,i32", "-c", "BLOCK=128", "-c", "SPECIALIZE=True", "-o", str(tmp_path)],
        capture_output=True, text=True, check=True)
    assert (f"warp_specialize loop at {_loop_line()}" in result.stderr
            and "not specialised (polytile-warpspec is not installed)" in result.stderr), result.stderr
