"""pipeline-loops with ``flatten=True``: the next outer iteration's prologue during this
one's epilogue (gpu/prefetch_next.py), as IR text and run on the CTA simulator."""

from __future__ import annotations

import numpy as np
import pytest

from polytile.compiler import compile_module
from polytile.gpu.pipelining import PipelineLoops
from polytile.ir_testing import dedent

from .llvm_cta import run_kernel
from .test_pipelining import BulkCopy, run
from tests.examples.loading import load_example

pytest.importorskip("polytile_nvidia")

# A persistent loop over tiles (every second one from the program's), the K loop inside
# (LOOP of test_pipelining, its pointers offset by the tile), and the tile stored after.
PERSISTENT = """
func.func @k(%a_ptr: ptr<f16>, %c_ptr: ptr<f32>, %n: i32, %tiles: i32) attributes {kernel = true, pt.divisibility = [16, 16, 1, 1]} {
  %c16 = arith.constant {value = 16} : tile<16x1xi32, {BL}>
  %acc = arith.constant {value = 0.0} : tile<16x16xf32, {MMA}>
  %c0 = arith.constant {value = 0} : i32
  %c1 = arith.constant {value = 1} : i32
  %c2 = arith.constant {value = 2} : i32
  %c256 = arith.constant {value = 256} : i32
  %step = arith.constant {value = 256} : tile<16x16xi32, {BL}>
  %pid = tile.program_id {axis = 0} : i32
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
  %out = tile.splat %c_ptr : tile<16x16xptr<f32>, {MMA}>
  scf.for %pid, %tiles, %c2 {pt.flatten = true} {
  ^bb0(%t: i32):
    %off = arith.muli %t, %c256 : i32
    %o = tile.splat %off : tile<16x16xi32, {BL}>
    %start = tile.addptr %ptrs, %o : tile<16x16xptr<f16>, {BL}>
    %p, %sum = scf.for %c0, %n, %c1, %start, %acc : tile<16x16xptr<f16>, {BL}>, tile<16x16xf32, {MMA}> {
    ^bb0(%i: i32, %p_1: tile<16x16xptr<f16>, {BL}>, %acc_1: tile<16x16xf32, {MMA}>):
      %x = tile.load %p_1 : tile<16x16xf16, {BL}>
      %a = gpu.convert_layout %x : tile<16x16xf16, {A}>
      %b = gpu.convert_layout %x : tile<16x16xf16, {B}>
      %acc_2 = tile.dot %a, %b, %acc_1 : tile<16x16xf32, {MMA}>
      %p_2 = tile.addptr %p_1, %step : tile<16x16xptr<f16>, {BL}>
      scf.yield %p_2, %acc_2
    }
    tile.store %out, %sum
    scf.yield
  }
  func.return
}
"""


def test_the_next_tiles_prologue_runs_between_the_drain_and_the_store():
    out = run(PERSISTENT, PipelineLoops(num_stages=2, completion="groups"))
    # The ring once, before the outer loop, with the first tile's prologue (its copy
    # only where that tile exists); each tile computes its own pointers, advanced one
    # iteration, for its K loop; after the K loop's drain, the next tile's pointers and
    # copy (where that tile exists), then the store.
    assert out[out.index("  %7 = gpu.local_alloc"):] == dedent("""
      %7 = gpu.local_alloc : !gpu.buffer<2x16x16xf16, {S}>
      %8 = arith.cmpi %pid, %tiles {predicate = "slt"} : i1
      scf.if %8 {
        %off = arith.muli %pid, %c256 : i32
        %o = tile.splat %off : tile<16x16xi32, {BL}>
        %start = tile.addptr %ptrs, %o : tile<16x16xptr<f16>, {BL}>
        %9 = arith.constant {value = 0} : i32
        %10 = arith.muli %c1, %9 : i32
        %11 = arith.addi %c0, %10 : i32
        %12 = arith.cmpi %11, %n {predicate = "slt"} : i1
        %13 = arith.constant {value = 0} : i32
        %14 = tile.splat %12 : tile<16x16xi1, {BL}>
        gpu.async_copy %start, %7, %13 mask(%14)
        gpu.async_commit_group
        scf.yield
      } {
        scf.yield
      }
      scf.for %pid, %tiles, %c2 {pt.flatten = true} {
      ^bb0(%t: i32):
        %off_1 = arith.muli %t, %c256 : i32
        %o_1 = tile.splat %off_1 : tile<16x16xi32, {BL}>
        %start_1 = tile.addptr %ptrs, %o_1 : tile<16x16xptr<f16>, {BL}>
        %15 = arith.constant {value = 0} : i32
        %16 = arith.muli %c1, %15 : i32
        %17 = arith.addi %c0, %16 : i32
        %18 = arith.cmpi %17, %n {predicate = "slt"} : i1
        %p_2 = tile.addptr %start_1, %step : tile<16x16xptr<f16>, {BL}>
        %19 = arith.constant {value = 0} : i32
        %20 = tile.splat %18 : tile<16x16xi1, {BL}>
        %21 = arith.constant {value = 1} : i32
        %22 = arith.muli %c1, %21 : i32
        %23 = arith.constant {value = 1} : i32
        %24 = arith.constant {value = 0} : i32
        %25 = arith.constant {value = 2} : i32
        %26 = arith.constant {value = 1} : i32
        %27, %28, %29, %30 = scf.for %c0, %n, %c1, %p_2, %acc, %24, %26 : tile<16x16xptr<f16>, {BL}>, tile<16x16xf32, {MMA}>, i32, i32 {
        ^bb0(%i: i32, %p_1: tile<16x16xptr<f16>, {BL}>, %acc_1: tile<16x16xf32, {MMA}>, %read_slot: i32, %write_slot: i32):
          gpu.async_wait {pending = 0}
          %31 = arith.addi %i, %22 : i32
          %32 = arith.cmpi %31, %n {predicate = "slt"} : i1
          %p_2_1 = tile.addptr %p_1, %step : tile<16x16xptr<f16>, {BL}>
          %33 = tile.splat %32 : tile<16x16xi1, {BL}>
          gpu.async_copy %p_1, %7, %write_slot mask(%33)
          gpu.async_commit_group
          %34 = gpu.local_load_slot %7, %read_slot : tile<16x16xf16, {A}>
          %35 = gpu.local_load_slot %7, %read_slot : tile<16x16xf16, {B}>
          %acc_2 = tile.dot %34, %35, %acc_1 : tile<16x16xf32, {MMA}>
          %36 = arith.addi %read_slot, %23 : i32
          %37 = arith.cmpi %36, %25 {predicate = "eq"} : i1
          %38 = arith.select %37, %24, %36 : i32
          %39 = arith.addi %write_slot, %23 : i32
          %40 = arith.cmpi %39, %25 {predicate = "eq"} : i1
          %41 = arith.select %40, %24, %39 : i32
          scf.yield %p_2_1, %acc_2, %38, %41
        }
        gpu.async_wait {pending = 0}
        %42 = arith.addi %t, %c2 : i32
        %43 = arith.cmpi %42, %tiles {predicate = "slt"} : i1
        scf.if %43 {
          %off_2 = arith.muli %42, %c256 : i32
          %o_2 = tile.splat %off_2 : tile<16x16xi32, {BL}>
          %start_2 = tile.addptr %ptrs, %o_2 : tile<16x16xptr<f16>, {BL}>
          gpu.async_copy %start_2, %7, %19 mask(%20)
          gpu.async_commit_group
          scf.yield
        } {
          scf.yield
        }
        tile.store %out, %28
        scf.yield
      }
      func.return
    }
    """)


def _same_as_without_the_hint(text: str) -> None:
    out = run(text, PipelineLoops(num_stages=2, completion="groups"))
    plain = run(text.replace(" {pt.flatten = true}", ""), PipelineLoops(num_stages=2, completion="groups"))
    assert out.replace(" {pt.flatten = true}", "") == plain
    assert "scf.if" not in out


def test_a_store_through_a_pointer_the_loads_read_keeps_the_prologue_in_its_tile():
    # The epilogue writes where the next tile's copies read: they must come after it.
    _same_as_without_the_hint(PERSISTENT.replace(
        "%out = tile.splat %c_ptr : tile<16x16xptr<f32>, {MMA}>",
        "%out = tile.splat %a_ptr : tile<16x16xptr<f16>, {MMA}>").replace(
        "tile.store %out, %sum",
        "%h = arith.truncf %sum : tile<16x16xf16, {MMA}>\n    tile.store %out, %h"))


def test_a_prologue_that_reads_a_value_the_outer_loop_carries_stays_in_its_tile():
    # The next tile's start is only known at the end of this one's body: not moved.
    text = PERSISTENT.replace(
        "scf.for %pid, %tiles, %c2 {pt.flatten = true} {\n  ^bb0(%t: i32):",
        "%last = scf.for %pid, %tiles, %c2, %ptrs {pt.flatten = true} : tile<16x16xptr<f16>, {BL}> {\n"
        "  ^bb0(%t: i32, %base: tile<16x16xptr<f16>, {BL}>):").replace(
        "%start = tile.addptr %ptrs, %o", "%start = tile.addptr %base, %o").replace(
        "tile.store %out, %sum\n    scf.yield", "tile.store %out, %sum\n    scf.yield %start")
    _same_as_without_the_hint(text)


# -- run on the CTA simulator ----------------------------------------------------------


#: The example's kernel (examples/persistent_matmul.py), as the bench and the GPU tests run it.
persistent_kernel = load_example("persistent_matmul").persistent_matmul_kernel


@pytest.mark.parametrize("arch, k, programs", [("sm_90a", 48, 1), ("sm_90a", 48, 3), ("sm_90a", 0, 1),
                                               ("sm_80", 48, 1), ("sm_80", 48, 3)])
def test_program_zero_of_a_persistent_matmul_matches_numpy(arch, k, programs):
    # 4 tiles of 64x32 (M and N not multiples), K in 32-wide steps with a tail: program
    # 0 computes tiles 0, programs, 2 * programs, ... with the next tile's first copies
    # in flight during each store (mbarrier rings on sm_90a, commit groups on sm_80).
    m, n = 100, 48  # N and K divisible by 16: the copies are 16 bytes wide
    rng = np.random.default_rng(k + programs)
    a = rng.integers(-2, 3, (m, k)).astype(np.float16)
    b = rng.integers(-2, 3, (k, n)).astype(np.float16)
    c = np.full((m, n), -7.0, np.float16)
    args = [a, b, c, m, n, k, k, 1, n, 1, n, 1]
    meta = dict(BLOCK_M=64, BLOCK_N=32, BLOCK_K=32, NUM_PROGRAMS=programs)
    result = compile_module(persistent_kernel.lower(*args, **meta), f"nvidia:{arch}", num_warps=4, num_stages=3)
    assert result.context.statistics.get("pipeline-loops.prefetched-across") == 1
    run_kernel(result.context.artifacts, args, 4)
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16)  # exact: small integers
    for tile in range(0, 4, programs):
        rows, cols = slice((tile // 2) * 64, (tile // 2 + 1) * 64), slice((tile % 2) * 32, (tile % 2 + 1) * 32)
        np.testing.assert_array_equal(c[rows, cols], expected[rows, cols])
    others = [t for t in range(4) if t % programs]
    for tile in others:  # other programs' tiles: untouched
        rows, cols = slice((tile // 2) * 64, (tile // 2 + 1) * 64), slice((tile % 2) * 32, (tile % 2 + 1) * 32)
        assert (c[rows, cols] == -7.0).all()


def test_an_atomic_in_the_outer_body_keeps_the_prologue_in_its_tile():
    # Even through another argument: an acquire could make bytes another program wrote
    # visible only after copies issued ahead of it had read them.
    _same_as_without_the_hint(PERSISTENT.replace(
        "tile.store %out, %sum\n",
        "tile.store %out, %sum\n    %one = arith.constant {value = 1.0} : f32\n"
        "    %old = tile.atomic_rmw %c_ptr, %one {kind = \"add\"} : f32\n"))


def test_a_plain_load_in_the_epilogue_does_not_stop_the_prefetch():
    # A bias read in the epilogue reads memory the copies do not write.
    out = run(PERSISTENT.replace(
        "tile.store %out, %sum\n",
        "%bias = tile.load %out : tile<16x16xf32, {MMA}>\n"
        "    %biased = arith.addf %sum, %bias : tile<16x16xf32, {MMA}>\n    tile.store %out, %biased\n"),
        PipelineLoops(num_stages=2, completion="groups"))
    assert out.count("scf.if") == 2


def test_copies_that_read_through_no_pointer_operand_are_not_traced():
    # A plugin's bulk tensor copy reads through a descriptor: its source is unknown here.
    from polytile.gpu.prefetch_next import _roots_read

    assert _roots_read([BulkCopy()]) is None
