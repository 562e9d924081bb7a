"""assign-layouts on sm_90a: a dot that fits warpgroups gets the wgmma accumulator layout
(``#gpu.mma<version = 3>``) and reads its operands in the layouts they were loaded in (no
``#gpu.dot_operand`` conversion: wgmma writes them to shared memory itself); other dots
and targets keep the mma.sync layouts.  IR text in, IR text out."""

from __future__ import annotations

import pytest

from polytile.backend import BackendOptions
from polytile.gpu.distribute import AssignLayouts, RemoveRedundantConverts
from polytile.gpu.layouts import BlockedLayout, MmaLayout
from polytile.passes.pass_base import PassContext
from polytile.target import Target
from polytile.ir_testing import apply_passes

from .test_distribute_dot import kernel, line

pytest.importorskip("polytile_nvidia.mma")  # registers the NVIDIA matrix unit


def context(num_warps: int = 4, arch: str = "sm_90a") -> PassContext:
    return PassContext(target=Target("nvidia", arch), options=BackendOptions(num_warps=num_warps))


@pytest.mark.parametrize("shape, num_warps, warps, instr_n", [
    ((64, 64, 32), 4, (4, 1), 64), ((128, 256, 64), 8, (8, 1), 256), ((64, 128, 32), 8, (4, 2), 64),
])
def test_the_accumulator_gets_the_wgmma_layout_and_the_operands_stay(shape, num_warps, warps, instr_n):
    m, n, k = shape
    out = apply_passes(kernel(m, n, k), AssignLayouts(), RemoveRedundantConverts(), context=context(num_warps))
    MMA = MmaLayout(3, warps, (16, instr_n, 16))
    assert line(out, "%d = tile.dot").endswith(f": tile<{m}x{n}xf32, {MMA}>")
    assert "#gpu.dot_operand" not in out
    # The dot reads the loaded tiles themselves, in their coalesced layouts.
    assert line(out, "%d = tile.dot").startswith("%d = tile.dot %a, %b, ")
    a_layout = line(out, "%a = tile.load").split(", #gpu.blocked")[1]
    assert a_layout.startswith("<size_per_thread = [1, 8]")


def test_a_loop_carries_the_accumulator_in_the_wgmma_layout():
    out = apply_passes(kernel(128, 128, 64, loop=True), AssignLayouts(), RemoveRedundantConverts(),
                       context=context(4))
    MMA = MmaLayout(3, (4, 1), (16, 128, 16))
    assert f"%zero = arith.constant {{value = 0}} : tile<128x128xf32, {MMA}>" in out
    assert "#gpu.dot_operand" not in out


@pytest.mark.parametrize("shape, num_warps, arch", [
    ((32, 64, 32), 4, "sm_90a"),    # M below 64
    ((64, 64, 32), 2, "sm_90a"),    # fewer warps than a warpgroup
    ((64, 64, 32), 4, "sm_90"),     # no wgmma without the arch-specific features
    ((64, 64, 32), 4, "sm_80"),
])
def test_mma_sync_layouts_elsewhere(shape, num_warps, arch):
    out = apply_passes(kernel(*shape), AssignLayouts(), RemoveRedundantConverts(), context=context(num_warps, arch))
    assert "#gpu.mma<version = 2" in out and "version = 3" not in out
    assert "#gpu.dot_operand<op_idx = 0, parent = #gpu.mma<version = 2" in out


def test_an_accumulator_becomes_the_next_dots_a_in_registers():
    from .test_distribute_dot import CHAINED

    out = apply_passes(CHAINED, AssignLayouts(), RemoveRedundantConverts(), context=context())
    first, second = MmaLayout(3, (4, 1), (16, 64, 16)), MmaLayout(3, (4, 1), (16, 32, 16))
    # The first dot's result (P, truncated to f16) is converted to the second dot's A
    # operand layout of the same warps: in registers, not through shared memory.
    assert f"%p = arith.truncf %s : tile<64x64xf16, {first}>" in out
    assert f"gpu.convert_layout %p : tile<64x64xf16, #gpu.dot_operand<op_idx = 0, parent = {second}, k_width = 2>>" \
        in out
    assert "#gpu.dot_operand<op_idx = 1" not in out


def test_buffers_of_a_kilobyte_or_more_start_on_1024_byte_boundaries():
    from polytile.gpu.allocation import BUFFER_ALIGNMENT, Piece, place

    # The larger scratch is placed first and leaves the next free byte at 4144.
    scratch = Piece(None, "gpu.scratch_offset", 4096 + 48, 0, 10)
    ring = Piece(None, "gpu.buffer_offset", 2048, 0, 10, alignment=BUFFER_ALIGNMENT)
    assert place([scratch, ring]) == 5120 + 2048
    assert (scratch.offset, ring.offset) == (0, 5120)
