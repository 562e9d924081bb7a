"""cse: what is merged (equal pure ops where the first dominates) and what never is."""

from __future__ import annotations

import pytest

from polytile.ir import parse_module
from polytile.passes.cse import CommonSubexpressionElimination, cse_key
from polytile.passes.pass_base import PassContext
from polytile.ir_testing import apply_passes, dedent


def cse(text: str, context: PassContext | None = None) -> str:
    return apply_passes(text, CommonSubexpressionElimination(), context=context)


def check(before: str, after: str) -> None:
    assert cse(before) == dedent(after)


def unchanged(text: str) -> None:
    check(text, text)


def test_equal_ops_in_one_block_are_merged():
    check("""
        func.func @f(%x: i32, %y: i32) -> i32 attributes {kernel = true} {
          %a = arith.addi %x, %y : i32
          %b = arith.addi %x, %y : i32
          %c = arith.muli %a, %b : i32
          func.return %c
        }
    """, """
        func.func @f(%x: i32, %y: i32) -> i32 attributes {kernel = true} {
          %a = arith.addi %x, %y : i32
          %c = arith.muli %a, %a : i32
          func.return %c
        }
    """)


def test_merging_cascades_to_users():
    # Once %b is %a, %d has the operands of %c and goes too.
    check("""
        func.func @f(%x: i32) -> i32 attributes {kernel = true} {
          %a = arith.muli %x, %x : i32
          %b = arith.muli %x, %x : i32
          %c = arith.addi %a, %x : i32
          %d = arith.addi %b, %x : i32
          %e = arith.subi %c, %d : i32
          func.return %e
        }
    """, """
        func.func @f(%x: i32) -> i32 attributes {kernel = true} {
          %a = arith.muli %x, %x : i32
          %c = arith.addi %a, %x : i32
          %e = arith.subi %c, %c : i32
          func.return %e
        }
    """)


def test_constants_and_tile_ops_are_merged():
    check("""
        func.func @f(%p: ptr<f32>) -> (tile<16xi32>, tile<16xi32>, tile<16xptr<f32>>, tile<16xptr<f32>>) attributes {kernel = true} {
          %c1 = arith.constant {value = 16} : i32
          %c2 = arith.constant {value = 16} : i32
          %r1 = tile.arange {end = 16, start = 0} : tile<16xi32>
          %r2 = tile.arange {end = 16, start = 0} : tile<16xi32>
          %s1 = tile.splat %c1 : tile<16xi32>
          %s2 = tile.splat %c2 : tile<16xi32>
          %o1 = arith.addi %r1, %s1 : tile<16xi32>
          %o2 = arith.addi %r2, %s2 : tile<16xi32>
          %p1 = tile.splat %p : tile<16xptr<f32>>
          %p2 = tile.splat %p : tile<16xptr<f32>>
          %q1 = tile.addptr %p1, %o1 : tile<16xptr<f32>>
          %q2 = tile.addptr %p2, %o2 : tile<16xptr<f32>>
          func.return %o1, %o2, %q1, %q2
        }
    """, """
        func.func @f(%p: ptr<f32>) -> (tile<16xi32>, tile<16xi32>, tile<16xptr<f32>>, tile<16xptr<f32>>) attributes {kernel = true} {
          %c1 = arith.constant {value = 16} : i32
          %r1 = tile.arange {end = 16, start = 0} : tile<16xi32>
          %s1 = tile.splat %c1 : tile<16xi32>
          %o1 = arith.addi %r1, %s1 : tile<16xi32>
          %p1 = tile.splat %p : tile<16xptr<f32>>
          %q1 = tile.addptr %p1, %o1 : tile<16xptr<f32>>
          func.return %o1, %o1, %q1, %q1
        }
    """)


def test_outer_op_is_reused_inside_regions():
    check("""
        func.func @f(%c: i1, %x: i32, %n: i32) -> (i32, i32) attributes {kernel = true} {
          %a = arith.addi %x, %x : i32
          %r = scf.if %c : i32 {
            %b = arith.addi %x, %x : i32
            scf.yield %b
          } {
            scf.yield %a
          }
          %z = arith.constant {value = 0} : i32
          %one = arith.constant {value = 1} : i32
          %s = scf.for %z, %n, %one, %x : i32 {
          ^bb0(%iv: i32, %acc: i32):
            %d = arith.addi %x, %x : i32
            %z2 = arith.constant {value = 0} : i32
            %e = arith.addi %acc, %d : i32
            %f = arith.addi %e, %z2 : i32
            scf.yield %f
          }
          func.return %r, %s
        }
    """, """
        func.func @f(%c: i1, %x: i32, %n: i32) -> (i32, i32) attributes {kernel = true} {
          %a = arith.addi %x, %x : i32
          %r = scf.if %c : i32 {
            scf.yield %a
          } {
            scf.yield %a
          }
          %z = arith.constant {value = 0} : i32
          %one = arith.constant {value = 1} : i32
          %s = scf.for %z, %n, %one, %x : i32 {
          ^bb0(%iv: i32, %acc: i32):
            %e = arith.addi %acc, %a : i32
            %f = arith.addi %e, %z : i32
            scf.yield %f
          }
          func.return %r, %s
        }
    """)


def test_equal_ops_in_different_branches_are_not_merged():
    unchanged("""
        func.func @f(%c: i1, %x: i32) -> i32 attributes {kernel = true} {
          %r = scf.if %c : i32 {
            %a = arith.muli %x, %x : i32
            scf.yield %a
          } {
            %b = arith.muli %x, %x : i32
            scf.yield %b
          }
          func.return %r
        }
    """)


def test_a_value_from_a_nested_region_is_not_reused_outside():
    unchanged("""
        func.func @f(%c: i1, %x: i32) -> i32 attributes {kernel = true} {
          %r = scf.if %c : i32 {
            %a = arith.muli %x, %x : i32
            scf.yield %a
          } {
            scf.yield %x
          }
          %b = arith.muli %x, %x : i32
          %s = arith.addi %r, %b : i32
          func.return %s
        }
    """)


def test_ops_in_two_loop_bodies_are_not_merged():
    unchanged("""
        func.func @f(%n: i32, %x: i32) -> (i32, i32) attributes {kernel = true} {
          %z = arith.constant {value = 0} : i32
          %one = arith.constant {value = 1} : i32
          %r = scf.for %z, %n, %one, %x : i32 {
          ^bb0(%iv: i32, %acc: i32):
            %a = arith.muli %iv, %iv : i32
            scf.yield %a
          }
          %s = scf.for %z, %n, %one, %x : i32 {
          ^bb0(%jv: i32, %acc2: i32):
            %b = arith.muli %x, %x : i32
            scf.yield %b
          }
          func.return %r, %s
        }
    """)


def test_functions_do_not_share_values():
    unchanged("""
        func.func @f(%x: i32) -> i32 attributes {kernel = true} {
          %c = arith.constant {value = 3} : i32
          %a = arith.muli %x, %c : i32
          func.return %a
        }
        func.func @g(%x: i32) -> i32 attributes {kernel = true} {
          %c = arith.constant {value = 3} : i32
          %a = arith.muli %x, %c : i32
          func.return %a
        }
    """)


def test_loads_are_never_merged():
    unchanged("""
        func.func @f(%p: ptr<f32>) -> f32 attributes {kernel = true} {
          %a = tile.load %p : f32
          %b = tile.load %p : f32
          %s = arith.addf %a, %b : f32
          func.return %s
        }
    """)


def test_loads_across_a_store_are_never_merged():
    unchanged("""
        func.func @f(%p: ptr<f32>, %x: f32) -> f32 attributes {kernel = true} {
          %a = tile.load %p : f32
          tile.store %p, %x
          %b = tile.load %p : f32
          %s = arith.addf %a, %b : f32
          func.return %s
        }
    """)


def test_side_effecting_ops_are_never_merged():
    unchanged("""
        func.func @g(%x: i32) -> i32 {
          func.return %x
        }
        func.func @f(%p: ptr<i32>, %x: i32) -> (i32, i32, i32, i32) attributes {kernel = true} {
          %a = tile.atomic_rmw %p, %x {kind = "add"} : i32
          %b = tile.atomic_rmw %p, %x {kind = "add"} : i32
          %c = func.call %x {callee = @g} : i32
          %d = func.call %x {callee = @g} : i32
          tile.store %p, %x
          tile.store %p, %x
          func.return %a, %b, %c, %d
        }
    """)


def test_pure_ops_with_regions_are_not_merged():
    unchanged("""
        func.func @f(%x: tile<8xf32>) -> (f32, f32) attributes {kernel = true} {
          %a = tile.reduce %x {axis = 0} : f32 {
          ^bb0(%l: f32, %r: f32):
            %s = arith.addf %l, %r : f32
            tile.reduce_return %s
          }
          %b = tile.reduce %x {axis = 0} : f32 {
          ^bb0(%l2: f32, %r2: f32):
            %s2 = arith.addf %l2, %r2 : f32
            tile.reduce_return %s2
          }
          func.return %a, %b
        }
    """)


@pytest.mark.parametrize("first, second", [
    ("%a = arith.subi %x, %y : i32", "%b = arith.subi %y, %x : i32"),                 # operand order
    ("%a = arith.addi %x, %y : i32", "%b = arith.subi %x, %y : i32"),                 # op name
    ('%a = arith.cmpi %x, %y {predicate = "slt"} : i1',
     '%b = arith.cmpi %x, %y {predicate = "sle"} : i1'),                               # attributes
    ("%a = arith.extsi %x : i64", "%b = arith.extui %x : i64"),
    ("%a = arith.trunci %x : i8", "%b = arith.trunci %x : i16"),                     # result types
    ("%a = arith.trunci %x : i8", "%b = arith.trunci %x : u8"),
    ("%a = arith.addi %x, %y {pt.hint = 1} : i32", "%b = arith.addi %x, %y : i32"),   # a hint differs
])
def test_ops_that_differ_are_not_merged(first, second):
    unchanged(f"""
        func.func @f(%x: i32, %y: i32) attributes {{kernel = true}} {{
          {first}
          {second}
          func.return
        }}
    """)


@pytest.mark.parametrize("first, second, merged", [
    ("0.0", "-0.0", False),
    ("-0.0", "-0.0", True),
    ("nan", "nan", True),        # identical bits
    ("1.0", "1", False),         # spelled differently: the attributes differ
    ("inf", "-inf", False),
])
def test_float_constants_compare_by_bits(first, second, merged):
    before = f"""
        func.func @f() -> (f32, f32) attributes {{kernel = true}} {{
          %a = arith.constant {{value = {first}}} : f32
          %b = arith.constant {{value = {second}}} : f32
          func.return %a, %b
        }}
    """
    if not merged:
        unchanged(before)
    else:
        check(before, f"""
            func.func @f() -> (f32, f32) attributes {{kernel = true}} {{
              %a = arith.constant {{value = {first}}} : f32
              func.return %a, %a
            }}
        """)


def test_bool_and_integer_attributes_differ():
    module = parse_module(dedent("""
        func.func @f() -> (i1, i1) attributes {kernel = true} {
          %a = arith.constant {value = true} : i1
          %b = arith.constant {value = 1} : i1
          func.return %a, %b
        }
    """))
    a, b = list(module.regions[0].block.first_op.regions[0].block)[:2]
    assert cse_key(a) != cse_key(b)


def test_the_later_op_goes_and_the_earlier_keeps_its_name():
    check("""
        func.func @f(%x: f32) -> f32 attributes {kernel = true} {
          %first = math.exp %x : f32
          %second = math.exp %x : f32
          %s = arith.addf %second, %first : f32
          func.return %s
        }
    """, """
        func.func @f(%x: f32) -> f32 attributes {kernel = true} {
          %first = math.exp %x : f32
          %s = arith.addf %first, %first : f32
          func.return %s
        }
    """)


def test_statistics_and_preserved_analyses():
    context = PassContext()
    cse("""
        func.func @f(%x: i32) -> i32 attributes {kernel = true} {
          %a = arith.addi %x, %x : i32
          %b = arith.addi %x, %x : i32
          %c = arith.addi %x, %x : i32
          %d = arith.addi %b, %c : i32
          func.return %d
        }
    """, context)
    assert context.statistics["cse.erased"] == 2
    module = parse_module("func.func @f(%x: i32) -> i32 attributes {kernel = true} {\n  func.return %x\n}\n")
    assert CommonSubexpressionElimination().run(module, PassContext()).preserves_all


def test_pass_metadata():
    assert CommonSubexpressionElimination.name == "cse"
    assert CommonSubexpressionElimination.summary
    assert CommonSubexpressionElimination().spelling() == "cse"
