"""Axis info: contiguity, divisibility and constancy of every value, IR text in.

Most tests parse a function, run the analysis and compare the facts of named values;
the first ones compare the whole annotated IR, as MLIR's -test-print-alignment tests do.
"""

from __future__ import annotations

import numpy as np
import pytest

import polytile.language as pl
from polytile.analysis.axis_info import (
    MAX_DIVISIBILITY,
    AxisInfo,
    AxisInfoAnalysis,
    divisibility_at,
    pow2_divisor,
)
from polytile.errors import VerificationError
from polytile.gpu.coalesce import contiguity_order, mask_vector_width, pointer_vector_width
from polytile.ir import parse_module, print_ir
from polytile.passes.pass_base import AnalysisManager, PassContext
from polytile.passes.print_axis_info import TestPrintAxisInfo
from polytile.runtime import jit
from polytile.ir_testing import apply_passes, dedent

ZERO = MAX_DIVISIBILITY  # the divisibility of 0: a multiple of everything


def A(contiguity, divisibility, constancy, constant=None) -> AxisInfo:
    """An AxisInfo from lists (or ints for scalars)."""
    as_tuple = lambda v: tuple(v) if isinstance(v, (list, tuple)) else (v,)  # noqa: E731
    return AxisInfo(as_tuple(contiguity), as_tuple(divisibility), as_tuple(constancy), constant)


def facts(text: str) -> dict[str, AxisInfo]:
    """Axis info of every named value (results and block arguments) of the IR text."""
    module = parse_module(dedent(text))
    analysis = AxisInfoAnalysis(module)
    found = {}
    for op in module.walk():
        values = list(op.results) + [a for r in op.regions for b in r.blocks for a in b.arguments]
        for value in values:
            if value.name_hint:
                found[value.name_hint] = analysis[value]
    return found


def kernel(body: str, args: str = "%n: i32", hints: str = "") -> str:
    """A kernel function around ``body`` (indented by 2)."""
    attributes = "kernel = true" + (", " + hints if hints else "")
    lines = "\n".join("  " + line for line in dedent(body).splitlines())
    return f"func.func @k({args}) attributes {{{attributes}}} {{\n{lines}\n  func.return\n}}\n"


# -- the whole annotated IR ------------------------------------------------------------


VECTOR_ADD = """
    func.func @add(%x: ptr<f32>, %n: i32) attributes {kernel = true, pt.divisibility = [16, 16], pt.equal_to_1 = [false, false]} {
      %pid = tile.program_id {axis = 0} : i32
      %c = arith.constant {value = 1024} : i32
      %start = arith.muli %pid, %c : i32
      %r = tile.arange {end = 1024, start = 0} : tile<1024xi32>
      %s = tile.splat %start : tile<1024xi32>
      %offs = arith.addi %s, %r : tile<1024xi32>
      %ns = tile.splat %n : tile<1024xi32>
      %mask = arith.cmpi %offs, %ns {predicate = "slt"} : tile<1024xi1>
      %xs = tile.splat %x : tile<1024xptr<f32>>
      %p = tile.addptr %xs, %offs : tile<1024xptr<f32>>
      %v = tile.load %p mask(%mask) : tile<1024xf32>
      tile.store %p, %v mask(%mask)
      func.return
    }
"""


def test_vector_add_annotated():
    S = "#axis_info<contiguity = [1], divisibility = [16], constancy = [1]>"
    assert apply_passes(VECTOR_ADD, TestPrintAxisInfo()) == dedent(f"""
        func.func @add(%x: ptr<f32>, %n: i32) attributes {{kernel = true, pt.arg_axis_info = [{S}, {S}], pt.divisibility = [16, 16], pt.equal_to_1 = [false, false]}} {{
          %pid = tile.program_id {{axis = 0, pt.axis_info = #axis_info<contiguity = [1], divisibility = [1], constancy = [1]>}} : i32
          %c = arith.constant {{pt.axis_info = #axis_info<contiguity = [1], divisibility = [1024], constancy = [1], constant = 1024>, value = 1024}} : i32
          %start = arith.muli %pid, %c {{pt.axis_info = #axis_info<contiguity = [1], divisibility = [1024], constancy = [1]>}} : i32
          %r = tile.arange {{end = 1024, pt.axis_info = #axis_info<contiguity = [1024], divisibility = [1073741824], constancy = [1]>, start = 0}} : tile<1024xi32>
          %s = tile.splat %start {{pt.axis_info = #axis_info<contiguity = [1], divisibility = [1024], constancy = [1024]>}} : tile<1024xi32>
          %offs = arith.addi %s, %r {{pt.axis_info = #axis_info<contiguity = [1024], divisibility = [1024], constancy = [1]>}} : tile<1024xi32>
          %ns = tile.splat %n {{pt.axis_info = #axis_info<contiguity = [1], divisibility = [16], constancy = [1024]>}} : tile<1024xi32>
          %mask = arith.cmpi %offs, %ns {{predicate = "slt", pt.axis_info = #axis_info<contiguity = [1], divisibility = [1], constancy = [16]>}} : tile<1024xi1>
          %xs = tile.splat %x {{pt.axis_info = #axis_info<contiguity = [1], divisibility = [16], constancy = [1024]>}} : tile<1024xptr<f32>>
          %p = tile.addptr %xs, %offs {{pt.axis_info = #axis_info<contiguity = [1024], divisibility = [16], constancy = [1]>}} : tile<1024xptr<f32>>
          %v = tile.load %p mask(%mask) {{pt.axis_info = #axis_info<contiguity = [1], divisibility = [1], constancy = [1]>}} : tile<1024xf32>
          tile.store %p, %v mask(%mask)
          func.return
        }}
    """)


def test_annotated_ir_parses_back():
    annotated = apply_passes(VECTOR_ADD, TestPrintAxisInfo())
    assert print_ir(parse_module(annotated)) == annotated


def test_the_analysis_does_not_change_the_ir():
    module = parse_module(dedent(VECTOR_ADD))
    before = print_ir(module)
    manager = AnalysisManager()
    first = manager.get(AxisInfoAnalysis, module)
    assert manager.get(AxisInfoAnalysis, module) is first  # cached
    assert print_ir(module) == before


def test_loop_annotations_include_the_induction_variable():
    out = apply_passes("""
        func.func @k(%n: i32) {
          %c0 = arith.constant {value = 0} : i32
          %c8 = arith.constant {value = 8} : i32
          scf.for %c0, %n, %c8 {
          ^bb0(%i: i32):
            scf.yield
          }
          func.return
        }
    """, TestPrintAxisInfo())
    assert ("scf.for %c0, %n, %c8 {pt.arg_axis_info = [#axis_info<contiguity = [1], divisibility = [8], "
            "constancy = [1]>]}") in out


# -- sources ----------------------------------------------------------------------------


def test_vector_add_facts_without_hints():
    found = facts(VECTOR_ADD.replace(", pt.divisibility = [16, 16], pt.equal_to_1 = [false, false]", ""))
    assert found["x"] == A(1, 1, 1)
    assert found["offs"] == A(1024, 1024, 1)
    assert found["mask"] == A(1, 1, 1)  # n could be anything: lanes may differ one by one
    assert found["p"] == A(1024, 1, 1)  # contiguous, but the base may be misaligned


def test_arange_and_constants():
    found = facts(kernel("""
        %r = tile.arange {end = 96, start = 32} : tile<64xi32>
        %one = tile.arange {end = 5, start = 4} : tile<1xi32>
        %c = arith.constant {value = 12} : tile<4x8xi32>
        %z = arith.constant {value = 0} : i32
        %t = arith.constant {value = true} : i1
        %f = arith.constant {value = 2.0} : tile<8xf32>
    """))
    assert found["r"] == A(64, 32, 1)
    assert found["one"] == A(1, 4, 1, constant=4)
    assert found["c"] == A([1, 1], [4, 4], [4, 8], constant=12)
    assert found["z"] == A(1, ZERO, 1, constant=0)
    assert found["t"] == A(1, 1, 1, constant=1)
    assert found["f"] == A(1, 1, 8)  # floats: equal elements only


def test_specialization_hints_on_arguments():
    found = facts(kernel("", args="%p: ptr<f16>, %a: i32, %b: i64, %one: i32",
                         hints="pt.divisibility = [16, 16, 1, 1], pt.equal_to_1 = [false, false, false, true]"))
    assert found["p"] == A(1, 16, 1)  # bytes
    assert found["a"] == A(1, 16, 1)
    assert found["b"] == A(1, 1, 1)
    assert found["one"] == A(1, 1, 1, constant=1)


def test_hints_must_list_every_argument():
    with pytest.raises(VerificationError, match=r"'pt.divisibility' of function '@k' must list one entry per "
                                                r"argument \(2\), got \[16\]"):
        facts(kernel("", args="%a: i32, %b: i32", hints="pt.divisibility = [16]"))


def test_program_id_and_num_programs_are_unknown():
    found = facts(kernel("""
        %pid = tile.program_id {axis = 1} : i32
        %np = tile.num_programs {axis = 0} : i32
    """))
    assert found["pid"] == found["np"] == A(1, 1, 1)


def test_language_hints_add_facts():
    found = facts(kernel("""
        %pid = tile.program_id {axis = 0} : i32
        %m = arith.muli %pid, %n {pt.multiple_of = 8} : i32
        %r = tile.arange {end = 64, start = 0} : tile<64xi32>
        %s = tile.splat %m : tile<64xi32>
        %o = arith.addi %s, %r {pt.max_contiguous = 64, pt.multiple_of = 64} : tile<64xi32>
        %l = tile.load %q {pt.max_constancy = [4, 2]} : tile<8x4xi32>
    """, args="%n: i32, %q: tile<8x4xptr<i32>>"))
    assert found["m"] == A(1, 8, 1)
    assert found["o"] == A(64, 64, 1)
    assert found["l"] == A([1, 1], [1, 1], [4, 2])


def test_a_hint_of_the_wrong_rank_is_an_error():
    with pytest.raises(VerificationError, match=r"hint 'pt.multiple_of' = \[8, 8\] needs one positive integer per "
                                                r"dimension of tile<64xi32> \(1\)"):
        facts(kernel("""
            %r = tile.arange {end = 64, start = 0, pt.multiple_of = [8, 8]} : tile<64xi32>
        """))


def test_hints_from_a_python_kernel():
    @jit
    def hinted(x_ptr, n, BLOCK: pl.constexpr):
        offs = pl.max_contiguous(pl.multiple_of(pl.program_id(0) * BLOCK + pl.arange(0, BLOCK), BLOCK), BLOCK)
        pl.store(x_ptr + offs, pl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    module = hinted.lower(np.zeros(64, np.float32), 64, BLOCK=64)
    analysis = AxisInfoAnalysis(module)
    loads = [op for op in module.walk() if op.name == "tile.load"]
    pointer = analysis[loads[0].operands[0]]
    assert pointer == A(64, 16, 1)
    assert pointer_vector_width(pointer, 32, (64,)) == 4
    mask = analysis[loads[0].operands[1]]
    assert mask.constancy == (16,)  # n = 64 specializes as divisible by 16


# -- arithmetic -------------------------------------------------------------------------


ARANGE = """
    %r = tile.arange {end = 128, start = 0} : tile<128xi32>
"""


def splats(**constants: int) -> str:
    return "".join(f"%{name}_c = arith.constant {{value = {value}}} : tile<128xi32>\n"
                   for name, value in constants.items())


def test_multiplying_loses_contiguity_keeps_divisibility():
    found = facts(kernel(ARANGE + splats(two=2, one=1, sixteen=16) + """
        %a = arith.muli %r, %two_c : tile<128xi32>
        %b = arith.muli %r, %one_c : tile<128xi32>
        %c = arith.muli %sixteen_c, %r : tile<128xi32>
    """))
    assert found["a"] == A(1, 2, 1)
    assert found["b"] == A(128, ZERO, 1)  # times one: the same value
    assert found["c"] == A(1, 16, 1)


def test_remainder_and_division():
    found = facts(kernel(ARANGE + splats(three=3, k64=64, four=4, one=1) + """
        %m3 = arith.remsi %r, %three_c : tile<128xi32>
        %m64 = arith.remsi %r, %k64_c : tile<128xi32>
        %m1 = arith.remui %r, %one_c : tile<128xi32>
        %d4 = arith.divsi %r, %four_c : tile<128xi32>
        %d1 = arith.divui %r, %one_c : tile<128xi32>
        %d3 = arith.divsi %r, %three_c : tile<128xi32>
    """))
    assert found["m3"] == A(1, 1, 1)  # 0 1 2 0 1 2 ...: no longer contiguous
    assert found["m64"] == A(64, 64, 1)  # two runs 0..63
    assert found["m1"] == A(1, ZERO, 128, constant=0)
    assert found["d4"] == A(1, 1, 4)  # 0 0 0 0 1 1 1 1 ...
    assert found["d1"] == A(128, ZERO, 1)
    assert found["d3"] == A(1, 1, 1)


def test_division_of_an_offset_range():
    found = facts(kernel("""
        %pid = tile.program_id {axis = 0} : i32
        %c = arith.constant {value = 256} : i32
        %base = arith.muli %pid, %c : i32
        %b = tile.splat %base : tile<128xi32>
        %r = tile.arange {end = 128, start = 0} : tile<128xi32>
        %o = arith.addi %b, %r : tile<128xi32>
        %k = arith.constant {value = 32} : tile<128xi32>
        %q = arith.divsi %o, %k : tile<128xi32>
        %m = arith.remsi %o, %k : tile<128xi32>
    """))
    assert found["o"] == A(128, 256, 1)
    assert found["q"] == A(1, 1, 32)
    assert found["m"] == A(32, 32, 1)


def test_subtraction_keeps_left_contiguity_only():
    found = facts(kernel(ARANGE + splats(k=8) + """
        %a = arith.subi %r, %k_c : tile<128xi32>
        %b = arith.subi %k_c, %r : tile<128xi32>
    """))
    assert found["a"] == A(128, 8, 1)
    assert found["b"] == A(1, 1, 1)


def test_adding_two_ranges_is_not_contiguous_but_a_range_and_a_splat_is():
    found = facts(kernel(ARANGE + splats(k=4) + """
        %a = arith.addi %r, %r : tile<128xi32>
        %b = arith.addi %r, %k_c : tile<128xi32>
    """))
    assert found["a"] == A(1, 1, 1)
    assert found["b"] == A(128, 4, 1)


def test_shifts():
    found = facts(kernel(ARANGE + splats(two=2, zero=0) + """
        %l = arith.shli %r, %two_c : tile<128xi32>
        %z = arith.shli %r, %zero_c : tile<128xi32>
        %s16 = arith.constant {value = 48} : i32
        %x = arith.muli %n, %s16 : i32
        %c2 = arith.constant {value = 2} : i32
        %h = arith.shrsi %x, %c2 : i32
        %u = arith.shrui %x, %n : i32
        %w = arith.shli %x, %n : i32
    """))
    assert found["l"] == A(1, 4, 1)
    assert found["z"] == A(128, ZERO, 1)
    assert found["x"] == A(1, 16, 1)
    assert found["h"] == A(1, 4, 1)  # 48k >> 2 = 12k: the power-of-two part
    assert found["u"] == A(1, 1, 1)  # an unknown right shift can take every bit
    assert found["w"] == A(1, 16, 1)


def test_bitwise_and_or():
    found = facts(kernel("""
        %c16 = arith.constant {value = 16} : i32
        %c255 = arith.constant {value = 255} : i32
        %c4 = arith.constant {value = 4} : i32
        %x = arith.muli %n, %c16 : i32
        %y = arith.muli %n, %c4 : i32
        %a = arith.andi %x, %c255 : i32
        %o = arith.ori %x, %y : i32
        %folded = arith.andi %c255, %c16 : i32
    """))
    assert found["a"] == A(1, 16, 1)
    assert found["o"] == A(1, 4, 1)
    assert found["folded"] == A(1, 16, 1, constant=16)


def test_min_max_and_constant_folding():
    found = facts(kernel(ARANGE + splats(k=64, j=32) + """
        %r2 = tile.arange {end = 192, start = 64} : tile<128xi32>
        %mx = arith.maxsi %r, %r2 : tile<128xi32>
        %mk = arith.maxsi %r, %k_c : tile<128xi32>
        %mn = arith.minui %k_c, %j_c : tile<128xi32>
        %s = arith.addi %k_c, %j_c : tile<128xi32>
    """))
    assert found["mx"] == A(128, 64, 1)
    assert found["mk"] == A(1, 1, 1)  # 64 64 ... 64 65 66: neither contiguous nor aligned
    assert found["mn"] == A(1, 32, 128, constant=32)
    assert found["s"] == A(1, 32, 128, constant=96)


def test_comparisons_are_constant_over_aligned_runs():
    found = facts(kernel("""
        %r = tile.arange {end = 128, start = 0} : tile<128xi32>
        %ns = tile.splat %n : tile<128xi32>
        %lt = arith.cmpi %r, %ns {predicate = "slt"} : tile<128xi1>
        %ge = arith.cmpi %r, %ns {predicate = "uge"} : tile<128xi1>
        %gt = arith.cmpi %r, %ns {predicate = "sgt"} : tile<128xi1>
        %flip = arith.cmpi %ns, %r {predicate = "sgt"} : tile<128xi1>
        %eq = arith.cmpi %r, %ns {predicate = "eq"} : tile<128xi1>
    """, hints="pt.divisibility = [16]"))
    assert found["lt"] == A(1, 1, 16)
    assert found["ge"] == A(1, 1, 16)
    assert found["gt"] == A(1, 1, 1)  # r > 16k flips after its first element
    assert found["flip"] == A(1, 1, 16)
    assert found["eq"] == A(1, 1, 1)


def test_select():
    found = facts(kernel("""
        %r = tile.arange {end = 128, start = 0} : tile<128xi32>
        %k = arith.constant {value = 64} : tile<128xi32>
        %o = arith.addi %r, %k : tile<128xi32>
        %ns = tile.splat %n : tile<128xi32>
        %c = arith.cmpi %r, %ns {predicate = "slt"} : tile<128xi1>
        %s = arith.select %c, %r, %o : tile<128xi32>
        %f = arith.cmpi %n, %n {predicate = "eq"} : i1
        %t = arith.select %f, %r, %o : tile<128xi32>
        %true = arith.constant {value = true} : i1
        %picked = arith.select %true, %r, %o : tile<128xi32>
    """, hints="pt.divisibility = [16]"))
    assert found["s"] == A(16, 16, 1)  # the condition holds over runs of 16
    assert found["t"] == A(128, 64, 1)  # a scalar condition picks a whole side
    assert found["picked"] == A(128, ZERO, 1)


def test_casts():
    found = facts(kernel("""
        %c = arith.constant {value = 64} : i32
        %x = arith.muli %n, %c : i32
        %w = arith.extsi %x : i64
        %t = arith.trunci %w : i8
        %r = tile.arange {end = 16, start = 0} : tile<16xi32>
        %ps = tile.splat %p : tile<16xptr<f32>>
        %q = tile.addptr %ps, %r : tile<16xptr<f32>>
        %i = arith.ptrtoint %q : tile<16xi64>
    """, args="%n: i32, %p: ptr<f32>",
        hints="pt.divisibility = [1, 16]"))
    assert found["w"] == A(1, 64, 1)
    assert found["t"] == A(1, 64, 1)
    assert found["q"] == A(16, 16, 1)
    assert found["i"] == A(1, 1, 1)  # addresses step by 4 bytes: not contiguous integers


# -- shapes -----------------------------------------------------------------------------


def test_broadcast_gives_constancy():
    found = facts(kernel("""
        %r = tile.arange {end = 64, start = 0} : tile<64xi32>
        %col = tile.expand_dims %r {axis = 1} : tile<64x1xi32>
        %row = tile.expand_dims %r {axis = 0} : tile<1x64xi32>
        %bc = tile.broadcast %col : tile<64x32xi32>
        %br = tile.broadcast %row : tile<16x64xi32>
        %t = tile.trans %bc {order = [1, 0]} : tile<32x64xi32>
    """))
    assert found["col"] == A([64, 1], [ZERO, 1], [1, 1])
    assert found["row"] == A([1, 64], [1, ZERO], [1, 1])
    assert found["bc"] == A([64, 1], [ZERO, 1], [1, 32])
    assert found["br"] == A([1, 64], [1, ZERO], [16, 1])
    assert found["t"] == A([1, 64], [1, ZERO], [32, 1])


def test_row_major_2d_pointers():
    found = facts(kernel("""
        %pid = tile.program_id {axis = 0} : i32
        %c64 = arith.constant {value = 64} : i32
        %m0 = arith.muli %pid, %c64 : i32
        %ms = tile.splat %m0 : tile<64xi32>
        %r = tile.arange {end = 64, start = 0} : tile<64xi32>
        %offs_m = arith.addi %ms, %r : tile<64xi32>
        %offs_n = tile.arange {end = 32, start = 0} : tile<32xi32>
        %em = tile.expand_dims %offs_m {axis = 1} : tile<64x1xi32>
        %st = tile.splat %stride : tile<64x1xi32>
        %rows = arith.muli %em, %st : tile<64x1xi32>
        %rb = tile.broadcast %rows : tile<64x32xi32>
        %en = tile.expand_dims %offs_n {axis = 0} : tile<1x32xi32>
        %cb = tile.broadcast %en : tile<64x32xi32>
        %offs = arith.addi %rb, %cb : tile<64x32xi32>
        %base = tile.splat %a : tile<64x32xptr<f16>>
        %ptrs = tile.addptr %base, %offs : tile<64x32xptr<f16>>
        %rs = tile.reshape %offs : tile<1x64x32xi32>
        %flat = tile.reshape %offs : tile<2048xi32>
    """, args="%a: ptr<f16>, %stride: i32", hints="pt.divisibility = [16, 16]"))
    assert found["rows"] == A([1, 1], [16, 16], [1, 1])
    assert found["offs"] == A([1, 32], [1, 16], [1, 1])
    assert found["ptrs"] == A([1, 32], [2, 16], [1, 1])  # down a column: f16 steps
    assert pointer_vector_width(found["ptrs"], 16, (64, 32)) == 8  # 16 bytes of f16
    assert contiguity_order(found["ptrs"]) == (1, 0)
    assert found["rs"] == A([1, 1, 32], [1, 1, 16], [1, 1, 1])
    assert found["flat"] == A(1, 1, 1)


def test_reshape_of_a_splat_stays_constant():
    found = facts(kernel("""
        %s = tile.splat %n : tile<4x8xi32>
        %r = tile.reshape %s : tile<32xi32>
        %c = arith.constant {value = 8} : tile<4x8xi32>
        %rc = tile.reshape %c : tile<2x16xi32>
    """, hints="pt.divisibility = [16]"))
    assert found["r"] == A(1, 16, 32)
    assert found["rc"] == A([1, 1], [8, 8], [2, 16], constant=8)


# -- control flow -----------------------------------------------------------------------


def test_loop_advancing_pointers_keeps_alignment():
    found = facts(kernel("""
        %c0 = arith.constant {value = 0} : i32
        %c1 = arith.constant {value = 1} : i32
        %r = tile.arange {end = 32, start = 0} : tile<32xi32>
        %ps = tile.splat %a : tile<32xptr<f16>>
        %p0 = tile.addptr %ps, %r : tile<32xptr<f16>>
        %step = arith.constant {value = 32} : tile<32xi32>
        %odd = arith.constant {value = 3} : tile<32xi32>
        %p, %q = scf.for %c0, %n, %c1, %p0, %p0 : tile<32xptr<f16>>, tile<32xptr<f16>> {
        ^bb0(%i: i32, %pi: tile<32xptr<f16>>, %qi: tile<32xptr<f16>>):
          %pn = tile.addptr %pi, %step : tile<32xptr<f16>>
          %qn = tile.addptr %qi, %odd : tile<32xptr<f16>>
          scf.yield %pn, %qn
        }
    """, args="%a: ptr<f16>, %n: i32", hints="pt.divisibility = [16, 1]"))
    assert found["i"] == A(1, 1, 1)
    assert found["pi"] == found["p"] == A(32, 16, 1)
    assert found["qi"] == found["q"] == A(32, 2, 1)  # 3 halves = 6 bytes: only even addresses


def test_induction_variable_divisibility():
    found = facts(kernel("""
        %c0 = arith.constant {value = 0} : i32
        %c16 = arith.constant {value = 16} : i32
        %c64 = arith.constant {value = 64} : i32
        scf.for %c16, %n, %c64 {
        ^bb0(%i: i32):
          scf.yield
        }
        scf.for %c0, %n, %k {
        ^bb0(%j: i32):
          scf.yield
        }
    """, args="%n: i32, %k: i32", hints="pt.divisibility = [1, 16]"))
    assert found["i"] == A(1, 16, 1)
    assert found["j"] == A(1, 16, 1)


def test_loop_carried_value_joins_with_its_updates():
    found = facts(kernel("""
        %c0 = arith.constant {value = 0} : i32
        %c1 = arith.constant {value = 1} : i32
        %c64 = arith.constant {value = 64} : i32
        %c8 = arith.constant {value = 8} : i32
        %x, %y = scf.for %c0, %n, %c1, %c64, %c64 : i32, i32 {
        ^bb0(%i: i32, %xi: i32, %yi: i32):
          %xn = arith.addi %xi, %c8 : i32
          scf.yield %xn, %yi
        }
    """))
    assert found["xi"] == found["x"] == A(1, 8, 1)
    assert found["yi"] == found["y"] == A(1, 64, 1, constant=64)


def test_nested_loops_reach_a_fixed_point():
    found = facts(kernel("""
        %c0 = arith.constant {value = 0} : i32
        %c1 = arith.constant {value = 1} : i32
        %c256 = arith.constant {value = 256} : i32
        %c32 = arith.constant {value = 32} : i32
        %c4 = arith.constant {value = 4} : i32
        %o = scf.for %c0, %n, %c1, %c256 : i32 {
        ^bb0(%i: i32, %a: i32):
          %in = scf.for %c0, %n, %c1, %a : i32 {
          ^bb1(%j: i32, %b: i32):
            %bn = arith.addi %b, %c32 : i32
            scf.yield %bn
          }
          %an = arith.addi %in, %c4 : i32
          scf.yield %an
        }
    """))
    assert found["b"] == A(1, 4, 1)
    assert found["o"] == A(1, 4, 1)


def test_if_joins_both_branches():
    found = facts(kernel("""
        %r = tile.arange {end = 128, start = 0} : tile<128xi32>
        %k = arith.constant {value = 128} : tile<128xi32>
        %c0 = arith.constant {value = 0} : i32
        %c = arith.cmpi %n, %c0 {predicate = "sgt"} : i1
        %v = scf.if %c : tile<128xi32> {
          scf.yield %r
        } {
          %s = arith.addi %r, %k : tile<128xi32>
          scf.yield %s
        }
        %true = arith.constant {value = true} : i1
        %w = scf.if %true : tile<128xi32> {
          scf.yield %r
        } {
          %u = arith.muli %r, %k : tile<128xi32>
          scf.yield %u
        }
    """))
    assert found["v"] == A(128, 128, 1)
    assert found["w"] == A(128, ZERO, 1)


def test_while_loop():
    found = facts(kernel("""
        %c0 = arith.constant {value = 0} : i32
        %c16 = arith.constant {value = 16} : i32
        %r = scf.while %c0 : i32 {
        ^bb0(%x: i32):
          %go = arith.cmpi %x, %n {predicate = "slt"} : i1
          scf.condition %go, %x
        } {
        ^bb1(%y: i32):
          %z = arith.addi %y, %c16 : i32
          scf.yield %z
        }
    """))
    assert found["x"] == found["y"] == found["r"] == A(1, 16, 1)


def test_noinline_callee_arguments_join_the_call_sites():
    found = facts("""
        func.func @helper(%p: ptr<f32>, %o: i32) -> i32 attributes {noinline = true} {
          %r = arith.addi %o, %o : i32
          func.return %r
        }
        func.func @lonely(%u: i32) attributes {noinline = true} {
          func.return
        }
        func.func @k(%x: ptr<f32>, %n: i32) attributes {kernel = true, pt.divisibility = [16, 16]} {
          %c32 = arith.constant {value = 32} : i32
          %a = func.call %x, %c32 {callee = @helper} : i32
          %b = func.call %x, %n {callee = @helper} : i32
          func.return
        }
    """)
    assert found["p"] == A(1, 16, 1)
    assert found["o"] == A(1, 16, 1)
    assert found["r"] == A(1, 16, 1)
    assert found["a"] == A(1, 1, 1)  # call results: unknown, as in Triton
    assert found["u"] == A(1, 1, 1)


def test_recursive_function_arguments_are_unknown():
    found = facts("""
        func.func @f(%v: i32) attributes {noinline = true} {
          func.call %v {callee = @f}
          func.return
        }
        func.func @k() attributes {kernel = true} {
          %c = arith.constant {value = 64} : i32
          func.call %c {callee = @f}
          func.return
        }
    """)
    assert found["v"] == A(1, 1, 1)


def test_analysis_of_one_function():
    module = parse_module(dedent(VECTOR_ADD))
    function = module.body.block.first_op
    analysis = PassContext().analyses.get(AxisInfoAnalysis, function)
    offs = next(op for op in function.walk() if op.results and op.results[0].name_hint == "offs")
    assert analysis[offs.results[0]] == A(1024, 1024, 1)


# -- the lattice and helpers ------------------------------------------------------------


def test_join_and_divisibility_helpers():
    assert A(128, 16, 1, 3).join(A(64, 24, 2, 3)) == A(64, 8, 1, 3)
    assert A(1, 16, 4, 3).join(A(1, 16, 4, 5)) == A(1, 16, 4)
    assert [pow2_divisor(n) for n in (0, 1, 12, -8, 1 << 40)] == [ZERO, 1, 4, 8, ZERO]
    info = A(64, 256, 1)  # runs of 64 starting at multiples of 256
    assert divisibility_at(info, 0, 64) == 256
    assert divisibility_at(info, 0, 128) == 256
    assert divisibility_at(info, 0, 16) == 16
    assert divisibility_at(info, 0, 1) == 1


def test_vector_widths():
    info = A([1, 128], [16, 16], [1, 1])
    assert pointer_vector_width(info, 32, (4, 128)) == 4
    assert pointer_vector_width(info, 8, (4, 128)) == 16
    assert pointer_vector_width(info, 8, (4, 8)) == 8  # no wider than the tile
    assert pointer_vector_width(A(1024, 4, 1), 32, (1024,)) == 1  # 4-byte aligned f32
    assert mask_vector_width(A(1, 1, 16), (0,)) == 16


def test_malformed_axis_info():
    with pytest.raises(ValueError, match="one entry per dimension"):
        AxisInfo((1, 1), (1,), (1,))
    with pytest.raises(ValueError, match="positive"):
        AxisInfo((0,), (1,), (1,))
