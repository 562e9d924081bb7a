"""dce: unused side-effect-free ops, dead scf results, unreachable functions; and what
must stay (stores, atomics, calls, volatile loads, kernels)."""

from __future__ import annotations

import pytest

from polytile.ir import parse_module
from polytile.passes.dce import DeadCodeElimination
from polytile.passes.pass_base import PassContext
from polytile.ir_testing import apply_passes, dedent


def dce(text: str, context: PassContext | None = None, **options) -> str:
    return apply_passes(text, DeadCodeElimination(**options), context=context)


def check(before: str, after: str, **options) -> None:
    assert dce(before, **options) == dedent(after)


def unchanged(text: str, **options) -> None:
    check(text, text, **options)


def test_dead_chains_go_in_one_run():
    context = PassContext()
    assert dce("""
        func.func @f(%x: i32, %p: ptr<f32>) -> i32 attributes {kernel = true} {
          %pid = tile.program_id {axis = 0} : i32
          %a = arith.addi %x, %pid : i32
          %b = arith.muli %a, %a : i32
          %r = tile.arange {end = 8, start = 0} : tile<8xi32>
          %s = tile.splat %b : tile<8xi32>
          %t = arith.addi %r, %s : tile<8xi32>
          %v = tile.load %p : f32
          %w = math.exp %v : f32
          %c = arith.constant {value = 1} : i32
          %live = arith.addi %x, %c : i32
          func.return %live
        }
    """, context) == dedent("""
        func.func @f(%x: i32, %p: ptr<f32>) -> i32 attributes {kernel = true} {
          %c = arith.constant {value = 1} : i32
          %live = arith.addi %x, %c : i32
          func.return %live
        }
    """)
    assert context.statistics["dce.erased-ops"] == 8


def test_side_effects_stay():
    unchanged("""
        func.func @g(%x: i32) -> i32 {
          func.return %x
        }
        func.func @f(%p: ptr<i32>, %x: i32) attributes {kernel = true} {
          %v = tile.load %p {volatile = true} : i32
          %a = tile.atomic_rmw %p, %x {kind = "add"} : i32
          %cas = tile.atomic_cas %p, %x, %x : i32
          %c = func.call %x {callee = @g} : i32
          tile.store %p, %x
          func.return
        }
    """)


def test_values_feeding_a_store_stay():
    unchanged("""
        func.func @f(%p: ptr<f32>, %q: ptr<f32>) attributes {kernel = true} {
          %v = tile.load %p : f32
          %w = math.exp %v : f32
          tile.store %q, %w
          func.return
        }
    """)


def test_dead_ops_inside_regions_and_dead_pure_regions():
    check("""
        func.func @f(%c: i1, %p: ptr<i32>, %x: i32, %n: i32) attributes {kernel = true} {
          scf.if %c {
            %a = arith.muli %x, %x : i32
            tile.store %p, %x
            scf.yield
          } {
            %b = arith.addi %x, %x : i32
            scf.yield
          }
          %z = arith.constant {value = 0} : i32
          %one = arith.constant {value = 1} : i32
          %r = scf.for %z, %n, %one, %x : i32 {
          ^bb0(%iv: i32, %acc: i32):
            %d = arith.addi %acc, %iv : i32
            scf.yield %d
          }
          scf.for %z, %n, %one {
          ^bb0(%jv: i32):
            %e = arith.addi %jv, %jv : i32
            scf.yield
          }
          func.return
        }
    """, """
        func.func @f(%c: i1, %p: ptr<i32>, %x: i32, %n: i32) attributes {kernel = true} {
          scf.if %c {
            tile.store %p, %x
            scf.yield
          } {
            scf.yield
          }
          func.return
        }
    """)


def test_a_loop_with_a_store_stays_even_if_its_results_are_unused():
    check("""
        func.func @f(%p: ptr<i32>, %x: i32, %n: i32) attributes {kernel = true} {
          %z = arith.constant {value = 0} : i32
          %one = arith.constant {value = 1} : i32
          %r = scf.for %z, %n, %one, %x : i32 {
          ^bb0(%iv: i32, %acc: i32):
            tile.store %p, %iv
            %d = arith.addi %acc, %iv : i32
            scf.yield %d
          }
          func.return
        }
    """, """
        func.func @f(%p: ptr<i32>, %x: i32, %n: i32) attributes {kernel = true} {
          %z = arith.constant {value = 0} : i32
          %one = arith.constant {value = 1} : i32
          scf.for %z, %n, %one {
          ^bb0(%iv: i32):
            tile.store %p, %iv
            scf.yield
          }
          func.return
        }
    """)


@pytest.fixture(params=["Pure", "RecursivelyPure"])
def reduce_trait(request, monkeypatch):
    """tile.reduce is moving from ``Pure`` to ``RecursivelyPure``: DCE must judge it by
    its combine region under either trait."""
    from polytile.dialects.tile import ReduceOp
    from polytile.ir.opdef import Pure, RecursivelyPure

    chosen = Pure if request.param == "Pure" else RecursivelyPure
    original = ReduceOp.has_trait.__func__

    def has_trait(cls, trait):
        if trait in (Pure, RecursivelyPure):
            return trait is chosen
        return original(cls, trait)

    monkeypatch.setattr(ReduceOp, "has_trait", classmethod(has_trait))
    return request.param


def test_an_unused_reduce_stays_when_its_combine_region_has_an_atomic(reduce_trait):
    check("""
        func.func @f(%x: tile<8xf32>, %p: tile<8xptr<f32>>) attributes {kernel = true} {
          %a, %q = tile.reduce %x, %p {axis = 0} : f32, ptr<f32> {
          ^bb0(%l: f32, %lp: ptr<f32>, %r: f32, %rp: ptr<f32>):
            %unused = arith.mulf %l, %r : f32
            %old = tile.atomic_rmw %lp, %r {kind = "fadd"} : f32
            %s = arith.addf %l, %r : f32
            tile.reduce_return %s, %lp
          }
          %b = tile.reduce %x {axis = 0} : f32 {
          ^bb0(%l2: f32, %r2: f32):
            %s2 = arith.addf %l2, %r2 : f32
            tile.reduce_return %s2
          }
          func.return
        }
    """, """
        func.func @f(%x: tile<8xf32>, %p: tile<8xptr<f32>>) attributes {kernel = true} {
          %a, %q = tile.reduce %x, %p {axis = 0} : f32, ptr<f32> {
          ^bb0(%l: f32, %lp: ptr<f32>, %r: f32, %rp: ptr<f32>):
            %old = tile.atomic_rmw %lp, %r {kind = "fadd"} : f32
            %s = arith.addf %l, %r : f32
            tile.reduce_return %s, %lp
          }
          func.return
        }
    """)


def test_only_the_dead_loop_carried_values_go():
    check("""
        func.func @f(%p: ptr<i32>, %x: i32, %y: i32, %w: i32, %n: i32) -> i32 attributes {kernel = true} {
          %z = arith.constant {value = 0} : i32
          %one = arith.constant {value = 1} : i32
          %a, %b, %c = scf.for %z, %n, %one, %x, %y, %w : i32, i32, i32 {
          ^bb0(%iv: i32, %u: i32, %v: i32, %t: i32):
            %u2 = arith.addi %u, %iv : i32
            %v2 = arith.muli %v, %v : i32
            %t2 = arith.addi %t, %one : i32
            tile.store %p, %t2
            scf.yield %u2, %v2, %t2
          }
          func.return %a
        }
    """, """
        func.func @f(%p: ptr<i32>, %x: i32, %y: i32, %w: i32, %n: i32) -> i32 attributes {kernel = true} {
          %z = arith.constant {value = 0} : i32
          %one = arith.constant {value = 1} : i32
          %a, %c = scf.for %z, %n, %one, %x, %w : i32, i32 {
          ^bb0(%iv: i32, %u: i32, %t: i32):
            %u2 = arith.addi %u, %iv : i32
            %t2 = arith.addi %t, %one : i32
            tile.store %p, %t2
            scf.yield %u2, %t2
          }
          func.return %a
        }
    """)


def test_loop_carried_values_that_feed_others_stay():
    # %v is unused after the loop but feeds %u, which is used.
    unchanged("""
        func.func @f(%x: i32, %y: i32, %n: i32) -> i32 attributes {kernel = true} {
          %z = arith.constant {value = 0} : i32
          %one = arith.constant {value = 1} : i32
          %a, %b = scf.for %z, %n, %one, %x, %y : i32, i32 {
          ^bb0(%iv: i32, %u: i32, %v: i32):
            %u2 = arith.addi %u, %v : i32
            %v2 = arith.muli %v, %iv : i32
            scf.yield %u2, %v2
          }
          func.return %a
        }
    """)


def test_a_loop_carried_value_feeding_a_store_stays():
    unchanged("""
        func.func @f(%p: ptr<i32>, %x: i32, %n: i32) attributes {kernel = true} {
          %z = arith.constant {value = 0} : i32
          %one = arith.constant {value = 1} : i32
          %a = scf.for %z, %n, %one, %x : i32 {
          ^bb0(%iv: i32, %u: i32):
            tile.store %p, %u
            %u2 = arith.addi %u, %iv : i32
            scf.yield %u2
          }
          func.return
        }
    """)


def test_unused_if_results_go():
    check("""
        func.func @f(%c: i1, %p: ptr<i32>, %x: i32, %y: i32) -> i32 attributes {kernel = true} {
          %a, %b = scf.if %c : i32, i32 {
            %s = arith.addi %x, %y : i32
            %m = arith.muli %x, %y : i32
            tile.store %p, %s
            scf.yield %s, %m
          } {
            %d = arith.subi %x, %y : i32
            scf.yield %x, %d
          }
          func.return %a
        }
    """, """
        func.func @f(%c: i1, %p: ptr<i32>, %x: i32, %y: i32) -> i32 attributes {kernel = true} {
          %a = scf.if %c : i32 {
            %s = arith.addi %x, %y : i32
            tile.store %p, %s
            scf.yield %s
          } {
            scf.yield %x
          }
          func.return %a
        }
    """)


def test_nested_dead_results_go_from_the_inside_out():
    check("""
        func.func @f(%c: i1, %d: i1, %x: i32) -> i32 attributes {kernel = true} {
          %a, %b = scf.if %c : i32, i32 {
            %i, %j = scf.if %d : i32, i32 {
              %m = arith.muli %x, %x : i32
              scf.yield %x, %m
            } {
              scf.yield %x, %x
            }
            scf.yield %i, %j
          } {
            scf.yield %x, %x
          }
          func.return %a
        }
    """, """
        func.func @f(%c: i1, %d: i1, %x: i32) -> i32 attributes {kernel = true} {
          %a = scf.if %c : i32 {
            %i = scf.if %d : i32 {
              scf.yield %x
            } {
              scf.yield %x
            }
            scf.yield %i
          } {
            scf.yield %x
          }
          func.return %a
        }
    """)


def test_unreferenced_helpers_go_and_reachable_ones_stay():
    context = PassContext()
    assert dce("""
        func.func @used(%x: i32) -> i32 attributes {noinline = true} {
          %r = func.call %x {callee = @deep} : i32
          func.return %r
        }
        func.func @deep(%x: i32) -> i32 {
          func.return %x
        }
        func.func @unused(%x: i32) -> i32 {
          %r = func.call %x {callee = @only_from_unused} : i32
          func.return %r
        }
        func.func @only_from_unused(%x: i32) -> i32 {
          func.return %x
        }
        func.func @self_recursive(%x: i32) -> i32 {
          %r = func.call %x {callee = @self_recursive} : i32
          func.return %r
        }
        func.func @k(%x: i32) -> i32 attributes {kernel = true} {
          %r = func.call %x {callee = @used} : i32
          func.return %r
        }
        func.func @other_kernel() attributes {kernel = true} {
          func.return
        }
    """, context) == dedent("""
        func.func @used(%x: i32) -> i32 attributes {noinline = true} {
          %r = func.call %x {callee = @deep} : i32
          func.return %r
        }
        func.func @deep(%x: i32) -> i32 {
          func.return %x
        }
        func.func @k(%x: i32) -> i32 attributes {kernel = true} {
          %r = func.call %x {callee = @used} : i32
          func.return %r
        }
        func.func @other_kernel() attributes {kernel = true} {
          func.return
        }
    """)
    assert context.statistics["dce.erased-functions"] == 3


def test_a_call_inside_a_region_keeps_its_callee():
    unchanged("""
        func.func @helper(%x: i32) -> i32 {
          func.return %x
        }
        func.func @k(%c: i1, %x: i32) -> i32 attributes {kernel = true} {
          %r = scf.if %c : i32 {
            %h = func.call %x {callee = @helper} : i32
            scf.yield %h
          } {
            scf.yield %x
          }
          func.return %r
        }
    """)


def test_function_removal_can_be_turned_off():
    unchanged("""
        func.func @unused(%x: i32) -> i32 {
          func.return %x
        }
        func.func @k() attributes {kernel = true} {
          func.return
        }
    """, remove_unused_functions=False)


def test_nothing_to_do_preserves_analyses():
    module = parse_module(dedent("""
        func.func @k(%p: ptr<i32>, %x: i32) attributes {kernel = true} {
          tile.store %p, %x
          func.return
        }
    """))
    context = PassContext()
    assert DeadCodeElimination().run(module, context).preserves_all
    assert context.statistics.get("dce.erased-ops", 0) == 0


def test_pass_metadata():
    assert DeadCodeElimination.name == "dce"
    assert DeadCodeElimination.summary
    assert DeadCodeElimination(remove_unused_functions=False).spelling() == "dce{remove-unused-functions=false}"


def test_a_module_without_kernels_keeps_its_functions():
    # polytile opt -p dce on a file of helpers must not empty it.
    text = """\
func.func @helper(%a: i32) -> i32 {
  %unused = arith.muli %a, %a : i32
  func.return %a
}
"""
    assert apply_passes(text, DeadCodeElimination()) == """\
func.func @helper(%a: i32) -> i32 {
  func.return %a
}
"""
