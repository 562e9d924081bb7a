"""pipeline-loops: dot operand loads of a loop become asynchronous copies into rings of
shared memory, num_stages - 1 iterations ahead.  IR text in, IR text out; then whole
kernels through every stage on the CTA simulator (tests/gpu/llvm_cta.py, which lands a
cp.async only at the cp.async.wait_group that retires it) against NumPy."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.backend import BackendOptions
from polytile.compiler import compile_module
from polytile.errors import ConfigError
from polytile.ir import types as t
from polytile.gpu.allocation import AllocateShared
from polytile.gpu.membar import InsertBarriers
import polytile.dialects.arith
import polytile.gpu.pipelining
from polytile.gpu.pipelining import PipelineLoops
from polytile.gpu.ring_copies import PointerTileCopies
from polytile.passes.pass_base import PassContext
from polytile.target import Target
from polytile.ir_testing import apply_passes, dedent

from .llvm_cta import SimulationError, run_kernel
from .test_membar import body as op_names

pytest.importorskip("polytile_nvidia")
import polytile_nvidia.mma  # noqa: E402,F401  (registers the NVIDIA matrix and async copy units)

NAMES = {
    "BL": "#gpu.blocked<size_per_thread = [1, 8], threads_per_warp = [16, 2], warps_per_cta = [1, 1], order = [1, 0]>",
    "MMA": "#gpu.mma<version = 2, warps_per_cta = [1, 1], instr_shape = [16, 8]>",
    "S": "#gpu.shared<vector = 8, per_phase = 4, max_phase = 2, order = [2, 1, 0]>",
}
NAMES["A"] = f"#gpu.dot_operand<op_idx = 0, parent = {NAMES['MMA']}, k_width = 2>"
NAMES["B"] = f"#gpu.dot_operand<op_idx = 1, parent = {NAMES['MMA']}, k_width = 2>"


def run(text: str, *passes, num_stages: int = 3, arch: str = "sm_90a") -> str:
    for short, full in NAMES.items():
        text = text.replace("{" + short + "}", full)
    context = PassContext(target=Target("nvidia", arch), options=BackendOptions(num_warps=1, num_stages=num_stages))
    out = apply_passes(text, *passes, context=context)
    for short, full in sorted(NAMES.items(), key=lambda item: -len(item[1])):
        out = out.replace(full, "{" + short + "}")
    return out


# A 16x16 f16 dot over K tiles: the pointers are carried and advanced, as in a matmul.
LOOP = """
func.func @k(%a_ptr: ptr<f16>, %n: i32) -> tile<16x16xf32, {MMA}> attributes {kernel = true, pt.divisibility = [16, 1]} {
  %c16 = arith.constant {value = 16} : tile<16x1xi32, {BL}>
  %acc = arith.constant {value = 0.0} : tile<16x16xf32, {MMA}>
  %c0 = arith.constant {value = 0} : i32
  %c1 = arith.constant {value = 1} : i32
  %step = arith.constant {value = 256} : tile<16x16xi32, {BL}>
  %rows = tile.arange {end = 16, start = 0} : tile<16xi32, #gpu.slice<dim = 1, parent = {BL}>>
  %0 = tile.expand_dims %rows {axis = 1} : tile<16x1xi32, {BL}>
  %1 = arith.muli %0, %c16 : tile<16x1xi32, {BL}>
  %2 = tile.splat %a_ptr : tile<16x1xptr<f16>, {BL}>
  %3 = tile.addptr %2, %1 : tile<16x1xptr<f16>, {BL}>
  %cols = tile.arange {end = 16, start = 0} : tile<16xi32, #gpu.slice<dim = 0, parent = {BL}>>
  %4 = tile.expand_dims %cols {axis = 0} : tile<1x16xi32, {BL}>
  %5 = tile.broadcast %3 : tile<16x16xptr<f16>, {BL}>
  %6 = tile.broadcast %4 : tile<16x16xi32, {BL}>
  %ptrs = tile.addptr %5, %6 : tile<16x16xptr<f16>, {BL}>
  %p, %sum = scf.for %c0, %n, %c1, %ptrs, %acc : tile<16x16xptr<f16>, {BL}>, tile<16x16xf32, {MMA}> {
  ^bb0(%i: i32, %p_1: tile<16x16xptr<f16>, {BL}>, %acc_1: tile<16x16xf32, {MMA}>):
    %x = tile.load %p_1 : tile<16x16xf16, {BL}>
    %a = gpu.convert_layout %x : tile<16x16xf16, {A}>
    %b = gpu.convert_layout %x : tile<16x16xf16, {B}>
    %acc_2 = tile.dot %a, %b, %acc_1 : tile<16x16xf32, {MMA}>
    %p_2 = tile.addptr %p_1, %step : tile<16x16xptr<f16>, {BL}>
    scf.yield %p_2, %acc_2
  }
  func.return %sum
}
"""


def test_a_carried_load_becomes_a_ring_a_prologue_and_a_wait_per_iteration():
    out = run(LOOP, PipelineLoops(num_stages=2, completion="groups"))
    # The ring, the copy of iteration 0 (predicated on 0 < n), the pointers advanced one
    # iteration ahead; in the loop the wait, the copy of iteration i + 1 and the slot reads.
    assert out[out.index("  %7 = gpu.local_alloc"):] == dedent("""
      %7 = gpu.local_alloc : !gpu.buffer<2x16x16xf16, {S}>
      %8 = arith.constant {value = 0} : i32
      %9 = arith.muli %c1, %8 : i32
      %10 = arith.addi %c0, %9 : i32
      %11 = arith.cmpi %10, %n {predicate = "slt"} : i1
      %p_2 = tile.addptr %ptrs, %step : tile<16x16xptr<f16>, {BL}>
      %12 = arith.constant {value = 0} : i32
      %13 = tile.splat %11 : tile<16x16xi1, {BL}>
      gpu.async_copy %ptrs, %7, %12 mask(%13)
      gpu.async_commit_group
      %14 = arith.constant {value = 1} : i32
      %15 = arith.muli %c1, %14 : i32
      %16 = arith.constant {value = 1} : i32
      %17 = arith.constant {value = 0} : i32
      %18 = arith.constant {value = 2} : i32
      %19 = arith.constant {value = 1} : i32
      %20, %21, %22, %23 = scf.for %c0, %n, %c1, %p_2, %acc, %17, %19 : tile<16x16xptr<f16>, {BL}>, tile<16x16xf32, {MMA}>, i32, i32 {
      ^bb0(%i: i32, %p_1: tile<16x16xptr<f16>, {BL}>, %acc_1: tile<16x16xf32, {MMA}>, %read_slot: i32, %write_slot: i32):
        gpu.async_wait {pending = 0}
        %24 = arith.addi %i, %15 : i32
        %25 = arith.cmpi %24, %n {predicate = "slt"} : i1
        %p_2_1 = tile.addptr %p_1, %step : tile<16x16xptr<f16>, {BL}>
        %26 = tile.splat %25 : tile<16x16xi1, {BL}>
        gpu.async_copy %p_1, %7, %write_slot mask(%26)
        gpu.async_commit_group
        %27 = gpu.local_load_slot %7, %read_slot : tile<16x16xf16, {A}>
        %28 = gpu.local_load_slot %7, %read_slot : tile<16x16xf16, {B}>
        %acc_2 = tile.dot %27, %28, %acc_1 : tile<16x16xf32, {MMA}>
        %29 = arith.addi %read_slot, %16 : i32
        %30 = arith.cmpi %29, %18 {predicate = "eq"} : i1
        %31 = arith.select %30, %17, %29 : i32
        %32 = arith.addi %write_slot, %16 : i32
        %33 = arith.cmpi %32, %18 {predicate = "eq"} : i1
        %34 = arith.select %33, %17, %32 : i32
        scf.yield %p_2_1, %acc_2, %31, %34
      }
      gpu.async_wait {pending = 0}
      func.return %21
    }
    """)


def test_one_barrier_per_iteration_between_the_wait_and_the_copies():
    # It makes every thread's landed copies visible, and orders the previous iteration's
    # reads of the slot before the copy that overwrites it.
    out = run(LOOP, PipelineLoops(num_stages=3, completion="groups"), AllocateShared(), InsertBarriers())
    ops = [name.removeprefix("= ") for name in op_names(out)]
    body = ops[ops.index("scf.for") + 1:ops.index("scf.yield")]
    assert body.count("gpu.barrier") == 1 and body[0] == "gpu.async_wait"
    assert body.index("gpu.barrier") + 1 == body.index("gpu.async_copy") < body.index("gpu.local_load_slot")
    assert ops[:ops.index("scf.for")].count("gpu.barrier") == 0


def test_with_barriers_each_slot_completes_on_its_own_mbarrier_and_the_phase_flips_as_the_slots_wrap():
    # One mbarrier per slot expecting every thread's arrival; each fill arrives on its
    # slot's barrier; the body waits for the read slot's phase, which flips each time the
    # read slot wraps around.  After the loop, the fills past the last iteration (two with
    # three slots) are waited for before the barriers are invalidated.
    out = run(LOOP, PipelineLoops(num_stages=3, completion="barriers"))
    assert out[out.index("  %7 = gpu.local_alloc"):] == dedent("""
        %7 = gpu.local_alloc : !gpu.buffer<3x16x16xf16, {S}>
        %8 = gpu.local_alloc : !gpu.buffer<3xi64, #gpu.shared<vector = 1, per_phase = 1, max_phase = 1, order = [0]>>
        gpu.mbarrier_init %8 {count = 32}
        %9 = arith.constant {value = 0} : i32
        %10 = arith.muli %c1, %9 : i32
        %11 = arith.addi %c0, %10 : i32
        %12 = arith.cmpi %11, %n {predicate = "slt"} : i1
        %p_2 = tile.addptr %ptrs, %step : tile<16x16xptr<f16>, {BL}>
        %13 = arith.constant {value = 0} : i32
        %14 = tile.splat %12 : tile<16x16xi1, {BL}>
        gpu.async_copy %ptrs, %7, %13 mask(%14)
        gpu.async_copy_arrive %8, %13
        %15 = arith.constant {value = 1} : i32
        %16 = arith.muli %c1, %15 : i32
        %17 = arith.addi %c0, %16 : i32
        %18 = arith.cmpi %17, %n {predicate = "slt"} : i1
        %p_2_1 = tile.addptr %p_2, %step : tile<16x16xptr<f16>, {BL}>
        %19 = arith.constant {value = 1} : i32
        %20 = tile.splat %18 : tile<16x16xi1, {BL}>
        gpu.async_copy %p_2, %7, %19 mask(%20)
        gpu.async_copy_arrive %8, %19
        %21 = arith.constant {value = 2} : i32
        %22 = arith.muli %c1, %21 : i32
        %23 = arith.constant {value = 1} : i32
        %24 = arith.constant {value = 0} : i32
        %25 = arith.constant {value = 3} : i32
        %26 = arith.constant {value = 2} : i32
        %27, %28, %29, %30, %31 = scf.for %c0, %n, %c1, %p_2_1, %acc, %24, %26, %24 : tile<16x16xptr<f16>, {BL}>, tile<16x16xf32, {MMA}>, i32, i32, i32 {
        ^bb0(%i: i32, %p_1: tile<16x16xptr<f16>, {BL}>, %acc_1: tile<16x16xf32, {MMA}>, %read_slot: i32, %write_slot: i32, %phase: i32):
          gpu.mbarrier_wait %8, %read_slot, %phase
          %32 = arith.addi %i, %22 : i32
          %33 = arith.cmpi %32, %n {predicate = "slt"} : i1
          %p_2_2 = tile.addptr %p_1, %step : tile<16x16xptr<f16>, {BL}>
          %34 = tile.splat %33 : tile<16x16xi1, {BL}>
          gpu.async_copy %p_1, %7, %write_slot mask(%34)
          gpu.async_copy_arrive %8, %write_slot
          %35 = gpu.local_load_slot %7, %read_slot : tile<16x16xf16, {A}>
          %36 = gpu.local_load_slot %7, %read_slot : tile<16x16xf16, {B}>
          %acc_2 = tile.dot %35, %36, %acc_1 : tile<16x16xf32, {MMA}>
          %37 = arith.addi %read_slot, %23 : i32
          %38 = arith.cmpi %37, %25 {predicate = "eq"} : i1
          %39 = arith.select %38, %24, %37 : i32
          %40 = arith.addi %write_slot, %23 : i32
          %41 = arith.cmpi %40, %25 {predicate = "eq"} : i1
          %42 = arith.select %41, %24, %40 : i32
          %43 = arith.cmpi %39, %24 {predicate = "eq"} : i1
          %44 = arith.xori %phase, %23 : i32
          %45 = arith.select %43, %44, %phase : i32
          scf.yield %p_2_2, %acc_2, %39, %42, %45
        }
        gpu.mbarrier_wait %8, %29, %31
        %46 = arith.addi %29, %23 : i32
        %47 = arith.cmpi %46, %25 {predicate = "eq"} : i1
        %48 = arith.select %47, %24, %46 : i32
        %49 = arith.cmpi %48, %24 {predicate = "eq"} : i1
        %50 = arith.xori %31, %23 : i32
        %51 = arith.select %49, %50, %31 : i32
        gpu.mbarrier_wait %8, %48, %51
        gpu.mbarrier_inval %8
        func.return %28
      }
    """)


def test_with_barriers_the_only_barrier_of_an_iteration_orders_reads_before_the_refill():
    # The mbarrier wait shows every thread's copies: no bar.sync between it and the reads.
    # One bar.sync follows the inits (before any thread arrives) and one precedes the
    # invalidations (after every thread's last wait).
    out = run(LOOP, PipelineLoops(num_stages=3, completion="barriers"), AllocateShared(), InsertBarriers())
    ops = [name.removeprefix("= ") for name in op_names(out)]
    loop, end = ops.index("scf.for"), ops.index("scf.yield")
    body, prologue, epilogue = ops[loop + 1:end], ops[:loop], ops[end:]
    assert body[0] == "gpu.mbarrier_wait" and body.count("gpu.barrier") == 1
    assert body.index("gpu.barrier") + 1 == body.index("gpu.async_copy") < body.index("gpu.async_copy_arrive") \
        < body.index("gpu.local_load_slot")
    assert prologue.count("gpu.barrier") == 1
    assert prologue.index("gpu.mbarrier_init") < prologue.index("gpu.barrier") < prologue.index("gpu.async_copy_arrive")
    assert epilogue.count("gpu.barrier") == 1
    assert epilogue.index("gpu.mbarrier_wait") < epilogue.index("gpu.barrier") < epilogue.index("gpu.mbarrier_inval")


def test_auto_completion_is_commit_groups_unless_the_loop_needs_barriers():
    # cp.async copies complete on commit groups everywhere (Triton's choice on Hopper: the
    # fewest instructions per wait) ...
    for arch in ("sm_90a", "sm_80"):
        out = run(LOOP, PipelineLoops(num_stages=3), arch=arch)
        assert "gpu.async_wait" in out and "mbarrier" not in out
    # ... but a loop to be warp-specialised gets a barrier per slot, through which the
    # producer's copies reach the consumers, where the target has them.
    hinted = LOOP.replace("%ptrs, %acc : tile", "%ptrs, %acc {pt.warp_specialize = true} : tile")
    assert hinted != LOOP
    assert "gpu.mbarrier_wait" in run(hinted, PipelineLoops(num_stages=3))
    out = run(hinted, PipelineLoops(num_stages=3), arch="sm_80")
    assert "gpu.async_wait" in out and "mbarrier" not in out
    assert "gpu.mbarrier_wait" in run(LOOP, PipelineLoops(num_stages=3, completion="barriers"))


def test_barriers_on_a_target_without_them_are_refused():
    with pytest.raises(ConfigError, match="sm_80 has no barriers in shared memory"):
        run(LOOP, PipelineLoops(num_stages=3, completion="barriers"), arch="sm_80")


def test_an_unknown_completion_is_refused():
    with pytest.raises(ConfigError, match="completion = 'eventually'; use auto, groups or barriers"):
        PipelineLoops(completion="eventually")


@pytest.mark.parametrize("num_stages", [0, 1])
def test_fewer_than_two_stages_leave_the_loop_alone(num_stages):
    assert "gpu.async_copy" not in run(LOOP, PipelineLoops(num_stages=num_stages), num_stages=1)


def test_a_carried_pointer_used_after_the_loop_keeps_the_loads():
    text = LOOP.replace("  func.return %sum", "  %last = tile.load %p : tile<16x16xf16, {BL}>\n  func.return %sum")
    assert "gpu.async_copy" not in run(text, PipelineLoops(num_stages=3))


def test_a_loop_that_stores_keeps_its_loads():
    # A copy issued iterations ahead would read the bytes before this store writes them.
    text = LOOP.replace("    scf.yield %p_2, %acc_2", "    tile.store %ptrs, %x\n    scf.yield %p_2, %acc_2")
    assert "gpu.async_copy" not in run(text, PipelineLoops(num_stages=3))


def test_a_load_with_a_nonzero_other_keeps_the_load():
    text = LOOP.replace("%x = tile.load %p_1 :", "%x = tile.load %p_1 other(%one) :").replace(
        "  %p, %sum = scf.for", "  %one = arith.constant {value = 1.0} : tile<16x16xf16, {BL}>\n  %p, %sum = scf.for")
    assert "gpu.async_copy" not in run(text, PipelineLoops(num_stages=3))


def test_an_unaligned_copy_keeps_the_load():
    # Without 16-byte divisibility of the base pointer a vector is 2 bytes: cp.async copies 4 or more.
    text = LOOP.replace("pt.divisibility = [16, 1]", "pt.divisibility = [1, 1]")
    assert "gpu.async_copy" not in run(text, PipelineLoops(num_stages=3))


# --------------------------------------------------------------------------------------
# Whole kernels on the simulator


@pt.jit
def matmul_loop_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                       BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    offs_m = pl.arange(0, BM)
    offs_n = pl.arange(0, BN)
    offs_k = pl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in range(pl.cdiv(K, BK)):
        a = pl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = pl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = pl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
    pl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def simulate_matmul(dtype, k: int, block_k: int, num_stages: int, drop: str | None = None,
                    arch: str = "sm_90a", edit=None, completion: str = "auto") -> tuple:
    """A 32x32 matmul over K on the simulator: its result, NumPy's, and the LLVM IR.
    ``completion``: how the rings' copies complete (auto: commit groups; "barriers", an
    mbarrier per slot, on sm_90a); ``drop``: a wait to weaken; ``edit``: a change to the
    LLVM IR before it runs."""
    if completion != "auto":  # the default pipeline's pass, as if built with the option
        with mock.patch.object(PipelineLoops, "_completion", lambda self, loop, loads, has_barriers: completion):
            return simulate_matmul(dtype, k, block_k, num_stages, drop, arch, edit)
    m = n = 32
    rng = np.random.default_rng(k + num_stages)
    a = rng.integers(-3, 4, (m, k)).astype(dtype)
    b = rng.integers(-3, 4, (k, n)).astype(dtype)
    c = np.zeros((m, n), np.float32)
    args = [a, b, c, m, n, k, k, n, n]
    module = matmul_loop_kernel.lower(*args, BM=m, BN=n, BK=block_k)
    artifacts = compile_module(module, f"nvidia:{arch}", num_warps=4, num_stages=num_stages).context.artifacts
    llvm_ir = artifacts["llvm_ir"]
    if drop is not None:
        assert drop in llvm_ir
        llvm_ir = llvm_ir.replace(drop, "cp.async.wait_group 7;")
    if edit is not None:
        llvm_ir = edit(llvm_ir)
    run_kernel({**artifacts, "llvm_ir": llvm_ir}, args, 4)
    return c, a.astype(np.float64) @ b.astype(np.float64), artifacts["llvm_ir"]


@pytest.mark.parametrize("arch, completion", [("sm_90a", "barriers"), ("sm_90a", "auto"), ("sm_80", "auto")])
@pytest.mark.parametrize("num_stages, k, block_k", [
    (2, 64, 16),    # more iterations than stages
    (3, 48, 32),    # a masked K tail (48 = 32 + 16)
    (4, 112, 32),   # four slots, a tail
    (4, 32, 32),    # one iteration: two of the three prologue copies are predicated off
    (3, 0, 32),     # no iteration: every fill predicated off, waited for and the barriers retired
])
def test_pipelined_matmul_matches_numpy(num_stages, k, block_k, arch, completion):
    got, expected, llvm_ir = simulate_matmul(np.float16, k, block_k, num_stages, arch=arch, completion=completion)
    # 16 or 8 bytes a copy: a 32x16 tile of A gives each of 128 threads 4 elements.
    assert ("cp.async.cg.shared.global" in llvm_ir or "cp.async.ca.shared.global" in llvm_ir) and "ldmatrix" in llvm_ir
    if completion == "barriers":
        assert "mbarrier.try_wait.parity" in llvm_ir and "cp.async.wait_group" not in llvm_ir
    else:
        assert "cp.async.wait_group" in llvm_ir and "mbarrier" not in llvm_ir
    np.testing.assert_array_equal(got, expected)


def test_pipelined_tf32_matmul_matches_numpy():
    got, expected, llvm_ir = simulate_matmul(np.float32, 64, 16, 3)
    assert "cp.async.cg.shared.global" in llvm_ir
    np.testing.assert_array_equal(got, expected)


def test_a_dot_of_slots_is_sliced_along_k_into_instruction_steps():
    a, b, c = np.zeros((32, 64), np.float16), np.zeros((64, 32), np.float16), np.zeros((32, 32), np.float32)
    module = matmul_loop_kernel.lower(a, b, c, 32, 32, 64, 64, 32, 32, BM=32, BN=32, BK=32)
    out = str(compile_module(module, "nvidia:sm_90a", num_warps=4, num_stages=3).module)
    loop = out[out.index("scf.for"):out.index("scf.yield")]
    assert loop.count("tile.dot") == 2
    assert "{offsets = [0, 16]} : tile<32x16xf16" in loop and "{offsets = [16, 0]} : tile<16x32xf16" in loop


def test_k_slices_read_element_by_element_where_the_matrix_unit_cannot(monkeypatch):
    # Without ldmatrix the slices are read through their offsets in the slot.
    monkeypatch.setattr(polytile_nvidia.mma.NvidiaMma, "load_operand", lambda self, *args, **kwargs: None)
    got, expected, llvm_ir = simulate_matmul(np.float16, 64, 32, 3)
    assert "ldmatrix" not in llvm_ir
    np.testing.assert_array_equal(got, expected)


def test_the_simulator_catches_a_read_before_the_wait():
    # Without the wait in the loop the slot is read before its copy lands.
    with pytest.raises(SimulationError, match="is still writing"):
        simulate_matmul(np.float16, 64, 16, 3, drop="cp.async.wait_group 1;", arch="sm_80")


def _never_flips(builder, phase, next_slot, one, zero):
    return phase


def _flips_every_iteration(builder, phase, next_slot, one, zero):
    return builder.create(polytile.dialects.arith.BINARY_OPS["xori"], phase, one).result


@pytest.mark.parametrize("mistake, message", [
    # The second round of slot 0 waits on the parity of the first, which has completed:
    # the wait passes before the copy lands.
    (_never_flips, "is still writing"),
    # The next slot's first phase is waited for with parity 1, the phase "before" it.
    (_flips_every_iteration, "is still writing"),
])
def test_the_simulator_catches_a_wait_on_the_wrong_phase(monkeypatch, mistake, message):
    monkeypatch.setattr(polytile.gpu.pipelining, "_next_phase", mistake)
    with pytest.raises(SimulationError, match=message):
        simulate_matmul(np.float16, 64, 16, 3, completion="barriers")


def test_the_simulator_catches_a_phase_that_cannot_complete(monkeypatch):
    # Each barrier expects one arrival more than the threads make.
    monkeypatch.setattr(PointerTileCopies, "arrivals", lambda self, num_threads: num_threads + 1)
    with pytest.raises(SimulationError, match="can never complete: phase 0 needs 1 more arrivals"):
        simulate_matmul(np.float16, 64, 16, 3, completion="barriers")


def test_the_simulator_catches_barriers_invalidated_while_copies_are_in_flight():
    # Without the last wait after the loop, a fill past the last iteration still arrives.
    def drop_last_wait(llvm_ir: str) -> str:
        at = llvm_ir.rindex("mbarrier.try_wait.parity")
        start = llvm_ir.rindex("\n", 0, at) + 1
        return llvm_ir[:start] + llvm_ir[llvm_ir.index("\n", at) + 1:]

    with pytest.raises(SimulationError, match="invalidates the mbarrier .* still in flight"):
        simulate_matmul(np.float16, 64, 16, 3, edit=drop_last_wait, completion="barriers")


class _RecordingCopies(PointerTileCopies):
    """The core's copies of tile.load, recording what the pass hands a RingCopies."""

    def __init__(self):
        self.prepared, self.issued_with, self.signalled = [], [], []

    def signal(self, builder, barriers, slot, valid, loads):
        self.signalled.append((valid, [load.name for load in loads]))
        super().signal(builder, barriers, slot, valid, loads)

    def prepare(self, builder, barriers):
        self.prepared.append(barriers)

    def issue(self, builder, load, lookup, ring, slot, valid, barriers):
        self.issued_with.append(barriers)
        super().issue(builder, load, lookup, ring, slot, valid, barriers)


@pytest.mark.parametrize("completion", ["barriers", "groups"])
def test_a_registered_ring_copies_gets_the_barriers_and_prepares_once(completion):
    # What a plugin's copy engine (TMA) relies on: its copies are told the ring's
    # barriers (a bulk copy completes on the slot's) and it may fence their
    # initialization once, before any copy.
    from polytile.gpu.ring_copies import POINTER_TILE_COPIES, register_ring_copies
    from polytile.dialects import tile

    recording = _RecordingCopies()
    register_ring_copies(tile.LoadOp, recording)
    try:
        out = run(LOOP, PipelineLoops(num_stages=3, completion=completion))
    finally:
        register_ring_copies(tile.LoadOp, POINTER_TILE_COPIES)
    assert "gpu.async_copy" in out
    # Two prologue fills and one in the body.
    assert len(recording.issued_with) == 3
    if completion == "barriers":
        assert len(recording.prepared) == 1 and recording.prepared[0] is not None
        assert all(b is recording.prepared[0] for b in recording.issued_with)
        # Each fill's signal hears which loads it copied and whether its iteration exists.
        assert len(recording.signalled) == 3
        assert all(names == ["tile.load"] and valid.type == t.i1 for valid, names in recording.signalled)
    else:
        assert recording.prepared == [] and recording.issued_with == [None, None, None]


class BulkCopy:
    """A plugin's copy into a ring as the passes see it: the ``IssuesIntoRing`` trait and
    a ``ring`` operand, and no tile of pointers (a bulk tensor copy reads through a
    descriptor)."""

    ring = object()

    @staticmethod
    def has_trait(trait):
        from polytile.dialects.gpu import IssuesIntoRing

        return trait is IssuesIntoRing


def test_a_plugins_copy_into_a_ring_is_a_write_from_its_issue_like_gpu_async_copy():
    # insert-barriers knows copies by the IssuesIntoRing trait and a ring operand, so a
    # plugin's bulk copy is ordered after earlier reads of its ring and leaves nothing
    # pending (the slot's wait shows its bytes).
    from polytile.dialects.gpu import AsyncCommitGroupOp, AsyncCopyOp, IssuesIntoRing
    from polytile.gpu.membar import _copies_into_ring

    class NotACopy(BulkCopy):
        ring = None

    assert _copies_into_ring(BulkCopy()) and not _copies_into_ring(NotACopy())
    assert AsyncCopyOp.has_trait(IssuesIntoRing) and AsyncCommitGroupOp.has_trait(IssuesIntoRing)


@pt.jit
def promised_matmul_kernel(a_ptr, b_ptr, c_ptr, K, BLOCK: pl.constexpr):
    r = pl.arange(0, BLOCK)
    acc = pl.zeros((BLOCK, BLOCK), pl.float32)
    for kk in range(K // BLOCK):
        kb = kk * BLOCK
        pl.assume(kb < K)  # a promise about the address computation
        a = pl.load(a_ptr + r[:, None] * K + (kb + r)[None, :])
        b = pl.load(b_ptr + (kb + r)[:, None] * BLOCK + r[None, :])
        acc = pl.dot(a, b, acc)
    pl.store(c_ptr + r[:, None] * BLOCK + r[None, :], acc)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_a_promise_about_the_addresses_is_dropped_rather_than_the_pipelining(arch):
    # The address computation runs ahead once pipelined, so a pl.assume reading it would
    # speak of a later iteration: the hint goes, the loop is still pipelined.
    a, b, c = np.ones((32, 128), np.float16), np.ones((128, 32), np.float16), np.zeros((32, 32), np.float32)
    result = compile_module(promised_matmul_kernel.lower(a, b, c, 128, BLOCK=32), f"nvidia:{arch}", num_warps=4,
                            num_stages=3)
    text = str(result.module)
    assert "gpu.async_copy" in text and "tile.assume" not in text[text.index("scf.for"):]
    run_kernel(result.context.artifacts, [a, b, c, 128], 4)
    np.testing.assert_array_equal(c, 128)
