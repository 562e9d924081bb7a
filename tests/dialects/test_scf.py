"""The scf dialect: ``scf.for``, ``scf.if``, ``scf.while``, ``scf.condition``, ``scf.yield``."""

from __future__ import annotations

import pytest

from polytile.dialects.scf import ForOp, IfOp
from polytile.errors import VerificationError
from polytile.ir import Builder, parse_module, print_ir, verify
from polytile.ir import types as t

from ._util import assert_roundtrip, assert_verify_error, func, ir

ROUNDTRIP = {
    "for-with-carried-values": ir("""
        func.func @f(%lo: i32, %hi: i32, %step: i32, %acc: tile<4xf32>) -> tile<4xf32> {
          %0, %1 = scf.for %lo, %hi, %step, %acc, %lo {pt.num_stages = 3} : tile<4xf32>, i32 {
          ^bb0(%i: i32, %a: tile<4xf32>, %n: i32):
            %2 = arith.addf %a, %a : tile<4xf32>
            %3 = arith.addi %n, %i : i32
            scf.yield %2, %3
          }
          func.return %0
        }
    """),
    "for-without-carried-values": ir("""
        func.func @f(%lo: i64, %hi: i64) {
          scf.for %lo, %hi, %lo {
          ^bb0(%i: i64):
            scf.yield
          }
          func.return
        }
    """),
    "if-with-and-without-results": ir("""
        func.func @f(%c: i1, %x: f32) -> f32 {
          %0 = scf.if %c : f32 {
            %1 = arith.mulf %x, %x : f32
            scf.yield %1
          } {
            scf.yield %x
          }
          scf.if %c {
            scf.yield
          } {
            scf.yield
          }
          func.return %0
        }
    """),
    "while": ir("""
        func.func @f(%n: i32, %x: f32) -> (i32, f32) {
          %0 = arith.constant {value = 1} : i32
          %1, %2 = scf.while %n, %x : i32, f32 {
          ^bb0(%k: i32, %v: f32):
            %3 = arith.cmpi %k, %0 {predicate = "sgt"} : i1
            scf.condition %3, %k, %v
          } {
          ^bb0(%k_1: i32, %v_1: f32):
            %4 = arith.subi %k_1, %0 : i32
            scf.yield %4, %v_1
          }
          func.return %1, %2
        }
    """),
}


@pytest.mark.parametrize("name", sorted(ROUNDTRIP))
def test_roundtrip(name):
    assert_roundtrip(ROUNDTRIP[name])


def test_for_accessors_and_create():
    module = parse_module(ROUNDTRIP["for-with-carried-values"])
    loop = module.body.block.first_op.entry_block.first_op
    lo, hi, step, acc = module.body.block.first_op.arguments
    assert (loop.lower, loop.upper, loop.step, loop.init_args) == (lo, hi, step, (acc, lo))
    assert loop.induction_variable.name_hint == "i" and [a.name_hint for a in loop.region_iter_args] == ["a", "n"]
    assert loop.get_attr("pt.num_stages") == 3
    copy = ForOp.create(lo, hi, step, [acc], iv_name="j")
    assert [a.type for a in copy.body.block.arguments] == [t.i32, t.TileType((4,), t.f32)]
    assert copy.induction_variable.name_hint == "j" and copy.results[0].type == t.TileType((4,), t.f32)


def test_if_create_and_builder():
    from polytile.dialects.func import FuncOp, ReturnOp
    from polytile.dialects.scf import YieldOp

    f = FuncOp.create("g", [t.i1, t.f32], [t.f32], arg_names=["c", "x"])
    b = Builder.at_end(f.entry_block)
    c, x = f.arguments
    if_op = b.insert(IfOp.create(c, [t.f32]))
    Builder.at_end(if_op.then_region.block).create(YieldOp, [x])
    Builder.at_end(if_op.else_region.block).create(YieldOp, [x])
    b.create(ReturnOp, [if_op.result])
    verify(f)
    assert print_ir(f) == ir("""
        func.func @g(%c: i1, %x: f32) -> f32 {
          %0 = scf.if %c : f32 {
            scf.yield %x
          } {
            scf.yield %x
          }
          func.return %0
        }
    """)


@pytest.mark.parametrize("body, op, message", [
    (["scf.for %i, %j, %i {", "^bb0(%k: i32):", "  scf.yield", "!}"], "scf.for",
     "lower, upper and step must have one type, got (i32, i64, i32)"),
    (["scf.for %i, %i, %i {", "^bb0(%k: i64):", "  scf.yield", "!}"], "scf.for",
     "the body's first argument must be the induction variable of type i32"),
    (["scf.for %i, %i, %i {", "  scf.yield", "!}"], "scf.for",
     "the body's first argument must be the induction variable of type i32"),
    (["%0 = scf.for %i, %i, %i, %x : f32 {", "^bb0(%k: i32, %a: f16):", "  scf.yield %a", "!}"], "scf.for",
     "loop-carried types differ: init (f32), body (f16), results (f32)"),
    (["%0 = scf.for %i, %i, %i, %x : i32 {", "^bb0(%k: i32, %a: f32):", "  scf.yield %a", "!}"], "scf.for",
     "loop-carried types differ: init (f32), body (f32), results (i32)"),
    (["%0 = scf.for %i, %i, %i, %x : f32 {", "^bb0(%k: i32, %a: f32):", "  !scf.yield %k", "}"], "scf.yield",
     "yields (i32) but the loop carries (f32)"),
    (["scf.for %x, %x, %x {", "^bb0(%k: f32):", "  scf.yield", "!}"], "scf.for",
     "operand 'lower' must be an i32 or i64 scalar, got f32"),
    (["%0 = scf.for %i, %i, %i, %x : f32 {", "^bb0(%k: i32, %a: f32):", "  %1 = arith.addf %a, %a : f32", "!}"],
     "scf.for", "region 'body' must end with 'scf.yield', found 'arith.addf'"),
    (["scf.if %m {", "  scf.yield", "} {", "  scf.yield", "!}"], "scf.if", "condition must be an i1 scalar, got tile<4xi1>"),
    (["scf.if %i {", "  scf.yield", "} {", "  scf.yield", "!}"], "scf.if",
     "operand 'condition' must be i1 or a tile of i1, got i32"),
    (["%0 = scf.if %c : f32 {", "  !scf.yield %i", "} {", "  scf.yield %x", "}"], "scf.yield",
     "the then branch yields (i32) but the if returns (f32)"),
    (["%0 = scf.if %c : f32 {", "  scf.yield %x", "} {", "  !scf.yield", "}"], "scf.yield",
     "the else branch yields () but the if returns (f32)"),
    (["scf.if %c {", "  scf.yield", "!}"], "scf.if", "expects 2 regions, got 1"),
    (["%0 = scf.while %i : i32 {", "^bb0(%k: f32):", "  scf.condition %c, %k", "} {",
      "^bb0(%k_1: i32):", "  scf.yield %k_1", "!}"], "scf.while",
     "the before region takes (f32) but the loop starts with (i32)"),
    (["%0 = scf.while %i : i32 {", "^bb0(%k: i32):", "  !scf.condition %c, %x", "} {",
      "^bb0(%k_1: i32):", "  scf.yield %k_1", "}"], "scf.condition",
     "passes values whose types differ from the after region's arguments or the loop's results"),
    (["%0 = scf.while %i : i32 {", "^bb0(%k: i32):", "  scf.condition %c, %k", "} {",
      "^bb0(%k_1: i32):", "  !scf.yield %x", "}"], "scf.yield", "yields (f32) but the before region takes (i32)"),
    (["%0 = scf.while %i : i32 {", "^bb0(%k: i32):", "  scf.yield %k", "} {",
      "^bb0(%k_1: i32):", "  scf.yield %k_1", "!}"], "scf.while",
     "region 'before' must end with 'scf.condition', found 'scf.yield'"),
    (["%0 = scf.while %i : i32 {", "^bb0(%k: i32):", "  !scf.condition %i, %k", "} {",
      "^bb0(%k_1: i32):", "  scf.yield %k_1", "}"], "scf.condition",
     "operand 'condition' must be i1 or a tile of i1, got i32"),
])
def test_op_checks(body, op, message):
    signature = "%i: i32, %j: i64, %x: f32, %c: i1, %m: tile<4xi1>"
    assert_verify_error(func(signature, *body, "func.return"), op, message)


def test_condition_must_be_inside_a_while():
    from polytile.dialects.func import FuncOp
    from polytile.dialects.scf import ConditionOp

    f = FuncOp.create("f", [t.i1])
    f.entry_block.append(ConditionOp.build(f.arguments[0], []))
    with pytest.raises(VerificationError) as info:
        verify(f)
    assert str(info.value) == "error: 'func.func' op region 'body' must end with 'func.return', found 'scf.condition'"
    # Inside a region that accepts any terminator (a module), the parent check speaks.
    assert_verify_error("%c = arith.constant {value = true} : i1\n!scf.condition %c\n", "scf.condition",
                        "must be inside 'scf.while', found in 'builtin.module'")


def test_yield_must_be_inside_a_loop_or_if():
    assert_verify_error("!scf.yield\n", "scf.yield", "must be inside 'scf.for' or 'scf.if' or 'scf.while', "
                                                     "found in 'builtin.module'")


@pytest.mark.parametrize("body, op, message", [
    (["scf.while {", "  !scf.condition %m", "} {", "  scf.yield", "}"], "scf.condition",
     "condition must be an i1 scalar, got tile<4xi1>"),
    (["scf.for %s, %s, %s {", "^bb0(%k: i16):", "  scf.yield", "!}"], "scf.for",
     "operand 'lower' must be an i32 or i64 scalar, got i16"),
    (["scf.for %u, %u, %u {", "^bb0(%k: u32):", "  scf.yield", "!}"], "scf.for",
     "operand 'lower' must be an i32 or i64 scalar, got u32"),
    (["scf.for %c, %c, %c {", "^bb0(%k: i1):", "  scf.yield", "!}"], "scf.for",
     "operand 'lower' must be an i32 or i64 scalar, got i1"),
    (["scf.for %i, %i, %c {", "^bb0(%k: i32):", "  scf.yield", "!}"], "scf.for",
     "operand 'step' must be an i32 or i64 scalar, got i1"),
])
def test_loop_bounds_are_i32_or_i64_and_while_conditions_scalar(body, op, message):
    signature = "%i: i32, %s: i16, %u: u32, %c: i1, %m: tile<4xi1>"
    assert_verify_error(func(signature, *body, "func.return"), op, message)


def test_i64_loops_verify():
    verify(parse_module(func("%n: i64", "scf.for %n, %n, %n {", "^bb0(%k: i64):", "  scf.yield", "}",
                             "func.return")))
