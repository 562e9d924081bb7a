"""Hopper's bulk tensor copies (polytile_tma.bulk, .hopper, .staging): which blocks they
move and how, the IR the descriptor lowering and ``stage-bulk-loads`` make, the PTX of
descriptor matmuls for sm_90a (assembled by ptxas), and what host descriptors pass."""

from __future__ import annotations

import re

import numpy as np
import pytest

import polytile.language as pl
from polytile.compiler import compile_module
from polytile.errors import VerificationError
from polytile.ir import parse_module, verify
from polytile.runtime import jit
from polytile.target import Target
from polytile.ir_testing import apply_passes, dedent

from polytile_tma import tensormap
from polytile_tma.arguments import ADAPTER, BULK_ADAPTER
from polytile_tma.bulk import box_plan
from polytile_tma.host import TensorDescriptor
from polytile_tma.lowering import LowerTensorDescriptors
from polytile_tma.staging import has_bulk_copies
from tests.gpu.ptx_assembly import assembles


# --------------------------------------------------------------------------------------
# Which blocks, in which layout


@pytest.mark.parametrize("bits, block, box, swizzle, copies", [
    (16, (128, 64), (128, 64), 128, 1),   # one 128-byte swizzle row per block row
    (16, (64, 128), (64, 64), 128, 2),    # wider rows: column blocks of 128 bytes, one box each
    (16, (64, 32), (64, 32), 64, 1),
    (16, (64, 16), (64, 16), 32, 1),
    (16, (16, 8), (16, 8), 0, 1),         # 16-byte rows: no swizzle
    (32, (64, 32), (64, 32), 128, 1),
    (8, (128, 128), (128, 128), 128, 1),
])
def test_a_block_is_copied_in_boxes_of_one_swizzle_row(bits, block, box, swizzle, copies):
    plan = box_plan(bits, block)
    assert (plan.box, plan.swizzle, plan.copies) == (box, swizzle, copies)
    assert plan.bytes == block[0] * block[1] * bits // 8
    # The slot's layout is the one wgmma reads in place: 16-byte vectors, swizzled by row.
    assert plan.slot.order == (1, 0) and plan.slot.vector * bits // 8 == 16


@pytest.mark.parametrize("bits, block", [
    (16, (16, 4)),      # 8-byte rows: a box row must be whole 16-byte units
    (16, (512, 64)),    # more than 256 rows
    (16, (4,)),         # a run of 8 bytes: boxes move whole 16-byte units
    (32, (1 << 14,)),   # a run of 64 boxes of 256 elements: more than MAX_BOXES
    (16, (4, 4, 64)),   # 4-row boxes again, with an outer dimension
    (16, (512, 8, 8)),  # an outer dimension wider than a box
    (16, (2, 2, 2, 2, 2, 2)),  # six dimensions
    (1, (64, 64)),      # bits
    (16, (4, 64)),      # swizzled boxes of 4 rows do not start on a pattern boundary
])
def test_blocks_a_bulk_copy_cannot_place_have_no_plan(bits, block):
    assert box_plan(bits, block) is None


@pytest.mark.parametrize("bits, block, box, swizzle, boxes", [
    # 1-D: one run, in boxes of at most 256 elements.
    (16, (8,), (8,), 0, [(0, (0,))]),
    (32, (1024,), (256,), 0, [(0, (0,)), (1024, (256,)), (2048, (512,)), (3072, (768,))]),
    # Outer dimensions over one column block: the whole block is one box.
    (16, (1, 64, 64), (1, 64, 64), 128, [(0, (0, 0, 0))]),
    (32, (2, 2, 16, 32), (2, 2, 16, 32), 128, [(0, (0, 0, 0, 0))]),
    (16, (1, 1, 1, 128, 64), (1, 1, 1, 128, 64), 128, [(0, (0,) * 5)]),
    # Several column blocks: a box per outer index and column block, as the slot has them.
    (16, (2, 64, 128), (1, 64, 64), 128, [(0, (0, 0, 0)), (8192, (0, 0, 64)), (16384, (1, 0, 0)),
                                          (24576, (1, 0, 64))]),
])
def test_blocks_of_every_rank_are_copied_in_boxes_where_the_slot_has_them(bits, block, box, swizzle, boxes):
    plan = box_plan(bits, block)
    assert (plan.box, plan.swizzle, list(plan.boxes)) == (box, swizzle, boxes)
    assert plan.bytes == np.prod(block) * bits // 8
    # Every box lands where the slot's layout puts the first element it copies.
    for byte_offset, position in plan.boxes:
        assert plan.slot.offset(position, block) * bits // 8 == byte_offset


@pytest.mark.parametrize("target, expected", [
    ("nvidia:sm_90a", True), ("nvidia:sm_90", True), ("nvidia:sm_100a", True), ("nvidia:sm_89", False),
    ("nvidia:sm_80", False), ("amd:gfx942", False), ("interp", False)])
def test_bulk_copies_are_for_hopper_and_later(target, expected):
    assert has_bulk_copies(Target.parse(target)) is expected
    assert ADAPTER.for_target(Target.parse(target)) is (BULK_ADAPTER if expected else ADAPTER)


# --------------------------------------------------------------------------------------
# What a host descriptor passes on Hopper


def test_a_hopper_descriptor_adds_its_tensor_map_where_a_bulk_copy_can_move_its_block():
    x = np.zeros((64, 64), np.float16)
    movable = ADAPTER.key(TensorDescriptor.from_tensor(x, [32, 64]))
    unmovable = ADAPTER.key(TensorDescriptor.from_tensor(x, [32, 4]))
    names = [p.suffix for p in BULK_ADAPTER.parts(movable)]
    assert names == [p.suffix for p in ADAPTER.parts(movable)] + ["_map"]
    assert BULK_ADAPTER.parts(movable)[-1].type.by_value == (128, 64)
    assert BULK_ADAPTER.parts(unmovable) == ADAPTER.parts(unmovable)


class DeviceLike:
    """A torch-like tensor over NumPy memory (its type claims torch's module, as host.py
    tells torch tensors apart): the C path keys and keeps these; its address can move."""

    def __init__(self, array):
        self.array, self.shape, self.dtype = array, array.shape, _F16

    def data_ptr(self):
        return self.array.__array_interface__["data"][0]

    def stride(self):
        return tuple(s // self.array.itemsize for s in self.array.strides)


DeviceLike.__module__ = "torch"


class _Float16:
    def __str__(self):
        return "torch.float16"


_F16 = _Float16()


@pytest.fixture
def counted_maps(monkeypatch):
    """encode_tensor_map replaced by a counter (each map says which call made it), with no
    map kept from before or after."""
    from polytile_tma import arguments

    calls = []

    def encode(address, element, shape, strides, box, swizzle, padding):
        calls.append((address, element, shape, strides, box, swizzle, padding))
        return bytes([len(calls)]) * 128

    monkeypatch.setattr(tensormap, "encode_tensor_map", encode)
    arguments.forget_tensor_maps()
    yield calls
    arguments.forget_tensor_maps()


@pytest.mark.parametrize("wrap", [lambda a: a, DeviceLike], ids=["numpy", "torch-like"])
def test_the_tensor_map_is_encoded_for_the_plan_and_follows_the_address(counted_maps, wrap):
    calls = counted_maps
    x = np.zeros((64, 96), np.float16)
    desc = TensorDescriptor(wrap(x), (64, 96), (96, 1), [64, 128])
    flat = BULK_ADAPTER.flatten(desc)
    address = x.__array_interface__["data"][0]
    assert calls == [(address, "f16", (64, 96), (96, 1), (64, 64), 128, "zero")]
    assert flat[:-1] == ADAPTER.flatten(desc) and flat[-1] == b"\x01" * 128
    # The same shape at a new address is a new map.
    y = np.zeros((64, 96), np.float16)
    desc.base = wrap(y)
    assert BULK_ADAPTER.flatten(desc)[-1] != flat[-1]
    assert calls[-1][0] == y.__array_interface__["data"][0]


def test_a_torch_descriptor_relaunched_or_made_again_encodes_no_new_map(counted_maps):
    calls = counted_maps
    x = DeviceLike(np.zeros((64, 96), np.float16))
    desc = TensorDescriptor.from_tensor(x, [64, 128])
    flat = BULK_ADAPTER.key_and_parts(desc)
    # Relaunched unchanged: the very same answer, nothing encoded again.
    assert BULK_ADAPTER.key_and_parts(desc) is flat and len(calls) == 1
    assert flat == (ADAPTER.key(desc), (*ADAPTER.flatten(desc), b"\x01" * 128))
    # A new descriptor of the same tensor: the map kept for that address, shape and block.
    again = BULK_ADAPTER.key_and_parts(TensorDescriptor.from_tensor(x, [64, 128]))
    assert again == flat and len(calls) == 1
    # The same tensor moved (torch's tensor.data = ...): a new map.
    x.array = np.zeros((64, 96), np.float16)
    assert BULK_ADAPTER.key_and_parts(desc)[1][-1] == b"\x02" * 128
    assert calls[-1][0] == x.data_ptr()
    # Another block (a new plan) or padding: a new map for each.
    desc.block_shape = [64, 64]
    assert BULK_ADAPTER.key_and_parts(desc)[1][-1] == b"\x03" * 128
    desc.padding = "nan"
    assert BULK_ADAPTER.key_and_parts(desc)[1][-1] == b"\x04" * 128 and calls[-1][-1] == "nan"


# --------------------------------------------------------------------------------------
# IR: lower-tensor-descriptors and stage-bulk-loads

HOST_DESCRIPTOR = """
func.func @k(%x: ptr<f16>, %m: i32, %n: i32, %s: i64, %map: !tma.map<>, %i: i32) attributes {kernel = true} {
  %one = arith.constant {value = 1} : i64
  %d = tma.make_descriptor %x shape(%m, %n) strides(%s, %one) map(%map) {block_shape = [64, 64]} : !tma.desc<tile<64x64xf16>, zero>
  %v = tma.load %d, %i, %i : tile<64x64xf16>
  %e = tma.load %d, %i, %i : tile<64x64xf16>
  func.return
}
"""


def test_stores_through_a_tensor_map_become_bulk_stores():
    text = HOST_DESCRIPTOR.replace("%e = tma.load %d, %i, %i : tile<64x64xf16>", "tma.store %d, %i, %i, %v")
    out = apply_passes(text, LowerTensorDescriptors())
    assert "tma.bulk_store %map, %i, %i, %0" in out and "tile.store" not in out


def test_a_bulk_store_writes_its_block_into_the_copy_layout_then_copies_it_out():
    from polytile_tma.staging import StageBulkLoads

    layout = "#gpu.blocked<size_per_thread = [1, 8], threads_per_warp = [4, 8], warps_per_cta = [4, 1], order = [1, 0]>"
    text = f"""
    func.func @k(%map: !tma.map<>, %i: i32, %v: tile<64x64xf16, {layout}>) attributes {{kernel = true}} {{
      tma.bulk_store %map, %i, %i, %v
      func.return
    }}
    """
    out = apply_passes(dedent(text), StageBulkLoads())
    assert out == dedent(f"""
        func.func @k(%map: !tma.map<>, %i: i32, %v: tile<64x64xf16, {layout}>) attributes {{kernel = true}} {{
          %0 = gpu.local_alloc : !gpu.buffer<64x64xf16, #gpu.shared<vector = 8, per_phase = 1, max_phase = 8, order = [1, 0]>>
          gpu.local_store %v, %0
          tma.fence_async_writes
          tma.store_from_shared %map, %i, %i, %0
          func.return
        }}
        """).lstrip("\n")


def test_loads_through_a_tensor_map_become_bulk_loads():
    # The kernel records that its map argument (4) describes the array of its base (0).
    out = apply_passes(HOST_DESCRIPTOR, LowerTensorDescriptors())
    assert out == dedent("""
        func.func @k(%x: ptr<f16>, %m: i32, %n: i32, %s: i64, %map: !tma.map<>, %i: i32) attributes {kernel = true, tma.map_bases = [[4, 0]]} {
          %one = arith.constant {value = 1} : i64
          %0 = tma.bulk_load %map, %i, %i : tile<64x64xf16>
          %1 = tma.bulk_load %map, %i, %i : tile<64x64xf16>
          func.return
        }
        """).lstrip("\n")


STAGED = """
func.func @k(%map: !tma.map<>, %i: i32, %y: tile<64x64xptr<f16>, #gpu.blocked<size_per_thread = [1, 8], threads_per_warp = [4, 8], warps_per_cta = [4, 1], order = [1, 0]>>) attributes {kernel = true} {
  %v = tma.bulk_load %map, %i, %i : tile<64x64xf16, #gpu.blocked<size_per_thread = [1, 8], threads_per_warp = [4, 8], warps_per_cta = [4, 1], order = [1, 0]>>
  tile.store %y, %v
  func.return
}
"""


def test_a_load_nothing_pipelined_is_copied_through_a_one_slot_buffer():
    from polytile_tma.staging import StageBulkLoads

    layout = "#gpu.blocked<size_per_thread = [1, 8], threads_per_warp = [4, 8], warps_per_cta = [4, 1], order = [1, 0]>"
    out = apply_passes(STAGED, StageBulkLoads())
    assert out == dedent(f"""
        func.func @k(%map: !tma.map<>, %i: i32, %y: tile<64x64xptr<f16>, {layout}>) attributes {{kernel = true}} {{
          %0 = gpu.local_alloc : !gpu.buffer<1x64x64xf16, #gpu.shared<vector = 8, per_phase = 1, max_phase = 8, order = [2, 1, 0]>>
          %1 = gpu.local_alloc : !gpu.buffer<1xi64, #gpu.shared<vector = 1, per_phase = 1, max_phase = 1, order = [0]>>
          %2 = arith.constant {{value = 0}} : i32
          %3 = arith.constant {{value = true}} : i1
          gpu.mbarrier_init %1 {{count = 1}}
          tma.fence_barrier_init
          tma.copy_to_ring %map, %i, %i, %0, %2, %1, %3
          tma.arrive_expect_bytes %1, %2, %3 {{bytes = 8192}}
          gpu.mbarrier_wait %1, %2, %2
          gpu.mbarrier_inval %1
          %4 = gpu.local_load_slot %0, %2 : tile<64x64xf16, {layout}>
          tile.store %y, %4
          func.return
        }}
        """).lstrip("\n")


def test_a_copy_into_slots_of_another_layout_is_refused():
    text = """
    func.func @k(%map: !tma.map<>, %i: i32, %slot: i32, %ok: i1) attributes {kernel = true} {
      %r = gpu.local_alloc : !gpu.buffer<2x64x64xf16, #gpu.shared<vector = 8, per_phase = 2, max_phase = 4, order = [2, 1, 0]>>
      %b = gpu.local_alloc : !gpu.buffer<2xi64, #gpu.shared<vector = 1, per_phase = 1, max_phase = 1, order = [0]>>
      tma.copy_to_ring %map, %i, %i, %r, %slot, %b, %ok
      func.return
    }
    """
    with pytest.raises(VerificationError, match="not in the layout a bulk copy writes"):
        verify(parse_module(dedent(text)))


# --------------------------------------------------------------------------------------
# PTX for sm_90a


@jit
def descriptor_matmul(a_desc, b_desc, c_ptr, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr,
                      B_T: pl.constexpr):
    pid_m, pid_n = pl.program_id(0), pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in range(0, K, BK):
        a = a_desc.load([pid_m * BM, k])
        if B_T:  # B stored N x K (K contiguous), as Triton's descriptor tutorials
            b = b_desc.load([pid_n * BN, k]).T
        else:
            b = b_desc.load([k, pid_n * BN])
        acc = pl.dot(a, b, acc)
    offs_m = pid_m * BM + pl.arange(0, BM)
    offs_n = pid_n * BN + pl.arange(0, BN)
    pl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _compile_matmul(target, b_t, num_stages, blocks=(128, 128, 64)):
    bm, bn, bk = blocks
    a = np.zeros((256, 256), np.float16)
    b = np.zeros((256, 256), np.float16)
    c = np.zeros((256, 256), np.float32)
    a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
    b_desc = TensorDescriptor.from_tensor(b, [bn, bk] if b_t else [bk, bn])
    module = descriptor_matmul.lower_for(target, a_desc, b_desc, c, 256, 256, 256, BM=bm, BN=bn, BK=bk, B_T=b_t)
    return compile_module(module, target, num_warps=4, num_stages=num_stages)


def _matmul_ptx(target, b_t, num_stages, blocks=(128, 128, 64)):
    artifacts = _compile_matmul(target, b_t, num_stages, blocks).context.artifacts
    return artifacts["ptx"], artifacts["kernel_name"]


def _loop_copies(module):
    from polytile.dialects import scf
    from polytile_tma.bulk import CopyToRingOp

    loop = next(op for op in module.walk() if isinstance(op, scf.ForOp))
    return loop, [op for op in loop.body.block if isinstance(op, CopyToRingOp)]


def test_the_loop_copies_the_iteration_ahead_where_the_offset_is_the_induction_variable():
    # desc.load([m, k]) in `for k in range(0, K, BK)`: the body's copies are of k + 2 * BK
    # with three stages, not of k (which the prologue copied already).
    from polytile.passes.rewrite import constant_value

    loop, copies = _loop_copies(_compile_matmul("nvidia:sm_90a", False, 3).module)
    assert len(copies) == 2
    for copy in copies:
        k = copy.offsets[1] if copy is copies[0] else copy.offsets[0]
        ahead = k.defining_op
        assert ahead is not None and ahead.name == "arith.addi" and loop.induction_variable in ahead.operands
        step = next(v for v in ahead.operands if v is not loop.induction_variable)
        assert constant_value(step) == 128 or step.defining_op.name == "arith.muli"


def test_a_staged_buffer_lives_until_the_dot_that_reads_it_in_place():
    from polytile.gpu.allocation import BUFFER_OFFSET_ATTR, buffer_bytes

    loop, copies = _loop_copies(_compile_matmul("nvidia:sm_90a", False, 1).module)
    spans = []
    for copy in copies:
        start = copy.ring.defining_op.attributes[BUFFER_OFFSET_ATTR]
        spans.append((start, start + buffer_bytes(copy.ring.type)))
    (a0, a1), (b0, b1) = spans
    assert a1 <= b0 or b1 <= a0, f"A's buffer {spans[0]} and B's {spans[1]} overlap while wgmma reads both"


@pytest.mark.parametrize("b_t", [False, True])
def test_a_pipelined_descriptor_matmul_fills_its_rings_with_bulk_copies(b_t):
    ptx, name = _matmul_ptx("nvidia:sm_90a", b_t, 3)
    copies = ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes")
    # A: one 128x64 box; B: one box (N x K) or two 64-column blocks (K x N) per fill, for
    # the two fills of the prologue and the one of the body.
    assert copies == 3 * (1 + (1 if b_t else 2))
    assert ptx.count("mbarrier.arrive.expect_tx.shared::cta.b64") == 3
    assert "fence.mbarrier_init.release.cluster" in ptx
    assert "cp.async.cg" not in ptx and "ld.global" not in ptx.split("wgmma.wait_group.sync.aligned 0")[0]
    # The tensor maps are grid constants: taken by address, never copied.
    assert ptx.count(".param .align 64 .b8") == 2 and "cvta.param" in ptx and "st.local" not in ptx
    # wgmma reads both operands in place, K-major (B^T of an N x K block) or N-major; the
    # copies write through the async proxy, so no proxy fence comes between the wait for a
    # slot and the wgmma reading it.
    assert set(re.findall(r"p, 1, 1, (\d), (\d);", ptx)) == {("0", "1" if not b_t else "0")}
    body = ptx[ptx.index("mbarrier.try_wait.parity"):ptx.index("wgmma.mma_async")]
    assert "fence.proxy.async" not in body
    assembles(ptx, "sm_90a", name)


@pytest.mark.parametrize("b_t", [False, True])
def test_an_unpipelined_descriptor_matmul_stages_each_load(b_t):
    ptx, name = _matmul_ptx("nvidia:sm_90a", b_t, 1)
    assert ptx.count("mbarrier.arrive.expect_tx.shared::cta.b64") == 2
    assert ptx.count("mbarrier.inval.shared.b64") == 2
    # Read in place by wgmma: no shared loads before the epilogue.
    assert "ld.shared" not in ptx.split("wgmma.wait_group.sync.aligned 0")[0]
    assembles(ptx, "sm_90a", name)


@jit
def descriptor_epilogue(a_desc, c_desc, BM: pl.constexpr, BN: pl.constexpr):
    pm, pn = pl.program_id(0) * BM, pl.program_id(1) * BN
    c_desc.store([pm, pn], (a_desc.load([pm, pn]) * 2).to(c_desc.dtype))


@pytest.mark.parametrize("dtype, block, boxes", [(np.float16, (128, 128), 2), (np.float32, (64, 32), 1),
                                                 (np.float32, (16, 8), 1)])
def test_a_descriptor_store_is_a_bulk_copy_out_of_shared_memory(dtype, block, boxes):
    x = np.zeros((256, 256), dtype)
    a_desc, c_desc = TensorDescriptor.from_tensor(x, list(block)), TensorDescriptor.from_tensor(x, list(block))
    module = descriptor_epilogue.lower_for("nvidia:sm_90a", a_desc, c_desc, BM=block[0], BN=block[1])
    artifacts = compile_module(module, "nvidia:sm_90a", num_warps=4).context.artifacts
    ptx = artifacts["ptx"]
    store = ptx.index("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group")
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group") == boxes
    # Every thread's writes, fenced for the copy engine, then a barrier, then one thread copies.
    fence = ptx.rindex("fence.proxy.async.shared::cta", 0, store)
    assert ptx.rindex("st.shared", 0, fence) < fence < ptx.index("bar.sync", fence) < store
    assert ptx.index("cp.async.bulk.commit_group", store) < ptx.index("cp.async.bulk.wait_group.read 0", store)
    assert "st.global" not in ptx
    assembles(ptx, "sm_90a", artifacts["kernel_name"])


@jit
def scale_run(src, dst, B: pl.constexpr):
    dst.store([pl.program_id(0) * B], src.load([pl.program_id(0) * B - 8]) * 2)


@jit
def scale_3d(src, dst, B0: pl.constexpr, B1: pl.constexpr, B2: pl.constexpr):
    i, j = pl.program_id(0), pl.program_id(1)
    dst.store([i * B0, j * B1, 0], src.load([i * B0, j * B1 - 3, 0]) * 2)


@jit
def scale_5d(src, dst, B3: pl.constexpr, B4: pl.constexpr):
    i = pl.program_id(0)
    dst.store([0, 1, 0, i * B3, 0], src.load([0, 1, 0, i * B3, 0]) * 2)


RANKED = {  # kernel, shape, block, grid, its extra arguments
    1: (scale_run, (1000,), [256], (4,), {"B": 256}),
    3: (scale_3d, (3, 70, 64), [1, 64, 64], (3, 2), {"B0": 1, "B1": 64, "B2": 64}),
    5: (scale_5d, (2, 2, 2, 40, 32), [1, 1, 2, 16, 32], (3,), {"B3": 16, "B4": 32}),
}


def _ranked_reference(rank, x):
    """What the RANKED kernels write: twice the block they read (reads outside give 0),
    blocks outside the destination dropped."""
    kernel, shape, block, grid, meta = RANKED[rank]
    pads = [b + 8 for b in block]  # reads start at most 8 before the array and end within a block past it
    padded = np.zeros([n + 2 * p for n, p in zip(shape, pads)], x.dtype)
    padded[tuple(slice(p, p + n) for n, p in zip(shape, pads))] = x
    y = np.full(shape, -1, x.dtype)
    for program in np.ndindex(*grid):
        if rank == 1:
            start, read = (program[0] * 256,), (program[0] * 256 - 8,)
        elif rank == 3:
            start = (program[0], program[1] * 64, 0)
            read = (program[0], program[1] * 64 - 3, 0)
        else:
            start = read = (0, 1, 0, program[0] * 16, 0)
        source = padded[tuple(slice(p + r, p + r + b) for r, b, p in zip(read, block, pads))] * 2
        target = tuple(slice(s, min(s + b, n)) for s, b, n in zip(start, block, shape))
        y[target] = source[tuple(slice(0, t.stop - t.start) for t in target)]
    return y


@pytest.mark.parametrize("rank", [1, 3, 5])
def test_a_block_of_any_rank_is_a_bulk_copy_on_hopper(rank):
    kernel, shape, block, grid, meta = RANKED[rank]
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    src, dst = TensorDescriptor.from_tensor(x, block), TensorDescriptor.from_tensor(np.zeros_like(x), block)
    plan = box_plan(32, tuple(block))
    module = kernel.lower_for("nvidia:sm_90a", src, dst, **meta)
    artifacts = compile_module(module, "nvidia:sm_90a", num_warps=4).context.artifacts
    ptx = artifacts["ptx"]
    load = f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
    store = f"cp.async.bulk.tensor.{rank}d.global.shared::cta.tile.bulk_group"
    assert ptx.count(load) == ptx.count(store) == plan.copies
    assert "ld.global" not in ptx and "st.global" not in ptx
    assembles(ptx, "sm_90a", artifacts["kernel_name"])
    # The same kernel on the interpreter: the reads outside give zeros, the writes outside are dropped.
    y = np.full_like(x, -1)
    kernel[grid](src, TensorDescriptor.from_tensor(y, block), **meta, target="interp")
    np.testing.assert_array_equal(y, _ranked_reference(rank, x))


@jit
def batched_matmul(a_desc, b_desc, c_desc, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    # 3-D descriptors (batch, rows, columns), a block of one batch entry, reshaped for the dot.
    bt, pid_m, pid_n = pl.program_id(2), pl.program_id(0), pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in range(0, K, BK):
        a = a_desc.load([bt, pid_m * BM, k]).reshape(BM, BK)
        b = b_desc.load([bt, pid_n * BN, k]).reshape(BN, BK)
        acc = pl.dot(a, b.T, acc)
    c_desc.store([bt, pid_m * BM, pid_n * BN], acc.to(c_desc.dtype).reshape(1, BM, BN))


def test_3d_descriptor_loads_in_a_matmul_loop_fill_rings_with_3d_bulk_copies():
    a = np.zeros((2, 256, 256), np.float16)
    descs = [TensorDescriptor.from_tensor(a, block) for block in ([1, 128, 64], [1, 128, 64], [1, 128, 128])]
    module = batched_matmul.lower_for("nvidia:sm_90a", *descs, 256, BM=128, BN=128, BK=64)
    artifacts = compile_module(module, "nvidia:sm_90a", num_warps=4, num_stages=3).context.artifacts
    ptx = artifacts["ptx"]
    # One 3-D copy per operand per fill, the tensor cores reading the slots, the store in
    # two column blocks of 128 bytes.
    assert ptx.count("cp.async.bulk.tensor.3d.shared::cluster.global.tile") == 2
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx
    assert ptx.count("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group") == 2
    assert "ld.global" not in ptx
    assembles(ptx, "sm_90a", artifacts["kernel_name"])
    # The interpreter agrees with NumPy, edges included.
    rng = np.random.default_rng(0)
    x, y = rng.random((2, 96, 64)).astype(np.float16), rng.random((2, 80, 64)).astype(np.float16)
    z = np.zeros((2, 96, 80), np.float16)
    batched_matmul[(3, 3, 2)](*(TensorDescriptor.from_tensor(v, [1, 32, 32]) for v in (x, y, z)), 64, BM=32, BN=32,
                              BK=32, target="interp")
    np.testing.assert_allclose(z, np.einsum("bmk,bnk->bmn", x.astype(np.float32), y.astype(np.float32)), rtol=2e-3,
                               atol=2e-2)


@jit
def persistent_matmul(a_desc, b_desc, c_desc, M, N, K, NP: pl.constexpr, BM: pl.constexpr, BN: pl.constexpr,
                      BK: pl.constexpr, FLATTEN: pl.constexpr, IN_PLACE: pl.constexpr):
    tiles_n = pl.cdiv(N, BN)
    for tile_id in pl.range(pl.program_id(0), pl.cdiv(M, BM) * tiles_n, NP, flatten=FLATTEN):
        pm, pn = tile_id // tiles_n, tile_id % tiles_n
        acc = pl.zeros((BM, BN), dtype=pl.float32)
        for k in range(0, K, BK):
            acc = pl.dot(a_desc.load([pm * BM, k]), b_desc.load([pn * BN, k]).T, acc)
        if IN_PLACE:  # the result written over A, which the next tile's copies read
            a_desc.store([pm * BM, pn * BN], acc.to(a_desc.dtype))
        else:
            c_desc.store([pm * BM, pn * BN], acc.to(c_desc.dtype))


def _compile_persistent(flatten, in_place=False):
    a = np.zeros((512, 512), np.float16)
    blocks = ([128, 64], [128, 64], [128, 128]) if not in_place else ([128, 128], [128, 128], [128, 128])
    descs = [TensorDescriptor.from_tensor(a, list(block)) for block in blocks]
    bk = 64 if not in_place else 128
    module = persistent_matmul.lower_for("nvidia:sm_90a", *descs, 512, 512, 512, NP=4, BM=128, BN=128, BK=bk,
                                         FLATTEN=flatten, IN_PLACE=in_place)
    return compile_module(module, "nvidia:sm_90a", num_warps=8, num_stages=3, record_stages=True)


def test_a_persistent_descriptor_matmul_copies_the_next_tile_during_this_tile_s_store():
    # flatten=True: the next tile's first two fills (num_stages - 1, two copies each)
    # are issued after this tile's K loop is drained, before its store; the first tile's
    # before the loop.
    plain, flattened = _compile_persistent(False), _compile_persistent(True)
    load = "cp.async.bulk.tensor.2d.shared::cluster.global.tile"
    assert plain.context.artifacts["ptx"].count(load) == 6 and flattened.context.artifacts["ptx"].count(load) == 10
    lines = next(stage.ir for stage in flattened.stages if stage.name == "distribute").splitlines()
    outer = next(i for i, line in enumerate(lines) if "pt.flatten = true" in line)
    drained = next(i for i in range(outer, len(lines)) if "gpu.mbarrier_inval" in lines[i])
    copy = next(i for i in range(drained, len(lines)) if "tma.copy_to_ring" in lines[i])
    store = next(i for i in range(drained, len(lines)) if "tma.store_from_shared" in lines[i])
    assert drained < copy < store
    # The store of C waits only until the copy engine has read shared memory: what comes
    # after it (the next tile's copies) reads A and B, other kernel arguments.
    assert "complete = true" not in lines[store]
    ptx = flattened.context.artifacts["ptx"]
    assert "cp.async.bulk.wait_group.read 0;" in ptx and "fence.proxy.async.global" not in ptx
    assembles(ptx, "sm_90a", flattened.context.artifacts["kernel_name"])


def test_a_store_through_a_descriptor_the_copies_read_keeps_the_next_tile_s_copies_in_it():
    load = "cp.async.bulk.tensor.2d.shared::cluster.global.tile"
    results = [_compile_persistent(flatten, in_place=True) for flatten in (False, True)]
    counts = [result.context.artifacts["ptx"].count(load) for result in results]
    assert counts[0] == counts[1]
    # And the store completes its writes before the next tile's copies read A again.
    assert "fence.proxy.async.global" in results[1].context.artifacts["ptx"]


@jit
def store_then_gather(x_desc, out_ptr, BN: pl.constexpr):
    # The store goes through x's map, the gather through x's base pointer: one array.
    x_desc.store([0, 0], pl.zeros((1, BN), dtype=pl.float32))
    rows = pl.arange(0, 8)
    pl.store(out_ptr + rows[:, None] * BN + pl.arange(0, BN)[None, :], x_desc.gather(rows, 0))


def test_a_bulk_store_completes_before_a_gather_through_the_same_descriptor():
    x, out = np.zeros((64, 64), np.float32), np.zeros((8, 4), np.float32)
    module = store_then_gather.lower_for("nvidia:sm_90a", TensorDescriptor.from_tensor(x, [1, 4]), out, BN=4)
    artifacts = compile_module(module, "nvidia:sm_90a", num_warps=4).context.artifacts
    ptx = artifacts["ptx"]
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in ptx and "ld.global" in ptx
    assert "cp.async.bulk.wait_group 0;" in ptx and "fence.proxy.async.global" in ptx
    assert "cp.async.bulk.wait_group.read" not in ptx
    # Thread 0 waits and fences; every thread's gather waits for it at a barrier.
    fence = ptx.index("fence.proxy.async.global")
    assert "bar.sync" in ptx[fence:ptx.index("ld.global", fence)]
    assembles(ptx, "sm_90a", artifacts["kernel_name"])
    # What the gather reads is what the store wrote.
    y = np.ones((64, 64), np.float32)
    result = np.full((8, 4), -1.0, np.float32)
    store_then_gather[(1,)](TensorDescriptor.from_tensor(y, [1, 4]), result, BN=4, target="interp")
    np.testing.assert_array_equal(result[0], 0.0)
    np.testing.assert_array_equal(result[1:], 1.0)


@jit
def same_box_each_iteration(x_desc, y_desc, N, B: pl.constexpr):
    for i in range(N):
        y_desc.store([0, 0], x_desc.load([0, 0]) * i)


def test_a_loop_that_stores_one_box_again_and_again_completes_each_store():
    # Bulk stores are unordered among themselves: the last iteration's must land last.
    x = np.zeros((64, 64), np.float16)
    descs = [TensorDescriptor.from_tensor(x, [64, 64]) for _ in range(2)]
    module = same_box_each_iteration.lower_for("nvidia:sm_90a", *descs, 4, B=64)
    ptx = compile_module(module, "nvidia:sm_90a", num_warps=4).context.artifacts["ptx"]
    assert "cp.async.bulk.wait_group 0;" in ptx and "cp.async.bulk.wait_group.read" not in ptx


@jit
def store_halves(x_desc, c_desc, BM: pl.constexpr, BN: pl.constexpr, SECOND: pl.constexpr):
    # A subtiled epilogue: the two halves of a tile, stored one after the other.
    pm = pl.program_id(0) * BM
    halves = pl.permute(pl.reshape(x_desc.load([pm, 0]), (BM, 2, BN // 2)), (0, 2, 1))
    first, second = pl.split(halves)
    c_desc.store([pm, 0], first)
    c_desc.store([pm, SECOND], second)


@pytest.mark.parametrize("second, full_waits", [(64, 0), (32, 1)])
def test_a_store_of_another_box_through_the_same_map_does_not_wait_for_the_first(second, full_waits):
    # Offsets 64 apart with 64-column blocks: provably other boxes, so the first store
    # waits only for its reads; 32 apart they overlap, and it waits for its writes.
    x = np.zeros((256, 128), np.float16)
    module = store_halves.lower_for("nvidia:sm_90a", TensorDescriptor.from_tensor(x, [64, 128]),
                                    TensorDescriptor.from_tensor(x, [64, 64]), BM=64, BN=128, SECOND=second)
    ptx = compile_module(module, "nvidia:sm_90a", num_warps=4).context.artifacts["ptx"]
    assert ptx.count("cp.async.bulk.wait_group 0;") == full_waits
    assert ptx.count("cp.async.bulk.wait_group.read 0;") == 2 - full_waits


def test_before_hopper_a_descriptor_matmul_loads_through_pointers():
    ptx, name = _matmul_ptx("nvidia:sm_80", True, 3)
    assert "cp.async.bulk" not in ptx and "mbarrier" not in ptx and "ld.global" in ptx
    assert ".param .align 64 .b8" not in ptx  # no tensor map parameters
    assembles(ptx, "sm_80", name)


def test_a_backend_without_by_value_parameters_names_the_parameter():
    from polytile.errors import CompilationError

    module = parse_module(dedent("""
        func.func @k(%map: !tma.map<>, %x: ptr<f32>) attributes {kernel = true} {
          func.return
        }
        """))
    with pytest.raises(CompilationError, match=r"parameter 'map' of type !tma.map<> is passed by value, which the "
                                               r"AMD backend does not support"):
        compile_module(module, "amd:gfx942")


@jit
def recurrence(w_desc, h_desc, K, BK: pl.constexpr):
    for k in range(0, K, BK):
        acc = pl.dot(w_desc.load([0, 0]), h_desc.load([k, 0]))
        h_desc.store([k + BK, 0], acc.to(pl.float16))


def test_a_loop_that_stores_through_a_descriptor_is_not_pipelined_and_completes_its_stores():
    # Copies issued ahead would read h before the iteration that writes it; and the next
    # iteration's load reads what this one stored: the store's writes are waited for and
    # fenced for the generic proxy, not only its reads of shared memory.
    from polytile.dialects import scf
    from polytile_tma.bulk import CopyToRingOp

    w, h = np.zeros((64, 64), np.float16), np.zeros((1024, 64), np.float16)
    module = recurrence.lower_for("nvidia:sm_90a", TensorDescriptor.from_tensor(w, [64, 64]),
                                  TensorDescriptor.from_tensor(h, [64, 64]), 1024, BK=64)
    result = compile_module(module, "nvidia:sm_90a", num_warps=4, num_stages=3)
    assert not [op for op in result.module.walk()
                if isinstance(op, CopyToRingOp) and not isinstance(op.parent_op, scf.ForOp)]
    ptx = result.context.artifacts["ptx"]
    assert "cp.async.bulk.wait_group 0;" in ptx and "fence.proxy.async.global" in ptx
    assert "cp.async.bulk.wait_group.read" not in ptx
    assembles(ptx, "sm_90a", result.context.artifacts["kernel_name"])


@pytest.mark.parametrize("size, alignment", [(8, 128), (256, 256), (512, 512), (600, 1024), (4096, 1024)])
def test_buffers_start_where_their_swizzle_pattern_does(size, alignment):
    from polytile.gpu.allocation import buffer_alignment

    assert buffer_alignment(size) == alignment


@pytest.mark.parametrize("block, guarded", [((64, 64), True), ((16, 8), False)])
def test_swizzled_bulk_copies_are_guarded_by_the_shared_memory_alignment(block, guarded):
    # No wgmma here: the guard is the copies' own (16-byte rows are not swizzled).
    x = np.zeros((256, 256), np.float16)
    a_desc, c_desc = TensorDescriptor.from_tensor(x, list(block)), TensorDescriptor.from_tensor(x, list(block))
    module = descriptor_epilogue.lower_for("nvidia:sm_90a", a_desc, c_desc, BM=block[0], BN=block[1])
    ptx = compile_module(module, "nvidia:sm_90a", num_warps=4).context.artifacts["ptx"]
    assert "wgmma" not in ptx and ("trap;" in ptx) is guarded
