"""The language suite's dot kernels, compiled for nvidia:sm_90a and run on the CTA
simulator (tests/gpu/llvm_cta.py): every stage together (layouts, shared-memory
conversions sharing one scratch offset, the barriers between them, ldmatrix, mma.sync,
the FMA fallback, the store of the result), against NumPy, without a GPU.

These are the kernels tests/language/test_dot.py and test_builtins.py launch on
"nvidia"; tests/backends/nvidia/test_gpu_dot_language_kernels.py launches them on a
device the same way.  The simulator also has to catch what it is here for: the last
tests take a barrier out of a kernel, or shared memory away from it, and expect it to.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import polytile.language as pl
from polytile.compiler import compile_module

from .language_tests import language_tests
from .llvm_cta import SimulationError, run_kernel

pytest.importorskip("polytile_nvidia")


test_dot = language_tests("test_dot")
test_builtins = language_tests("test_builtins")

NUM_WARPS = 4


def compile_artifacts(kernel, *args, **meta) -> dict:
    module = kernel.lower(*args, **meta)
    return compile_module(module, "nvidia:sm_90a", num_warps=NUM_WARPS).context.artifacts


def small_integers(rng, shape, dtype):
    # Every product and sum exact in every operand type, tf32 included.
    return rng.integers(-4, 5, shape).astype(dtype)


def language_dot(dtype, result, mnk, acc, precision="ieee", out=None, alias=False, least=16):
    """test_dot.dot_kernel as the language test launches it; returns (got, expected)."""
    m, n, k = mnk
    rng = np.random.default_rng(0)
    a, b = small_integers(rng, (m, k), dtype), small_integers(rng, (k, n), dtype)
    c_init = small_integers(rng, (m, n), result)
    c = np.zeros((m, n), result)
    acc_arg = c if alias else c_init  # test_dot_input_precision passes c twice
    blocks = [max(least, 1 << (d - 1).bit_length()) for d in mnk]
    args = [a, b, c, acc_arg, m, n, k]
    meta = dict(BM=blocks[0], BN=blocks[1], BK=blocks[2], ACC=acc, PRECISION=precision, OUT=out)
    run_kernel(compile_artifacts(test_dot.dot_kernel, *args, **meta), args, NUM_WARPS)
    expected = a.astype(np.int64) @ b.astype(np.int64) + (c_init if acc else 0)
    return c, expected.astype(result)


@pytest.mark.parametrize("dtype, result, precision, mnk, acc", [
    (np.float32, np.float32, "ieee", (16, 16, 16), False),  # multiply-adds
    (np.float32, np.float32, "ieee", (13, 9, 11), True),    # masked in every dimension
    (np.float32, np.float32, "tf32", (16, 16, 32), True),   # mma.sync m16n8k8, ldmatrix of 32-bit operands
    (np.float32, np.float32, "tf32x3", (16, 16, 16), False),
    (np.float16, np.float32, "ieee", (20, 12, 18), True),   # m16n8k16, ldmatrix (.trans for B)
    (np.int8, np.int32, "ieee", (16, 16, 32), True),        # m16n8k32
    (np.float64, np.float64, "ieee", (16, 16, 16), True),   # m8n8k4
])
def test_language_dot_kernel_matches_numpy(dtype, result, precision, mnk, acc):
    got, expected = language_dot(dtype, result, mnk, acc, precision)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype, result, precision, mnk", [
    (np.float16, np.float32, "ieee", (4, 2, 8)),    # tiles under mma.sync's: multiply-adds
    (np.float32, np.float32, "tf32", (1, 16, 5)),   # one row
    (np.int8, np.int32, "ieee", (16, 16, 8)),      # K under int8's 32
    (np.float16, np.float32, "ieee", (16, 1, 16)),  # one column
])
def test_dots_under_the_matrix_instructions_sizes(dtype, result, precision, mnk):
    got, expected = language_dot(dtype, result, mnk, True, precision, least=1)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype, result, precision, bmnk", [
    (np.float16, np.float32, "ieee", (2, 16, 16, 16)),  # two mma.sync dots
    (np.float32, np.float32, "ieee", (4, 16, 8, 16)),   # four multiply-add dots
    (np.int8, np.int32, "ieee", (8, 2, 4, 32)),         # eight small ones: three levels of halves
    (np.float16, np.float32, "ieee", (1, 32, 16, 16)),  # a batch of one
])
def test_batched_dot_kernel_matches_numpy(dtype, result, precision, bmnk):
    # test_dot.batched_dot_kernel (3-D pl.dot), split into 2-D dots by unbatch-dots.
    batch, m, n, k = bmnk
    rng = np.random.default_rng(0)
    a = small_integers(rng, (batch, m, k), dtype)
    b = small_integers(rng, (batch, k, n), dtype)
    c_init = small_integers(rng, (batch, m, n), result)
    c = np.zeros((batch, m, n), result)
    args = [a, b, c, c_init]
    meta = dict(B=batch, M=m, N=n, K=k, PRECISION=precision)
    run_kernel(compile_artifacts(test_dot.batched_dot_kernel, *args, **meta), args, NUM_WARPS)
    expected = a.astype(np.int64) @ b.astype(np.int64) + c_init
    np.testing.assert_array_equal(c, expected.astype(result))


@pytest.mark.parametrize("precision", ["ieee", "tf32"])
def test_result_and_accumulator_given_the_same_array(precision):
    # test_dot_input_precision's launch: c is both c_ptr and acc_ptr (acc unused).  The
    # kernel writes c; a harness that gives the two arguments two device copies and copies
    # both back reads zeros, whatever the kernel did.
    got, expected = language_dot(np.float32, np.float32, (16, 16, 16), False, precision, alias=True)
    np.testing.assert_array_equal(got, expected)


def test_f16_result_with_out_dtype():
    # test_dot_out_dtype: f16 operands accumulating in f16 (mma.sync .f16.f16).
    got, expected = language_dot(np.float16, np.float16, (16, 16, 16), False, out=pl.float16, alias=True)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("acc", [False, True])
def test_builtins_dot_kernel(dtype, acc):
    rng = np.random.default_rng(6)
    a, b = small_integers(rng, (16, 32), dtype), small_integers(rng, (32, 16), dtype)
    c = np.zeros((16, 16), np.float32)
    args = [a, b, c]
    run_kernel(compile_artifacts(test_builtins.dot_kernel, *args, M=16, N=16, K=32, ACC=acc), args, NUM_WARPS)
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32) + (1.0 if acc else 0.0))


def test_f32_default_precision_rounds_inputs_to_tf32():
    # pl.dot of f32 tiles defaults to tf32, as Triton's does: inputs keep 10 mantissa bits,
    # so 1 + 2**-12 is multiplied as 1.  (test_builtins' f32 dot needs a tf32 tolerance.)
    a = np.full((16, 32), 1 + 2.0 ** -12, np.float32)
    b = np.ones((32, 16), np.float32)
    c = np.zeros((16, 16), np.float32)
    args = [a, b, c]
    run_kernel(compile_artifacts(test_builtins.dot_kernel, *args, M=16, N=16, K=32, ACC=False), args, NUM_WARPS)
    np.testing.assert_array_equal(c, np.full((16, 16), 32.0, np.float32))


def test_the_matmul_example_with_its_k_loop():
    # Loop-carried accumulator (phis), masked K tail, f16 result.
    from tests.examples.loading import load_example

    example = load_example("matmul", "_simulated_matmul")  # with examples/ on sys.path, for its _device
    m, n, k = 20, 24, 40
    rng = np.random.default_rng(3)
    a, b = small_integers(rng, (m, k), np.float16), small_integers(rng, (k, n), np.float16)
    c = np.zeros((m, n), np.float16)
    args = [a, b, c, m, n, k, k, 1, n, 1, n, 1]
    artifacts = compile_artifacts(example.matmul_kernel, *args, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
    run_kernel(artifacts, args, NUM_WARPS)
    np.testing.assert_array_equal(c, (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16))


# --------------------------------------------------------------------------------------
# The simulator catches what it is here for


def f32_fma_artifacts() -> tuple[dict, list]:
    rng = np.random.default_rng(0)
    a, b = small_integers(rng, (16, 16), np.float32), small_integers(rng, (16, 16), np.float32)
    c = np.zeros((16, 16), np.float32)
    args = [a, b, c, c, 16, 16, 16]
    return compile_artifacts(test_dot.dot_kernel, *args, BM=16, BN=16, BK=16, ACC=False, PRECISION="ieee",
                             OUT=None), args


BARRIER = re.compile(r'^\s*call void asm sideeffect "bar\.sync 0;".*\n', re.M)


def test_a_missing_barrier_between_two_conversions_is_a_race():
    artifacts, args = f32_fma_artifacts()
    # A's and B's conversions share scratch offset 0: the barrier after A's reads is what
    # keeps B's stores from overwriting them.
    barriers = list(BARRIER.finditer(artifacts["llvm_ir"]))
    assert len(barriers) >= 3
    second = barriers[1]
    text = artifacts["llvm_ir"][:second.start()] + artifacts["llvm_ir"][second.end():]
    third = list(BARRIER.finditer(text))[1]
    text = text[:third.start()] + text[third.end():]
    with pytest.raises(SimulationError, match="since the last barrier"):
        run_kernel({**artifacts, "llvm_ir": text}, args, NUM_WARPS)


def test_too_little_shared_memory_is_an_out_of_bounds_access():
    artifacts, args = f32_fma_artifacts()
    assert artifacts["shared_bytes"] == 16 * 16 * 4
    with pytest.raises(SimulationError, match="outside address space 3"):
        run_kernel({**artifacts, "shared_bytes": 512}, args, NUM_WARPS)


FP8_KERNEL = """
func.func @fp8_dot(%a: ptr<{t}>, %b: ptr<{t}>, %c: ptr<{acc}>) attributes {{kernel = true, pt.divisibility = [16, 16, 16]}} {{
  %ra = tile.arange {{end = 512, start = 0}} : tile<512xi32>
  %oa = tile.reshape %ra : tile<16x32xi32>
  %pa = tile.splat %a : tile<16x32xptr<{t}>>
  %qa = tile.addptr %pa, %oa : tile<16x32xptr<{t}>>
  %x = tile.load %qa : tile<16x32x{t}>
  %ob = tile.reshape %ra : tile<32x16xi32>
  %pb = tile.splat %b : tile<32x16xptr<{t}>>
  %qb = tile.addptr %pb, %ob : tile<32x16xptr<{t}>>
  %y = tile.load %qb : tile<32x16x{t}>
  %z = arith.constant {{value = 0.0}} : tile<16x16x{acc}>
  %d = tile.dot %x, %y, %z : tile<16x16x{acc}>
  %rc = tile.arange {{end = 256, start = 0}} : tile<256xi32>
  %oc = tile.reshape %rc : tile<16x16xi32>
  %s = tile.splat %c : tile<16x16xptr<{acc}>>
  %u = tile.addptr %s, %oc : tile<16x16xptr<{acc}>>
  tile.store %u, %d
  func.return
}}
"""


@pytest.mark.parametrize("kind", ["e4m3", "e5m2"])
@pytest.mark.parametrize("arch", ["sm_89", "sm_90a"])
@pytest.mark.parametrize("acc, version", [("f32", "8.4"), ("f16", "8.7")])
def test_fp8_dot_on_mma_sync_matches_numpy(kind, arch, acc, version):
    """fp8 operands on mma.sync m16n8k32 (sm_89 and later; on sm_90a where wgmma does not
    take the dot): the operands are fp8 bytes in memory, the products exact in f32."""
    from polytile.ir import parse_module

    from .llvm_cta import fp8_bytes

    rng = np.random.default_rng(1)
    a_values, b_values = rng.integers(-6, 7, (16, 32)), rng.integers(-6, 7, (32, 16))
    a, b = fp8_bytes(a_values, kind), fp8_bytes(b_values, kind)
    dtype = np.float32 if acc == "f32" else np.float16
    c = np.zeros((16, 16), dtype)
    module = parse_module(FP8_KERNEL.format(t=f"f8{kind}", acc=acc))
    artifacts = compile_module(module, f"nvidia:{arch}", num_warps=NUM_WARPS).context.artifacts
    assert f"mma.sync.aligned.m16n8k32.row.col.{acc}.{kind}.{kind}.{acc}" in artifacts["ptx"]
    # fp8 mma needs PTX ISA 8.4 (into f16: 8.7); every other kernel keeps 8.0.
    assert f".version {version}" in artifacts["ptx"]
    run_kernel(artifacts, [a, b, c], NUM_WARPS)
    np.testing.assert_array_equal(c, (a_values @ b_values).astype(dtype))
