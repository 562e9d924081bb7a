"""The distribute stage: assign-layouts and remove-redundant-converts, IR text in and out.

Layouts print in full; the expected texts name them {B} (blocked), {R} / {C} (its row and
column slices) to stay readable.
"""

from __future__ import annotations

import pytest

from polytile.backend import BackendOptions
from polytile.dialects.gpu import ConvertLayoutOp
from polytile.errors import VerificationError
from polytile.gpu.distribute import AssignLayouts, RemoveRedundantConverts
from polytile.ir import parse_module, print_ir, verify
from polytile.passes.pass_base import PassContext
from polytile.target import Target
from polytile.ir_testing import apply_passes, dedent, roundtrip


def context(num_warps: int = 4) -> PassContext:
    return PassContext(target=Target("nvidia", "sm_90a"), options=BackendOptions(num_warps=num_warps))


def blocked(spt, tpw, wpc, order) -> str:
    as_list = lambda v: "[" + ", ".join(map(str, v)) + "]"  # noqa: E731
    return (f"#gpu.blocked<size_per_thread = {as_list(spt)}, threads_per_warp = {as_list(tpw)}, "
            f"warps_per_cta = {as_list(wpc)}, order = {as_list(order)}>")


COPY = """
func.func @copy(%x: ptr<f32>, %out: ptr<f32>) attributes {kernel = true, pt.divisibility = [DIV, 16]} {
  %0 = tile.arange {end = 256, start = 0} : tile<256xi32>
  %1 = tile.splat %x : tile<256xptr<f32>>
  %2 = tile.addptr %1, %0 : tile<256xptr<f32>>
  %3 = tile.load %2 : tile<256xf32>
  %4 = tile.splat %out : tile<256xptr<f32>>
  %5 = tile.addptr %4, %0 : tile<256xptr<f32>>
  tile.store %5, %3
  func.return
}
"""


def test_aligned_copy_gets_four_elements_per_thread():
    B = blocked([4], [32], [2], [0])
    expected = f"""
    func.func @copy(%x: ptr<f32>, %out: ptr<f32>) attributes {{gpu.num_warps = 2, gpu.warp_size = 32, kernel = true, pt.divisibility = [16, 16]}} {{
      %0 = tile.arange {{end = 256, start = 0}} : tile<256xi32, {B}>
      %1 = tile.splat %x : tile<256xptr<f32>, {B}>
      %2 = tile.addptr %1, %0 : tile<256xptr<f32>, {B}>
      %3 = tile.load %2 : tile<256xf32, {B}>
      %4 = tile.splat %out : tile<256xptr<f32>, {B}>
      %5 = tile.addptr %4, %0 : tile<256xptr<f32>, {B}>
      tile.store %5, %3
      func.return
    }}
    """
    assert apply_passes(COPY.replace("DIV", "16"), AssignLayouts(), context=context(2)) == dedent(expected)


def test_the_widest_access_of_a_group_decides():
    # %x is not known to be aligned, %out is: one layout for both, 16 bytes per thread;
    # the lowering then reads %x one element at a time.
    out = apply_passes(COPY.replace("DIV", "1"), AssignLayouts(), context=context(2))
    assert f"tile.load %2 : tile<256xf32, {blocked([4], [32], [2], [0])}>" in out


def test_small_tiles_replicate_rather_than_vectorize():
    # 128 elements, 8 warps: fewer elements than threads, so one per thread at most.
    text = COPY.replace("DIV", "16").replace("256", "128")
    out = apply_passes(text, AssignLayouts(), context=context(8))
    assert f"tile<128xf32, {blocked([1], [32], [8], [0])}>" in out


TWO_D = """
func.func @k(%x: ptr<f32>) attributes {kernel = true, pt.divisibility = [16]} {
  %0 = tile.arange {end = 64, start = 0} : tile<64xi32>
  %1 = tile.expand_dims %0 {axis = 1} : tile<64x1xi32>
  %2 = tile.expand_dims %0 {axis = 0} : tile<1x64xi32>
  %3 = tile.broadcast %1 : tile<64x64xi32>
  %4 = tile.broadcast %2 : tile<64x64xi32>
  %c = arith.constant {value = 64} : tile<64x64xi32>
  %5 = arith.muli %3, %c : tile<64x64xi32>
  %6 = arith.addi %5, %4 : tile<64x64xi32>
  %7 = tile.splat %x : tile<64x64xptr<f32>>
  %8 = tile.addptr %7, %6 : tile<64x64xptr<f32>>
  %9 = tile.load %8 : tile<64x64xf32>
  tile.store %8, %9
  func.return
}
"""

B2 = blocked([1, 4], [2, 16], [4, 1], [1, 0])
ROWS = f"#gpu.slice<dim = 1, parent = {B2}>"
COLS = f"#gpu.slice<dim = 0, parent = {B2}>"


def test_expand_dims_sources_take_the_slice_and_conflicts_get_a_conversion():
    out = apply_passes(TWO_D, AssignLayouts(), context=context())
    # One arange feeds both rows and columns: it takes the first slice, the second use
    # converts.
    assert f"%0 = tile.arange {{end = 64, start = 0}} : tile<64xi32, {ROWS}>" in out
    assert f"%2 = gpu.convert_layout %0 : tile<64xi32, {COLS}>" in out
    assert f"%3 = tile.expand_dims %2 {{axis = 0}} : tile<1x64xi32, {B2}>" in out
    assert f"%10 = tile.load %9 : tile<64x64xf32, {B2}>" in out


def test_converted_aranges_are_recomputed_in_the_wanted_layout():
    out = apply_passes(TWO_D, AssignLayouts(), RemoveRedundantConverts(), context=context())
    assert "gpu.convert_layout" not in out
    assert f"%2 = tile.arange {{end = 64, start = 0}} : tile<64xi32, {COLS}>" in out


def test_loop_carried_tiles_share_the_layout_of_their_uses():
    text = """
    func.func @k(%x: ptr<f32>, %n: i32) attributes {kernel = true, pt.divisibility = [16, 1]} {
      %0 = tile.arange {end = 512, start = 0} : tile<512xi32>
      %1 = tile.splat %x : tile<512xptr<f32>>
      %2 = tile.addptr %1, %0 : tile<512xptr<f32>>
      %z = arith.constant {value = 0.0} : tile<512xf32>
      %lo = arith.constant {value = 0} : i32
      %one = arith.constant {value = 1} : i32
      %3 = scf.for %lo, %n, %one, %z : tile<512xf32> {
      ^bb0(%i: i32, %acc: tile<512xf32>):
        %4 = tile.load %2 : tile<512xf32>
        %5 = arith.addf %acc, %4 : tile<512xf32>
        scf.yield %5
      }
      tile.store %2, %3
      func.return
    }
    """
    out = apply_passes(text, AssignLayouts(), context=context())
    B = blocked([4], [32], [4], [0])
    assert f"%z = arith.constant {{value = 0.0}} : tile<512xf32, {B}>" in out
    assert f"%3 = scf.for %lo, %n, %one, %z : tile<512xf32, {B}> {{" in out
    assert f"^bb0(%i: i32, %acc: tile<512xf32, {B}>):" in out


def test_the_kernel_records_its_block_shape():
    out = apply_passes(COPY.replace("DIV", "16"), AssignLayouts(), context=context(8))
    assert "gpu.num_warps = 8, gpu.warp_size = 32" in out


CONVERT = """
func.func @k(%a: tile<64xi32, #gpu.blocked<size_per_thread = [1], threads_per_warp = [32], warps_per_cta = [2], order = [0]>>) {
  %0 = gpu.convert_layout %a : tile<64xi32, #gpu.blocked<size_per_thread = [2], threads_per_warp = [32], warps_per_cta = [1], order = [0]>>
  %1 = gpu.convert_layout %0 : tile<64xi32, #gpu.blocked<size_per_thread = [1], threads_per_warp = [32], warps_per_cta = [2], order = [0]>>
  func.return
}
"""


def test_convert_layout_round_trips():
    assert roundtrip(CONVERT) == dedent(CONVERT)


def test_a_chain_of_conversions_back_to_the_source_layout_disappears():
    out = apply_passes(CONVERT, RemoveRedundantConverts())
    assert "gpu.convert_layout" not in out


def test_convert_layout_keeps_shape_and_element_type():
    bad = CONVERT.replace("%0 = gpu.convert_layout %a : tile<64xi32", "%0 = gpu.convert_layout %a : tile<32xi32")
    with pytest.raises(VerificationError, match="converts the layout only"):
        verify(parse_module(dedent(bad)))


def test_convert_layout_is_in_the_gpu_dialect():
    assert ConvertLayoutOp.name == "gpu.convert_layout"
    module = parse_module(dedent(CONVERT))
    assert print_ir(module).count("gpu.convert_layout") == 2


# A mask (``offs[None, :] + start < n``) computed in one layout and wanted in another.
MASK_CHAIN = """
func.func @k(%start: i32, %n: i32) -> tile<64x64xi1, {B}> attributes {kernel = true} {
  %0 = tile.arange {end = 64, start = 0} : tile<64xi32, {C}>
  %1 = tile.splat %start : tile<64xi32, {C}>
  %2 = arith.addi %1, %0 : tile<64xi32, {C}>
  %3 = tile.expand_dims %2 {axis = 0} : tile<1x64xi32, {B}>
  %4 = tile.broadcast %3 : tile<64x64xi32, {B}>
  %5 = tile.splat %n : tile<64x64xi32, {B}>
  %6 = arith.cmpi %4, %5 {predicate = "slt"} : tile<64x64xi1, {B}>
  %7 = gpu.convert_layout %6 : tile<64x64xi1, {B2}>
  func.return %7
}
"""


def _names(text: str) -> str:
    B = blocked([1, 4], [4, 8], [4, 1], [1, 0])
    return text.replace("{B2}", B2).replace("{B}", B).replace("{C}", f"#gpu.slice<dim = 0, parent = {B}>") \
        .replace("{C2}", COLS)


def test_cheap_index_and_mask_arithmetic_is_recomputed_instead_of_converted():
    # The whole chain down to the arange and the splats, in the wanted layout (the
    # column slice of it for the 1-D part): no data moves between threads.
    out = apply_passes(_names(MASK_CHAIN).replace("-> tile<64x64xi1, " + blocked([1, 4], [4, 8], [4, 1], [1, 0]),
                                                  "-> tile<64x64xi1, " + B2), RemoveRedundantConverts())
    assert out == dedent(_names("""
    func.func @k(%start: i32, %n: i32) -> tile<64x64xi1, {B2}> attributes {kernel = true} {
      %0 = tile.splat %start : tile<64xi32, {C2}>
      %1 = tile.arange {end = 64, start = 0} : tile<64xi32, {C2}>
      %2 = arith.addi %0, %1 : tile<64xi32, {C2}>
      %3 = tile.expand_dims %2 {axis = 0} : tile<1x64xi32, {B2}>
      %4 = tile.broadcast %3 : tile<64x64xi32, {B2}>
      %5 = tile.splat %n : tile<64x64xi32, {B2}>
      %6 = arith.cmpi %4, %5 {predicate = "slt"} : tile<64x64xi1, {B2}>
      func.return %6
    }
    """))


def test_an_expensive_producer_is_converted_not_recomputed():
    text = _names(MASK_CHAIN).replace("%2 = arith.addi %1, %0", "%2 = arith.divsi %1, %0") \
        .replace("-> tile<64x64xi1, " + blocked([1, 4], [4, 8], [4, 1], [1, 0]), "-> tile<64x64xi1, " + B2)
    out = apply_passes(text, RemoveRedundantConverts())
    assert "gpu.convert_layout %6" in out and "arith.divsi" in out and out.count("arith.cmpi") == 1


# A row maximum in the slice of {B2}, expanded in a layout of its own ({B}) and converted
# back for the broadcast (what assign-layouts makes of ``x - m[:, None]`` when the
# expansion lands in a group of its own): a round trip through shared memory.
ROUND_TRIP = """
func.func @k(%m: tile<64xf32, {R2}>, %x: tile<64x64xf32, {B2}>) -> tile<64x64xf32, {B2}> {
  %0 = gpu.convert_layout %m : tile<64xf32, {R}>
  %1 = tile.expand_dims %0 {axis = 1} : tile<64x1xf32, {B}>
  %2 = gpu.convert_layout %1 : tile<64x1xf32, {B2}>
  %3 = tile.broadcast %2 : tile<64x64xf32, {B2}>
  %4 = arith.subf %x, %3 : tile<64x64xf32, {B2}>
  func.return %4
}
"""


def _round_trip_names(text: str) -> str:
    B = blocked([1, 4], [4, 8], [4, 1], [1, 0])
    return text.replace("{R2}", ROWS).replace("{B2}", B2).replace("{B}", B) \
        .replace("{R}", f"#gpu.slice<dim = 1, parent = {B}>")


def test_a_shape_op_between_a_conversion_and_its_inverse_reads_the_original():
    out = apply_passes(_round_trip_names(ROUND_TRIP), RemoveRedundantConverts())
    assert out == dedent(_round_trip_names("""
    func.func @k(%m: tile<64xf32, {R2}>, %x: tile<64x64xf32, {B2}>) -> tile<64x64xf32, {B2}> {
      %0 = tile.expand_dims %m {axis = 1} : tile<64x1xf32, {B2}>
      %1 = tile.broadcast %0 : tile<64x64xf32, {B2}>
      %2 = arith.subf %x, %1 : tile<64x64xf32, {B2}>
      func.return %2
    }
    """))


def test_a_conversion_from_a_third_layout_stays_a_conversion():
    # The source is in neither layout: undoing the first conversion would still move data.
    B3 = blocked([1, 1], [32, 1], [4, 1], [1, 0])
    text = _round_trip_names(ROUND_TRIP).replace(f"%m: tile<64xf32, {ROWS}>",
                                                 f"%m: tile<64xf32, #gpu.slice<dim = 1, parent = {B3}>>")
    out = apply_passes(text, RemoveRedundantConverts())
    assert out.count("gpu.convert_layout") == 2


TRANSPOSE = """
func.func @transpose(%x: ptr<f32>, %out: ptr<f32>) attributes {kernel = true, pt.divisibility = [16, 16]} {
  %0 = tile.arange {end = 64, start = 0} : tile<64xi32>
  %1 = tile.expand_dims %0 {axis = 1} : tile<64x1xi32>
  %2 = tile.expand_dims %0 {axis = 0} : tile<1x64xi32>
  %3 = arith.constant {value = 64} : tile<1x64xi32>
  %4 = arith.muli %2, %3 : tile<1x64xi32>
  %5 = tile.broadcast %1 : tile<64x64xi32>
  %6 = tile.broadcast %4 : tile<64x64xi32>
  %7 = arith.addi %5, %6 : tile<64x64xi32>
  %8 = tile.splat %x : tile<64x64xptr<f32>>
  %9 = tile.addptr %8, %7 : tile<64x64xptr<f32>>
  %10 = tile.load %9 : tile<64x64xf32>
  %11 = arith.constant {value = 64} : tile<64x1xi32>
  %12 = arith.muli %1, %11 : tile<64x1xi32>
  %13 = tile.broadcast %12 : tile<64x64xi32>
  %14 = tile.broadcast %2 : tile<64x64xi32>
  %15 = arith.addi %13, %14 : tile<64x64xi32>
  %16 = tile.splat %out : tile<64x64xptr<f32>>
  %17 = tile.addptr %16, %15 : tile<64x64xptr<f32>>
  tile.store %17, %10
  func.return
}
"""


def test_a_load_and_a_store_contiguous_along_different_dimensions_each_stay_coalesced():
    # x is read down its columns (i + 64 j) and out written along its rows (64 i + j),
    # through one shared arange: each access keeps its own coalesced layout (four f32 a
    # thread along its contiguous dimension), the data changes layout once in between,
    # and the store's index arithmetic is recomputed in its layout.
    L = blocked([4, 1], [16, 2], [1, 4], [0, 1])  # the load's: down the columns
    S = blocked([1, 4], [2, 16], [4, 1], [1, 0])  # the store's: along the rows
    expected = f"""
    func.func @transpose(%x: ptr<f32>, %out: ptr<f32>) attributes {{gpu.num_warps = 4, gpu.warp_size = 32, kernel = true, pt.divisibility = [16, 16]}} {{
      %0 = tile.arange {{end = 64, start = 0}} : tile<64xi32, #gpu.slice<dim = 1, parent = {L}>>
      %1 = tile.expand_dims %0 {{axis = 1}} : tile<64x1xi32, {L}>
      %2 = tile.arange {{end = 64, start = 0}} : tile<64xi32, #gpu.slice<dim = 0, parent = {L}>>
      %3 = tile.expand_dims %2 {{axis = 0}} : tile<1x64xi32, {L}>
      %4 = arith.constant {{value = 64}} : tile<1x64xi32, {L}>
      %5 = arith.muli %3, %4 : tile<1x64xi32, {L}>
      %6 = tile.broadcast %1 : tile<64x64xi32, {L}>
      %7 = tile.broadcast %5 : tile<64x64xi32, {L}>
      %8 = arith.addi %6, %7 : tile<64x64xi32, {L}>
      %9 = tile.splat %x : tile<64x64xptr<f32>, {L}>
      %10 = tile.addptr %9, %8 : tile<64x64xptr<f32>, {L}>
      %11 = tile.load %10 : tile<64x64xf32, {L}>
      %12 = tile.splat %out : tile<64x64xptr<f32>, {S}>
      %13 = tile.arange {{end = 64, start = 0}} : tile<64xi32, #gpu.slice<dim = 1, parent = {S}>>
      %14 = tile.expand_dims %13 {{axis = 1}} : tile<64x1xi32, {S}>
      %15 = arith.constant {{value = 64}} : tile<64x1xi32, {S}>
      %16 = arith.muli %14, %15 : tile<64x1xi32, {S}>
      %17 = tile.broadcast %16 : tile<64x64xi32, {S}>
      %18 = tile.arange {{end = 64, start = 0}} : tile<64xi32, #gpu.slice<dim = 0, parent = {S}>>
      %19 = tile.expand_dims %18 {{axis = 0}} : tile<1x64xi32, {S}>
      %20 = tile.broadcast %19 : tile<64x64xi32, {S}>
      %21 = arith.addi %17, %20 : tile<64x64xi32, {S}>
      %22 = tile.addptr %12, %21 : tile<64x64xptr<f32>, {S}>
      %23 = gpu.convert_layout %11 : tile<64x64xf32, {S}>
      tile.store %22, %23
      func.return
    }}
    """
    assert apply_passes(TRANSPOSE, AssignLayouts(), RemoveRedundantConverts(), context=context(4)) == dedent(expected)
