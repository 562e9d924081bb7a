"""wgmma on sm_90a without a GPU: which dots take it, the matrix descriptors and shared
layouts it reads, and the PTX of dot kernels (the instruction with its shape qualifiers,
the proxy fence, barrier, wgmma fence, commit and wait in that order), assembled by
ptxas.  Dots wgmma cannot take, and other architectures, keep mma.sync."""

from __future__ import annotations

import re

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.compiler import compile_module
from polytile.gpu.layouts import SwizzledSharedLayout
from polytile.ir import types as t

from tests.gpu.ptx_assembly import assembles

pytest.importorskip("polytile_nvidia")

from polytile_nvidia import wgmma  # noqa: E402
from polytile_nvidia.wgmma import OperandPlacement, matrix_descriptor, place_operand, wgmma_warps  # noqa: E402


# --------------------------------------------------------------------------------------
# Descriptors and placements


def test_descriptor_fields_follow_the_ptx_isa():
    # Matrix Descriptor Format: start address >> 4 in bits 0-13, leading byte offset >> 4
    # in 16-29, stride byte offset >> 4 in 32-45, swizzle mode in 62-63 (1: 128B,
    # 2: 64B, 3: 32B).
    assert matrix_descriptor(0x400, 16, 1024, 128) == (1 << 62) | (64 << 32) | (1 << 16) | 0x40
    assert matrix_descriptor(0x8020, 8192, 512, 64) == (2 << 62) | (32 << 32) | (512 << 16) | 0x802
    assert matrix_descriptor(0x100, 16, 256, 32) == (3 << 62) | (16 << 32) | (1 << 16) | 0x10
    # Only address bits 4-17 are encoded (matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4).
    assert matrix_descriptor(0x40000 + 0x30, 16, 1024, 128) & 0x3FFF == 0x3


@pytest.mark.parametrize("swizzle, rows", [(128, 64), (64, 32), (32, 16)])
def test_one_block_placement_is_the_swizzled_shared_layout(swizzle, rows):
    # A ring slot of one swizzle row per tile row is read in place: the placement must be
    # the SwizzledSharedLayout the slot was written in (16-byte vectors, per_phase
    # 128 / swizzle, max_phase swizzle / 16).
    cols = swizzle // 2
    placement = OperandPlacement((rows, cols), 1, swizzle, 2, 0, 1)
    shared = SwizzledSharedLayout(8, 128 // swizzle, swizzle // 16, (1, 0))
    for r in range(rows):
        for c in range(cols):
            assert placement.byte_offset((r, c)) == 2 * shared.offset((r, c), (rows, cols))


@pytest.mark.parametrize("shape, contiguous, swizzle", [((64, 128), 1, 128), ((64, 256), 1, 128), ((32, 64), 0, 64),
                                                        ((16, 64), 1, 32)])
def test_placement_is_the_hardware_swizzle_of_column_blocks(shape, contiguous, swizzle):
    placement = OperandPlacement(shape, contiguous, swizzle, 2, 2048, 1)
    row_elements = swizzle // 2
    rows = shape[1 - contiguous]
    seen = set()
    for i in range(shape[0]):
        for j in range(shape[1]):
            column, row = (i, j)[contiguous], (i, j)[1 - contiguous]
            linear = (column // row_elements) * rows * swizzle + row * swizzle + (column % row_elements) * 2
            # The 16-byte chunk index XOR the address bits above the 128-byte row.
            chunk = (linear >> 4) & (swizzle // 16 - 1)
            phase = (linear >> 7) & (swizzle // 16 - 1)
            expected = 2048 + (linear & ~((swizzle // 16 - 1) << 4)) + ((chunk ^ phase) << 4)
            assert placement.byte_offset((i, j)) == expected
            seen.add(expected)
    assert len(seen) == shape[0] * shape[1]


def test_operand_placement_choice():
    # A read K-major (K contiguous, 64 x f16 = 128 bytes): 128-byte swizzle.
    a = place_operand((128, 64), 1, 1, 2, 64, 0)
    assert (a.contiguous, a.swizzle, a.k_major) == (1, 128, True)
    assert a.stride_bytes() == 1024 and a.start(64, 16) == 64 * 128 + 32
    # B with N contiguous stays N-major (transposed), in 64-column blocks of 128 bytes.
    b = place_operand((64, 256), 0, 1, 2, 256, 0)
    assert (b.contiguous, b.swizzle, b.k_major) == (1, 128, False)
    assert b.leading_bytes() == 64 * 128 and b.start(128, 16) == 2 * 64 * 128 + 16 * 128
    # Too narrow to swizzle along N (8 columns of 16 bytes): K-major instead.
    narrow = place_operand((32, 8), 0, 1, 2, 8, 0)
    assert (narrow.contiguous, narrow.swizzle) == (0, 64)
    # K = 16: a 32-byte swizzle.
    assert place_operand((64, 16), 1, 1, 2, 64, 0).swizzle == 32


@pytest.mark.parametrize("shape, num_warps, expected", [
    ((64, 64), 4, (4, 1)), ((128, 128), 4, (4, 1)), ((128, 256), 8, (8, 1)), ((64, 128), 8, (4, 2)),
    ((256, 64), 4, (4, 1)), ((32, 64), 4, None), ((64, 64), 2, None), ((64, 8), 8, None), ((192, 64), 8, None),
])
def test_warps_per_warpgroup(shape, num_warps, expected):
    assert wgmma_warps(shape, num_warps) == expected


@pytest.mark.parametrize("a, acc, shape, num_warps, name", [
    (t.f16, t.f32, (64, 64, 64), 4, "wgmma.mma_async.m64n64k16.f32.f16"),
    (t.f16, t.f16, (128, 128, 32), 4, "wgmma.mma_async.m64n128k16.f16.f16"),
    (t.bf16, t.f32, (128, 256, 64), 8, "wgmma.mma_async.m64n256k16.f32.bf16"),
    (t.f16, t.f32, (64, 512, 16), 4, "wgmma.mma_async.m64n256k16.f32.f16"),
    (t.f16, t.f32, (64, 64, 8), 4, None),     # K below 16
    (t.f32, t.f32, (64, 64, 64), 4, None),    # tf32: mma.sync for now
    (t.i8, t.i32, (64, 64, 64), 4, None),
])
def test_select(a, acc, shape, num_warps, name):
    found = wgmma.select_wgmma(a, acc, shape, num_warps)
    assert (found.name if found is not None else None) == name


# --------------------------------------------------------------------------------------
# Kernels


@pt.jit
def loop_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr,
                ACC: pl.constexpr, A_T: pl.constexpr):
    pid_m, pid_n = pl.program_id(0), pl.program_id(1)
    offs_m = pid_m * BM + pl.arange(0, BM)
    offs_n = pid_n * BN + pl.arange(0, BN)
    offs_k = pl.arange(0, BK)
    if A_T:  # A stored column-major: M contiguous
        a_ptrs = a_ptr + offs_m[:, None] + offs_k[None, :] * 4096
    else:
        a_ptrs = a_ptr + offs_m[:, None] * 4096 + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * 4096 + offs_n[None, :]
    acc = pl.zeros((BM, BN), dtype=ACC)
    for k in range(pl.cdiv(K, BK)):
        a = pl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = pl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = pl.dot(a, b, acc)
        a_ptrs += BK * (4096 if A_T else 1)
        b_ptrs += BK * 4096
    pl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(pl.float32),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def compile_ptx(blocks, num_warps, num_stages=1, dtype=np.float16, acc=pl.float32, a_t=False,
                target="nvidia:sm_90a", **options) -> tuple[str, str]:
    bm, bn, bk = blocks
    a, b, c = np.zeros((4, 4), dtype), np.zeros((4, 4), dtype), np.zeros((4, 4), np.float32)
    module = loop_kernel.lower(a, b, c, 4096, 4096, 4096, BM=bm, BN=bn, BK=bk, ACC=acc, A_T=a_t)
    artifacts = compile_module(module, target, num_warps=num_warps, num_stages=num_stages, **options).context.artifacts
    return artifacts["ptx"], artifacts["kernel_name"]


WGMMA_CASES = [
    # blocks, num_warps, num_stages, operand dtype, accumulator, A transposed, instruction
    ((64, 64, 64), 4, 1, np.float16, pl.float32, False, "m64n64k16.f32.f16.f16"),
    ((128, 128, 64), 4, 3, np.float16, pl.float32, False, "m64n128k16.f32.f16.f16"),
    ((128, 256, 64), 8, 3, np.float16, pl.float32, False, "m64n256k16.f32.f16.f16"),
    ((64, 128, 32), 8, 2, np.float16, pl.float32, False, "m64n64k16.f32.f16.f16"),
    ((128, 128, 64), 4, 4, np.float16, pl.float16, False, "m64n128k16.f16.f16.f16"),
    ((128, 64, 16), 4, 2, np.float16, pl.float32, True, "m64n64k16.f32.f16.f16"),
]


def _positions(ptx: str, *patterns: str) -> list[int]:
    return [ptx.index(p) for p in patterns]


@pytest.mark.parametrize("blocks, num_warps, num_stages, dtype, acc, a_t, instruction", WGMMA_CASES)
def test_wgmma_ptx(blocks, num_warps, num_stages, dtype, acc, a_t, instruction):
    ptx, name = compile_ptx(blocks, num_warps, num_stages, dtype, acc, a_t)
    found = set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(\S+)", ptx))
    assert found == {instruction}
    assert "mma.sync" not in ptx
    # Per 64-row slab and N piece of a warpgroup, one instruction per 16 of K.
    bm, bn, bk = blocks
    n_instr = int(instruction.split("n")[1].split("k")[0])
    warps_m, warps_n = wgmma_warps((bm, bn), num_warps)
    assert ptx.count("wgmma.mma_async") == (bm // (16 * warps_m)) * (bn // (n_instr * warps_n)) * (bk // 16)
    wg_fence, first, commit = _positions(
        ptx, "wgmma.fence.sync.aligned", "wgmma.mma_async", "wgmma.commit_group.sync.aligned")
    assert wg_fence < first < commit < ptx.index("wgmma.wait_group.sync.aligned", first)
    assert ptx.rindex("wgmma.mma_async") < commit
    if num_stages == 1:
        # The operands go through the dot's scratch: stored, fenced for the async proxy,
        # and a barrier after the fence before any warpgroup reads them.
        fence = ptx.index("fence.proxy.async.shared::cta")
        assert fence < wg_fence and ptx.index("bar.sync", fence) < wg_fence
    else:
        # Pipelined: the slots are read in place (no stores) once the loop has waited for
        # the slot's commit group and a barrier has made every thread's copies visible; a
        # proxy fence after them orders cp.async's generic-proxy writes before wgmma's
        # async-proxy reads.
        wait = ptx.index("cp.async.wait_group", ptx.index("cp.async.commit_group"))
        barrier = ptx.index("bar.sync", wait)
        fence = ptx.index("fence.proxy.async.shared::cta", wait)
        assert wait < barrier < fence < wg_fence < first and "bar.sync" not in ptx[fence:first]
        assert "mbarrier" not in ptx
    assembles(ptx, "sm_90a", name)


def test_transposed_operands_set_the_trans_flags():
    # A row-major is read K-major (imm-trans-a 0), B row-major N-major (imm-trans-b 1).
    ptx, _ = compile_ptx((128, 64, 64), 4, 1)
    assert set(re.findall(r"p, 1, 1, (\d), (\d);", ptx)) == {("0", "1")}
    # A column-major: M-major (imm-trans-a 1).
    ptx, _ = compile_ptx((128, 64, 16), 4, 1, a_t=True)
    assert {flags[0] for flags in re.findall(r"p, 1, 1, (\d), (\d);", ptx)} == {"1"}


@pytest.mark.parametrize("blocks, num_warps, target, options", [
    ((16, 64, 64), 4, "nvidia:sm_90a", {}),     # M below a warpgroup's 64 rows
    ((32, 32, 32), 4, "nvidia:sm_90a", {}),
    ((64, 64, 64), 2, "nvidia:sm_90a", {}),     # fewer warps than a warpgroup
    ((128, 128, 64), 4, "nvidia:sm_90", {}),    # wgmma needs the arch-specific sm_90a
    ((128, 128, 64), 4, "nvidia:sm_80", {}),
    ((128, 128, 64), 4, "nvidia:sm_89", {}),
    ((128, 128, 64), 4, "nvidia:sm_90a", {"enable_wgmma": False}),
])
def test_mma_sync_where_wgmma_does_not_apply(blocks, num_warps, target, options):
    ptx, name = compile_ptx(blocks, num_warps, 2, target=target, **options)
    assert "wgmma" not in ptx and "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx
    assembles(ptx, target.split(":")[1], name)


@pt.jit
def converted_dot_kernel(a_ptr, b_ptr, c_ptr, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr,
                         TYPE: pl.constexpr, ACC: pl.constexpr, PREC: pl.constexpr):
    rm, rn, rk = pl.arange(0, BM), pl.arange(0, BN), pl.arange(0, BK)
    a = pl.load(a_ptr + rm[:, None] * BK + rk[None, :]).to(TYPE)
    b = pl.load(b_ptr + rk[:, None] * BN + rn[None, :]).to(TYPE)
    c = pl.dot(a, b, input_precision=PREC, out_dtype=ACC)
    pl.store(c_ptr + rm[:, None] * BN + rn[None, :], c.to(pl.float32))


@pytest.mark.parametrize("dtype, acc, precision, blocks, instruction", [
    (pl.float32, pl.float32, "tf32", (128, 128, 32), "m64n128k8.f32.tf32.tf32"),
    (pl.float8e4nv, pl.float32, "tf32", (128, 64, 64), "m64n64k32.f32.e4m3.e4m3"),
    (pl.float8e5, pl.float16, "tf32", (64, 128, 32), "m64n128k32.f16.e5m2.e5m2"),
    (pl.bfloat16, pl.float32, "tf32", (64, 64, 16), "m64n64k16.f32.bf16.bf16"),
])
def test_wgmma_precisions(dtype, acc, precision, blocks, instruction):
    bm, bn, bk = blocks
    a = np.zeros((4, 4), np.float32)
    module = converted_dot_kernel.lower(a, a, a, BM=bm, BN=bn, BK=bk, TYPE=dtype, ACC=acc, PREC=precision)
    artifacts = compile_module(module, "nvidia:sm_90a", num_warps=4).context.artifacts
    ptx = artifacts["ptx"]
    assert set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(\S+)", ptx)) == {instruction}
    if dtype in (pl.float32, pl.float8e4nv, pl.float8e5):  # no transpose flags: K-major only
        assert re.findall(r"p, 1, 1;", ptx) and not re.findall(r"p, 1, 1, \d", ptx)
    assembles(ptx, "sm_90a", artifacts["kernel_name"])


def test_tf32x3_keeps_mma_sync():
    a = np.zeros((4, 4), np.float32)
    module = converted_dot_kernel.lower(a, a, a, BM=128, BN=128, BK=32, TYPE=pl.float32, ACC=pl.float32,
                                        PREC="tf32x3")
    ptx = compile_module(module, "nvidia:sm_90a", num_warps=4).context.artifacts["ptx"]
    assert "wgmma" not in ptx and "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx


@pt.jit
def chained_kernel(q_ptr, k_ptr, v_ptr, o_ptr, BM: pl.constexpr, BN: pl.constexpr, D: pl.constexpr):
    # o = (q @ k) @ v, the second dot's A the first one's accumulator (attention's P @ V).
    rm, rn, rd = pl.arange(0, BM), pl.arange(0, BN), pl.arange(0, D)
    q = pl.load(q_ptr + rm[:, None] * D + rd[None, :])
    k = pl.load(k_ptr + rd[:, None] * BN + rn[None, :])
    v = pl.load(v_ptr + rn[:, None] * D + rd[None, :])
    p = pl.dot(q, k).to(pl.float16)
    pl.store(o_ptr + rm[:, None] * D + rd[None, :], pl.dot(p, v))


def chained_ptx(bm, bn, d, num_warps):
    x = np.zeros((4, 4), np.float16)
    module = chained_kernel.lower(x, x, x, np.zeros((4, 4), np.float32), BM=bm, BN=bn, D=d)
    artifacts = compile_module(module, "nvidia:sm_90a", num_warps=num_warps).context.artifacts
    return artifacts["ptx"], artifacts["kernel_name"]


@pytest.mark.parametrize("bm, bn, d, num_warps", [(64, 64, 64, 4), (128, 64, 128, 8), (128, 128, 64, 4)])
def test_an_accumulator_feeds_the_next_dot_from_registers(bm, bn, d, num_warps):
    ptx, name = chained_ptx(bm, bn, d, num_warps)
    shared_a = re.findall(r"wgmma\.mma_async\.sync\.aligned\.\S+ \{[^}]*\}, %rd\d+, %rd\d+, p, 1, 1, \d, \d;", ptx)
    register_a = re.findall(r"wgmma\.mma_async\.sync\.aligned\.\S+ \{[^}]*\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, "
                            r"%rd\d+, p, 1, 1, \d;", ptx)
    warps_m = wgmma_warps((bm, d), num_warps)[0]
    assert len(shared_a) == (bm // (16 * warps_m)) * (d // 16)          # q @ k: both from shared memory
    assert len(register_a) == (bm // (16 * warps_m)) * (bn // 16)       # p @ v: p from registers
    assembles(ptx, "sm_90a", name)


def test_slots_read_in_place_are_guarded_by_the_shared_memory_alignment():
    # Pipelined (A's ring slot read in place): a trap if shared memory did not start on a
    # 1024-byte boundary; unpipelined (the dot's own scratch, aligned at run time): none.
    pipelined, _ = compile_ptx((128, 128, 64), 4, 3)
    assert "trap;" in pipelined
    unpipelined, _ = compile_ptx((128, 128, 64), 4, 1)
    assert "trap;" not in unpipelined


def _bench_kernel(name: str):
    import bench.polytile_kernels as kernels

    return getattr(kernels, name)


@pytest.mark.parametrize("head_dim, num_warps", [(64, 4), (128, 8)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_keeps_its_wgmmas_in_flight_without_ptxas_serializing_them(head_dim, num_warps, causal):
    # The bench's attention (examples/flash_attention.py) with the Hopper blocks it times:
    # both dots asynchronous, and nothing that makes ptxas wait for every wgmma
    # (C7515: a non-wgmma instruction writing an in-flight accumulator or A register).
    rows, seq_len = 4096, 1024
    q = np.zeros((rows, head_dim), np.float16)
    module = _bench_kernel("attention_kernel").lower(q, q, q, q, 0.125, seq_len, HEAD_DIM=head_dim, BLOCK_M=128,
                                                      BLOCK_N=64, CAUSAL=causal)
    result = compile_module(module, "nvidia:sm_90a", num_warps=num_warps, num_stages=3)
    artifacts = result.context.artifacts
    assert str(result.module).count("{gpu.async = true}") == 2
    notes = artifacts["resources"]["notes"]
    assert not [note for note in notes if "C7515" in note or "serialized" in note], notes
    assert artifacts["resources"]["spills"] == {"store_bytes": 0, "load_bytes": 0}
    # K and V of an iteration complete at one wait: one proxy fence after it orders both
    # slots for Q @ K and P @ V (a second one before P @ V would stall every iteration).
    loop = _loop_body(artifacts["ptx"], "cp.async.wait_group")
    assert loop.count("fence.proxy.async.shared::cta") == 1
    assert loop.index("cp.async.wait_group") < loop.index("fence.proxy.async") < loop.index("wgmma.mma_async")
    assembles(artifacts["ptx"], "sm_90a", artifacts["kernel_name"])


@pytest.mark.parametrize("head_dim, num_warps", [(64, 4), (128, 8)])
@pytest.mark.parametrize("causal", [False, True])
def test_descriptor_attention_keeps_its_wgmmas_in_flight_without_ptxas_serializing_them(head_dim, num_warps,
                                                                                        causal):
    # The same attention with K and V through tensor maps: its loop body was one basic
    # block, which ptxas 13.0 serializes when P @ V stays in flight across the back edge
    # (C7514; 389 against Triton's 413 TFLOP/s on an H100).  The shared-memory alignment
    # check now stays in the loop (inline assembly, a predicated trap), and with that exit
    # in the body ptxas keeps the wgmmas asynchronous.
    pytest.importorskip("polytile_tma")
    rows, seq_len = 4096, 1024
    q = np.zeros((rows, head_dim), np.float16)
    module = _bench_kernel("attention_descriptor_kernel").lower(q, q, q, q, 0.125, seq_len, rows, HEAD_DIM=head_dim,
                                                                 BLOCK_M=128, BLOCK_N=64, CAUSAL=causal)
    result = compile_module(module, "nvidia:sm_90a", num_warps=num_warps, num_stages=3)
    artifacts = result.context.artifacts
    assert str(result.module).count("{gpu.async = true}") == 2
    notes = artifacts["resources"]["notes"]
    assert not [note for note in notes if "C751" in note or "serialized" in note], notes
    loop = _loop_body(artifacts["ptx"], "wgmma.mma_async")
    assert "@p trap;" in loop and loop.count("wgmma.wait_group.sync.aligned 1;") == 1
    assembles(artifacts["ptx"], "sm_90a", artifacts["kernel_name"])


def _loop_body(ptx: str, marker: str) -> str:
    """The PTX from the label of the loop whose body holds ``marker`` to its branch back."""
    at = ptx.index(marker)
    label = re.findall(r"^(\$L__BB\d+_\d+):", ptx[:at], re.MULTILINE)[-1]
    back = re.search(rf"bra(\.uni)?\s+{re.escape(label)};", ptx[at:])
    return ptx[ptx.index(label + ":"):at + back.end()]


@pt.jit
def two_dots(a_ptr, b_ptr, c_ptr, o_ptr, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    # Two dots per iteration whose operands come from rings the pipeline fills at once.
    rm, rn, rk = pl.arange(0, BM), pl.arange(0, BN), pl.arange(0, BK)
    acc = pl.zeros((BM, BN), pl.float32)
    for k in range(0, K, BK):
        a = pl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = pl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = pl.dot(a, b, acc)
        c = pl.load(c_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = pl.dot(a, c, acc)
    pl.store(o_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_two_dots_of_an_iteration_share_the_fence_after_its_one_wait():
    x = np.zeros((4, 4), np.float16)
    module = two_dots.lower(x, x, x, np.zeros((4, 4), np.float32), 256, BM=128, BN=128, BK=64)
    result = compile_module(module, "nvidia:sm_90a", num_warps=4, num_stages=3)
    ptx = result.context.artifacts["ptx"]
    loop = _loop_body(ptx, "cp.async.wait_group")
    waits, fences = loop.count("cp.async.wait_group"), loop.count("fence.proxy.async.shared::cta")
    dots = loop.count("wgmma.commit_group")
    assert (dots, waits, fences) == (2, 1, 1)
    assembles(ptx, "sm_90a", result.context.artifacts["kernel_name"])


def test_the_bench_matmul_keeps_its_wgmmas_in_flight_without_ptxas_serializing_them():
    a = np.zeros((4096, 4096), np.float16)
    module = _bench_kernel("matmul_kernel").lower(a, a, a, 4096, 4096, 4096, 4096, 1, 4096, 1, 4096, 1,
                                                   BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8)
    result = compile_module(module, "nvidia:sm_90a", num_warps=8, num_stages=3)
    notes = result.context.artifacts["resources"]["notes"]
    assert "{gpu.async = true}" in str(result.module)
    assert not [note for note in notes if "C7515" in note or "serialized" in note], notes


def _attention_after_memory_stage():
    from polytile.ir.parser import parse_module

    q = np.zeros((4096, 128), np.float16)
    module = _bench_kernel("attention_kernel").lower(q, q, q, q, 0.125, 1024, HEAD_DIM=128, BLOCK_M=128,
                                                      BLOCK_N=64, CAUSAL=False)
    result = compile_module(module, "nvidia:sm_90a", num_warps=8, num_stages=3, record_stages=True)
    text = next(stage.ir for stage in result.stages if stage.name == "memory")
    return parse_module(text)


def test_a_dot_needs_no_second_fence_unless_a_wait_or_call_comes_between():
    from polytile.dialects.gpu import AsyncWaitOp
    from polytile.dialects.tile import DotOp
    from polytile.dialects.tile_debug import PrintOp

    module = _attention_after_memory_stage()
    dots = [op for op in module.walk() if isinstance(op, DotOp)]
    wait = next(op for op in module.walk() if isinstance(op, AsyncWaitOp) and op.parent is dots[0].parent)
    qk, pv = dots
    assert qk.parent is pv.parent is wait.parent
    assert not wgmma._fenced_since_last_wait(qk)  # the first after the wait fences
    assert wgmma._fenced_since_last_wait(pv)       # Q @ K's fence ordered V's slot too
    # An op not known to leave copies alone between the two (a plugin's, say): a fence again.
    foreign = PrintOp.build(prefix="between")
    pv.parent.insert_before(foreign, pv)
    assert not wgmma._fenced_since_last_wait(pv)
    foreign.erase()
    assert wgmma._fenced_since_last_wait(pv)
    # A wait between the two (its copies are completed after Q @ K's fence): a fence again.
    pv.parent.insert_before(wait.clone(), pv)
    assert not wgmma._fenced_since_last_wait(pv)


@pytest.mark.parametrize("target", ["nvidia:sm_90a", "nvidia:sm_80"])
def test_a_rings_copies_address_one_register_plus_constants(target):
    # Each thread's copies into a slot differ by the same constants in every thread
    # (the swizzle phase comes from thread bits only): one register per ring and
    # iteration, the rest folded into the copies' addresses ([r + 2048]), as Triton's.
    # Built as slot + (offset + constant), LLVM hoisted each offset + constant out of the
    # loop and added the slot per copy: eight more registers and adds per ring.
    ptx, name = compile_ptx((128, 128, 64), 4, num_stages=4, target=target)
    last = ptx.rindex("cp.async.cg.shared.global")  # the prologue's copies come first
    label = re.findall(r"^(\$L__BB\d+_\d+):", ptx[:last], re.MULTILINE)[-1]
    loop = ptx[ptx.index(label + ":"):last + 200]
    adds = {m.group(1): m.group(2) for m in re.finditer(r"add\.s32\s+(%r\d+), (%r\d+), -?\d+;", loop)}
    copies = re.findall(r"cp\.async\.cg\.shared\.global \[(%r\d+)\]", loop)
    bases = {adds.get(register, register) for register in copies}
    assert len(copies) == 16 and len(bases) == 2, (copies, bases)
    assembles(ptx, target.split(":")[1], name)
