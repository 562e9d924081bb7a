"""warp-specialize: IR text in, IR text out, and the loops it leaves alone (and why)."""

from __future__ import annotations

import pytest

from polytile.backend import BackendOptions
from polytile.passes.dce import DeadCodeElimination
from polytile.passes.pass_base import PassContext
from polytile.target import Target
from polytile.ir_testing import apply_passes, dedent

pytest.importorskip("polytile_nvidia")
pytest.importorskip("polytile_tma")
pytest.importorskip("polytile_warpspec")

from polytile_warpspec.partition import WarpSpecializeLoops  # noqa: E402

NAMES = {
    "W": "#gpu.mma<version = 3, warps_per_cta = [4, 1], instr_shape = [16, 64, 16]>",
    "SA": "#gpu.shared<vector = 8, per_phase = 2, max_phase = 4, order = [2, 1, 0]>",
    "SB": "#gpu.shared<vector = 8, per_phase = 2, max_phase = 4, order = [1, 2, 0]>",
    "SM": "#gpu.shared<vector = 1, per_phase = 1, max_phase = 1, order = [0]>",
    "BA": "#gpu.blocked<size_per_thread = [1, 1], threads_per_warp = [1, 32], warps_per_cta = [4, 1], order = [1, 0]>",
    "BB": "#gpu.blocked<size_per_thread = [1, 1], threads_per_warp = [1, 32], warps_per_cta = [2, 2], order = [1, 0]>",
}


def run(text: str, *passes, target: str = "sm_90a", num_warps: int = 4, names: dict = NAMES) -> tuple[str, dict]:
    for short, full in names.items():
        text = text.replace("{" + short + "}", full)
    context = PassContext(target=Target("nvidia", target), options=BackendOptions(num_warps=num_warps, num_stages=3))
    out = apply_passes(text, *passes, context=context)
    for short, full in sorted(names.items(), key=lambda item: -len(item[1])):
        out = out.replace(full, "{" + short + "}")
    return out, context.artifacts


# What pipeline-loops and async-dots make of a 64x64 f16 matmul through two tensor maps,
# three stages: the prologue's two fills, the loop (wait, read, dot, retire the last dot,
# fill the slot it read), the drain's waits for the fills past the end.
PIPELINED = """
func.func @mm(%a: !tma.map<>, %b: !tma.map<>, %n: i32) -> tile<64x64xf32, {W}> attributes {kernel = true} {
  %acc = arith.constant {value = 0.0} : tile<64x64xf32, {W}>
  %c32 = arith.constant {value = 32} : i32
  %c1 = arith.constant {value = 1} : i32
  %c0 = arith.constant {value = 0} : i32
  %c2 = arith.constant {value = 2} : i32
  %c3 = arith.constant {value = 3} : i32
  %ra = gpu.local_alloc : !gpu.buffer<3x64x32xf16, {SA}>
  %rb = gpu.local_alloc : !gpu.buffer<3x32x64xf16, {SB}>
  %full = gpu.local_alloc : !gpu.buffer<3xi64, {SM}>
  gpu.mbarrier_init %full {count = 1}
  tma.fence_barrier_init
  %v0 = arith.cmpi %c0, %n {predicate = "slt"} : i1
  tma.copy_to_ring %a, %c0, %c0, %ra, %c0, %full, %v0
  tma.copy_to_ring %b, %c0, %c0, %rb, %c0, %full, %v0
  tma.arrive_expect_bytes %full, %c0, %v0 {bytes = 8192}
  %v1 = arith.cmpi %c1, %n {predicate = "slt"} : i1
  tma.copy_to_ring %a, %c0, %c32, %ra, %c1, %full, %v1
  tma.copy_to_ring %b, %c0, %c32, %rb, %c1, %full, %v1
  tma.arrive_expect_bytes %full, %c1, %v1 {bytes = 8192}
  %start = gpu.dot_wait values(%acc) {pending = 0} : tile<64x64xf32, {W}>
  %sum, %r, %w, %p = scf.for %c0, %n, %c1, %start, %c0, %c2, %c0 {pt.warp_specialize = 1} : tile<64x64xf32, {W}>, i32, i32, i32 {
  ^bb0(%k: i32, %acc_1: tile<64x64xf32, {W}>, %read_slot: i32, %write_slot: i32, %phase: i32):
    gpu.mbarrier_wait %full, %read_slot, %phase
    %ahead = arith.addi %k, %c2 : i32
    %valid = arith.cmpi %ahead, %n {predicate = "slt"} : i1
    %offs = arith.muli %ahead, %c32 : i32
    %x = gpu.local_load_slot %ra, %read_slot : tile<64x32xf16, {BA}>
    %y = gpu.local_load_slot %rb, %read_slot : tile<32x64xf16, {BB}>
    %acc_2 = tile.dot %x, %y, %acc_1 {gpu.async = true} : tile<64x64xf32, {W}>
    %acc_3 = gpu.dot_wait values(%acc_2) buffers(%ra, %rb) {pending = 1} : tile<64x64xf32, {W}>
    tma.copy_to_ring %a, %c0, %offs, %ra, %write_slot, %full, %valid
    tma.copy_to_ring %b, %c0, %offs, %rb, %write_slot, %full, %valid
    tma.arrive_expect_bytes %full, %write_slot, %valid {bytes = 8192}
    %r1 = arith.addi %read_slot, %c1 : i32
    %rw = arith.cmpi %r1, %c3 {predicate = "eq"} : i1
    %r2 = arith.select %rw, %c0, %r1 : i32
    %w1 = arith.addi %write_slot, %c1 : i32
    %ww = arith.cmpi %w1, %c3 {predicate = "eq"} : i1
    %w2 = arith.select %ww, %c0, %w1 : i32
    %flip = arith.cmpi %r2, %c0 {predicate = "eq"} : i1
    %p1 = arith.xori %phase, %c1 : i32
    %p2 = arith.select %flip, %p1, %phase : i32
    scf.yield %acc_3, %r2, %w2, %p2
  }
  %done = gpu.dot_wait values(%sum) buffers(%ra, %rb) {pending = 0} : tile<64x64xf32, {W}>
  gpu.mbarrier_wait %full, %r, %p
  gpu.mbarrier_wait %full, %w, %p
  gpu.mbarrier_inval %full
  func.return %done
}
"""

SPLIT = """
func.func @mm(%a: !tma.map<>, %b: !tma.map<>, %n: i32) -> tile<64x64xf32, {W}> attributes {gpu.worker_warps = 4, kernel = true} {
  %c32 = arith.constant {value = 32} : i32
  %c1 = arith.constant {value = 1} : i32
  %c0 = arith.constant {value = 0} : i32
  %c2 = arith.constant {value = 2} : i32
  %c3 = arith.constant {value = 3} : i32
  %ra = gpu.local_alloc : !gpu.buffer<3x64x32xf16, {SA}>
  %rb = gpu.local_alloc : !gpu.buffer<3x32x64xf16, {SB}>
  %full = gpu.local_alloc : !gpu.buffer<3xi64, {SM}>
  gpu.mbarrier_init %full {count = 1}
  %empty = gpu.local_alloc : !gpu.buffer<3xi64, {SM}>
  gpu.mbarrier_init %empty {count = 4}
  tma.fence_barrier_init
  %0, %1, %2, %3 = ws.warp_specialize {consumer_registers = 240, kernel_registers = 240, producer_registers = 40, producer_warps = 4} : tile<64x64xf32, {W}>, i32, i32, i32 {
    %acc = arith.constant {value = 0.0} : tile<64x64xf32, {W}>
    %start = gpu.dot_wait values(%acc) {pending = 0} : tile<64x64xf32, {W}>
    %sum, %r, %w, %p = scf.for %c0, %n, %c1, %start, %c0, %c2, %c0 {pt.warp_specialize = 1} : tile<64x64xf32, {W}>, i32, i32, i32 {
    ^bb0(%k: i32, %acc_1: tile<64x64xf32, {W}>, %read_slot: i32, %write_slot: i32, %phase: i32):
      gpu.mbarrier_wait %full, %read_slot, %phase
      %x = gpu.local_load_slot %ra, %read_slot : tile<64x32xf16, {BA}>
      %y = gpu.local_load_slot %rb, %read_slot : tile<32x64xf16, {BB}>
      %acc_2 = tile.dot %x, %y, %acc_1 {gpu.async = true} : tile<64x64xf32, {W}>
      %acc_3 = gpu.dot_wait values(%acc_2) buffers(%ra, %rb) {pending = 1} : tile<64x64xf32, {W}>
      %4 = arith.cmpi %k, %c0 {predicate = "ne"} : i1
      gpu.mbarrier_arrive %empty, %write_slot, %4
      %r1 = arith.addi %read_slot, %c1 : i32
      %rw = arith.cmpi %r1, %c3 {predicate = "eq"} : i1
      %r2 = arith.select %rw, %c0, %r1 : i32
      %w1 = arith.addi %write_slot, %c1 : i32
      %ww = arith.cmpi %w1, %c3 {predicate = "eq"} : i1
      %w2 = arith.select %ww, %c0, %w1 : i32
      %flip = arith.cmpi %r2, %c0 {predicate = "eq"} : i1
      %p1 = arith.xori %phase, %c1 : i32
      %p2 = arith.select %flip, %p1, %phase : i32
      scf.yield %acc_3, %r2, %w2, %p2
    }
    ws.yield %sum, %r, %w, %p
  } {
    %5 = arith.constant {value = 0} : i32
    %6 = arith.constant {value = 1} : i32
    %7 = arith.constant {value = 3} : i32
    %8 = arith.constant {value = 2} : i32
    %9 = arith.muli %c1, %8 : i32
    %10, %11 = scf.for %c0, %n, %c1, %5, %5 : i32, i32 {
    ^bb0(%fill: i32, %slot: i32, %phase_1: i32):
      %12 = arith.xori %phase_1, %6 : i32
      gpu.mbarrier_wait %empty, %slot, %12
      %13 = arith.subi %fill, %9 : i32
      %ahead = arith.addi %13, %c2 : i32
      %valid = arith.cmpi %ahead, %n {predicate = "slt"} : i1
      %offs = arith.muli %ahead, %c32 : i32
      tma.copy_to_ring %a, %c0, %offs, %ra, %slot, %full, %valid
      tma.copy_to_ring %b, %c0, %offs, %rb, %slot, %full, %valid
      tma.arrive_expect_bytes %full, %slot, %valid {bytes = 8192}
      %14 = arith.addi %slot, %6 : i32
      %15 = arith.cmpi %14, %7 {predicate = "eq"} : i1
      %16 = arith.select %15, %5, %14 : i32
      %17 = arith.xori %phase_1, %6 : i32
      %18 = arith.select %15, %17, %phase_1 : i32
      scf.yield %16, %18
    }
    ws.yield
  }
  %done = gpu.dot_wait values(%0) buffers(%ra, %rb) {pending = 0} : tile<64x64xf32, {W}>
  gpu.mbarrier_inval %full
  gpu.mbarrier_inval %empty
  func.return %done
}
"""


def test_a_pipelined_loop_of_bulk_copies_splits_into_producer_and_consumers():
    out, artifacts = run(PIPELINED, WarpSpecializeLoops(), DeadCodeElimination())
    assert out == dedent(SPLIT)
    assert [{k: v for k, v in e.items() if k != "loop"} for e in artifacts["warp_specialize"]] == \
        [{"specialised": True, "producer_registers": 40, "consumer_registers": 240}]


def test_a_loops_own_registers_win_over_the_pass_options_and_the_settings():
    # pl.WarpSpecialize(producer_registers=24, consumer_registers=248) on the loop.
    options = "{pt.warp_specialize = 1, pt.warp_specialize.consumer_registers = 248, " \
              "pt.warp_specialize.producer_registers = 24}"
    before = PIPELINED.replace("{pt.warp_specialize = 1}", options)
    expected = SPLIT.replace("{pt.warp_specialize = 1}", options).replace(
        "{consumer_registers = 240, kernel_registers = 240, producer_registers = 40, producer_warps = 4}",
        "{consumer_registers = 248, kernel_registers = 248, producer_registers = 24, producer_warps = 4}")
    out, artifacts = run(before, WarpSpecializeLoops(producer_registers=56), DeadCodeElimination())
    assert out == dedent(expected)
    assert [{k: v for k, v in e.items() if k != "loop"} for e in artifacts["warp_specialize"]] == \
        [{"specialised": True, "producer_registers": 24, "consumer_registers": 248}]
