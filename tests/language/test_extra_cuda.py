"""pl.extra.cuda's launch facts, clock and SM id (Triton's tl.extra.cuda.num_threads,
num_warps, globaltimer, smid): compile-time values from the launch's num_warps, the
interpreter's virtual clock in both execution modes, and the instructions every GPU
target emits for them (assembled by ptxas for NVIDIA).
tests/backends/nvidia/test_gpu_misc.py runs them on a GPU."""

from __future__ import annotations

import re

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile import config
from polytile.compiler import compile_module
from polytile.errors import CompilationError

from gpu.ptx_assembly import assembles


@pt.jit
def threads_kernel(out_ptr, warps_ptr):
    # Triton's test_num_threads: the count as a compile-time block size.
    n: pl.constexpr = pl.extra.cuda.num_threads()
    pl.store(out_ptr + pl.arange(0, n), pl.full((n,), 1, pl.int32))
    pl.store(warps_ptr, pl.extra.cuda.num_warps())


@pt.jit
def clock_kernel(times_ptr, ids_ptr, READS: pl.constexpr):
    pid = pl.program_id(0)
    start = pl.extra.cuda.globaltimer()
    if pid == 0:  # program 0 reads its clock more often: each program keeps its own
        for _ in pl.static_range(READS):
            start = pl.extra.cuda.globaltimer()
    end = pl.extra.cuda.globaltimer()
    pl.store(times_ptr + 2 * pid, start)
    pl.store(times_ptr + 2 * pid + 1, end)
    pl.store(ids_ptr + pid, pl.extra.cuda.smid())


@pytest.fixture(params=["per_program", "auto"])
def mode(request):
    with config.override(interpreter_mode=request.param):
        yield request.param


@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_num_threads_is_a_compile_time_count_of_the_launch(mode, num_warps):
    out = np.zeros(512, np.int32)
    warps = np.zeros(1, np.int32)
    threads_kernel[(1,)](out, warps, num_warps=num_warps, target="interp")
    assert out.sum() == 32 * num_warps and out[:32 * num_warps].all()
    assert warps[0] == num_warps


def test_the_interpreter_clock_counts_each_programs_readings(mode):
    times = np.full(8, -1, np.int64)
    ids = np.full(4, -1, np.int32)
    clock_kernel[(4,)](times, ids, READS=3, target="interp")
    # Program 0 read 1 + 3 times before its last reading (4); the others once (1).
    assert times.tolist() == [3, 4, 0, 1, 0, 1, 0, 1]
    assert ids.tolist() == [0, 0, 0, 0]


def test_without_the_launchs_num_warps_the_count_is_a_located_error():
    with pytest.raises(CompilationError, match=r"pl\.extra\.cuda\.num_threads\(\) is a fact of the launch") as info:
        threads_kernel.lower(np.zeros(512, np.int32), np.zeros(1, np.int32))
    assert "test_extra_cuda.py" in str(info.value)
    module = threads_kernel.lower(np.zeros(512, np.int32), np.zeros(1, np.int32), num_warps=2)
    assert "tile<64xi32>" in str(module)


# The instructions each GPU target reads them with, and the thread count per warp size.
TARGETS = {
    "nvidia:sm_80": (32, [r"%globaltimer", r"%smid"]),
    "nvidia:sm_90a": (32, [r"%globaltimer", r"%smid"]),
    "amd:gfx90a": (64, [r"s_memrealtime", r"hwreg\(HW_REG_HW_ID, 8, 8\)"]),
    "amd:gfx942": (64, [r"s_memrealtime", r"hwreg\(HW_REG_HW_ID, 8, 8\)", r"hwreg\(HW_REG_XCC_ID, 0, 4\)"]),
    "amd:gfx950": (64, [r"s_memrealtime", r"hwreg\(HW_REG_XCC_ID, 0, 4\)"]),
    "amd:gfx1100": (32, [r"sendmsg\(MSG_RTN_GET_REALTIME\)", r"hwreg\(HW_REG_HW_ID1, 10, 11\)"]),
}


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_gpu_target_reads_its_clock_and_processor(target):
    backend = pytest.importorskip("polytile_nvidia" if target.startswith("nvidia") else "polytile_amd")
    del backend
    warp_size, patterns = TARGETS[target]
    times, ids = np.zeros(8, np.int64), np.zeros(4, np.int32)
    module = clock_kernel.lower_for(target, times, ids, READS=2)
    result = compile_module(module, target, num_warps=4)
    text = result.artifacts["ptx" if target.startswith("nvidia") else "amdgcn"]
    for pattern in patterns:
        assert re.search(pattern, text), (target, pattern)
    if target.startswith("nvidia"):
        # Three readings where the program reads three times (none merged or hoisted).
        assert text.count("%globaltimer;") == 2 + 2
        assembles(text, target.split(":")[1], "clock_kernel")
    counts = threads_kernel.lower_for(target, np.zeros(512, np.int32), np.zeros(1, np.int32), num_warps=4)
    assert f"tile<{4 * warp_size}xi32>" in str(counts)


def test_a_launch_compiles_the_count_for_its_own_num_warps():
    # The cache key holds num_warps: two launches with other counts get two kernels.
    out, warps = np.zeros(512, np.int32), np.zeros(1, np.int32)
    threads_kernel[(1,)](out, warps, num_warps=2, target="interp")
    first = int(out.sum())
    out[:] = 0
    threads_kernel[(1,)](out, warps, num_warps=16, target="interp")
    assert (first, int(out.sum()), int(warps[0])) == (64, 512, 16)
