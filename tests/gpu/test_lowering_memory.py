"""Masked loads and stores (core/polytile/gpu/lowering/memory.py) through the NVIDIA
pipeline, run on the thread-block simulator (tests/gpu/llvm_cta.py): the predicated
vector accesses read only the unmasked elements, keep ``other`` elsewhere, and write
only where the mask holds."""

from __future__ import annotations

import re
import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.compiler import compile_module

from .llvm_cta import run_kernel

pytest.importorskip("polytile_nvidia")

NUM_WARPS = 2


@pt.jit
def masked_shift(x, out, n, BLOCK: pl.constexpr):
    cols = pl.arange(0, BLOCK)
    row = pl.load(x + cols, mask=cols < n, other=-3)
    pl.store(out + cols, row + 1, mask=cols < BLOCK - 16)


def run(kernel, args, **meta) -> str:
    artifacts = compile_module(kernel.lower(*args, **meta), "nvidia:sm_90a", num_warps=NUM_WARPS).context.artifacts
    run_kernel(artifacts, args, NUM_WARPS)
    return artifacts["llvm_ir"]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int8, np.float64])
@pytest.mark.parametrize("n", [96, 37])  # a multiple of the vectors, and one inside a vector
def test_masked_loads_keep_other_and_masked_stores_skip(dtype, n):
    block = 256
    x = (np.arange(block) % 50).astype(dtype)
    out = np.full(block, 7, dtype)
    llvm_ir = run(masked_shift, [x, out, n], BLOCK=block)
    expected = np.where(np.arange(block) < n, x, -3).astype(dtype) + dtype(1)
    np.testing.assert_array_equal(out[:block - 16], expected[:block - 16])
    np.testing.assert_array_equal(out[block - 16:], 7)
    assert "ld.global" in llvm_ir and "llvm.masked" not in llvm_ir


@pt.jit
def double_in_place(p, n):
    # Triton's test_load_store_same_ptr: each program reads one element and writes it back
    # doubled, a scalar every thread holds.
    pid = pl.program_id(0)
    x = pl.load(p + pid)
    pl.store(p + pid, x * 2, mask=pid < n)


@pytest.mark.parametrize("target", ["nvidia:sm_90a", "amd:gfx942"])
def test_a_scalar_is_stored_by_one_thread(target):
    # Were every thread to store it, a warp that stores early could overwrite the element
    # before a later warp of the same program loads it, which then stores it doubled twice
    # (seen on an H200 with 32 warps).
    pytest.importorskip("polytile_amd" if target.startswith("amd") else "polytile_nvidia")
    x = np.ones(4, np.float32)
    artifacts = compile_module(double_in_place.lower(x, 4), target, num_warps=32).context.artifacts
    llvm_ir = artifacts["llvm_ir"]
    thread = re.search(r'(%"[.\w]+") = call i32 @"llvm\.(nvvm\.read\.ptx\.sreg\.tid\.x|amdgcn\.workitem\.id\.x)"',
                       llvm_ir).group(1)
    owner = re.search(rf'(%"[.\w]+") = icmp eq i32 {re.escape(thread)}, 0', llvm_ir).group(1)
    condition = re.search(rf'(%"[.\w]+") = and i1 %"[.\w]+", {re.escape(owner)}', llvm_ir).group(1)
    store = next(line for line in llvm_ir.splitlines() if "st.global" in line or "masked.store" in line)
    vector = re.search(rf'(%"[.\w]+") = insertelement <1 x i1> <i1 0>, i1 {re.escape(condition)}', llvm_ir)
    assert condition in store or (vector and vector.group(1) in store)  # predicated on the mask and thread 0


def test_a_scalar_store_runs_once_per_program():
    # The simulator runs one warp ahead of another where nothing makes them wait.
    x = np.arange(1, 5, dtype=np.float32)
    artifacts = compile_module(double_in_place.lower(x, 4), "nvidia:sm_90a", num_warps=4).context.artifacts
    run_kernel(artifacts, [x, 4], 4)
    np.testing.assert_array_equal(x, [2, 2, 3, 4])


@pt.jit
def store_then_load(p, out):
    # Thread 0 stores the scalar; every warp loads it back.
    pl.store(p, 7.0)
    x = pl.load(p)
    pl.store(out + pl.arange(0, 128), pl.zeros([128], pl.float32) + x)


@pytest.mark.parametrize("last_first", [False, True])
def test_a_scalar_stored_then_loaded_is_seen_by_every_warp(monkeypatch, last_first):
    from . import llvm_cta_schedule

    monkeypatch.setattr(llvm_cta_schedule, "WARPS_LAST_FIRST", last_first)
    p, out = np.zeros(1, np.float32), np.zeros(128, np.float32)
    artifacts = compile_module(store_then_load.lower(p, out), "nvidia:sm_90a", num_warps=4).context.artifacts
    run_kernel(artifacts, [p, out], 4)
    np.testing.assert_array_equal(out, 7)
    # Only where something reads after the store: double_in_place ends with its store.
    x = np.ones(4, np.float32)
    ptx = compile_module(double_in_place.lower(x, 4), "nvidia:sm_90a", num_warps=4).context.artifacts["ptx"]
    assert "bar.sync" not in ptx[ptx.index(".entry"):]


@pt.jit
def two_scalars_then_load(p, q, out):
    # Layer norm's mean and rstd: two scalar stores, then loads.
    pl.store(p, 7.0)
    pl.store(q, 8.0)
    x = pl.load(p) + pl.load(q)
    pl.store(out + pl.arange(0, 128), pl.zeros([128], pl.float32) + x)


@pytest.mark.parametrize("last_first", [False, True])
def test_consecutive_scalar_stores_share_one_barrier(monkeypatch, last_first):
    from . import llvm_cta_schedule

    monkeypatch.setattr(llvm_cta_schedule, "WARPS_LAST_FIRST", last_first)
    p, q, out = np.zeros(1, np.float32), np.zeros(1, np.float32), np.zeros(128, np.float32)
    artifacts = compile_module(two_scalars_then_load.lower(p, q, out), "nvidia:sm_90a", num_warps=4).context.artifacts
    ptx = artifacts["ptx"]
    assert ptx[ptx.index(".entry"):].count("bar.sync") == 1
    run_kernel(artifacts, [p, q, out], 4)
    np.testing.assert_array_equal(out, 15)
