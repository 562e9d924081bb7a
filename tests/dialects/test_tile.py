"""The tile dialect: ids, ranges, shapes, pointers, memory, atomics, dot and reductions."""

from __future__ import annotations

import pytest

from polytile.dialects.tile import ArangeOp, LoadOp, ReduceOp, SplatOp
from polytile.ir import Block, Builder, parse_module, print_ir, verify
from polytile.ir import types as t

from ._util import assert_roundtrip, assert_verify_error, func, ir

ROUNDTRIP = {
    "ids-ranges-and-shapes": func(
        "%n: i32, %f: f16",
        "%pid = tile.program_id {axis = 0} : i32",
        "%np = tile.num_programs {axis = 2} : i32",
        "%r = tile.arange {end = 132, start = 4} : tile<128xi32>",
        "%rl = tile.arange {end = 8, start = 0} : tile<8xi32, @blocked>",
        "%s = tile.splat %n : tile<128xi32>",
        "%sf = tile.splat %f : tile<2x2xf16>",
        "%e = tile.expand_dims %r {axis = 1} : tile<128x1xi32>",
        "%e0 = tile.expand_dims %r {axis = 0} : tile<1x128xi32>",
        "%b = tile.broadcast %e : tile<128x64xi32>",
        "%rs = tile.reshape %b : tile<64x2x64xi32>",
        "%tr = tile.trans %b {order = [1, 0]} : tile<64x128xi32>",
        "%t3 = tile.trans %rs {order = [2, 0, 1]} : tile<64x64x2xi32>",
        "func.return",
    ),
    "pointers-and-memory": func(
        "%p: ptr<f32>, %q: ptr<f16, 3>, %o: tile<4xi32>, %m: tile<4xi1>, %v: tile<4xf32>",
        "%x = tile.load %p : f32",
        "%y = tile.load %q {cache = \".ca\", evict = \"evict_last\", volatile = true} : f16",
        "%ps = tile.splat %p : tile<4xptr<f32>>",
        "%pa = tile.addptr %ps, %o : tile<4xptr<f32>>",
        "%sa = tile.addptr %p, %x_i : ptr<f32>",
        "%l = tile.load %pa mask(%m) : tile<4xf32>",
        "%lo = tile.load %pa mask(%m) other(%v) {cache = \".cg\"} : tile<4xf32>",
        "%lother = tile.load %pa other(%v) : tile<4xf32>",
        "tile.store %pa, %l mask(%m) {cache = \".wb\", evict = \"evict_first\"}",
        "tile.store %p, %x",
        "func.return",
    ).replace("%sa = tile.addptr %p, %x_i", "%xi = arith.fptosi %x : i64\n  %sa = tile.addptr %p, %xi"),
    "atomics": func(
        "%p: ptr<i32>, %pt: tile<4xptr<f32>>, %i: i32, %v: tile<4xf32>, %m: tile<4xi1>",
        "%0 = tile.atomic_rmw %p, %i {kind = \"add\"} : i32",
        "%1 = tile.atomic_rmw %pt, %v mask(%m) {kind = \"fadd\", scope = \"cta\", sem = \"relaxed\"} : tile<4xf32>",
        "%2 = tile.atomic_rmw %p, %i {kind = \"xchg\", scope = \"sys\", sem = \"acquire\"} : i32",
        "%3 = tile.atomic_cas %p, %i, %i : i32",
        "%4 = tile.atomic_cas %p, %i, %i {scope = \"cta\", sem = \"release\"} : i32",
        "func.return",
    ),
    "dot": func(
        "%a: tile<16x32xf16>, %b: tile<32x8xf16>, %acc: tile<16x8xf32>, %ai: tile<16x32xi8>, %bi: tile<32x8xi8>, "
        "%ci: tile<16x8xi32>",
        "%0 = tile.dot %a, %b, %acc : tile<16x8xf32>",
        "%1 = tile.dot %a, %b, %0 {input_precision = \"ieee\", max_num_imprecise_acc = 32} : tile<16x8xf32>",
        "%2 = tile.dot %ai, %bi, %ci {input_precision = \"tf32x3\"} : tile<16x8xi32>",
        "func.return %1",
        results="tile<16x8xf32>",
    ),
    "reductions": ir("""
        func.func @f(%t: tile<4x8xf32>, %idx: tile<4x8xi32>) -> (tile<4xf32>, tile<4xi32>, f32) {
          %0, %1 = tile.reduce %t, %idx {axis = 1} : tile<4xf32>, tile<4xi32> {
          ^bb0(%va: f32, %ia: i32, %vb: f32, %ib: i32):
            %2 = arith.cmpf %va, %vb {predicate = "oge"} : i1
            %3 = arith.select %2, %va, %vb : f32
            %4 = arith.select %2, %ia, %ib : i32
            tile.reduce_return %3, %4
          }
          %5 = tile.reduce %0 {axis = 0} : f32 {
          ^bb0(%a: f32, %b: f32):
            %6 = arith.addf %a, %b : f32
            tile.reduce_return %6
          }
          func.return %0, %1, %5
        }
    """),
}


@pytest.mark.parametrize("name", sorted(ROUNDTRIP))
def test_roundtrip(name):
    assert_roundtrip(ROUNDTRIP[name])


def test_load_defaults_when_left_out_of_the_text():
    module = parse_module(ROUNDTRIP["pointers-and-memory"])
    ops = module.body.block.first_op.entry_block.ops
    plain, flagged = ops[0], ops[1]
    assert plain.attributes == {} and (plain.cache, plain.evict, plain.volatile) == ("", "", False)
    assert (flagged.cache, flagged.evict, flagged.volatile) == (".ca", "evict_last", True)
    masked_other = ops[7]
    assert masked_other.mask is not None and masked_other.other is not None
    assert ops[8].mask is None and ops[8].other is not None


def test_built_ops_store_no_defaults_and_round_trip():
    from polytile.dialects.func import FuncOp, ReturnOp

    f = FuncOp.create("g", [t.PointerType(t.f32), t.i32], arg_names=["p", "n"])
    b = Builder.at_end(f.entry_block)
    p, n = f.arguments
    r = b.create(ArangeOp, start=0, end=16).result
    ptrs = b.create(SplatOp, p, result_types=[t.TileType((16,), t.PointerType(t.f32))]).result
    load = b.create(LoadOp, ptrs)
    assert load.result.type == t.TileType((16,), t.f32) and r.type == t.TileType((16,), t.i32)
    b.create(ReturnOp, [])
    verify(f)
    text = print_ir(f)
    # Defaults are not stored, so the built op prints as text that leaves them out does.
    assert load.attributes == {} and load.cache == "" and load.volatile is False
    assert "%2 = tile.load %1 : tile<16xf32>" in text
    assert print_ir(parse_module(text)) == text


def test_reduce_accessors():
    module = parse_module(ROUNDTRIP["reductions"])
    reduce = module.body.block.first_op.entry_block.first_op
    assert isinstance(reduce, ReduceOp)
    assert len(reduce.sources) == 2 and reduce.outputs == reduce.results and reduce.axis == 1
    assert len(reduce.combine.block.arguments) == 4


SIGNATURE = ("%i: i32, %x: f32, %p: ptr<f32>, %pi: ptr<i32>, %t: tile<4xf32>, %t2: tile<4x8xf32>, "
             "%tc: tile<4x1xf32>, %pt: tile<4xptr<f32>>, %o: tile<4xi32>, %m: tile<4xi1>, %m8: tile<8xi1>, "
             "%a: tile<16x32xf16>, %b: tile<32x8xf16>, %acc: tile<16x8xf32>")


@pytest.mark.parametrize("line, op, message", [
    ("%0 = tile.program_id {axis = 3} : i32", "tile.program_id", "axis must be 0, 1 or 2, got 3"),
    ("%0 = tile.program_id {axis = 0} : i64", "tile.program_id", "result must be i32, got i64"),
    ("%0 = tile.num_programs {axis = -1} : i32", "tile.num_programs", "axis must be 0, 1 or 2, got -1"),
    ("%0 = tile.num_programs {axis = 1} : f32", "tile.num_programs", "result must be i32, got f32"),
    ("%0 = tile.arange {end = 4, start = 4} : tile<1xi32>", "tile.arange", "end (4) must be greater than start (4)"),
    ("%0 = tile.arange {end = 8, start = 0} : tile<4xi32>", "tile.arange", "result must be tile<8xi32>, got "
                                                                          "tile<4xi32>"),
    ("%0 = tile.arange {end = 8, start = 0} : i32", "tile.arange", "result 'result' must be a tile, got i32"),
    ("%0 = tile.arange {start = 0} : tile<4xi32>", "tile.arange", "requires attribute 'end' (an integer)"),
    ("%0 = tile.splat %i : tile<4xf32>", "tile.splat", "splats i32 into a tile of f32"),
    ("%0 = tile.splat %t : tile<4xf32>", "tile.splat", "operand 'value' must be a scalar, got tile<4xf32>"),
    ("%0 = tile.splat %x : f32", "tile.splat", "result 'result' must be a tile, got f32"),
    ("%0 = tile.broadcast %tc : tile<4x8xf16>", "tile.broadcast",
     "cannot broadcast tile<4x1xf32> to tile<4x8xf16>: element type and rank must match"),
    ("%0 = tile.broadcast %tc : tile<8xf32>", "tile.broadcast",
     "cannot broadcast tile<4x1xf32> to tile<8xf32>: element type and rank must match"),
    ("%0 = tile.broadcast %tc : tile<8x8xf32>", "tile.broadcast",
     "cannot broadcast tile<4x1xf32> to tile<8x8xf32>: only dimensions of size 1 stretch"),
    ("%0 = tile.expand_dims %t {axis = 2} : tile<4x1xf32>", "tile.expand_dims",
     "axis 2 is out of range for a tile of rank 1"),
    ("%0 = tile.expand_dims %t {axis = 0} : tile<4x1xf32>", "tile.expand_dims",
     "result must be tile<1x4xf32>, got tile<4x1xf32>"),
    ("%0 = tile.reshape %t2 : tile<16xf32>", "tile.reshape", "cannot reshape tile<4x8xf32> to tile<16xf32>"),
    ("%0 = tile.reshape %t2 : tile<32xf16>", "tile.reshape", "cannot reshape tile<4x8xf32> to tile<32xf16>"),
    ("%0 = tile.trans %t2 {order = [0, 0]} : tile<8x4xf32>", "tile.trans",
     "order [0, 0] is not a permutation of 0..1"),
    ("%0 = tile.trans %t2 {order = [1, 0]} : tile<4x8xf32>", "tile.trans",
     "transposing tile<4x8xf32> by [1, 0] does not give tile<4x8xf32>"),
    ('%0 = tile.trans %t2 {order = ["a", 1]} : tile<8x4xf32>', "tile.trans",
     "order ['a', 1] is not a permutation of 0..1"),
    ("%0 = tile.addptr %pt, %o : tile<4xptr<f16>>", "tile.addptr", "result must have the pointer's type "
                                                                   "tile<4xptr<f32>>"),
    ("%0 = tile.addptr %pt, %i : tile<4xptr<f32>>", "tile.addptr",
     "pointer and offset shapes differ: tile<4xptr<f32>> and i32"),
    ("%0 = tile.addptr %o, %o : tile<4xi32>", "tile.addptr",
     "operand 'ptr' must be a pointer or a tile of pointers, got tile<4xi32>"),
    ("%0 = tile.load %p : f16", "tile.load", "loading through ptr<f32> gives f32, not f16"),
    ("%0 = tile.load %pt : f32", "tile.load", "loading through tile<4xptr<f32>> gives tile<4xf32>, not f32"),
    ("%0 = tile.load %pt mask(%m8) : tile<4xf32>", "tile.load",
     "mask shape tile<8xi1> differs from the pointer shape tile<4xptr<f32>>"),
    ("%0 = tile.load %pt other(%x) : tile<4xf32>", "tile.load",
     "'other' must have the result type tile<4xf32>, got f32"),
    ("%0 = tile.load %pt mask(%o) : tile<4xf32>", "tile.load",
     "operand 'mask' must be i1 or a tile of i1, got tile<4xi32>"),
    ('%0 = tile.load %p {cache = ".xx"} : f32', "tile.load",
     "unknown cache modifier '.xx'; use one of '', '.ca', '.cg', '.cv', '.cs', '.wb', '.wt'"),
    ('%0 = tile.load %p {evict = "never"} : f32', "tile.load",
     "unknown eviction policy 'never'; use one of '', 'evict_first', 'evict_last', 'evict_normal'"),
    ("%0 = tile.load %p {volatile = 1} : f32", "tile.load", "attribute 'volatile' must be a boolean, got 1"),
    ("tile.store %p, %i", "tile.store", "cannot store i32 through ptr<f32>"),
    ("tile.store %pt, %x", "tile.store", "cannot store f32 through tile<4xptr<f32>>"),
    ("tile.store %pt, %t mask(%m8)", "tile.store",
     "mask shape tile<8xi1> differs from the pointer shape tile<4xptr<f32>>"),
    ('%0 = tile.atomic_rmw %p, %x {kind = "mul"} : f32', "tile.atomic_rmw",
     "unknown kind 'mul'; use one of add, fadd, max, min, umax, umin, and, or, xor, xchg"),
    ('%0 = tile.atomic_rmw %p, %x {kind = "fadd", sem = "seq_cst"} : f32', "tile.atomic_rmw",
     "unknown sem 'seq_cst'; use one of relaxed, acquire, release, acq_rel"),
    ('%0 = tile.atomic_rmw %p, %x {kind = "fadd", scope = "grid"} : f32', "tile.atomic_rmw",
     "unknown scope 'grid'; use one of gpu, cta, sys"),
    ('%0 = tile.atomic_rmw %p, %x {kind = "fadd"} : f16', "tile.atomic_rmw",
     "result must have the value's type f32"),
    ('%0 = tile.atomic_rmw %pt, %t mask(%m8) {kind = "fadd"} : tile<4xf32>', "tile.atomic_rmw",
     "mask shape tile<8xi1> differs from the pointer shape tile<4xptr<f32>>"),
    ("%0 = tile.atomic_rmw %p, %x : f32", "tile.atomic_rmw", "requires attribute 'kind' (a string)"),
    ("%0 = tile.atomic_cas %pi, %p, %i : i32", "tile.atomic_cas",
     "operand 'compare' must be an integer or a tile of integers or a float or a tile of floats, got ptr<f32>"),
    ("%0 = tile.dot %t, %b, %acc : tile<16x8xf32>", "tile.dot",
     "needs 2-D tiles, or 3-D ones batched along the first dimension, got tile<4xf32>, tile<32x8xf16>, tile<16x8xf32>"),
    ("%0 = tile.dot %a, %a, %acc : tile<16x8xf32>", "tile.dot",
     "shapes do not chain: tile<16x32xf16> @ tile<16x32xf16> accumulated into tile<16x8xf32>"),
    ("%0 = tile.dot %a, %b, %t2 : tile<4x8xf32>", "tile.dot",
     "shapes do not chain: tile<16x32xf16> @ tile<32x8xf16> accumulated into tile<4x8xf32>"),
    ('%0 = tile.dot %a, %b, %acc {input_precision = "tf16"} : tile<16x8xf32>', "tile.dot",
     "unknown input_precision 'tf16'; use one of tf32, tf32x3, ieee"),
    ("%0 = tile.dot %a, %b, %acc : tile<16x8xf16>", "tile.dot",
     "result must have the accumulator's type tile<16x8xf32>"),
    ("%0 = tile.dot %a, %b, %x : tile<16x8xf32>", "tile.dot", "operand 'acc' must be a tile, got f32"),
])
def test_op_checks(line, op, message):
    assert_verify_error(func(SIGNATURE, "!" + line, "func.return"), op, message)


@pytest.mark.parametrize("lines, op, message", [
    (["%0 = tile.reduce {axis = 0} : f32 {", "^bb0(%a: f32, %b: f32):", "  tile.reduce_return %a", "!}"],
     "tile.reduce", "needs at least one operand"),
    (["%0, %1 = tile.reduce %t, %t2 {axis = 0} : f32, f32 {", "^bb0(%a: f32, %b: f32, %c: f32, %d: f32):",
      "  tile.reduce_return %a, %b", "!}"], "tile.reduce", "operands must have one shape"),
    (["%0 = tile.reduce %t2 {axis = 2} : tile<4xf32> {", "^bb0(%a: f32, %b: f32):", "  tile.reduce_return %a", "!}"],
     "tile.reduce", "axis 2 is out of range for rank 2"),
    (["%0 = tile.reduce %t2 {axis = 1} : tile<8xf32> {", "^bb0(%a: f32, %b: f32):", "  tile.reduce_return %a", "!}"],
     "tile.reduce", "reducing tile<4x8xf32> along axis 1 gives tile<4xf32>, not tile<8xf32>"),
    (["%0 = tile.reduce %t {axis = 0} : i32 {", "^bb0(%a: f32, %b: f32):", "  tile.reduce_return %a", "!}"],
     "tile.reduce", "reducing tile<4xf32> along axis 0 gives f32, not i32"),
    (["%0, %1 = tile.reduce %t {axis = 0} : f32, f32 {", "^bb0(%a: f32, %b: f32):", "  tile.reduce_return %a",
      "!}"], "tile.reduce", "reduces 1 operands but has 2 results"),
    (["%0 = tile.reduce %t {axis = 0} : f32 {", "^bb0(%a: f32):", "  tile.reduce_return %a", "!}"],
     "tile.reduce", "the combine region must take two scalars per operand: (f32, f32)"),
    (["%0 = tile.reduce %t {axis = 0} : f32 {", "^bb0(%a: f32, %b: f32):", "  %c = arith.cmpf %a, %b "
      "{predicate = \"olt\"} : i1", "  !tile.reduce_return %c", "}"],
     "tile.reduce_return", "returns (i1) but the reduction combines (f32)"),
    (["%0 = tile.reduce %t {axis = 0} : f32 {", "^bb0(%a: f32, %b: f32):", "  %c = arith.addf %a, %b : f32", "!}"],
     "tile.reduce", "region 'combine' must end with 'tile.reduce_return', found 'arith.addf'"),
    (["%0 = tile.reduce %x {axis = 0} : f32 {", "^bb0(%a: f32, %b: f32):", "  tile.reduce_return %a", "!}"],
     "tile.reduce", "operand 'sources' must be a tile, got f32"),
])
def test_reduce_checks(lines, op, message):
    assert_verify_error(func(SIGNATURE, *lines, "func.return"), op, message)


def test_reduce_return_must_be_inside_a_reduce():
    assert_verify_error("!tile.reduce_return\n", "tile.reduce_return",
                        "must be inside 'tile.reduce', found in 'builtin.module'")
    assert_verify_error(ir("""
        func.func @f(%c: i1) {
          scf.if %c {
            tile.reduce_return
          } {
            scf.yield
          !}
          func.return
        }
    """), "scf.if", "region 'then_region' must end with 'scf.yield', found 'tile.reduce_return'")


def test_load_infers_its_result_from_the_pointer():
    block = Block([t.TileType((8, 2), t.PointerType(t.bf16, 3))])
    load = LoadOp.build(block.arguments[0])
    assert load.result.type == t.TileType((8, 2), t.bf16)


def test_reduce_combine_region_is_isolated_from_above():
    # As in Triton, a combine function sees only its arguments: a backend turns it into
    # a shuffle tree without looking outside it.
    text = """\
func.func @k(%t: tile<4xf32>, %scale: f32) -> f32 {
  %r = tile.reduce %t {axis = 0} : f32 {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    %m = arith.mulf %s, %scale : f32
    tile.reduce_return %m
  }
  func.return %r
}
"""
    with pytest.raises(Exception) as info:
        verify(parse_module(text))
    assert "does not dominate this use" in str(info.value) and "'arith.mulf' op" in str(info.value)


def test_canonicalize_keeps_combine_constants_inside_the_region():
    from polytile.passes.canonicalize import Canonicalize
    from polytile.ir_testing import apply_passes

    out = apply_passes("""
        func.func @k(%t: tile<4xf32>) -> f32 {
          %r = tile.reduce %t {axis = 0} : f32 {
          ^bb0(%a: f32, %b: f32):
            %s = arith.addf %a, %b : f32
            %two = arith.constant {value = 2.0} : f32
            %m = arith.mulf %s, %two : f32
            tile.reduce_return %m
          }
          func.return %r
        }
    """, Canonicalize())
    assert out == """\
func.func @k(%t: tile<4xf32>) -> f32 {
  %r = tile.reduce %t {axis = 0} : f32 {
  ^bb0(%a: f32, %b: f32):
    %two = arith.constant {value = 2.0} : f32
    %s = arith.addf %a, %b : f32
    %m = arith.mulf %s, %two : f32
    tile.reduce_return %m
  }
  func.return %r
}
"""


CHECKED = ("%p: ptr<f32>, %pi: ptr<i32>, %pt: tile<4xptr<i32>>, %i: i32, %x: f32, %o: tile<4xi32>, "
           "%o8: tile<8xi32>, %a: tile<16x32xf16>, %b: tile<32x8xf16>, %acc: tile<16x8xf32>, %acc16: tile<16x8xf16>, "
           "%ai: tile<16x32xi8>, %bi: tile<32x8xi8>, %ci: tile<16x8xi32>, %af: tile<16x32xf32>, %bf: tile<32x8xf32>, "
           "%ad: tile<16x32xf64>, %bd: tile<32x8xf64>, %accd: tile<16x8xf64>, %bb: tile<32x8xbf16>, "
           "%a8: tile<16x32xf8e4m3>, %b8: tile<32x8xf8e4m3>, %as: tile<16x32xi16>, %bs: tile<32x8xi16>")


@pytest.mark.parametrize("line, op, message", [
    ('%0 = tile.atomic_cas %pi, %i, %i {sem = "whenever"} : i32', "tile.atomic_cas",
     "unknown sem 'whenever'; use one of relaxed, acquire, release, acq_rel"),
    ('%0 = tile.atomic_cas %pi, %i, %i {scope = "galaxy"} : i32', "tile.atomic_cas",
     "unknown scope 'galaxy'; use one of gpu, cta, sys"),
    ("%0 = tile.atomic_cas %p, %x, %x : i32", "tile.atomic_cas",
     "compare, value and result must have one type, got f32, f32 -> i32"),
    ("%0 = tile.atomic_cas %pi, %i, %x : f32", "tile.atomic_cas",
     "compare, value and result must have one type, got i32, f32 -> f32"),
    ("%0 = tile.atomic_cas %p, %i, %i : i32", "tile.atomic_cas", "cannot compare-and-swap i32 through ptr<f32>"),
    ("%0 = tile.atomic_cas %pt, %i, %i : i32", "tile.atomic_cas",
     "cannot compare-and-swap i32 through tile<4xptr<i32>>"),
    ("%0 = tile.atomic_cas %pt, %o8, %o8 : tile<8xi32>", "tile.atomic_cas",
     "cannot compare-and-swap tile<8xi32> through tile<4xptr<i32>>"),
    ('%0 = tile.atomic_rmw %p, %i {kind = "add"} : i32', "tile.atomic_rmw",
     "cannot combine i32 into memory through ptr<f32>"),
    ('%0 = tile.atomic_rmw %pt, %i {kind = "add"} : i32', "tile.atomic_rmw",
     "cannot combine i32 into memory through tile<4xptr<i32>>"),
    ("%0 = tile.dot %a, %bi, %acc : tile<16x8xf32>", "tile.dot",
     "a and b must have one element type, got f16 and i8"),
    ("%0 = tile.dot %ad, %bd, %acc : tile<16x8xf32>", "tile.dot", "a dot of f64 accumulates in f64, not f32"),
    ("%0 = tile.dot %as, %bs, %ci : tile<16x8xi32>", "tile.dot",
     "cannot multiply tiles of i16; supported: f16, bf16, f32, f64, f8e4m3, f8e5m2, i8"),
    ("%0 = tile.dot %ai, %bi, %acc : tile<16x8xf32>", "tile.dot", "a dot of i8 accumulates in i32, not f32"),
    ("%0 = tile.dot %af, %bf, %acc16 : tile<16x8xf16>", "tile.dot", "a dot of f32 accumulates in f32, not f16"),
    ("%0 = tile.dot %a, %b, %ci : tile<16x8xi32>", "tile.dot", "a dot of f16 accumulates in f32 or f16, not i32"),
])
def test_atomic_and_dot_type_checks(line, op, message):
    assert_verify_error(func(CHECKED, "!" + line, "func.return"), op, message)


def test_supported_atomics_and_dots_verify():
    verify(parse_module(func(
        CHECKED,
        "%0 = tile.atomic_cas %pt, %o, %o : tile<4xi32>",
        '%1 = tile.atomic_rmw %pt, %o {kind = "max"} : tile<4xi32>',
        "%2 = tile.dot %a, %b, %acc16 : tile<16x8xf16>",
        "%3 = tile.dot %ai, %bi, %ci : tile<16x8xi32>",
        "%4 = tile.dot %af, %bf, %acc : tile<16x8xf32>",
        "%5 = tile.dot %a8, %b8, %acc : tile<16x8xf32>",
        "func.return",
    )))


REDUCE_WITH_A_SIDE_EFFECT = ir("""
    func.func @k(%t: tile<4xi32>) attributes {kernel = true} {
      %r = tile.reduce %t {axis = 0} : i32 {
      ^bb0(%a: i32, %b: i32):
        %addr = arith.constant {value = 4096} : i64
        %p = arith.inttoptr %addr : ptr<i32>
        %old = tile.atomic_rmw %p, %a {kind = "add"} : i32
        %s = arith.addi %a, %b : i32
        tile.reduce_return %s
      }
      func.return
    }
""")


def test_reduce_is_pure_only_when_its_combine_region_is():
    from polytile.ir.opdef import Pure, RecursivelyPure
    from polytile.passes.dce import DeadCodeElimination
    from polytile.ir_testing import apply_passes

    assert ReduceOp.has_trait(RecursivelyPure) and not ReduceOp.has_trait(Pure)
    # An unused reduce whose combine region writes memory stays ...
    assert apply_passes(REDUCE_WITH_A_SIDE_EFFECT, DeadCodeElimination()) == REDUCE_WITH_A_SIDE_EFFECT
    # ... and one that only computes goes.
    pure = REDUCE_WITH_A_SIDE_EFFECT.replace('    %old = tile.atomic_rmw %p, %a {kind = "add"} : i32\n', "")
    assert apply_passes(pure, DeadCodeElimination()) == ir("""
        func.func @k(%t: tile<4xi32>) attributes {kernel = true} {
          func.return
        }
    """)


def test_const_pointers_round_trip_and_are_never_written():
    # ptr<T, const>: a pl.const parameter's pointers; loads read them, writes are refused.
    assert_roundtrip(func("%p: ptr<f32, const>, %q: ptr<f16, 3, const>",
                          "%0 = tile.load %p : f32", "func.return"))
    signature = "%p: ptr<f32, const>, %x: f32, %i: i32"
    for line in ("tile.store %p, %x", '%0 = tile.atomic_rmw %p, %x {kind = "fadd"} : f32'):
        assert_verify_error(func(signature, "!" + line, "func.return"), line.split()[0] if line.startswith("tile")
                            else line.split()[2], "writes through ptr<f32, const>, a const pointer (read only)")
    assert t.PointerType(t.f32, const=True) != t.PointerType(t.f32)
