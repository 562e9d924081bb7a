"""Loops on the GPU: the loop options of ``pl.range`` that LLVM carries out become the
back edge's ``llvm.loop`` metadata, on every GPU backend's pipeline."""

from __future__ import annotations

import re

import numpy as np
import pytest

import polytile.language as pl
from polytile.compiler import compile_module
from polytile.runtime import jit

from .ptx_assembly import assembles

TARGETS = ["nvidia:sm_80", "nvidia:sm_90a", "amd:gfx942"]


@jit
def summed_rows(x_ptr, y_ptr, n, UNROLL: pl.constexpr, NO_LICM: pl.constexpr):
    offs = pl.arange(0, 128)
    acc = pl.zeros((128,), dtype=pl.float32)
    for i in pl.range(n, loop_unroll_factor=UNROLL, disable_licm=NO_LICM):
        acc += pl.load(x_ptr + i * 128 + offs) * 2.0
    pl.store(y_ptr + offs, acc)


def _compile(target: str, unroll, no_licm):
    pytest.importorskip("polytile_amd" if target.startswith("amd") else "polytile_nvidia")
    x = np.zeros(128, np.float32)
    module = summed_rows.lower(x, x, 8, UNROLL=unroll, NO_LICM=no_licm)
    return compile_module(module, target, num_warps=4).context.artifacts


def _loop_ids(llvm_ir: str) -> dict[str, list[str]]:
    """Each ``llvm.loop`` node: its option strings (the node must name itself first)."""
    nodes = dict(re.findall(r"^(![0-9]+) = (?:distinct )?!\{ (.*) \}$", llvm_ir, re.MULTILINE))
    found = {}
    for loop_id in re.findall(r"!llvm\.loop (![0-9]+)", llvm_ir):
        first, *options = [part.strip() for part in nodes[loop_id].split(",")]
        assert first == loop_id, nodes[loop_id]
        found[loop_id] = [re.search(r'!"([^"]+)"', nodes[o]).group(1) for o in options]
    return found


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("unroll, no_licm, expected", [
    (4, False, ["llvm.loop.unroll.count"]),
    (1, True, ["llvm.licm.disable"]),  # below 2: nothing, as Triton
    (1, False, None),
    (None, True, ["llvm.licm.disable"]),
    (None, False, None),
    (0, False, None),
])
def test_loop_options_become_llvm_loop_metadata(target, unroll, no_licm, expected):
    artifacts = _compile(target, unroll, no_licm)
    ids = _loop_ids(artifacts["llvm_ir"])
    if expected is None:
        assert ids == {}
    else:
        assert list(ids.values()) == [expected]
        if unroll and unroll > 1:
            assert re.search(rf'!"llvm.loop.unroll.count", i32 {unroll} ', artifacts["llvm_ir"])


def test_the_unroll_factor_sets_how_many_loads_one_trip_of_the_ptx_loop_makes():
    # n is a run-time value: LLVM unrolls 4 or 2 times (and keeps a remainder loop).
    loads = {}
    for unroll in (4, 2):
        artifacts = _compile("nvidia:sm_80", unroll, False)
        loads[unroll] = artifacts["ptx"].count("ld.global")
        assembles(artifacts["ptx"], "sm_80", artifacts["kernel_name"])
    assert loads[4] >= 4 and loads[2] >= 2 and loads[4] > loads[2]


@pytest.mark.parametrize("target", TARGETS)
def test_loop_ids_are_distinct_nodes_one_per_loop(target):
    @jit
    def two_loops(x_ptr, y_ptr, n):
        offs = pl.arange(0, 128)
        acc = pl.zeros((128,), dtype=pl.float32)
        for i in pl.range(n, loop_unroll_factor=4, disable_licm=True):
            acc += pl.load(x_ptr + i * 128 + offs)
        for i in pl.range(n, loop_unroll_factor=4, disable_licm=True):  # the same options
            acc += pl.load(x_ptr + i * 128 + offs) * 2.0
        pl.store(y_ptr + offs, acc)

    pytest.importorskip("polytile_amd" if target.startswith("amd") else "polytile_nvidia")
    x = np.zeros(128, np.float32)
    artifacts = compile_module(two_loops.lower(x, x, 8), target, num_warps=4).context.artifacts
    # Before LLVM's passes: one self-referencing distinct node per loop.
    ids = re.findall(r"^(![0-9]+) = distinct !\{ \1, ", artifacts["llvm_ir"], re.MULTILINE)
    used = re.findall(r"!llvm\.loop (![0-9]+)", artifacts["llvm_ir"])
    assert len(ids) == 2 and sorted(set(used)) == sorted(ids)
