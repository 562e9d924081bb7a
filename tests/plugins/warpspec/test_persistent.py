"""warp-specialize on a persistent kernel's loop over tiles (polytile_warpspec.persistent):
IR text in, IR text out; the loops it leaves alone and why; the compiled kernel."""

from __future__ import annotations

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl

from polytile.compiler import compile_module
from polytile.passes.dce import DeadCodeElimination

pytest.importorskip("polytile_nvidia")
pytest.importorskip("polytile_tma")
pytest.importorskip("polytile_warpspec")

import polytile_tma.hopper  # noqa: E402, F401 - what pipeline-loops imports: where bulk copies read and write
from polytile_warpspec.partition import WarpSpecializeLoops  # noqa: E402

from tests.gpu.ptx_assembly import assembles  # noqa: E402

from .kernels import matmul_persistent  # noqa: E402
from .test_partition import NAMES, run  # noqa: E402

NAMES = {**NAMES, "SC": "#gpu.shared<vector = 8, per_phase = 1, max_phase = 8, order = [1, 0]>"}

# What pipeline-loops and async-dots make of a persistent 64x64 f16 matmul through tensor
# maps, three stages, flatten=False: in each tile, the ring made and filled two K steps
# ahead, the K loop, the drain, then the tile's store.
PERSISTENT = """
func.func @mm(%a: !tma.map<>, %b: !tma.map<>, %c: !tma.map<>, %tiles: i32, %n: i32) attributes {kernel = true} {
  %acc = arith.constant {value = 0.0} : tile<64x64xf32, {W}>
  %c64 = arith.constant {value = 64} : i32
  %c32 = arith.constant {value = 32} : i32
  %c1 = arith.constant {value = 1} : i32
  %c0 = arith.constant {value = 0} : i32
  %c2 = arith.constant {value = 2} : i32
  %c3 = arith.constant {value = 3} : i32
  %pid = tile.program_id {axis = 0} : i32
  scf.for %pid, %tiles, %c2 {pt.warp_specialize = 1} {
  ^bb0(%tile: i32):
    %offs_m = arith.muli %tile, %c64 : i32
    %ra = gpu.local_alloc : !gpu.buffer<3x64x32xf16, {SA}>
    %rb = gpu.local_alloc : !gpu.buffer<3x32x64xf16, {SB}>
    %full = gpu.local_alloc : !gpu.buffer<3xi64, {SM}>
    gpu.mbarrier_init %full {count = 1}
    tma.fence_barrier_init
    %v0 = arith.cmpi %c0, %n {predicate = "slt"} : i1
    tma.copy_to_ring %a, %offs_m, %c0, %ra, %c0, %full, %v0
    tma.copy_to_ring %b, %c0, %c0, %rb, %c0, %full, %v0
    tma.arrive_expect_bytes %full, %c0, %v0 {bytes = 8192}
    %v1 = arith.cmpi %c1, %n {predicate = "slt"} : i1
    tma.copy_to_ring %a, %offs_m, %c32, %ra, %c1, %full, %v1
    tma.copy_to_ring %b, %c0, %c32, %rb, %c1, %full, %v1
    tma.arrive_expect_bytes %full, %c1, %v1 {bytes = 8192}
    %start = gpu.dot_wait values(%acc) {pending = 0} : tile<64x64xf32, {W}>
    %sum, %r, %w, %p = scf.for %c0, %n, %c1, %start, %c0, %c2, %c0 : tile<64x64xf32, {W}>, i32, i32, i32 {
    ^bb0(%k: i32, %acc_1: tile<64x64xf32, {W}>, %read_slot: i32, %write_slot: i32, %phase: i32):
      gpu.mbarrier_wait %full, %read_slot, %phase
      %ahead = arith.addi %k, %c2 : i32
      %valid = arith.cmpi %ahead, %n {predicate = "slt"} : i1
      %offs = arith.muli %ahead, %c32 : i32
      %x = gpu.local_load_slot %ra, %read_slot : tile<64x32xf16, {BA}>
      %y = gpu.local_load_slot %rb, %read_slot : tile<32x64xf16, {BB}>
      %acc_2 = tile.dot %x, %y, %acc_1 {gpu.async = true} : tile<64x64xf32, {W}>
      %acc_3 = gpu.dot_wait values(%acc_2) buffers(%ra, %rb) {pending = 1} : tile<64x64xf32, {W}>
      tma.copy_to_ring %a, %offs_m, %offs, %ra, %write_slot, %full, %valid
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
    %half = arith.truncf %done : tile<64x64xf16, {W}>
    %out = gpu.local_alloc : !gpu.buffer<64x64xf16, {SC}>
    gpu.local_store %half, %out
    tma.fence_async_writes
    tma.store_from_shared %c, %offs_m, %c0, %out
    scf.yield
  }
  func.return
}
"""

# The split: one ring for every tile, made before it; the consumers' tile loop carries the
# ring's slot and phase from one K loop to the next (each starts where the last stopped,
# releasing the slot before its first first) and releases the last slot after the wait
# for its dots; the producer's tile loop computes the tile's offset and issues every
# copy, its slot and phase running on across tiles.
SPLIT = """
func.func @mm(%a: !tma.map<>, %b: !tma.map<>, %c: !tma.map<>, %tiles: i32, %n: i32) attributes {gpu.worker_warps = 4, kernel = true} {
  %c64 = arith.constant {value = 64} : i32
  %c32 = arith.constant {value = 32} : i32
  %c1 = arith.constant {value = 1} : i32
  %c0 = arith.constant {value = 0} : i32
  %c2 = arith.constant {value = 2} : i32
  %c3 = arith.constant {value = 3} : i32
  %pid = tile.program_id {axis = 0} : i32
  %ra = gpu.local_alloc : !gpu.buffer<3x64x32xf16, {SA}>
  %rb = gpu.local_alloc : !gpu.buffer<3x32x64xf16, {SB}>
  %full = gpu.local_alloc : !gpu.buffer<3xi64, {SM}>
  gpu.mbarrier_init %full {count = 1}
  %empty = gpu.local_alloc : !gpu.buffer<3xi64, {SM}>
  gpu.mbarrier_init %empty {count = 4}
  tma.fence_barrier_init
  ws.warp_specialize {consumer_registers = 240, kernel_registers = 240, producer_registers = 40, producer_warps = 4} {
    %acc = arith.constant {value = 0.0} : tile<64x64xf32, {W}>
    %0 = arith.constant {value = 0} : i32
    %1, %2 = scf.for %pid, %tiles, %c2, %0, %0 {pt.warp_specialize = 1} : i32, i32 {
    ^bb0(%tile: i32, %ring_slot: i32, %ring_phase: i32):
      %offs_m = arith.muli %tile, %c64 : i32
      %start = gpu.dot_wait values(%acc) {pending = 0} : tile<64x64xf32, {W}>
      %3 = arith.constant {value = 0} : i32
      %4 = arith.constant {value = 1} : i32
      %5 = arith.constant {value = 2} : i32
      %6 = arith.cmpi %ring_slot, %3 {predicate = "eq"} : i1
      %7 = arith.subi %ring_slot, %4 : i32
      %8 = arith.select %6, %5, %7 : i32
      %sum, %r, %w, %p = scf.for %c0, %n, %c1, %start, %ring_slot, %8, %ring_phase : tile<64x64xf32, {W}>, i32, i32, i32 {
      ^bb0(%k: i32, %acc_1: tile<64x64xf32, {W}>, %read_slot: i32, %write_slot: i32, %phase: i32):
        gpu.mbarrier_wait %full, %read_slot, %phase
        %x = gpu.local_load_slot %ra, %read_slot : tile<64x32xf16, {BA}>
        %y = gpu.local_load_slot %rb, %read_slot : tile<32x64xf16, {BB}>
        %acc_2 = tile.dot %x, %y, %acc_1 {gpu.async = true} : tile<64x64xf32, {W}>
        %acc_3 = gpu.dot_wait values(%acc_2) buffers(%ra, %rb) {pending = 1} : tile<64x64xf32, {W}>
        %9 = arith.cmpi %k, %c0 {predicate = "ne"} : i1
        gpu.mbarrier_arrive %empty, %write_slot, %9
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
      %10 = arith.cmpi %c0, %n {predicate = "slt"} : i1
      gpu.mbarrier_arrive %empty, %w, %10
      %half = arith.truncf %done : tile<64x64xf16, {W}>
      %out = gpu.local_alloc : !gpu.buffer<64x64xf16, {SC}>
      gpu.local_store %half, %out
      tma.fence_async_writes
      tma.store_from_shared %c, %offs_m, %c0, %out
      scf.yield %r, %p
    }
    ws.yield
  } {
    %11 = arith.constant {value = 0} : i32
    %12, %13 = scf.for %pid, %tiles, %c2, %11, %11 : i32, i32 {
    ^bb0(%tile_1: i32, %slot: i32, %phase_1: i32):
      %offs_m_1 = arith.muli %tile_1, %c64 : i32
      %14 = arith.constant {value = 0} : i32
      %15 = arith.constant {value = 1} : i32
      %16 = arith.constant {value = 3} : i32
      %17 = arith.constant {value = 2} : i32
      %18 = arith.muli %c1, %17 : i32
      %19, %20 = scf.for %c0, %n, %c1, %slot, %phase_1 : i32, i32 {
      ^bb0(%fill: i32, %slot_1: i32, %phase_2: i32):
        %21 = arith.xori %phase_2, %15 : i32
        gpu.mbarrier_wait %empty, %slot_1, %21
        %22 = arith.subi %fill, %18 : i32
        %ahead = arith.addi %22, %c2 : i32
        %valid = arith.cmpi %ahead, %n {predicate = "slt"} : i1
        %offs = arith.muli %ahead, %c32 : i32
        tma.copy_to_ring %a, %offs_m_1, %offs, %ra, %slot_1, %full, %valid
        tma.copy_to_ring %b, %c0, %offs, %rb, %slot_1, %full, %valid
        tma.arrive_expect_bytes %full, %slot_1, %valid {bytes = 8192}
        %23 = arith.addi %slot_1, %15 : i32
        %24 = arith.cmpi %23, %16 {predicate = "eq"} : i1
        %25 = arith.select %24, %14, %23 : i32
        %26 = arith.xori %phase_2, %15 : i32
        %27 = arith.select %24, %26, %phase_2 : i32
        scf.yield %25, %27
      }
      scf.yield %19, %20
    }
    ws.yield
  }
  gpu.mbarrier_inval %full
  gpu.mbarrier_inval %empty
  func.return
}
"""


def _run(text: str) -> tuple[str, list]:
    out, artifacts = run(text, WarpSpecializeLoops(), DeadCodeElimination(), names=NAMES)
    return out, [{k: v for k, v in e.items() if k != "loop"} for e in artifacts["warp_specialize"]]


def test_a_loop_over_tiles_splits_around_its_pipelined_k_loop():
    from polytile.ir_testing import dedent

    out, outcome = _run(PERSISTENT)
    assert out == dedent(SPLIT)
    assert outcome == [{"specialised": True, "producer_registers": 40, "consumer_registers": 240}]


def test_a_store_through_an_array_the_copies_read_keeps_the_loop_whole():
    # In place (the tile's result written into A): the producer, a tile ahead, could read
    # A before this tile's store lands.
    from polytile.ir_testing import dedent

    before = PERSISTENT.replace("tma.store_from_shared %c,", "tma.store_from_shared %a,")
    out, outcome = _run(before)
    assert out == dedent(before)
    assert outcome == [{"specialised": False, "why": (
        "its body writes memory the next tile's copies read ('tma.store_from_shared' writes through 'a', which the "
        "copies read: the next tile's copies could read it before the write)")}]


def test_copies_addressed_by_a_value_the_tile_loop_carries_keep_it_whole():
    # The tile's row offset carried from one tile to the next: the producer, which runs
    # the tile loop on its own, does not have it.
    from polytile.ir_testing import dedent

    before = PERSISTENT.replace(
        "  scf.for %pid, %tiles, %c2 {pt.warp_specialize = 1} {\n  ^bb0(%tile: i32):\n"
        "    %offs_m = arith.muli %tile, %c64 : i32\n",
        "  %last = scf.for %pid, %tiles, %c2, %c0 {pt.warp_specialize = 1} : i32 {\n  ^bb0(%tile: i32, %prev: i32):\n"
        "    %offs_m = arith.addi %prev, %c64 : i32\n").replace("    scf.yield\n  }\n  func.return",
                                                             "    scf.yield %offs_m\n  }\n  func.return")
    assert before != PERSISTENT
    out, outcome = _run(before)
    assert out == dedent(before)
    assert outcome == [{"specialised": False, "why": "its inner loop's copies depend on values the loop carries; the "
                                                     "producer computes them per tile"}]


def _compile(flatten: bool, num_warps: int = 8, block=(128, 256, 64), ws: bool = True):
    f16 = np.zeros((512, 512), np.float16)
    module = matmul_persistent.lower(f16, f16, f16, 512, 512, 512, BLOCK_M=block[0], BLOCK_N=block[1],
                                     BLOCK_K=block[2], NUM_PROGRAMS=132, WS=ws, FLATTEN=flatten)
    return compile_module(module, "nvidia:sm_90a", num_warps=num_warps, num_stages=3)


@pytest.mark.parametrize("flatten", [False, True])
def test_tutorial_09s_persistent_kernel_is_split_and_assembles(flatten):
    from polytile.ir import print_ir

    result = _compile(flatten)
    assert [{k: v for k, v in e.items() if k != "loop"} for e in result.metadata["warp_specialize"]] == \
        [{"specialised": True, "producer_registers": 40, "consumer_registers": 232}]
    text = print_ir(result.module)
    split = text[text.index("ws.warp_specialize"):]
    # The ring's barriers are made once, before the split (flatten=True's prefetch of the
    # next tile and the per-tile setup and drain are gone).
    assert "mbarrier_init" not in split and text.count("gpu.mbarrier_init") == 2
    ptx = result.artifacts["ptx"]
    assert ptx.count("setmaxnreg.dec.sync.aligned.u32 40;") == 1
    assert ptx.count("setmaxnreg.inc.sync.aligned.u32 232;") == 1
    assert result.metadata["launch_warps"] == 12
    assembles(ptx, "sm_90a", "matmul_persistent")


def test_without_the_hint_the_persistent_kernel_is_not_split():
    result = _compile(True, ws=False)
    assert "warp_specialize" not in result.metadata or not result.metadata["warp_specialize"]
    assert "setmaxnreg" not in result.artifacts["ptx"]


def test_a_tile_loop_whose_k_loop_was_not_pipelined_says_so():
    # One stage: nothing pipelined, so nothing to split; the metadata names both loops.
    f16 = np.zeros((512, 512), np.float16)
    module = matmul_persistent.lower(f16, f16, f16, 512, 512, 512, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                                     NUM_PROGRAMS=132, WS=True, FLATTEN=False)
    result = compile_module(module, "nvidia:sm_90a", num_warps=4, num_stages=1)
    (entry,) = result.metadata["warp_specialize"]
    assert not entry["specialised"]
    assert entry["why"].startswith("neither the loop nor the loop in its body was pipelined into rings")


@pt.jit
def pointer_persistent_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr,
                              BLOCK_K: pl.constexpr, NUM_PROGRAMS: pl.constexpr, FLATTEN: pl.constexpr):
    num_pid_n = pl.cdiv(N, BLOCK_N)
    num_tiles = pl.cdiv(M, BLOCK_M) * num_pid_n
    for tile_id in pl.range(pl.program_id(0), num_tiles, NUM_PROGRAMS, flatten=FLATTEN, warp_specialize=True):
        offs_m = (tile_id // num_pid_n) * BLOCK_M + pl.arange(0, BLOCK_M)
        offs_n = (tile_id % num_pid_n) * BLOCK_N + pl.arange(0, BLOCK_N)
        offs_k = pl.arange(0, BLOCK_K)
        acc = pl.zeros((BLOCK_M, BLOCK_N), dtype=pl.float32)
        for ki in range(pl.cdiv(K, BLOCK_K)):
            a = pl.load(a_ptr + offs_m[:, None] * K + (ki * BLOCK_K + offs_k)[None, :])
            b = pl.load(b_ptr + (ki * BLOCK_K + offs_k)[:, None] * N + offs_n[None, :])
            acc = pl.dot(a, b, acc)
        pl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(pl.float16))


@pytest.mark.parametrize("flatten", [False, True])
def test_a_tile_loop_whose_k_loop_copies_pointer_tiles_says_so(flatten):
    # Its K loop's cp.async ring completes on commit groups; the reason is the copies'.
    f16 = np.zeros(1, np.float16)
    module = pointer_persistent_matmul.lower(f16, f16, f16, 256, 256, 256, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32,
                                             NUM_PROGRAMS=4, FLATTEN=flatten)
    result = compile_module(module, "nvidia:sm_90a", num_warps=4)
    (entry,) = result.metadata["warp_specialize"]
    assert not entry["specialised"]
    assert entry["why"].startswith("its inner loop's loads are per-thread cp.async copies of pointer tiles"), entry


@pytest.mark.parametrize("edit, why", [
    # Something that reads the tile between the ring's setup and its first copy: the split
    # would make the setup once, before the loop, where the tile is not known.
    (lambda text: text.replace("    tma.fence_barrier_init\n",
                               "    tma.fence_barrier_init\n    tile.print %offs_m {prefix = \"tile \"}\n"),
     "'tile.print' between its inner loop's ring setup and first copy reads what the loop makes; the split makes "
     "the setup once, before the loop"),
])
def test_what_the_setup_may_hold(edit, why):
    from polytile.ir_testing import dedent

    before = edit(PERSISTENT)
    assert before != PERSISTENT
    out, outcome = _run(before)
    assert out == dedent(before)
    assert outcome == [{"specialised": False, "why": why}]
