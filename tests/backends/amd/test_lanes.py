"""Butterfly lane exchanges on AMD (polytile_amd.lanes): DPP ``quad_perm`` / ``row_xmask``
and ``ds_swizzle`` where they reach ``lane ^ mask``, ``ds_bpermute`` elsewhere; checked
against the simulator's own DPP and swizzle tables, run in reductions and scans on wave64
and wave32 against NumPy, and assembled for every arch."""

from __future__ import annotations

import re

import numpy as np
import pytest
from llvmlite import ir

import polytile as pt
import polytile.language as pl
from gpu.llvm_cta import run_kernel
from gpu.llvm_cta_amdgpu import dpp_source, swizzle_source
from polytile_amd.codegen import amd_gpu_target
from polytile_amd.lanes import (DPP_ROW_SHR, DPP_ROW_XMASK, DPP_WAVE_SHR1, has_row_xmask, quad_perm, swizzle_xor, up_move,
                                xor_move)

from .kernels import ARCHS, WAVEFRONT, compile_amd


@pytest.mark.parametrize("mask", [1, 2, 3])
def test_quad_perm_reads_lane_xor_mask(mask):
    assert [dpp_source(quad_perm(mask), lane, 64) for lane in range(64)] == [lane ^ mask for lane in range(64)]


@pytest.mark.parametrize("mask", range(1, 16))
def test_row_xmask_reads_lane_xor_mask(mask):
    assert [dpp_source(DPP_ROW_XMASK | mask, lane, 32) for lane in range(32)] == [lane ^ mask for lane in range(32)]


@pytest.mark.parametrize("mask", range(1, 32))
def test_swizzle_reads_lane_xor_mask_in_both_wave64_halves(mask):
    assert [swizzle_source(swizzle_xor(mask), lane) for lane in range(64)] == [lane ^ mask for lane in range(64)]


def _shuffle_ir(arch: str, mask: int, element: ir.Type) -> str:
    module = ir.Module()
    function = ir.Function(module, ir.FunctionType(element, [element]), "f")
    builder = ir.IRBuilder(function.append_basic_block())
    builder.ret(amd_gpu_target(arch).shuffle_xor(builder, function.args[0], mask))
    return str(module)


@pytest.mark.parametrize("arch, mask, intrinsic", [
    ("gfx942", 1, "llvm.amdgcn.update.dpp"),
    ("gfx942", 4, "llvm.amdgcn.ds.swizzle"),
    ("gfx942", 16, "llvm.amdgcn.ds.swizzle"),
    ("gfx942", 32, "llvm.amdgcn.ds.bpermute"),
    ("gfx90a", 8, "llvm.amdgcn.ds.swizzle"),
    ("gfx1100", 2, "llvm.amdgcn.update.dpp"),
    ("gfx1100", 8, "llvm.amdgcn.update.dpp"),   # row_xmask: gfx10 and later only
    ("gfx1100", 16, "llvm.amdgcn.ds.swizzle"),
])
def test_each_mask_gets_its_move(arch, mask, intrinsic):
    text = _shuffle_ir(arch, mask, ir.FloatType())
    moves = {name for name in ("update.dpp", "ds.swizzle", "ds.bpermute") if f"llvm.amdgcn.{name}" in text}
    assert moves == {intrinsic[len("llvm.amdgcn."):]}


def test_row_xmask_only_where_the_hardware_has_it():
    assert [has_row_xmask(arch) for arch in ARCHS] == [False, False, False, True]
    assert xor_move("gfx942", 32) is None


def test_wide_values_move_in_32_bit_words():
    text = _shuffle_ir("gfx942", 1, ir.DoubleType())
    assert text.count('call i32 @"llvm.amdgcn.update.dpp.i32"') == 2


@pt.jit
def reduce_and_scan(x_ptr, rows_ptr, cols_ptr, scan_ptr, R: pl.constexpr, C: pl.constexpr):
    r, c = pl.arange(0, R), pl.arange(0, C)
    x = pl.load(x_ptr + r[:, None] * C + c[None, :])
    pl.store(rows_ptr + r, pl.sum(x, axis=1))
    pl.store(cols_ptr + c, pl.sum(x.to(pl.float64), axis=0).to(pl.int32))  # 64-bit values cross lanes
    pl.store(scan_ptr + r[:, None] * C + c[None, :], pl.cumsum(x, axis=1))


def _reduce_case(arch, rows, cols, num_warps):
    rng = np.random.default_rng(4)
    x = rng.integers(-50, 50, (rows, cols)).astype(np.int32)
    outs = [np.zeros(rows, np.int32), np.zeros(cols, np.int32), np.zeros((rows, cols), np.int32)]
    args = [x, *outs]
    artifacts = compile_amd(reduce_and_scan, *args, arch=arch, num_warps=num_warps, R=rows, C=cols)
    return artifacts, args, [x.sum(1), x.sum(0), x.cumsum(1)]


ROW_SHR = {DPP_ROW_SHR | delta for delta in (1, 2, 4, 8)}


@pytest.mark.parametrize("arch, rows, cols, num_warps, scan_moves", [
    # The scan's 16 lanes along a row: DPP row_shr for every step.
    ("gfx942", 4, 64, 1, ROW_SHR), ("gfx942", 64, 64, 4, ROW_SHR),
    # 64 lanes along the axis: wave_shr:1 (gfx9), then ds_bpermute across rows.
    ("gfx90a", 2, 128, 2, {DPP_WAVE_SHR1}),
    ("gfx1100", 4, 64, 1, ROW_SHR), ("gfx1100", 32, 64, 2, ROW_SHR),
])
def test_reductions_and_scans_match_numpy(arch, rows, cols, num_warps, scan_moves):
    artifacts, args, expected = _reduce_case(arch, rows, cols, num_warps)
    text = artifacts["llvm_ir"]
    # The row sums' butterflies: DPP for the in-quad (and on gfx11 in-row) steps, swizzles
    # for the rest up to 16.  The scans shift lanes (shuffle_up): DPP where a shift reaches.
    assert "llvm.amdgcn.update.dpp" in text and "llvm.amdgcn.ds.swizzle" in text
    controls = {int(c) for c in re.findall(r'update\.dpp\.i32"\(i32 [^,]+, i32 [^,]+, i32 (\d+)', text)}
    assert scan_moves <= controls
    run_kernel(artifacts, args, num_warps, WAVEFRONT[arch])
    for got, want in zip(args[1:], expected):
        np.testing.assert_array_equal(got, want)


def test_the_simulator_catches_a_wrong_dpp_pattern():
    artifacts, args, expected = _reduce_case("gfx942", 4, 64, 1)
    identity = sum(i << (2 * i) for i in range(4))  # quad_perm:[0,1,2,3]: every lane reads itself
    tampered, count = re.subn(r'(@"llvm\.amdgcn\.update\.dpp\.i32"\(i32 [^,]+, i32 [^,]+, i32 )' + str(quad_perm(1)),
                              lambda m: m.group(1) + str(identity), artifacts["llvm_ir"])
    assert count
    run_kernel({**artifacts, "llvm_ir": tampered}, args, 1, 64)
    assert not all(np.array_equal(got, want) for got, want in zip(args[1:], expected))


@pytest.mark.parametrize("arch", ARCHS)
def test_reductions_assemble_for_every_arch(arch):
    artifacts, _, _ = _reduce_case(arch, 4, 64, 1)
    assembly = artifacts["amdgcn"]
    assert "quad_perm:[1,0,3,2]" in assembly
    assert ("row_xmask" in assembly) == has_row_xmask(arch)
    assert "ds_swizzle_b32" in assembly
    assert artifacts["hsaco"]


# -- scans' shifts (shuffle_up) --------------------------------------------------------


def _control(move) -> int:
    """The DPP control a move emits."""
    module = ir.Module()
    builder = ir.IRBuilder(ir.Function(module, ir.FunctionType(ir.VoidType(), []), "f").append_basic_block())
    move(builder, ir.Constant(ir.IntType(32), 0))
    return int(re.search(r'update\.dpp\.i32"\(i32 [^,]+, i32 [^,]+, i32 (\d+)', str(module)).group(1))


@pytest.mark.parametrize("arch", ARCHS)
def test_each_shift_reads_lane_minus_delta_wherever_the_contract_asks(arch):
    # shuffle_up's contract: lane - delta for every lane at least delta into its span.
    warp = WAVEFRONT[arch]
    for span in (2, 4, 8, 16, 32, 64):
        if span > warp:
            continue
        for delta in (1, 2, 4, 8, 16, 32):
            if delta >= span:
                continue
            move = up_move(arch, delta, span)
            if move is None:
                continue  # ds_bpermute of lane - delta
            control = _control(move)
            for lane in range(warp):
                if lane % span >= delta:
                    assert dpp_source(control, lane, warp) == lane - delta, (arch, span, delta, lane)


def test_shifts_use_dpp_within_rows_and_wave_shr_only_on_gfx9():
    assert _control(up_move("gfx942", 4, 16)) == DPP_ROW_SHR | 4
    assert _control(up_move("gfx942", 1, 64)) == DPP_WAVE_SHR1
    assert up_move("gfx942", 2, 64) is None  # crosses rows: ds_bpermute
    assert up_move("gfx1100", 1, 32) is None  # no wave shifts on gfx10+
    assert _control(up_move("gfx1100", 8, 16)) == DPP_ROW_SHR | 8


@pytest.mark.parametrize("arch", ARCHS)
def test_scans_over_a_whole_wavefront_assemble_for_every_arch(arch):
    artifacts, args, expected = _reduce_case(arch, 2, 2 * WAVEFRONT[arch], 1)
    assembly = artifacts["amdgcn"]
    assert ("wave_shr:1" in assembly) == (not has_row_xmask(arch))
    assert "row_shr" in assembly or "wave_shr" in assembly
    run_kernel(artifacts, args, 1, WAVEFRONT[arch])
    for got, want in zip(args[1:], expected):
        np.testing.assert_array_equal(got, want)
