"""hoist-dot-operands: a loop-invariant operand of a wgmma dot is stored in shared memory
once, before the loop, and read there in place.  IR text in, IR text out; the kernel
runs on the CTA simulator in test_wgmma_simulated.py."""

from __future__ import annotations

import pytest

from polytile.gpu.hoist_operands import HoistDotOperands
from polytile.ir_testing import dedent

from .test_async_dots import run

pytest.importorskip("polytile_nvidia")

LOOP = """
func.func @k(%a_ptrs: tile<64x16xptr<f16>, {BA}>, %b_ptrs: tile<16x64xptr<f16>, {BB}>, %n: i32) -> tile<64x64xf32, {W}> attributes {kernel = true} {
  %acc = arith.constant {value = 0.0} : tile<64x64xf32, {W}>
  %c0 = arith.constant {value = 0} : i32
  %c1 = arith.constant {value = 1} : i32
  %a = tile.load %a_ptrs : tile<64x16xf16, {BA}>
  %sum = scf.for %c0, %n, %c1, %acc : tile<64x64xf32, {W}> {
  ^bb0(%i: i32, %acc_1: tile<64x64xf32, {W}>):
    %b = tile.load %b_ptrs : tile<16x64xf16, {BB}>
    %acc_2 = tile.dot %a, %b, %acc_1 : tile<64x64xf32, {W}>
    scf.yield %acc_2
  }
  func.return %sum
}
"""


def test_the_invariant_operand_is_stored_once_and_read_in_the_loop():
    out = run(LOOP, HoistDotOperands())
    assert out[out.index("  %a = tile.load"):] == dedent("""
      %a = tile.load %a_ptrs : tile<64x16xf16, {BA}>
      %0 = gpu.local_alloc source(%a) : !gpu.buffer<64x16xf16, #gpu.shared<vector = 8, per_phase = 4, max_phase = 2, order = [1, 0]>>
      gpu.fence_async_shared
      %sum = scf.for %c0, %n, %c1, %acc : tile<64x64xf32, {W}> {
      ^bb0(%i: i32, %acc_1: tile<64x64xf32, {W}>):
        %b = tile.load %b_ptrs : tile<16x64xf16, {BB}>
        %1 = gpu.local_load %0 {gpu.in_place = true} : tile<64x16xf16, {BA}>
        %acc_2 = tile.dot %1, %b, %acc_1 : tile<64x64xf32, {W}>
        scf.yield %acc_2
      }
      func.return %sum
    }
    """)


def test_operands_computed_in_the_loop_stay():
    text = LOOP.replace("  %a = tile.load %a_ptrs : tile<64x16xf16, {BA}>\n", "") \
        .replace("    %b = tile.load", "    %a = tile.load %a_ptrs : tile<64x16xf16, {BA}>\n    %b = tile.load")
    assert run(text, HoistDotOperands()) == run(text)


def test_mma_sync_dots_keep_their_operands_in_registers():
    # sm_80 has no wgmma: this dot's layouts are no matrix instruction's there, and
    # mma.sync reads registers (its conversion goes through shared memory by itself).
    assert run(LOOP, HoistDotOperands(), target="sm_80") == run(LOOP, target="sm_80")


def test_a_value_two_dots_read_is_stored_once():
    text = LOOP.replace("    %acc_2 = tile.dot %a, %b, %acc_1 : tile<64x64xf32, {W}>",
                        "    %acc_3 = tile.dot %a, %b, %acc_1 : tile<64x64xf32, {W}>\n"
                        "    %acc_2 = tile.dot %a, %b, %acc_3 : tile<64x64xf32, {W}>")
    out = run(text, HoistDotOperands())
    assert out.count("gpu.local_alloc source(%a)") == 1
    assert out.count("gpu.local_load %0 {gpu.in_place = true}") == 2


def test_an_operand_the_unit_cannot_read_in_place_stays():
    # tf32 operands are read K-major only: a B with N contiguous would go through the
    # dot's scratch anyway, so storing it before the loop too would only cost memory.
    tf32 = "#gpu.mma<version = 3, warps_per_cta = [4, 1], instr_shape = [16, 64, 8]>"  # K of 8 per instruction
    text = LOOP.replace("f16", "f32").replace("{W}", tf32)
    b_outside = (text.replace("    %b = tile.load %b_ptrs : tile<16x64xf32, {BB}>\n", "")
                 .replace("  %a = tile.load %a_ptrs : tile<64x16xf32, {BA}>\n",
                          "  %a = tile.load %a_ptrs : tile<64x16xf32, {BA}>\n  %b = tile.load %b_ptrs : tile<16x64xf32, {BB}>\n"))
    out = run(b_outside, HoistDotOperands())
    assert "gpu.local_alloc source(%a)" in out  # A is K-major: read in place
    assert "source(%b)" not in out


# A loaded whole from a ring slot before the loop (a descriptor's bulk copy, here a
# cp.async copy of the same shape): the dot reads the slot itself in the loop.
SLOT = LOOP.replace(
    "  %a = tile.load %a_ptrs : tile<64x16xf16, {BA}>\n",
    "  %ra = gpu.local_alloc : !gpu.buffer<1x64x16xf16, {SA}>\n"
    "  gpu.async_copy %a_ptrs, %ra, %c0\n"
    "  gpu.async_commit_group\n"
    "  gpu.async_wait {pending = 0}\n"
    "  %a = gpu.local_load_slot %ra, %c0 : tile<64x16xf16, {BA}>\n")


def test_a_slot_loaded_before_the_loop_is_read_in_place_without_a_copy():
    out = run(SLOT, HoistDotOperands())
    # The load before the loop has no use left: gone (insert-barriers would count it).
    assert out[out.index("  gpu.async_wait"):] == dedent("""
      gpu.async_wait {pending = 0}
      %sum = scf.for %c0, %n, %c1, %acc : tile<64x64xf32, {W}> {
      ^bb0(%i: i32, %acc_1: tile<64x64xf32, {W}>):
        %b = tile.load %b_ptrs : tile<16x64xf16, {BB}>
        %0 = gpu.local_load_slot %ra, %c0 : tile<64x16xf16, {BA}>
        %acc_2 = tile.dot %0, %b, %acc_1 : tile<64x64xf32, {W}>
        scf.yield %acc_2
      }
      func.return %sum
    }
    """)


@pytest.mark.parametrize("where", ["in the loop", "after the load"])
def test_a_slot_written_again_before_the_loop_ends_is_copied(where):
    # The slot's contents at the load are what the dot must read: a later write to the
    # ring (in the loop, or between the load and the loop) would change them, so the
    # value is stored in a buffer of its own as any other.
    copy = "gpu.async_copy %a_ptrs, %ra, %c0\n"
    if where == "in the loop":
        text = SLOT.replace("    %b = tile.load", "    " + copy + "    %b = tile.load")
    else:
        text = SLOT.replace("  %sum = scf.for", "  " + copy + "  %sum = scf.for")
    out = run(text, HoistDotOperands())
    assert "gpu.local_alloc source(%a)" in out and "gpu.local_load_slot %ra, %c0 : tile<64x16xf16, {BA}>\n" \
        not in out[out.index("scf.for"):]
