"""Atomics through the NVIDIA pipeline to PTX (ptxas assembles it inside the pipeline):
the instructions Triton emits, one atomic per owned element, old values shared with the
threads that hold copies, and the target-neutral LLVM path."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.compiler import compile_module
from polytile.gpu.lowering import atomics  # noqa: F401  (registers the lowerings; see module.py)
from polytile.gpu.lowering.module import lower_module
from polytile_nvidia.codegen import emit_ptx, nvidia_gpu_target


def compile_ptx(kernel, *args, arch="sm_90a", num_warps=4, **meta):
    return compile_module(kernel.lower(*args, **meta), f"nvidia:{arch}", num_warps=num_warps).context.artifacts["ptx"]


def atomic_lines(ptx: str) -> list[str]:
    """The atom/red instructions of ``ptx``, without their predicates."""
    lines = [line.strip() for line in ptx.splitlines()]
    lines = [line.split(" ", 1)[1] if line.startswith("@") else line for line in lines]
    return [line for line in lines if line.startswith(("atom.", "red."))]


@pt.jit
def rmw(p, v, o, OP: pl.constexpr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    val = pl.load(v + offs)
    if OP == "add":
        old = pl.atomic_add(p + offs, val)
    elif OP == "max":
        old = pl.atomic_max(p + offs, val)
    elif OP == "min":
        old = pl.atomic_min(p + offs, val, sem="acquire", scope="cta")
    elif OP == "xchg":
        old = pl.atomic_xchg(p + offs, val, scope="sys")
    elif OP == "cas":
        old = pl.atomic_cas(p + offs, val, val + 1)
    else:
        old = pl.atomic_and(p + offs, val, sem="relaxed")
    pl.store(o + offs, old)


CASES = [
    (np.int32, "add", "atom.global.gpu.acq_rel.add.u32"),
    (np.uint32, "max", "atom.global.gpu.acq_rel.max.u32"),
    (np.int32, "max", "atom.global.gpu.acq_rel.max.s32"),
    (np.int64, "min", "atom.global.cta.acquire.min.s64"),
    (np.uint64, "min", "atom.global.cta.acquire.min.u64"),
    (np.int32, "and", "atom.global.gpu.relaxed.and.b32"),
    (np.int64, "xchg", "atom.global.sys.acq_rel.exch.b64"),
    (np.float32, "add", "atom.global.gpu.acq_rel.add.f32"),
    (np.float64, "add", "atom.global.gpu.acq_rel.add.f64"),
    (np.float16, "add", "atom.global.gpu.acq_rel.add.noftz.f16"),
    (np.int32, "cas", "atom.global.acq_rel.gpu.cas.b32"),
    (np.float64, "cas", "atom.global.acq_rel.gpu.cas.b64"),
]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype, op, instruction", CASES)
def test_rmw_instructions(dtype, op, instruction, arch):
    x = np.zeros(128, dtype)
    lines = atomic_lines(compile_ptx(rmw, x, x, x, OP=op, BLOCK=128, arch=arch))
    assert lines and all(line.startswith(instruction) for line in lines), lines


@pytest.mark.parametrize("dtype, bits", [(np.float32, 32), (np.float64, 64)])
def test_float_max_is_signed_max_or_unsigned_min_by_sign(dtype, bits):
    lines = atomic_lines(compile_ptx(rmw, *[np.zeros(128, dtype)] * 3, OP="max", BLOCK=128))
    assert {line.split()[0] for line in lines} == {f"atom.global.gpu.acq_rel.max.s{bits}",
                                                   f"atom.global.gpu.acq_rel.min.u{bits}"}


def test_half_max_and_xchg_loop_on_16_bit_compare_and_swap():
    for op in ("max", "xchg"):
        lines = atomic_lines(compile_ptx(rmw, *[np.zeros(128, np.float16)] * 3, OP=op, BLOCK=128))
        assert [line.split()[0] for line in lines] == [f"atom.global.acq_rel.{'gpu' if op == 'max' else 'sys'}.cas.b16"]


@pt.jit
def histogram(x, bins, n, BLOCK: pl.constexpr, SEM: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    v = pl.load(x + offs, mask=mask, other=0)
    pl.atomic_add(bins + v, 1, mask=mask, sem=SEM)


def test_unused_results_are_atoms_as_in_triton():
    # atom, its result unused or not (as Triton issues it), scope then ordering: Triton's
    # PTX text, which its test_atomic_rmw reads ("atom.global.gpu.<sem>").
    args = (np.zeros(1000, np.int32), np.zeros(16, np.int32), 1000)
    for sem in ("relaxed", "release", "acq_rel", "acquire"):
        lines = atomic_lines(compile_ptx(histogram, *args, BLOCK=256, SEM=sem))
        assert lines and all(line.startswith(f"atom.global.gpu.{sem}.add.u32") for line in lines), lines


def test_each_element_is_updated_once_when_the_layout_repeats_it():
    # 32 elements over 4 warps of 32 lanes: warps 1-3 hold copies of warp 0's elements.
    ptx = compile_ptx(rmw, *[np.zeros(32, np.int32)] * 3, OP="add", BLOCK=32)
    assert len(atomic_lines(ptx)) == 1
    # The old values reach the copies through shared memory.
    assert "st.shared" in ptx and "ld.shared" in ptx and "bar.sync" in ptx
    no_copies = compile_ptx(rmw, *[np.zeros(128, np.int32)] * 3, OP="add", BLOCK=128)
    assert "st.shared" not in no_copies


@pt.jit
def scalar_counter(p, o):
    pl.store(o, pl.atomic_add(p, 1))


def test_a_scalar_atomic_is_issued_by_one_thread_and_shared():
    ptx = compile_ptx(scalar_counter, np.zeros(1, np.int32), np.zeros(1, np.int32))
    assert len(atomic_lines(ptx)) == 1 and "%tid.x" in ptx and "st.shared.b32" in ptx


def test_without_target_hooks_llvm_atomics_are_used(tmp_path):
    target = dataclasses.replace(nvidia_gpu_target("sm_90a"), atomic_rmw=None, atomic_cas=None)
    module = histogram.lower(np.zeros(1000, np.int32), np.zeros(16, np.int32), 1000, BLOCK=256, SEM="relaxed")
    compile_module(module, "nvidia:sm_90a")  # lays out the IR
    text = str(lower_module(module, target))
    assert "atomicrmw add" in text and "monotonic" in text
    assert "atom.global.add.u32" in emit_ptx(text, "sm_90a", "histogram")
