"""Registers up to the occupancy cliff (backends/nvidia/polytile_nvidia/registers.py) and
the second assembly of ptx-to-cubin that uses them."""

from __future__ import annotations

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.compiler import compile_module
from polytile_nvidia import assemble, toolkit
from polytile_nvidia.assemble import ptx_to_cubin
from polytile_nvidia.registers import (REGISTERS_PER_SM, cubin_registers, register_budget, threads_per_block,
                                       with_register_cap)

from .ptx_kernels import VECTOR_ADD


@pytest.mark.parametrize("registers, threads, budget", [
    (104, 256, 128),   # two blocks of 256 fit at 104 and still at 128
    (147, 256, 255),   # one block at 147: every register a thread can address
    (40, 512, None),   # three blocks at 40; 42 is not a whole allocation unit more
    (27, 128, None),   # allocated as 32, the cliff itself
    (255, 1024, None),  # not even one block fits: nothing to keep
    # Two warps: warps take registers from one of 4 sub-partitions of 16384 (4 warps
    # each at 104 or at 128), 8 blocks either way; the whole file alone would say 9 at 104.
    (104, 64, 128),
])
def test_budget_keeps_the_blocks_an_sm_holds(registers, threads, budget):
    assert register_budget(registers, threads) == budget

    def blocks(r):  # the CUDA occupancy calculator's rule
        warps = -(-threads // 32)
        return 16384 // (-(-r // 8) * 8 * 32) * 4 // warps
    if budget is not None:
        assert blocks(budget) == blocks(registers)


def test_register_cap_goes_after_the_block_size():
    ptx = ".visible .entry k(\n)\n.maxntid 256\n{\n}\n"
    assert threads_per_block(ptx) == 256
    assert ".maxntid 256\n.maxnreg 128\n{" in with_register_cap(ptx, 128)


def test_register_count_comes_from_the_cubin(ptxas):
    plain = ptx_to_cubin(VECTOR_ADD, "sm_90a", kernel_name="add_kernel", assembler="ptxas")
    assert 0 < cubin_registers(plain) <= 32
    assert cubin_registers(b"not a cubin") is None


@pt.jit
def three_passes(x, y, n, BLOCK: pl.constexpr):
    # bench/'s layer norm, without weights: a row summed in registers, then read twice more.
    acc = pl.zeros((BLOCK,), dtype=pl.float32)
    for off in range(0, n, BLOCK):
        cols = off + pl.arange(0, BLOCK)
        acc += pl.load(x + cols, mask=cols < n, other=0.0).to(pl.float32)
    mean = pl.sum(acc, axis=0) / n
    acc = pl.zeros((BLOCK,), dtype=pl.float32)
    for off in range(0, n, BLOCK):
        cols = off + pl.arange(0, BLOCK)
        d = pl.where(cols < n, pl.load(x + cols, mask=cols < n, other=0.0).to(pl.float32) - mean, 0.0)
        acc += d * d
    rstd = 1 / pl.sqrt(pl.sum(acc, axis=0) / n + 1e-5)
    for off in range(0, n, BLOCK):
        cols = off + pl.arange(0, BLOCK)
        v = pl.load(x + cols, mask=cols < n, other=0.0).to(pl.float32)
        pl.store(y + cols, (v - mean) * rstd, mask=cols < n)


def test_ptx_to_cubin_assembles_again_up_to_the_cliff(ptxas):
    h = np.zeros(16384, np.float16)
    module = three_passes.lower(h, h, 16384, BLOCK=16384)
    context = compile_module(module, "nvidia:sm_90a", num_warps=8).context
    artifacts = context.artifacts
    # What the assembler gives the kernel alone depends on its version (ptxas 13.0: 104
    # registers, two blocks of 256 threads, which still fit at 128): the cap is the
    # budget of that first count, or absent when the first count is at the cliff.
    uncapped = "\n".join(line for line in artifacts["ptx"].splitlines() if not line.startswith(".maxnreg"))
    first = cubin_registers(ptx_to_cubin(uncapped, "sm_90a", kernel_name="three_passes", options=context.options))
    budget = register_budget(first, 256)
    caps = [line for line in artifacts["ptx"].splitlines() if line.startswith(".maxnreg")]
    if budget is None:
        assert caps == []
    else:
        assert caps == [f".maxnreg {budget}"]
        assert cubin_registers(artifacts["cubin"]) <= budget  # (may be fewer than the first: ptxas schedules again)
        assert REGISTERS_PER_SM // (budget * 256) == REGISTERS_PER_SM // (-(-first // 8) * 8 * 256)


def test_a_user_cap_is_left_alone(ptxas):
    h = np.zeros(16384, np.float16)
    module = three_passes.lower(h, h, 16384, BLOCK=16384)
    artifacts = compile_module(module, "nvidia:sm_90a", num_warps=8, maxnreg=64).context.artifacts
    # In the PTX: ptxas ignores -maxrregcount for a kernel with .maxntid.
    assert [line for line in artifacts["ptx"].splitlines() if line.startswith(".maxnreg")] == [".maxnreg 64"]
    assert cubin_registers(artifacts["cubin"]) <= 64
