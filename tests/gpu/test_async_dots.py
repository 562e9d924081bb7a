"""async-dots: a loop's accumulating wgmma stays in flight while the next iteration's
copies are issued.  IR text in, IR text out; then the barriers insert-barriers puts
around the wait.  Whole kernels run on the CTA simulator in test_wgmma_simulated.py."""

from __future__ import annotations

import pytest

from polytile.backend import BackendOptions
from polytile.gpu.allocation import AllocateShared
from polytile.gpu.async_dots import AsyncDots
from polytile.gpu.membar import InsertBarriers
from polytile.gpu.pipelining import PipelineLoops
from polytile.passes.pass_base import PassContext
from polytile.target import Target
from polytile.ir_testing import apply_passes, dedent, roundtrip

from .test_membar import body as op_names

pytest.importorskip("polytile_nvidia")
import polytile_nvidia.mma  # noqa: E402,F401  (registers the NVIDIA matrix unit: wgmma on sm_90a)

NAMES = {
    "BA": "#gpu.blocked<size_per_thread = [1, 8], threads_per_warp = [16, 2], warps_per_cta = [4, 1], order = [1, 0]>",
    "BB": "#gpu.blocked<size_per_thread = [1, 8], threads_per_warp = [4, 8], warps_per_cta = [4, 1], order = [1, 0]>",
    "W": "#gpu.mma<version = 3, warps_per_cta = [4, 1], instr_shape = [16, 64, 16]>",
    # The rings' slots are NVMMA layouts: A's rows 32 bytes, B's 128 bytes.
    "SA": "#gpu.shared<vector = 8, per_phase = 4, max_phase = 2, order = [2, 1, 0]>",
    "SB": "#gpu.shared<vector = 8, per_phase = 1, max_phase = 8, order = [2, 1, 0]>",
}


def run(text: str, *passes, target: str = "sm_90a") -> str:
    for short, full in NAMES.items():
        text = text.replace("{" + short + "}", full)
    context = PassContext(target=Target("nvidia", target), options=BackendOptions(num_warps=4, num_stages=3))
    out = apply_passes(text, *passes, context=context)
    for short, full in sorted(NAMES.items(), key=lambda item: -len(item[1])):
        out = out.replace(full, "{" + short + "}")
    return out


# What pipeline-loops makes of a 64x64 f16 matmul loop with three stages (the prologue
# left out): wait for the oldest copies, copy ahead into the slot the last iteration
# read, read this iteration's slots, accumulate.
LOOP = """
func.func @k(%a_ptrs: tile<64x16xptr<f16>, {BA}>, %b_ptrs: tile<16x64xptr<f16>, {BB}>, %n: i32) -> tile<64x64xf32, {W}> attributes {kernel = true} {
  %acc = arith.constant {value = 0.0} : tile<64x64xf32, {W}>
  %c0 = arith.constant {value = 0} : i32
  %c1 = arith.constant {value = 1} : i32
  %ra = gpu.local_alloc : !gpu.buffer<3x64x16xf16, {SA}>
  %rb = gpu.local_alloc : !gpu.buffer<3x16x64xf16, {SB}>
  %sum, %r, %w = scf.for %c0, %n, %c1, %acc, %c0, %c1 : tile<64x64xf32, {W}>, i32, i32 {
  ^bb0(%i: i32, %acc_1: tile<64x64xf32, {W}>, %read: i32, %write: i32):
    gpu.async_wait {pending = 1}
    gpu.async_copy %a_ptrs, %ra, %write
    gpu.async_copy %b_ptrs, %rb, %write
    gpu.async_commit_group
    %a = gpu.local_load_slot %ra, %read : tile<64x16xf16, {BA}>
    %b = %B
    %acc_2 = tile.dot %a, %b, %acc_1 : tile<64x64xf32, {W}>%EXTRA
    scf.yield %acc_2, %write, %read
  }
  gpu.async_wait {pending = 0}
  func.return %sum
}
"""


def loop(b: str = "gpu.local_load_slot %rb, %read : tile<16x64xf16, {BB}>", extra: str = "") -> str:
    return LOOP.replace("%B", b).replace("%EXTRA", extra)


def test_the_dot_is_issued_the_wait_keeps_one_in_flight_and_the_copies_follow_it():
    out = run(loop(), AsyncDots())
    # The constant initial accumulator enters through a wait too (nothing in flight yet):
    # the path that skips the loop then hands the final wait the same registers.
    assert out[out.index("  %0 = gpu.dot_wait"):] == dedent("""
      %0 = gpu.dot_wait values(%acc) {pending = 0} : tile<64x64xf32, {W}>
      %sum, %r, %w = scf.for %c0, %n, %c1, %0, %c0, %c1 : tile<64x64xf32, {W}>, i32, i32 {
      ^bb0(%i: i32, %acc_1: tile<64x64xf32, {W}>, %read: i32, %write: i32):
        gpu.async_wait {pending = 1}
        %a = gpu.local_load_slot %ra, %read : tile<64x16xf16, {BA}>
        %b = gpu.local_load_slot %rb, %read : tile<16x64xf16, {BB}>
        %acc_2 = tile.dot %a, %b, %acc_1 {gpu.async = true} : tile<64x64xf32, {W}>
        %1 = gpu.dot_wait values(%acc_2) buffers(%ra, %rb) {pending = 1} : tile<64x64xf32, {W}>
        gpu.async_copy %a_ptrs, %ra, %write
        gpu.async_copy %b_ptrs, %rb, %write
        gpu.async_commit_group
        scf.yield %1, %write, %read
      }
      %2 = gpu.dot_wait values(%sum) buffers(%ra, %rb) {pending = 0} : tile<64x64xf32, {W}>
      gpu.async_wait {pending = 0}
      func.return %2
    }
    """)


def test_the_wait_prints_and_parses_back():
    text = run(loop(), AsyncDots())
    for short, full in NAMES.items():
        text = text.replace("{" + short + "}", full)
    roundtrip(text)


def test_more_than_one_in_flight_is_refused():
    # The copies go into the slot the previous iteration's dot read: it must be done.
    from polytile.errors import ConfigError

    with pytest.raises(ConfigError, match="async-dots: pending = 2; it is 1 .* or 0"):
        AsyncDots(pending=2)


def test_f16_accumulators_stay_synchronous():
    # They travel packed two to a register: unpacking between iterations would touch
    # registers an in-flight wgmma writes.
    text = loop().replace("tile<64x64xf32, {W}>", "tile<64x64xf16, {W}>").replace("{value = 0.0}", "{value = 0.0}")
    assert run(text, AsyncDots()) == run(text)


@pytest.mark.parametrize("why, text, passes", [
    ("pending = 0 turns the pass off", loop(), [AsyncDots(pending=0)]),
    # B goes through the dot's scratch, which the next iteration's dot overwrites.
    ("an operand not in a ring slot", loop("tile.load %b_ptrs : tile<16x64xf16, {BB}>"), [AsyncDots()]),
    # Read before a wait retired it, the accumulator would not hold the sum yet.
    ("a result read in the loop", loop(extra="\n    %s = arith.addf %acc_2, %acc_2 : tile<64x64xf32, {W}>"),
     [AsyncDots()]),
    # The next dot accumulates into the registers the in-flight one writes: the carried
    # value may not be read besides.
    ("a chained accumulator read besides", loop(extra="\n    %s = arith.addf %acc_1, %acc_1 : tile<64x64xf32, {W}>"),
     [AsyncDots()]),
])
def test_dots_that_cannot_overlap_are_left_alone(why, text, passes):
    assert run(text, *passes) == run(text), why


def test_an_mma_sync_loop_is_left_alone():
    from .test_pipelining import LOOP as MMA_LOOP, run as run_v2

    pipelined = run_v2(MMA_LOOP, PipelineLoops(num_stages=3))
    assert run_v2(MMA_LOOP, PipelineLoops(num_stages=3), AsyncDots()) == pipelined
    assert "gpu.dot_wait" not in pipelined


def test_the_copies_wait_for_every_warp_group_after_the_dot_wait():
    # The barrier between the wait and the copies: every warp group's dot of the last
    # iteration is done before any thread overwrites the slot it read.  The one after
    # the copy wait makes the landed copies visible.
    out = run(loop(), AsyncDots(), AllocateShared(), InsertBarriers())
    ops = [name.removeprefix("= ") for name in op_names(out)]
    body = ops[ops.index("scf.for") + 1:ops.index("scf.yield")]
    assert body == ["gpu.async_wait", "gpu.barrier", "gpu.local_load_slot", "gpu.local_load_slot", "tile.dot",
                    "gpu.dot_wait", "gpu.barrier", "gpu.async_copy", "gpu.async_copy", "gpu.async_commit_group"]


# FlashAttention-3's order: the scores of this iteration and the previous iteration's
# P @ V issued together; the softmax (here a multiply) reads the scores while the second
# dot runs, and the rescale reads the second's result. No dot crosses iterations.
OVERLAPPED = """
func.func @k(%n: i32, %alpha: tile<64x64xf32, {W}>) -> tile<64x64xf32, {W}> attributes {kernel = true} {
  %zero = arith.constant {value = 0.0} : tile<64x64xf32, {W}>
  %c0 = arith.constant {value = 0} : i32
  %c1 = arith.constant {value = 1} : i32
  %ra = gpu.local_alloc : !gpu.buffer<3x64x16xf16, {SA}>
  %rb = gpu.local_alloc : !gpu.buffer<3x16x64xf16, {SB}>
  %sum, %r = scf.for %c0, %n, %c1, %zero, %c0 : tile<64x64xf32, {W}>, i32 {
  ^bb0(%i: i32, %acc: tile<64x64xf32, {W}>, %read: i32):
    %a = gpu.local_load_slot %ra, %read : tile<64x16xf16, {BA}>
    %b = gpu.local_load_slot %rb, %read : tile<16x64xf16, {BB}>
    %s = tile.dot %a, %b, %zero : tile<64x64xf32, {W}>
    %acc_1 = tile.dot %a, %b, %acc : tile<64x64xf32, {W}>
    %p = arith.mulf %s, %alpha : tile<64x64xf32, {W}>
    %acc_2 = arith.addf %acc_1, %p : tile<64x64xf32, {W}>
    scf.yield %acc_2, %read
  }
  func.return %sum
}
"""


def test_a_dot_issued_before_the_previous_ones_reader_overlaps_it():
    out = run(OVERLAPPED, AsyncDots())
    assert out[out.index("  %sum, %r = scf.for"):] == dedent("""
      %sum, %r = scf.for %c0, %n, %c1, %zero, %c0 : tile<64x64xf32, {W}>, i32 {
      ^bb0(%i: i32, %acc: tile<64x64xf32, {W}>, %read: i32):
        %a = gpu.local_load_slot %ra, %read : tile<64x16xf16, {BA}>
        %b = gpu.local_load_slot %rb, %read : tile<16x64xf16, {BB}>
        %s = tile.dot %a, %b, %zero {gpu.async = true} : tile<64x64xf32, {W}>
        %acc_1 = tile.dot %a, %b, %acc {gpu.async = true} : tile<64x64xf32, {W}>
        %0 = gpu.dot_wait values(%s) buffers(%ra, %rb) {pending = 1} : tile<64x64xf32, {W}>
        %p = arith.mulf %0, %alpha : tile<64x64xf32, {W}>
        %1 = gpu.dot_wait values(%acc_1) buffers(%ra, %rb) {pending = 0} : tile<64x64xf32, {W}>
        %acc_2 = arith.addf %1, %p : tile<64x64xf32, {W}>
        scf.yield %acc_2, %read
      }
      func.return %sum
    }
    """)


def test_dots_each_read_right_after_it_stay_synchronous():
    # Nothing would run beside them: the pass leaves the loop alone.
    text = OVERLAPPED.replace("""    %acc_1 = tile.dot %a, %b, %acc : tile<64x64xf32, {W}>
    %p = arith.mulf %s, %alpha : tile<64x64xf32, {W}>""", """    %p = arith.mulf %s, %alpha : tile<64x64xf32, {W}>
    %acc_1 = tile.dot %a, %b, %acc : tile<64x64xf32, {W}>""")
    assert run(text, AsyncDots()) == run(text)
