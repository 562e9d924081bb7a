"""AMD matrix cores for ``tile.dot`` (polytile_amd.matrix), proven without an AMD GPU:

- the accumulator and operand layouts against AMD's lane tables, which the CTA simulator
  (tests/gpu/llvm_cta_amdgpu.py) writes as formulas of its own;
- which instruction each arch, dtype and shape gets (FMA where none fits);
- dot kernels compiled for every arch and run on the simulator against NumPy;
- the same kernels linked into HSACO code objects whose notes and code say MFMA / WMMA.
"""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from gpu.llvm_cta import SimulationError, run_kernel
from gpu.llvm_cta_amdgpu import mfma_operand_element, mfma_result_element, wmma_result_element
from polytile.gpu.layouts import BlockedLayout, DotOperandLayout, MfmaLayout, WmmaLayout
from polytile.ir import types as t
from polytile_amd.codeobject import read_code_object
from polytile_amd.matrix import SPECS, AmdMatrixUnit, choose, instruction_for

from .kernels import ARCHS, WAVEFRONT, compile_amd

# --------------------------------------------------------------------------------------
# Layouts against the lane tables


def _spec_cases():
    return [pytest.param(spec, sorted(spec.archs)[0], id=f"{spec.intrinsic}-{sorted(spec.archs)[0]}") for spec in SPECS]


@pytest.mark.parametrize("spec, arch", _spec_cases())
def test_fragments_match_the_lane_tables(spec, arch):
    m, n, k = spec.shape
    instruction = instruction_for(spec, arch)
    result = instruction.result_layout((m, n), 1)
    a, b = instruction.operand_layout(0, result), instruction.operand_layout(1, result)
    c_size, lanes = spec.accumulator_registers, WAVEFRONT[arch]
    assert instruction.fragments == (spec.k_width, spec.k_width, c_size)
    for lane in range(lanes):
        got_c = result.thread_indices((m, n), 0, lane)[:c_size]
        got_a = a.thread_indices((m, k), 0, lane)[:spec.k_width]
        got_b = b.thread_indices((k, n), 0, lane)[:spec.k_width]
        if spec.is_wmma:
            assert got_c == [wmma_result_element(lane, r) for r in range(c_size)]
            assert got_a == [(lane % 16, kk) for kk in range(16)]  # lanes 16..31 repeat 0..15
            assert got_b == [(kk, lane % 16) for kk in range(16)]
        else:
            f64 = spec.accumulator == t.f64
            assert got_c == [mfma_result_element(m, n, lane, r, f64) for r in range(c_size)]
            assert got_a == [mfma_operand_element(m, k, lane, i) for i in range(spec.k_width)]
            assert got_b == [mfma_operand_element(n, k, lane, i)[::-1] for i in range(spec.k_width)]


def test_lane_tables_agree_with_amds_published_examples():
    # Spot checks of the simulator's formulas against the AMD Matrix Instruction
    # Calculator's tables (v_mfma_f32_32x32x8f16, 16x16x16f16, f64_16x16x4f64).
    assert mfma_operand_element(32, 8, 33, 2) == (1, 6)          # A[1][6]: lane 33, item 2
    assert mfma_result_element(32, 32, 40, 5, False) == (13, 8)  # D[13][8]: lane 40, register 5
    assert mfma_result_element(16, 16, 17, 3, False) == (7, 1)   # D[7][1]: lane 17, register 3
    assert mfma_result_element(16, 16, 17, 3, True) == (13, 1)   # f64: D[13][1]: lane 17, register 3
    assert wmma_result_element(20, 3) == (7, 4)                  # WMMA f32: D[7][4]: lane 20, v3


def test_f64_mfma_layout_differs_from_f32_and_prints_its_bits():
    f32 = MfmaLayout(3, (1, 1), (16, 16))
    f64 = MfmaLayout(3, (1, 1), (16, 16), accumulator_bits=64)
    assert f32.thread_indices((16, 16), 0, 17) == [(4 + r, 1) for r in range(4)]
    assert f64.thread_indices((16, 16), 0, 17) == [(1 + 4 * r, 1) for r in range(4)]
    assert "accumulator_bits" not in str(f32) and "accumulator_bits = 64" in str(f64)


def test_f64_mfma_layout_has_only_the_16x16_shape():
    with pytest.raises(ValueError, match="f64 mfma.*instr_shape \\[16, 16\\]"):
        MfmaLayout(3, (1, 1), (32, 32), accumulator_bits=64)


# --------------------------------------------------------------------------------------
# Selection


@pytest.mark.parametrize("arch, a, acc, shape, expected", [
    ("gfx942", t.f16, t.f32, (64, 64, 64), "mfma.f32.32x32x8f16"),
    ("gfx942", t.f16, t.f32, (16, 64, 64), "mfma.f32.16x16x16f16"),
    ("gfx942", t.f16, t.f16, (32, 32, 16), "mfma.f32.32x32x8f16"),      # f16 accumulator through f32
    ("gfx950", t.f16, t.f32, (64, 64, 64), "mfma.f32.32x32x16.f16"),
    ("gfx950", t.bf16, t.f32, (16, 16, 32), "mfma.f32.16x16x32.bf16"),
    ("gfx950", t.bf16, t.f32, (16, 16, 16), "mfma.f32.16x16x16bf16.1k"),  # K too short for x32
    ("gfx90a", t.bf16, t.f32, (32, 32, 32), "mfma.f32.32x32x8bf16.1k"),
    ("gfx90a", t.f32, t.f32, (32, 32, 16), "mfma.f32.32x32x2f32"),
    ("gfx90a", t.i8, t.i32, (32, 32, 16), "mfma.i32.32x32x8i8"),
    ("gfx942", t.i8, t.i32, (32, 32, 16), "mfma.i32.32x32x16.i8"),
    ("gfx942", t.i8, t.i32, (16, 16, 16), None),                          # 16x16x32.i8 needs K >= 32
    ("gfx942", t.f64, t.f64, (64, 64, 16), "mfma.f64.16x16x4f64"),
    ("gfx1100", t.f16, t.f32, (64, 64, 64), "wmma.f32.16x16x16.f16"),
    ("gfx1100", t.bf16, t.f32, (16, 16, 16), "wmma.f32.16x16x16.bf16"),
    ("gfx1100", t.i8, t.i32, (16, 16, 16), "wmma.i32.16x16x16.iu8"),
    ("gfx1100", t.f32, t.f32, (64, 64, 64), None),                        # RDNA3 has no f32 WMMA
    ("gfx1100", t.f64, t.f64, (16, 16, 16), None),
    ("gfx942", t.f16, t.f32, (8, 64, 64), None),                          # smaller than any tile
])
def test_instruction_selection(arch, a, acc, shape, expected):
    spec = choose(arch, a, acc, shape)
    assert (spec.intrinsic if spec else None) == expected
    found = AmdMatrixUnit().select(a, acc, "ieee", shape, arch, 4)
    assert (found.name if found else None) == expected


def test_result_layout_spreads_warps_over_tiles():
    instruction = AmdMatrixUnit().select(t.f16, t.f32, "tf32", (128, 32, 32), "gfx942", 4)
    assert instruction.result_layout((128, 32), 4) == MfmaLayout(3, (4, 1), (32, 32))
    wmma = AmdMatrixUnit().select(t.f16, t.f32, "tf32", (32, 64, 32), "gfx1100", 8)
    assert wmma.result_layout((32, 64), 8) == WmmaLayout(1, (2, 4))


# --------------------------------------------------------------------------------------
# Dot kernels on the simulator


def _language_tests(name: str):
    path = pathlib.Path(__file__).parents[2] / "language" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_amd_simulated_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


test_dot = _language_tests("test_dot")


def small_integers(rng, shape, dtype):
    return rng.integers(-4, 5, shape).astype(dtype)  # every product and sum exact


def run_dot(arch, dtype, result, mnk, num_warps, acc=True, out=None, options=None):
    """test_dot.dot_kernel compiled for ``arch`` and run on the simulator; returns
    (got, expected, llvm_ir)."""
    m, n, k = mnk
    rng = np.random.default_rng(1)
    a, b = small_integers(rng, (m, k), dtype), small_integers(rng, (k, n), dtype)
    c_init = small_integers(rng, (m, n), result)
    c = np.zeros((m, n), result)
    blocks = [max(16, 1 << (d - 1).bit_length()) for d in mnk]
    args = [a, b, c, c_init, m, n, k]
    artifacts = compile_amd(test_dot.dot_kernel, *args, arch=arch, num_warps=num_warps, options=options,
                            BM=blocks[0], BN=blocks[1], BK=blocks[2], ACC=acc, PRECISION="ieee", OUT=out)
    run_kernel(artifacts, args, num_warps, WAVEFRONT[arch])
    expected = a.astype(np.int64) @ b.astype(np.int64) + (c_init if acc else 0)
    return c, expected.astype(result), artifacts


@pytest.mark.parametrize("arch, dtype, result, mnk, num_warps, intrinsic", [
    ("gfx942", np.float16, np.float32, (32, 32, 16), 4, "mfma.f32.32x32x8f16"),
    ("gfx942", np.float16, np.float32, (20, 33, 45), 4, "mfma.f32.32x32x8f16"),  # masked in every dimension
    ("gfx942", np.float16, np.float32, (13, 40, 18), 4, "mfma.f32.16x16x16f16"),
    ("gfx942", np.float16, np.float32, (64, 32, 32), 2, "mfma.f32.32x32x8f16"),
    ("gfx942", np.float16, np.float32, (32, 64, 32), 8, "mfma.f32.32x32x8f16"),  # warps repeat tiles
    ("gfx942", np.int8, np.int32, (16, 16, 32), 4, "mfma.i32.16x16x32.i8"),
    ("gfx942", np.float64, np.float64, (16, 32, 16), 2, "mfma.f64.16x16x4f64"),
    ("gfx90a", np.float32, np.float32, (32, 32, 16), 1, "mfma.f32.32x32x2f32"),
    ("gfx90a", np.float32, np.float32, (16, 32, 16), 4, "mfma.f32.16x16x4f32"),
    ("gfx90a", np.int8, np.int32, (32, 32, 16), 4, "mfma.i32.32x32x8i8"),
    ("gfx950", np.float16, np.float32, (32, 32, 32), 4, "mfma.f32.32x32x16.f16"),
    ("gfx950", np.float16, np.float32, (16, 16, 32), 1, "mfma.f32.16x16x32.f16"),
    ("gfx1100", np.float16, np.float32, (32, 32, 16), 4, "wmma.f32.16x16x16.f16"),
    ("gfx1100", np.float16, np.float32, (16, 64, 32), 2, "wmma.f32.16x16x16.f16"),
    ("gfx1100", np.int8, np.int32, (32, 16, 32), 4, "wmma.i32.16x16x16.iu8"),
])
def test_dot_kernel_matches_numpy(arch, dtype, result, mnk, num_warps, intrinsic):
    got, expected, artifacts = run_dot(arch, dtype, result, mnk, num_warps)
    assert f"llvm.amdgcn.{intrinsic}" in artifacts["llvm_ir"]
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("arch, nonkdim, intrinsic, not_used", [
    ("gfx942", 16, "mfma.f32.16x16x16f16", "mfma.f32.32x32x8f16"),
    ("gfx942", 32, "mfma.f32.32x32x8f16", "mfma.f32.16x16x16f16"),
    ("gfx950", 16, "mfma.f32.16x16x32.f16", "mfma.f32.32x32x16.f16"),
    ("gfx1100", 32, "wmma.f32.16x16x16.f16", "mfma"),  # WMMA has only 16x16: the option cannot apply
])
def test_matrix_instr_nonkdim_picks_the_instruction_tile(arch, nonkdim, intrinsic, not_used):
    got, expected, artifacts = run_dot(arch, np.float16, np.float32, (64, 64, 32), 4,
                                       options={"matrix_instr_nonkdim": nonkdim})
    assert f"llvm.amdgcn.{intrinsic}" in artifacts["llvm_ir"]
    assert f"llvm.amdgcn.{not_used}" not in artifacts["llvm_ir"]
    np.testing.assert_array_equal(got, expected)


def test_matrix_instr_nonkdim_32_on_a_dot_smaller_than_32_takes_16():
    assert choose("gfx942", t.f16, t.f32, (16, 64, 64), nonkdim=32).intrinsic == "mfma.f32.16x16x16f16"
    assert choose("gfx942", t.f16, t.f32, (64, 64, 64), nonkdim=16).intrinsic == "mfma.f32.16x16x16f16"
    assert AmdMatrixUnit().select(t.f16, t.f32, "ieee", (64, 64, 64), "gfx942", 4, nonkdim=16).name == \
        "mfma.f32.16x16x16f16"


@pytest.mark.parametrize("arch", ["gfx942", "gfx1100"])
def test_f16_accumulator_rides_on_f32(arch):
    got, expected, artifacts = run_dot(arch, np.float16, np.float16, (32, 32, 16), 4, acc=False, out=pl.float16)
    assert "llvm.amdgcn." + ("wmma" if arch == "gfx1100" else "mfma") in artifacts["llvm_ir"]
    np.testing.assert_array_equal(got, expected)


@pt.jit
def bf16_dot(a_ptr, b_ptr, c_ptr, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    # NumPy has no bf16: the operands are rounded from f32 (small integers, exact).
    rm, rn, rk = pl.arange(0, BM), pl.arange(0, BN), pl.arange(0, BK)
    a = pl.load(a_ptr + rm[:, None] * BK + rk[None, :]).to(pl.bfloat16)
    b = pl.load(b_ptr + rk[:, None] * BN + rn[None, :]).to(pl.bfloat16)
    pl.store(c_ptr + rm[:, None] * BN + rn[None, :], pl.dot(a, b))


@pytest.mark.parametrize("arch, mnk, intrinsic", [
    ("gfx90a", (16, 16, 16), "mfma.f32.16x16x16bf16.1k"),
    ("gfx942", (32, 32, 16), "mfma.f32.32x32x8bf16.1k"),
    ("gfx950", (32, 32, 32), "mfma.f32.32x32x16.bf16"),
    ("gfx950", (16, 32, 32), "mfma.f32.16x16x32.bf16"),
    ("gfx1100", (16, 32, 32), "wmma.f32.16x16x16.bf16"),
])
def test_bf16_dot_matches_numpy(arch, mnk, intrinsic):
    m, n, k = mnk
    rng = np.random.default_rng(2)
    a, b = small_integers(rng, (m, k), np.float32), small_integers(rng, (k, n), np.float32)
    c = np.zeros((m, n), np.float32)
    artifacts = compile_amd(bf16_dot, a, b, c, arch=arch, BM=m, BN=n, BK=k)
    assert f"llvm.amdgcn.{intrinsic}" in artifacts["llvm_ir"]
    run_kernel(artifacts, [a, b, c], 4, WAVEFRONT[arch])
    np.testing.assert_array_equal(c, a @ b)


def test_dots_no_instruction_fits_take_multiply_adds():
    got, expected, artifacts = run_dot("gfx1100", np.float32, np.float32, (16, 16, 16), 4)
    assert "llvm.amdgcn.wmma" not in artifacts["llvm_ir"] and "llvm.fmuladd" in artifacts["llvm_ir"]
    np.testing.assert_array_equal(got, expected)


def test_the_simulator_catches_a_wrong_fragment():
    # The second K step multiplies the first step's A again: a fragment read from the wrong
    # registers does the same, and the result must then be wrong.
    m, n, k = 32, 32, 16
    _, _, artifacts = run_dot("gfx942", np.float16, np.float32, (m, n, k), 4)
    text = artifacts["llvm_ir"]
    calls = [line for line in text.splitlines() if "call <16 x float> @\"llvm.amdgcn.mfma" in line]
    assert len(calls) >= 2
    first, second = calls[0], calls[1]
    a_first, a_second = first.split("(")[1].split(",")[0], second.split("(")[1].split(",")[0]
    tampered = text.replace(second, second.replace(a_second, a_first, 1))
    rng = np.random.default_rng(1)
    a, b = small_integers(rng, (m, k), np.float16), small_integers(rng, (k, n), np.float16)
    c_init = small_integers(rng, (m, n), np.float32)
    c = np.zeros((m, n), np.float32)
    run_kernel({**artifacts, "llvm_ir": tampered}, [a, b, c, c_init, m, n, k], 4, 64)
    assert not np.array_equal(c, a.astype(np.float32) @ b.astype(np.float32) + c_init)


def test_the_simulator_refuses_wmma_operands_not_repeated_in_both_lane_halves():
    _, _, artifacts = run_dot("gfx1100", np.float16, np.float32, (16, 16, 16), 1)
    text = artifacts["llvm_ir"]
    # Lane 16 and up would read A from lane id - 16 no longer: give every lane its own copy
    # of element 0 replaced by its lane id (mbcnt), which differs between the halves.
    call = next(line for line in text.splitlines() if "@\"llvm.amdgcn.wmma" in line and "call" in line)
    a_value = call.split("(")[1].split(",")[0].split()[-1]
    lane = "%\"lane.for.test\""
    as_half = "%\"lane.half.for.test\""
    broken = "%\"a.broken.for.test\""
    inserted = (f"  {lane} = call i32 @llvm.amdgcn.mbcnt.lo(i32 -1, i32 0)\n"
                f"  {as_half} = uitofp i32 {lane} to half\n"
                f"  {broken} = insertelement <16 x half> {a_value}, half {as_half}, i32 0\n")
    tampered = text.replace(call, inserted + call.replace(a_value, broken, 1), 1)
    if "llvm.amdgcn.mbcnt.lo" not in text:
        tampered += "\ndeclare i32 @llvm.amdgcn.mbcnt.lo(i32, i32)\n"
    rng = np.random.default_rng(1)
    a, b = small_integers(rng, (16, 16), np.float16), small_integers(rng, (16, 16), np.float16)
    c_init = small_integers(rng, (16, 16), np.float32)
    c = np.zeros((16, 16), np.float32)
    with pytest.raises(SimulationError, match="does not repeat lane"):
        run_kernel({**artifacts, "llvm_ir": tampered}, [a, b, c, c_init, 16, 16, 16], 1, 32)


# --------------------------------------------------------------------------------------
# Code objects


MATRIX_OPCODE = {"gfx90a": "v_mfma_f32_32x32x8f16", "gfx942": "v_mfma_f32_32x32x8_f16",
                 "gfx950": "v_mfma_f32_32x32x16_f16", "gfx1100": "v_wmma_f32_16x16x16_f16"}


@pytest.mark.parametrize("arch", ARCHS)
def test_dot_code_object_for_every_arch(arch):
    m = n = k = 32
    a, b = np.zeros((m, k), np.float16), np.zeros((k, n), np.float16)
    c = np.zeros((m, n), np.float32)
    artifacts = compile_amd(test_dot.dot_kernel, a, b, c, c, m, n, k, arch=arch, BM=m, BN=n, BK=k, ACC=True,
                            PRECISION="ieee", OUT=None)
    assert MATRIX_OPCODE[arch] in artifacts["amdgcn"]
    code_object = read_code_object(artifacts["hsaco"])
    kernel = code_object.kernel(artifacts["kernel_name"])
    assert code_object.arch == arch
    assert kernel.wavefront_size == WAVEFRONT[arch]
    assert kernel.group_segment_fixed_size == artifacts["shared_bytes"] > 0  # the operands' LDS round trip


@pytest.mark.parametrize("arch, dtype, result, opcode", [
    ("gfx90a", np.int8, np.int32, "v_mfma_i32_32x32x8i8"),
    ("gfx942", np.int8, np.int32, "v_mfma_i32_32x32x16_i8"),
    ("gfx950", np.float64, np.float64, "v_mfma_f64_16x16x4_f64"),
    ("gfx90a", np.float32, np.float32, "v_mfma_f32_32x32x2f32"),
    ("gfx1100", np.int8, np.int32, "v_wmma_i32_16x16x16_iu8"),
])
def test_other_dtypes_assemble(arch, dtype, result, opcode):
    a, b, c = np.zeros((32, 32), dtype), np.zeros((32, 32), dtype), np.zeros((32, 32), result)
    artifacts = compile_amd(test_dot.dot_kernel, a, b, c, c, 32, 32, 32, arch=arch, BM=32, BN=32, BK=32, ACC=False,
                            PRECISION="ieee", OUT=None)
    assert opcode in artifacts["amdgcn"]
    assert read_code_object(artifacts["hsaco"]).arch == arch


def test_fma_layouts_stay_blocked_where_no_instruction_fits():
    # gfx1100 f32: the dot's result is a blocked layout and its operands the FMA ones.
    from polytile.compiler import compile_module

    a, b, c = np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float32)
    module = test_dot.dot_kernel.lower(a, b, c, c, 16, 16, 16, BM=16, BN=16, BK=16, ACC=False, PRECISION="ieee",
                                       OUT=None)
    result = compile_module(module, "amd:gfx1100", num_warps=4)
    dots = [op for op in result.module.walk() if op.name == "tile.dot"]
    assert dots and isinstance(dots[0].result.type.layout, BlockedLayout)
    assert isinstance(dots[0].a.type.layout, DotOperandLayout)
