"""Layout attributes: text round-trips, and which thread holds which element, checked
against brute-force enumeration and the vendors' fragment tables."""

from __future__ import annotations

from collections import Counter

import pytest

from polytile.errors import IRParseError
from polytile.gpu.layouts import (
    BlockedLayout,
    DotOperandLayout,
    LayoutError,
    MfmaLayout,
    MmaLayout,
    NvmmaSharedLayout,
    SliceLayout,
    SwizzledSharedLayout,
    WmmaLayout,
    default_blocked_layout,
)
from polytile.ir import parse_type
from polytile.ir_testing import roundtrip


def ownership(layout, shape) -> Counter:
    """How many (warp, lane, register) positions hold each element."""
    linear = layout.linear(shape)
    return Counter(coords for _, _, _, coords in linear.positions())


def every_element_held(layout, shape, copies: int) -> None:
    counts = ownership(layout, shape)
    numel = 1
    for n in shape:
        numel *= n
    assert len(counts) == numel
    assert set(counts.values()) == {copies}
    assert layout.linear(shape).copies == copies


BLOCKED = BlockedLayout((1, 4), (8, 4), (4, 1), (1, 0))
MMA2 = MmaLayout(2, (2, 2), (16, 8))
MMA3 = MmaLayout(3, (4, 1), (16, 64, 16))
MFMA32 = MfmaLayout(3, (2, 2), (32, 32))
MFMA16 = MfmaLayout(2, (1, 4), (16, 16), transposed=True)
WMMA1 = WmmaLayout(1, (2, 2))
WMMA2 = WmmaLayout(2, (2, 1))

LAYOUTS = {
    "blocked": (BLOCKED, "#gpu.blocked<size_per_thread = [1, 4], threads_per_warp = [8, 4], "
                         "warps_per_cta = [4, 1], order = [1, 0]>"),
    "slice": (SliceLayout(1, BLOCKED), "#gpu.slice<dim = 1, parent = #gpu.blocked<size_per_thread = [1, 4], "
                                       "threads_per_warp = [8, 4], warps_per_cta = [4, 1], order = [1, 0]>>"),
    "mma2": (MMA2, "#gpu.mma<version = 2, warps_per_cta = [2, 2], instr_shape = [16, 8]>"),
    "mma3": (MMA3, "#gpu.mma<version = 3, warps_per_cta = [4, 1], instr_shape = [16, 64, 16]>"),
    "mfma": (MFMA32, "#gpu.amd_mfma<version = 3, warps_per_cta = [2, 2], instr_shape = [32, 32], "
                     "transposed = false>"),
    "wmma": (WMMA1, "#gpu.amd_wmma<version = 1, warps_per_cta = [2, 2]>"),
    "dot": (DotOperandLayout(0, MMA2, 2), "#gpu.dot_operand<op_idx = 0, parent = #gpu.mma<version = 2, "
                                          "warps_per_cta = [2, 2], instr_shape = [16, 8]>, k_width = 2>"),
    "shared": (SwizzledSharedLayout(8, 1, 8, (1, 0)), "#gpu.shared<vector = 8, per_phase = 1, max_phase = 8, "
                                                      "order = [1, 0]>"),
    "shared_blocks": (SwizzledSharedLayout(8, 1, 8, (1, 0), 64), "#gpu.shared<vector = 8, per_phase = 1, "
                                                                 "max_phase = 8, order = [1, 0], block = 64>"),
    "nvmma": (NvmmaSharedLayout(128, 16), "#gpu.nvmma_shared<swizzle_bytes = 128, element_bits = 16, "
                                          "transposed = false>"),
}


# -- text ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_tile_types_with_layouts_round_trip(name):
    layout, text = LAYOUTS[name]
    assert str(layout) == text
    shape = "64" if name == "slice" else "64x64"
    tile = parse_type(f"tile<{shape}xf16, {text}>")
    assert tile.layout == layout
    assert str(tile) == f"tile<{shape}xf16, {text}>"


def test_ops_with_layouts_round_trip():
    b = LAYOUTS["blocked"][1]
    s = LAYOUTS["slice"][1]
    text = f"""
        func.func @k(%x: tile<32x16xi32, {b}>) {{
          %r = tile.arange {{end = 32, start = 0}} : tile<32xi32, {s}>
          %e = tile.expand_dims %r {{axis = 1}} : tile<32x1xi32, {b}>
          func.return
        }}
    """
    from polytile.ir_testing import dedent

    assert roundtrip(text) == dedent(text)


def test_bad_layout_text_names_the_problem():
    with pytest.raises(IRParseError, match=r"bad parameters for '#gpu.blocked': threads_per_warp \[4, 4\] makes "
                                           r"warps of 16 threads; warps have 32 or 64"):
        parse_type("tile<4x4xf32, #gpu.blocked<size_per_thread = [1, 1], threads_per_warp = [4, 4], "
                   "warps_per_cta = [1, 1], order = [1, 0]>>")
    with pytest.raises(IRParseError, match=r"'#gpu.mma' has no parameter 'warps'"):
        parse_type("tile<4x4xf32, #gpu.mma<version = 2, warps = [1, 1]>>")


@pytest.mark.parametrize("make, message", [
    (lambda: BlockedLayout((1,), (32,), (4,), (1,)), r"order \[1\] is not a permutation of 0..0"),
    (lambda: BlockedLayout((3, 1), (1, 32), (4, 1), (1, 0)), "size_per_thread must be powers of two"),
    (lambda: BlockedLayout((1,), (32, 1), (4,), (0,)), "threads_per_warp has 2 entries; the layout has rank 1"),
    (lambda: SliceLayout(2, BLOCKED), "dim 2 is out of range for a parent of rank 2"),
    (lambda: SliceLayout(0, BlockedLayout((1,), (32,), (1,), (0,))), "slicing a rank-1 layout"),
    (lambda: MmaLayout(2, (2, 2), (16, 16)), r"mma version 2 \(mma.sync\) has instr_shape \[16, 8\]"),
    (lambda: MmaLayout(3, (2, 1), (16, 64, 16)), r"must hold a multiple of 4 warps"),
    (lambda: MmaLayout(3, (4, 1), (16, 12, 16)), r"instr_shape \[16, N, K\]"),
    (lambda: MmaLayout(1, (4, 1), (16, 8)), "mma version must be 2"),
    (lambda: MfmaLayout(3, (2, 2), (8, 8)), r"amd_mfma instr_shape must be one of \[\[32, 32\], \[16, 16\]\]"),
    (lambda: WmmaLayout(3, (1, 1)), "amd_wmma version must be 1"),
    (lambda: DotOperandLayout(1, MMA3, 2), "wgmma .* reads B from shared memory"),
    (lambda: DotOperandLayout(2, MMA2, 2), "op_idx is 0"),
    (lambda: DotOperandLayout(0, WMMA1, 8), "amd_wmma version 1 operands have k_width 16"),
    (lambda: DotOperandLayout(0, SliceLayout(1, BLOCKED), 1), "parent is a blocked, mma"),
    (lambda: SwizzledSharedLayout(3, 1, 1, (1, 0)), "vector must be a power of two"),
    (lambda: NvmmaSharedLayout(16, 16), "swizzle_bytes must be 0, 32, 64 or 128"),
])
def test_invalid_layouts(make, message):
    with pytest.raises(LayoutError, match=message):
        make()


def test_shape_problems():
    with pytest.raises(LayoutError, match=r"has rank 2 but the tile has shape \[64\]"):
        BLOCKED.check((64,))
    with pytest.raises(LayoutError, match=r"tile shape \[48, 64\] is not made of powers of two"):
        BLOCKED.check((48, 64))
    with pytest.raises(LayoutError, match="contiguous dimension holds at least 128 bytes"):
        NvmmaSharedLayout(128, 16).check((64, 32))


# -- blocked --------------------------------------------------------------------------------


def legacy_blocked_indices(layout: BlockedLayout, shape, warp: int, lane: int):
    """Triton's pre-linear-layout emitIndices for blocked layouts, written out directly."""
    rank = layout.rank

    def delinearize(index, sizes):
        out = [0] * rank
        for d in layout.order:
            out[d] = index % sizes[d]
            index //= sizes[d]
        return out

    lane_ids, warp_ids = delinearize(lane, layout.threads_per_warp), delinearize(warp, layout.warps_per_cta)
    footprint = layout.footprint
    reps = [max(n // f, 1) for n, f in zip(shape, footprint)]
    per_thread = 1
    for s in layout.size_per_thread:
        per_thread *= s
    out = []
    for n in range(per_thread * (reps[0] if rank == 1 else reps[0] * reps[1])):
        tile, elem = delinearize(n // per_thread, reps), delinearize(n % per_thread, layout.size_per_thread)
        out.append(tuple((tile[d] * footprint[d] + warp_ids[d] * layout.size_per_thread[d] * layout.threads_per_warp[d]
                          + lane_ids[d] * layout.size_per_thread[d] + elem[d]) % shape[d] for d in range(rank)))
    return out


@pytest.mark.parametrize("layout, shape", [
    (BLOCKED, (32, 16)), (BLOCKED, (128, 64)), (BLOCKED, (8, 4)),
    (BlockedLayout((4,), (32,), (4,), (0,)), (1024,)),
    (BlockedLayout((2, 1), (8, 8), (2, 2), (0, 1)), (64, 32)),
    (BlockedLayout((1, 8), (2, 32), (1, 4), (1, 0)), (16, 1024)),
])
def test_blocked_matches_the_legacy_index_formula(layout, shape):
    linear = layout.linear(shape)
    for warp in range(layout.num_warps):
        for lane in range(layout.warp_size):
            assert linear.thread_indices(warp, lane) == legacy_blocked_indices(layout, shape, warp, lane)


def test_blocked_consecutive_lanes_own_consecutive_chunks():
    layout = BlockedLayout((1, 4), (4, 8), (4, 1), (1, 0))
    for lane in range(32):
        first = layout.thread_indices((16, 64), 0, lane)
        assert first[:4] == [(lane // 8, (lane % 8) * 4 + i) for i in range(4)]


@pytest.mark.parametrize("shape, copies, per_thread", [
    ((32, 16), 1, 4),   # exactly the footprint
    ((128, 64), 1, 64),  # larger: wraps into more registers
    ((8, 16), 4, 4),    # fewer rows than the warps cover: four warps share each element
    ((8, 4), 16, 4),
    ((1, 2), 256, 4),   # narrower than one thread's chunk: registers hold copies too
])
def test_blocked_replicates_and_wraps(shape, copies, per_thread):
    every_element_held(BLOCKED, shape, copies)
    assert BLOCKED.elements_per_thread(shape) == per_thread


# -- slice ------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1])
def test_slice_holds_the_parent_elements_without_the_dimension(dim):
    parent = BlockedLayout((2, 2), (4, 8), (2, 2), (1, 0))
    layout = SliceLayout(dim, parent)
    shape = (64,)
    parent_shape = (1, 64) if dim == 0 else (64, 1)
    for warp in range(4):
        for lane in range(32):
            mine = set(layout.thread_indices(shape, warp, lane))
            theirs = {c[:dim] + c[dim + 1:] for c in parent.thread_indices(parent_shape, warp, lane)}
            assert mine == theirs
    # Registers along the removed dimension are dropped, not kept as copies.
    assert layout.elements_per_thread(shape) == (8 if dim == 1 else 4)
    every_element_held(layout, shape, copies=128 * layout.elements_per_thread(shape) // 64)


# -- NVIDIA mma ---------------------------------------------------------------------------


def test_mma_v2_accumulator_matches_the_ptx_fragment():
    # PTX ISA, mma.m16n8k16 accumulators: c_i at row groupID + 8*(i >= 2), column
    # 2*threadID_in_group + (i & 1).
    layout = MmaLayout(2, (1, 1), (16, 8))
    for lane in range(32):
        group, in_group = lane // 4, lane % 4
        expected = [(group + 8 * (i >= 2), 2 * in_group + (i & 1)) for i in range(4)]
        assert layout.thread_indices((16, 8), 0, lane) == expected


def test_mma_v2_warps_tile_row_major_and_repeat_along_n_first():
    layout = MMA2
    assert layout.thread_indices((32, 16), 1, 0)[0] == (0, 8)  # warp 1: next tile along N
    assert layout.thread_indices((32, 16), 2, 0)[0] == (16, 0)
    assert layout.thread_indices((32, 32), 0, 0)[4] == (0, 16)  # register 4: the next N repetition
    every_element_held(layout, (64, 64), 1)
    every_element_held(layout, (16, 8), 4)  # four warps, one 16x8 tile


def test_mma_v3_each_warp_of_a_group_takes_16_rows():
    layout = MMA3
    shape = (64, 64)
    for warp in range(4):
        rows = {r for lane in range(32) for r, _ in layout.thread_indices(shape, warp, lane)}
        assert rows == set(range(16 * warp, 16 * warp + 16))
    assert layout.elements_per_thread(shape) == 32
    assert layout.thread_indices(shape, 0, 0)[:6] == [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9)]
    every_element_held(layout, (128, 64), 1)


def test_mma_v2_operands_match_the_ptx_fragments():
    # PTX ISA, mma.m16n8k16 .f16: a_i at row groupID + 8*(i in 2,3,6,7), column
    # 2*threadID_in_group + (i & 1) + 8*(i >= 4); b_i at row 2*threadID_in_group + (i & 1)
    # + 8*(i >= 2), column groupID.
    mma = MmaLayout(2, (1, 1), (16, 8))
    a, b = DotOperandLayout(0, mma, 2), DotOperandLayout(1, mma, 2)
    for lane in range(32):
        group, in_group = lane // 4, lane % 4
        assert a.thread_indices((16, 16), 0, lane) == [
            (group + 8 * ((i // 2) % 2), 2 * in_group + (i & 1) + 8 * (i >= 4)) for i in range(8)]
        assert b.thread_indices((16, 8), 0, lane) == [
            (2 * in_group + (i & 1) + 8 * (i >= 2), group) for i in range(4)]


def test_dot_operands_are_shared_by_the_warps_that_need_them():
    a, b = DotOperandLayout(0, MMA2, 2), DotOperandLayout(1, MMA2, 2)
    every_element_held(a, (64, 32), copies=2)  # the two warps along N hold the same A
    every_element_held(b, (32, 64), copies=2)
    assert a.thread_indices((64, 32), 0, 0) == a.thread_indices((64, 32), 1, 0)
    assert a.thread_indices((64, 32), 0, 0) != a.thread_indices((64, 32), 2, 0)
    assert b.thread_indices((32, 64), 0, 0) == b.thread_indices((32, 64), 2, 0)
    # Registers go along K first: one thread feeds consecutive k-steps.
    assert a.thread_indices((64, 32), 0, 0)[8] == (0, 16)
    every_element_held(DotOperandLayout(0, MMA3, 2), (128, 64), copies=1)


def test_blocked_dot_operand_holds_whole_k():
    parent = BlockedLayout((2, 2), (4, 8), (2, 2), (1, 0))
    a = DotOperandLayout(0, parent)
    regs = a.thread_indices((16, 8), 0, 1)
    assert {c[1] for c in regs} == set(range(8))
    every_element_held(a, (16, 8), copies=8 * 2)


# -- AMD ----------------------------------------------------------------------------------


def test_mfma_32x32_matches_the_cdna_table():
    layout = MfmaLayout(3, (1, 1), (32, 32))
    for lane in range(64):
        expected = [((r // 4) * 8 + (lane // 32) * 4 + r % 4, lane % 32) for r in range(16)]
        assert layout.thread_indices((32, 32), 0, lane) == expected
    every_element_held(MFMA32, (128, 64), 1)


def test_mfma_16x16_transposed_runs_along_n():
    layout = MfmaLayout(2, (1, 1), (16, 16), transposed=True)
    for lane in range(64):
        expected = [(lane % 16, (lane // 16) * 4 + r) for r in range(4)]
        assert layout.thread_indices((16, 16), 0, lane) == expected
    every_element_held(MFMA16, (16, 64), 1)
    assert MFMA16.warp_size == 64


def test_mfma_operands():
    a = DotOperandLayout(0, MFMA32, 4)
    lane = 37
    assert a.thread_indices((32, 8), 0, lane) == [(lane % 32, 4 + i) for i in range(4)]
    every_element_held(a, (64, 32), copies=2)
    b = DotOperandLayout(1, MfmaLayout(3, (2, 2), (16, 16)), 8)
    assert b.thread_indices((32, 16), 0, 17)[:8] == [(8 + i, 1) for i in range(8)]
    every_element_held(b, (64, 64), copies=2)


@pytest.mark.parametrize("version, row", [(1, lambda r, lane: 2 * r + lane // 16),
                                          (2, lambda r, lane: r + 8 * (lane // 16))])
def test_wmma_matches_the_rdna_tables(version, row):
    layout = WmmaLayout(version, (1, 1))
    for lane in range(32):
        assert layout.thread_indices((16, 16), 0, lane) == [(row(r, lane), lane % 16) for r in range(8)]
    every_element_held(WmmaLayout(version, (2, 2)), (64, 64), 1)


def test_wmma_operands():
    v1 = DotOperandLayout(0, WMMA1, 16)
    assert v1.thread_indices((16, 16), 0, 3) == v1.thread_indices((16, 16), 0, 19)  # lanes 16..31 repeat
    assert v1.thread_indices((16, 16), 0, 3) == [(3, k) for k in range(16)]
    every_element_held(v1, (32, 16), copies=4)
    v2 = DotOperandLayout(1, WMMA2, 8)
    assert v2.thread_indices((16, 16), 0, 20) == [(8 + k, 4) for k in range(8)]
    every_element_held(v2, (16, 16), copies=2)


# -- shared ---------------------------------------------------------------------------------


@pytest.mark.parametrize("layout, shape", [
    (SwizzledSharedLayout(8, 1, 8, (1, 0)), (32, 64)),
    (SwizzledSharedLayout(4, 2, 4, (0, 1)), (64, 16)),
    (SwizzledSharedLayout(1, 1, 1, (1, 0)), (4, 8)),
    (SwizzledSharedLayout(2, 1, 4, (2, 1, 0)), (2, 8, 16)),
    (SwizzledSharedLayout(8, 1, 8, (1, 0), 64), (16, 256)),
    (SwizzledSharedLayout(8, 1, 8, (2, 1, 0), 64), (3, 8, 128)),
    (SwizzledSharedLayout(8, 2, 4, (0, 1), 32), (128, 4)),
    (NvmmaSharedLayout(128, 16), (16, 64)),
    (NvmmaSharedLayout(64, 8, transposed=True), (64, 8)),
    (NvmmaSharedLayout(0, 32), (8, 8)),
])
def test_shared_layouts_place_every_element_once(layout, shape):
    coords = [(i, j) for i in range(shape[0]) for j in range(shape[1])] if len(shape) == 2 else \
        [(i, j, k) for i in range(shape[0]) for j in range(shape[1]) for k in range(shape[2])]
    offsets = sorted(layout.offset(c, shape) for c in coords)
    assert offsets == list(range(len(coords)))


def test_column_blocks_hold_128_bytes_of_every_row_one_after_another():
    # A [64, 256] f16 tile (rows of 512 bytes) as four [64, 64] NVMMA 128-byte swizzle
    # atoms: what wgmma reads in place with its leading byte offset from block to block.
    layout, shape = SwizzledSharedLayout(8, 1, 8, (1, 0), 64), (64, 256)
    nvmma = NvmmaSharedLayout(128, 16)
    for row, column in [(0, 0), (5, 9), (63, 63), (3, 64), (7, 200), (40, 255)]:
        block, within = divmod(column, 64)
        assert layout.offset((row, column), shape) == block * 64 * 64 + nvmma.offset((row, within), (64, 64))
    # A ring of such slots: the slot is the slowest dimension, the blocks inside a slot.
    ring = SwizzledSharedLayout(8, 1, 8, (2, 1, 0), 64)
    assert ring.offset((2, 5, 130), (3, 64, 256)) == 2 * 64 * 256 + layout.offset((5, 130), shape)
    # No block, or one as wide as the row: whole rows, as before.
    assert SwizzledSharedLayout(8, 1, 8, (1, 0), 64).offset((3, 9), (8, 64)) == \
        SwizzledSharedLayout(8, 1, 8, (1, 0)).offset((3, 9), (8, 64))


@pytest.mark.parametrize("layout, shape", [
    (SwizzledSharedLayout(8, 1, 8, (1, 0), 64), (16, 256)),
    (SwizzledSharedLayout(8, 1, 8, (2, 1, 0), 64), (2, 8, 128)),
    (SwizzledSharedLayout(4, 2, 4, (0, 1), 16), (64, 4)),
    (SwizzledSharedLayout(2, 1, 4, (2, 1, 0)), (2, 8, 16)),
])
def test_run_time_offsets_match_the_layout(layout, shape):
    from polytile.gpu.lowering.dot_operands import shared_offset
    from polytile.gpu.lowering.indexing import PyOps
    from polytile.gpu.lowering.shared import PyAddOps, element_offset

    coords = [(i, j) for i in range(shape[0]) for j in range(shape[1])] if len(shape) == 2 else \
        [(i, j, k) for i in range(shape[0]) for j in range(shape[1]) for k in range(shape[2])]
    for c in coords:
        expected = layout.offset(c, shape)
        assert element_offset(PyAddOps(), layout, list(c), shape) == expected
        assert shared_offset(PyOps(), layout, list(c), shape) == expected


def test_a_column_block_holds_the_whole_swizzle_pattern():
    with pytest.raises(LayoutError, match="holds the whole swizzle pattern: 8 vectors of 8 elements"):
        SwizzledSharedLayout(8, 1, 8, (1, 0), 32)
    with pytest.raises(LayoutError, match="block must be 0"):
        SwizzledSharedLayout(8, 1, 8, (1, 0), 48)


def test_nvmma_128_byte_swizzle_spreads_a_column_over_chunks():
    layout = NvmmaSharedLayout(128, 16)
    assert layout.as_swizzled() == SwizzledSharedLayout(8, 1, 8, (1, 0))
    shape = (8, 64)
    chunks = {(layout.offset((row, 0), shape) % 64) // 8 for row in range(8)}
    assert chunks == set(range(8))  # the 8 rows' first vectors land in 8 different 16-byte chunks
    assert layout.offset((3, 9), shape) == 3 * 64 + ((1 ^ 3) * 8 + 1)


# -- default layouts ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape, num_warps, warp_size, order, vector, expected", [
    ((1024,), 4, 32, None, 1, ((1,), (32,), (4,), (0,))),
    ((1024,), 4, 32, None, 4, ((4,), (32,), (4,), (0,))),
    ((16, 16), 4, 32, None, 1, ((1, 1), (2, 16), (4, 1), (1, 0))),
    ((128, 64), 8, 32, None, 8, ((1, 8), (4, 8), (8, 1), (1, 0))),
    ((64, 128), 4, 64, (0, 1), 4, ((4, 1), (16, 4), (1, 4), (0, 1))),
    ((4, 4), 4, 32, None, 1, ((1, 1), (8, 4), (4, 1), (1, 0))),  # too small: rows replicate
])
def test_default_blocked_layout(shape, num_warps, warp_size, order, vector, expected):
    layout = default_blocked_layout(shape, num_warps, warp_size, order, vector)
    assert (layout.size_per_thread, layout.threads_per_warp, layout.warps_per_cta, layout.order) == expected
    assert layout.warp_size == warp_size and layout.num_warps == num_warps
    layout.check(shape)


def test_default_blocked_layout_rejects_bad_settings():
    with pytest.raises(LayoutError, match="warp_size must be 32 or 64, got 16"):
        default_blocked_layout((64,), 4, 16)
    with pytest.raises(LayoutError, match=r"num_warps \(3\) and vector \(1\) must be powers of two"):
        default_blocked_layout((64,), 3)


def test_register_offsets_are_one_base_plus_constants_where_the_swizzle_phase_comes_from_threads():
    from polytile.gpu.lowering.shared import constant_offset_deltas

    # Each thread holds one 8-element run in 8 rows, 8 rows apart: the rows' swizzle phase
    # (row % 8) comes from the thread alone, so a register's offset is the first one's
    # plus 8 rows of 64 elements (the tile sits as two 64-column blocks).
    rows = BlockedLayout(size_per_thread=(1, 8), threads_per_warp=(2, 16), warps_per_cta=(4, 1), order=(1, 0))
    swizzled = SwizzledSharedLayout(vector=8, per_phase=1, max_phase=8, order=(1, 0), block=64)
    assert constant_offset_deltas(rows.linear((64, 128)), swizzled, tuple(range(0, 64, 8)), (64, 128)) == [
        8 * 64 * i for i in range(8)]
    # Two rows a thread: the second row's phase differs, and XOR does not add: no constants.
    pairs = BlockedLayout(size_per_thread=(2, 8), threads_per_warp=(4, 8), warps_per_cta=(4, 1), order=(1, 0))
    plain = SwizzledSharedLayout(vector=8, per_phase=1, max_phase=8, order=(1, 0))
    assert constant_offset_deltas(pairs.linear((64, 64)), plain, tuple(range(0, 32, 8)), (64, 64)) is None


def test_register_offsets_in_padded_and_nvmma_placements():
    from polytile.gpu.layouts import NvmmaSharedLayout
    from polytile.gpu.lowering.shared import PaddedPlacement, constant_offset_deltas

    # Row-major with 4 padding elements a row: a thread's rows 8 apart are 8 padded rows apart.
    rows = BlockedLayout(size_per_thread=(1, 4), threads_per_warp=(4, 8), warps_per_cta=(2, 1), order=(1, 0))
    padded = PaddedPlacement((64, 32), 1, (0,), pad=4)
    assert constant_offset_deltas(rows.linear((64, 32)), padded, tuple(range(0, 8, 4)), (64, 32)) == [0, 8 * 36]
    # wgmma's 128-byte swizzle, f16: a row's phase is row % 8, from the thread alone here
    # (each thread's rows are 8 apart): constants; two consecutive rows a thread: none.
    nvmma = NvmmaSharedLayout(swizzle_bytes=128, element_bits=16)
    apart = BlockedLayout(size_per_thread=(1, 8), threads_per_warp=(8, 4), warps_per_cta=(4, 1), order=(1, 0))
    assert constant_offset_deltas(apart.linear((64, 32)), nvmma, (0, 8), (64, 32)) is not None
    pairs = BlockedLayout(size_per_thread=(2, 8), threads_per_warp=(4, 8), warps_per_cta=(4, 1), order=(1, 0))
    assert constant_offset_deltas(pairs.linear((64, 64)), nvmma, tuple(range(0, 16, 8)), (64, 64)) is None
