"""The coalescing heuristic: blocked layouts from pointer axis info (Triton's Coalesce)."""

from __future__ import annotations

from polytile.analysis.axis_info import AxisInfo, AxisInfoAnalysis
from polytile.gpu.coalesce import coalesced_layout
from polytile.ir import parse_module
from polytile.ir_testing import dedent


def pointer(contiguity, divisibility) -> AxisInfo:
    return AxisInfo(tuple(contiguity), tuple(divisibility), (1,) * len(contiguity))


def test_vector_add_f32_block_1024_four_warps():
    # 16-byte aligned, 1024 contiguous: min(16 B / 4 B, 1024, 128 bits / 32) = 4 per
    # thread, below 1024 / 128 threads = 8.
    layout = coalesced_layout((1024,), pointer([1024], [16]), 32, num_warps=4)
    assert layout.size_per_thread == (4,)
    assert layout.threads_per_warp == (32,) and layout.warps_per_cta == (4,) and layout.order == (0,)


def test_vector_widths_by_element_type_alignment_and_tile_size():
    assert coalesced_layout((1024,), pointer([1024], [16]), 16, 4).size_per_thread == (8,)
    assert coalesced_layout((1024,), pointer([1024], [16]), 8, 4).size_per_thread == (8,)  # 1024 / 128 threads
    assert coalesced_layout((256,), pointer([256], [16]), 32, 4).size_per_thread == (2,)
    assert coalesced_layout((1024,), pointer([1024], [4]), 32, 4).size_per_thread == (1,)  # misaligned
    assert coalesced_layout((1024,), pointer([1], [16]), 32, 4).size_per_thread == (1,)  # a gather
    assert coalesced_layout((1024,), pointer([1024], [16]), 32, 4, warp_size=64).threads_per_warp == (64,)


def test_row_major_and_column_major_tiles():
    rows = coalesced_layout((64, 32), pointer([1, 32], [2, 16]), 16, num_warps=4)
    assert (rows.size_per_thread, rows.threads_per_warp, rows.warps_per_cta, rows.order) == (
        (1, 8), (8, 4), (4, 1), (1, 0))
    cols = coalesced_layout((64, 32), pointer([64, 1], [16, 2]), 16, num_warps=4)
    assert (cols.size_per_thread, cols.threads_per_warp, cols.warps_per_cta, cols.order) == (
        (8, 1), (8, 4), (1, 4), (0, 1))


def test_accesses_of_the_same_order_share_the_widest_chunk_but_stores_keep_their_own():
    f32 = pointer([1024], [16])
    f16 = pointer([1024], [16])
    load = coalesced_layout((2048,), f32, 32, 4, same_order=[(f16, 16)])
    store = coalesced_layout((2048,), f32, 32, 4, is_store=True, same_order=[(f16, 16)])
    assert load.size_per_thread == (8,)
    assert store.size_per_thread == (4,)
    other_order = coalesced_layout((64, 32), pointer([1, 32], [2, 16]), 32, 4,
                                   same_order=[(pointer([64, 1], [16, 2]), 8)])
    assert other_order.size_per_thread == (1, 4)


def test_from_the_analysis_of_a_kernel():
    module = parse_module(dedent("""
        func.func @k(%x: ptr<f16>) attributes {kernel = true, pt.divisibility = [16]} {
          %r = tile.arange {end = 512, start = 0} : tile<512xi32>
          %xs = tile.splat %x : tile<512xptr<f16>>
          %p = tile.addptr %xs, %r : tile<512xptr<f16>>
          %v = tile.load %p : tile<512xf16>
          func.return
        }
    """))
    load = next(op for op in module.walk() if op.name == "tile.load")
    info = AxisInfoAnalysis(module)[load.operands[0]]
    layout = coalesced_layout((512,), info, 16, num_warps=4)
    assert str(layout) == ("#gpu.blocked<size_per_thread = [4], threads_per_warp = [32], warps_per_cta = [4], "
                           "order = [0]>")
