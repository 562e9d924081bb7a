"""wgmma kernels for sm_90a run by the CTA simulator (tests/gpu/llvm_cta_wgmma.py: the PTX
ISA's descriptors, canonical layouts, fragments and in-flight rule), without a GPU: the
results against NumPy, and the simulator catching an operand overwritten while its wgmma
is in flight and a missing barrier.  The same kernels run on an H100 in
tests/backends/nvidia/test_wgmma_gpu.py; the simulator agreeing with them there is what
makes it a model of the hardware for these layouts."""

from __future__ import annotations

import re

from unittest import mock

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.compiler import compile_module

from .llvm_cta import SimulationError, run_kernel

pytest.importorskip("polytile_nvidia")


# The kernels the H100 runs (masked K loops, the K-major or transposed operands, P from
# registers), so that the simulator and the hardware are held to the same ones.
from tests.backends.nvidia.test_wgmma_gpu import (chained_kernel, invariant_q_case, invariant_q_kernel,  # noqa: E402
                                                  loop_kernel)


def _compile(kernel, args, num_warps=4, num_stages=1, **meta) -> dict:
    module = kernel.lower(*args, **meta)
    artifacts = compile_module(module, "nvidia:sm_90a", num_warps=num_warps, num_stages=num_stages).context.artifacts
    assert "wgmma.mma_async" in artifacts["ptx"]
    return artifacts


def _loop(m, n, k, bk, *, a_col=False, b_col=False, acc16=False, num_warps=4, num_stages=1, edit=None):
    rng = np.random.default_rng(m + n + k + num_stages)
    a = rng.integers(-2, 3, (m, k)).astype(np.float16)
    b = rng.integers(-2, 3, (k, n)).astype(np.float16)
    if acc16:  # every partial sum exact in f16
        a, b = np.clip(a, -1, 1), np.clip(b, -1, 1)
    # Column-major storage: the operand's contiguous dimension is M (A) or K (B).
    a_mem, b_mem = (np.asfortranarray(a) if a_col else a), (np.asfortranarray(b) if b_col else b)
    strides = (1, m) if a_col else (k, 1)
    strides += (1, k) if b_col else (n, 1)
    c = np.zeros((m, n), np.float32)
    args = [a_mem, b_mem, c, m, n, k, *strides]
    artifacts = _compile(loop_kernel, args, num_warps, num_stages, BM=m, BN=n, BK=bk, ACC16=acc16)
    if edit is not None:
        artifacts = {**artifacts, "llvm_ir": edit(artifacts["llvm_ir"])}
    # The simulator reads arrays as laid out in memory: the transposed copies' bytes.
    flat = [np.ascontiguousarray(a.T) if a_col else a, np.ascontiguousarray(b.T) if b_col else b]
    run_kernel(artifacts, [flat[0], flat[1], c, m, n, k], num_warps)
    return c, a.astype(np.float64) @ b.astype(np.float64)


ORDERS = [(False, False), (False, True), (True, False), (True, True)]


@pytest.mark.parametrize("num_stages", [1, 3])
@pytest.mark.parametrize("a_col, b_col", ORDERS)
def test_loops_of_every_operand_order_match_numpy(num_stages, a_col, b_col):
    # With stages the operands come from the ring slots in place or copied to the dot's scratch.
    got, expected = _loop(64, 64, 128, 32, a_col=a_col, b_col=b_col, num_stages=num_stages)
    np.testing.assert_array_equal(got, expected)


def test_the_orders_read_operands_both_k_major_and_transposed():
    """The cases above cover both ways of reading A and B (imm-trans-a/-b 0 and 1)."""
    import re

    seen = set()
    for a_col, b_col in ORDERS:
        a, b, c = np.zeros((64, 128), np.float16), np.zeros((128, 64), np.float16), np.zeros((64, 64), np.float32)
        strides = ((1, 64) if a_col else (128, 1)) + ((1, 128) if b_col else (64, 1))
        ptx = _compile(loop_kernel, [a, b, c, 64, 64, 128, *strides], BM=64, BN=64, BK=32, ACC16=False)["ptx"]
        seen |= set(re.findall(r"p, 1, 1, (\d), (\d);", ptx))
    assert {trans_a for trans_a, _ in seen} == {"0", "1"} and {trans_b for _, trans_b in seen} == {"0", "1"}


@pytest.mark.parametrize("a_col, b_col", ORDERS)
def test_pipelined_loops_read_column_blocks_in_place_with_one_wgmma_in_flight(a_col, b_col):
    # Rows of 256 bytes (N = 128 f16, or M = 64 and K = 128 transposed) sit in the ring
    # slots as column blocks of 128 bytes, which wgmma reads in place (no scratch); each
    # iteration leaves its wgmma in flight (async-dots) until the next one's wait.
    m, n, k, bk = 64, 128, 128, 32
    a, b, c = np.zeros((m, k), np.float16), np.zeros((k, n), np.float16), np.zeros((m, n), np.float32)
    strides = ((1, m) if a_col else (k, 1)) + ((1, k) if b_col else (n, 1))
    artifacts = _compile(loop_kernel, [a, b, c, m, n, k, *strides], 4, 3, BM=m, BN=n, BK=bk, ACC16=False)
    # The two rings, nothing else (their copies complete on commit groups).
    assert artifacts["shared_bytes"] == 3 * (m * bk + bk * n) * 2
    assert artifacts["ptx"].count("wgmma.wait_group.sync.aligned 1;") == 1
    got, expected = _loop(m, n, k, bk, a_col=a_col, b_col=b_col, num_stages=3)
    np.testing.assert_array_equal(got, expected)


def test_the_benchmark_configuration_two_warpgroups_n_256_three_stages():
    got, expected = _loop(128, 256, 128, 64, num_warps=8, num_stages=3)
    np.testing.assert_array_equal(got, expected)


def test_a_copy_into_a_slot_an_in_flight_wgmma_reads_is_caught():
    # Leaving two groups in flight with three slots lets the copy issued after the wait
    # overwrite the slot the oldest wgmma still reads.
    def keep_two_in_flight(llvm_ir: str) -> str:
        assert llvm_ir.count("wgmma.wait_group.sync.aligned 1;") == 1
        return llvm_ir.replace("wgmma.wait_group.sync.aligned 1;", "wgmma.wait_group.sync.aligned 2;")

    with pytest.raises(SimulationError, match="starts a cp.async into shared bytes .* which an in-flight "
                                              "wgmma.mma_async of warpgroup 0 reads"):
        _loop(64, 128, 128, 32, num_stages=3, edit=keep_two_in_flight)


def test_two_warpgroups_and_a_wide_n():
    got, expected = _loop(128, 128, 64, 64, num_warps=8)
    np.testing.assert_array_equal(got, expected)


def test_f16_accumulators():
    got, expected = _loop(64, 64, 64, 32, acc16=True)
    np.testing.assert_array_equal(got, expected)


def test_a_from_registers():
    rng = np.random.default_rng(3)
    q = rng.integers(-2, 3, (64, 64)).astype(np.float16)
    k = rng.integers(-2, 3, (64, 64)).astype(np.float16)
    v = rng.integers(-2, 3, (64, 64)).astype(np.float16)
    o = np.zeros((64, 64), np.float32)
    artifacts = _compile(chained_kernel, [q, k, v, o], BM=64, BN=64, D=64)
    run_kernel(artifacts, [q, k, v, o], 4)
    p = q.astype(np.float64) @ k.astype(np.float64)
    np.testing.assert_array_equal(o, p @ v.astype(np.float64))


def test_a_loop_invariant_q_is_stored_once_and_k_and_v_are_pipelined():
    # Attention's loop: q stored in shared memory before the loop and read in place, the
    # K and V loads pipelined although the scores share their mask; P from registers.
    q, k, v, expected = invariant_q_case(64, 64, 160)
    o = np.zeros((64, 64), np.float32)
    args = [q, k, v, o, 160]
    artifacts = _compile(invariant_q_kernel, args, 4, 3, BM=64, BN=64, D=64)
    rings = 2 * 3 * 64 * 64 * 2  # completed by commit groups: no barriers in shared memory
    assert artifacts["shared_bytes"] == 64 * 64 * 2 + rings  # q, the K and V rings: no dot scratch
    assert artifacts["ptx"].count("cp.async.cg") >= 2
    run_kernel(artifacts, args, 4)
    np.testing.assert_array_equal(o, expected)


@pytest.mark.parametrize("completion, waits", [
    # Commit groups (the default): every thread waits for its own copies, a barrier makes
    # all of them visible before the dots read the slots.
    ("auto", ["gpu.async_wait", "gpu.barrier", "tile.dot", "gpu.dot_wait", "gpu.barrier",
              "gpu.async_commit_group", "gpu.dot_wait", "tile.dot"]),
    # A barrier per slot: the wait on it is all the dots need.
    ("barriers", ["gpu.mbarrier_wait", "tile.dot", "gpu.dot_wait", "gpu.barrier", "gpu.async_copy_arrive",
                  "gpu.dot_wait", "tile.dot"]),
])
def test_attention_keeps_p_at_v_in_flight_across_the_next_scores(completion, waits):
    # Both dots issue asynchronously: the scores' dot, then a wait that leaves only it in
    # flight (retiring the previous iteration's P @ V, whose slots the copies after it
    # refill), then the scores' own wait right before the scores are read; P @ V (A in
    # registers) stays in flight into the next iteration.
    from polytile.gpu.pipelining import PipelineLoops

    q, k, v, expected = invariant_q_case(64, 64, 160)
    o = np.zeros((64, 64), np.float32)
    args = [q, k, v, o, 160]
    module = invariant_q_kernel.lower(*args, BM=64, BN=64, D=64)
    with mock.patch.object(PipelineLoops, "_completion",
                           lambda self, loop, loads, has_barriers: completion if completion != "auto" else "groups"):
        result = compile_module(module, "nvidia:sm_90a", num_warps=4, num_stages=3)
    text = str(result.module)
    loop = text[text.index("scf.for"):text.index("scf.yield")]
    ops = re.findall(r"(tile\.dot|gpu\.dot_wait|gpu\.barrier|gpu\.async_copy_arrive|gpu\.mbarrier_wait|"
                     r"gpu\.async_wait|gpu\.async_commit_group)", loop)
    assert ops == waits
    assert loop.count("{gpu.async = true}") == 2
    assert re.findall(r"gpu.dot_wait .*?\{pending = (\d)\}", loop) == ["1", "0"]
    artifacts = result.context.artifacts
    # The dots read in place: no stores and no barrier at the dots; the hoisted q's
    # proxy fence before the loop, and one after the slots' wait, before the first wgmma:
    # K's and V's copies completed at that wait, so P @ V needs no fence of its own.
    assert artifacts["ptx"].count("fence.proxy.async") == 2 and text.count("gpu.fence_async_shared") == 1
    run_kernel(artifacts, args, 4)
    np.testing.assert_array_equal(o, expected)


def test_reading_the_accumulator_before_its_wait_is_caught():
    # After the loop every wgmma must retire (pending = 0) before the result is stored;
    # a wait that leaves them in flight lets the epilogue read registers the tensor
    # cores may still write.
    def retire_nothing(llvm_ir: str) -> str:
        # Two waits with pending 0: the one the accumulator enters the loop through
        # (nothing in flight yet) and the one after the loop, which this weakens.
        assert llvm_ir.count("wgmma.wait_group.sync.aligned 0;") == 2
        at = llvm_ir.rindex("wgmma.wait_group.sync.aligned 0;")
        return llvm_ir[:at] + "wgmma.wait_group.sync.aligned 9;" + llvm_ir[at + len("wgmma.wait_group.sync.aligned 0;"):]

    with pytest.raises(SimulationError, match="a register of an in-flight wgmma.mma_async was read before the "
                                              "wgmma.wait_group that retires it"):
        _loop(64, 128, 128, 32, num_stages=3, edit=retire_nothing)


def test_an_operand_overwritten_while_its_wgmma_is_in_flight_is_caught():
    # Waiting for all but one group lets the next iteration's copy into the dot's scratch
    # land while the last wgmma still reads it.
    def keep_one_in_flight(llvm_ir: str) -> str:
        assert llvm_ir.count("wgmma.wait_group.sync.aligned 0;") == 1
        return llvm_ir.replace("wgmma.wait_group.sync.aligned 0;", "wgmma.wait_group.sync.aligned 1;")

    with pytest.raises(SimulationError, match="an operand of a wgmma.mma_async of warpgroup 0, changed before the "
                                              "wgmma.wait_group that retires it"):
        _loop(64, 64, 128, 32, edit=keep_one_in_flight)


def _drop_proxy_fences(llvm_ir: str) -> str:
    lines = llvm_ir.splitlines()
    kept = [line for line in lines if "fence.proxy.async" not in line]
    assert len(kept) < len(lines)
    return "\n".join(kept) + "\n"


@pytest.mark.parametrize("num_stages", [1, 3])
def test_a_wgmma_reading_generic_proxy_writes_without_a_proxy_fence_is_caught(num_stages):
    # Stages 1: the operands stored to the dot's scratch; 3: ring slots cp.async filled,
    # read in place after the slot's mbarrier wait.  Either way the bytes were written
    # through the generic proxy, and wgmma reads through the async proxy.
    with pytest.raises(SimulationError, match="the async proxy \\(wgmma or a bulk copy\\) reads shared byte .* with no "
                                              "fence.proxy.async after the write"):
        _loop(64, 64, 128, 32, num_stages=num_stages, edit=_drop_proxy_fences)


def test_a_missing_barrier_before_the_wgmma_is_caught():
    def drop_the_barrier_after_the_fence(llvm_ir: str) -> str:
        lines = llvm_ir.splitlines()
        fence = next(i for i, line in enumerate(lines) if "fence.proxy.async" in line)
        barrier = next(i for i in range(fence, len(lines)) if "barrier" in lines[i] or "bar.sync" in lines[i])
        del lines[barrier]
        return "\n".join(lines) + "\n"

    with pytest.raises(SimulationError, match="reads shared byte .* that thread .* wrote since the last barrier"):
        _loop(64, 64, 64, 64, edit=drop_the_barrier_after_the_fence)


FP8_WGMMA = """
func.func @fp8_dot(%a: ptr<{t}>, %b: ptr<{t}>, %c: ptr<f32>) attributes {{kernel = true, pt.divisibility = [16, 16, 16]}} {{
  %ra = tile.arange {{end = 2048, start = 0}} : tile<2048xi32>
  %oa = tile.reshape %ra : tile<64x32xi32>
  %pa = tile.splat %a : tile<64x32xptr<{t}>>
  %qa = tile.addptr %pa, %oa : tile<64x32xptr<{t}>>
  %x = tile.load %qa : tile<64x32x{t}>
  %ob = tile.reshape %ra : tile<32x64xi32>
  %pb = tile.splat %b : tile<32x64xptr<{t}>>
  %qb = tile.addptr %pb, %ob : tile<32x64xptr<{t}>>
  %y = tile.load %qb : tile<32x64x{t}>
  %z = arith.constant {{value = 0.0}} : tile<64x64xf32>
  %d = tile.dot %x, %y, %z : tile<64x64xf32>
  %rc = tile.arange {{end = 4096, start = 0}} : tile<4096xi32>
  %oc = tile.reshape %rc : tile<64x64xi32>
  %s = tile.splat %c : tile<64x64xptr<f32>>
  %u = tile.addptr %s, %oc : tile<64x64xptr<f32>>
  tile.store %u, %d
  func.return
}}
"""


@pytest.mark.parametrize("kind", ["e4m3", "e5m2"])
def test_fp8_wgmma(kind):
    from polytile.ir import parse_module

    from .llvm_cta import fp8_bytes

    rng = np.random.default_rng(5)
    a_values, b_values = rng.integers(-4, 5, (64, 32)), rng.integers(-4, 5, (32, 64))
    a, b = fp8_bytes(a_values, kind), fp8_bytes(b_values, kind)
    c = np.zeros((64, 64), np.float32)
    module = parse_module(FP8_WGMMA.format(t=f"f8{kind}"))
    artifacts = compile_module(module, "nvidia:sm_90a", num_warps=4).context.artifacts
    assert f"wgmma.mma_async.sync.aligned.m64n64k32.f32.{kind}.{kind}" in artifacts["ptx"]
    run_kernel(artifacts, [a, b, c], 4)
    np.testing.assert_array_equal(c, (a_values @ b_values).astype(np.float32))


@pt.jit
def several_dots_kernel(a_ptr, b_ptr, c_ptr, d_ptr, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr,
                        SCORES: pl.constexpr):
    # Two accumulating dots (one chained on its own registers, one into a scaled
    # accumulator) and, with SCORES, a dot the body reads before them.
    offs_m, offs_n, offs_k = pl.arange(0, BM), pl.arange(0, BN), pl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * N + offs_n[None, :]
    acc1 = pl.zeros((BM, BN), dtype=pl.float32)
    acc2 = pl.zeros((BM, BN), dtype=pl.float32)
    total = pl.zeros((BM, BN), dtype=pl.float32)
    for k in range(pl.cdiv(K, BK)):
        a = pl.load(a_ptrs)
        b = pl.load(b_ptrs)
        if SCORES:
            total += pl.dot(a, b) * 2.0
        acc1 = pl.dot(a, b, acc1)
        acc2 = pl.dot(a, b, acc2 * 0.5)
        a_ptrs += BK
        b_ptrs += BK * N
    out = offs_m[:, None] * N + offs_n[None, :]
    pl.store(c_ptr + out, acc1 + total)
    pl.store(d_ptr + out, acc2)


@pytest.mark.parametrize("scores", [False, True])
def test_several_asynchronous_dots_in_one_loop_match_numpy(scores):
    # The waits async-dots places for more than one dot in flight: after the first dot
    # (pending 1), and with a dot the body reads, that one's own (pending 0, before the
    # reader), on the simulator against NumPy.
    m = n = 64
    k, bk = 128, 32
    rng = np.random.default_rng(7)
    a = rng.integers(-2, 3, (m, k)).astype(np.float16)
    b = rng.integers(-2, 3, (k, n)).astype(np.float16)
    c, d = np.zeros((m, n), np.float32), np.zeros((m, n), np.float32)
    args = [a, b, c, d, m, n, k]
    result = compile_module(several_dots_kernel.lower(*args, BM=m, BN=n, BK=bk, SCORES=scores), "nvidia:sm_90a",
                            num_warps=4, num_stages=3)
    loop = str(result.module)
    loop = loop[loop.index("scf.for"):loop.index("scf.yield")]
    assert loop.count("{gpu.async = true}") == (3 if scores else 2)
    assert re.findall(r"gpu.dot_wait .*?\{pending = (\d)\}", loop) == (["1", "0"] if scores else ["1"])
    run_kernel(result.context.artifacts, args, 4)
    A, B = a.astype(np.float64), b.astype(np.float64)
    acc2, total = np.zeros((m, n)), np.zeros((m, n))
    for i in range(k // bk):
        part = A[:, i * bk:(i + 1) * bk] @ B[i * bk:(i + 1) * bk]
        acc2 = acc2 * 0.5 + part
        total += 2 * part
    np.testing.assert_array_equal(c, A @ B + (total if scores else 0))
    np.testing.assert_array_equal(d, acc2)
