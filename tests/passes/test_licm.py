"""Loop-invariant code motion: IR text in, exact IR text out."""

from __future__ import annotations

import pytest

from polytile.analysis.call_graph import CallGraph
from polytile.ir import parse_module
from polytile.passes.licm import LoopInvariantCodeMotion, hoist_loop_invariants
from polytile.passes.pass_base import PassContext
from polytile.ir_testing import apply_passes, dedent


def check(before: str, after: str, **options) -> None:
    assert apply_passes(before, LoopInvariantCodeMotion(**options)) == dedent(after)


def unchanged(text: str, **options) -> None:
    check(text, text, **options)


def test_invariant_op_moves_before_the_loop():
    check("""
        func.func @k(%n: i32, %m: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %r = scf.for %c0, %n, %c1, %c0 : i32 {
          ^bb0(%i: i32, %acc: i32):
            %inv = arith.muli %n, %m : i32
            %next = arith.addi %acc, %inv : i32
            scf.yield %next
          }
          func.return
        }
    """, """
        func.func @k(%n: i32, %m: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %inv = arith.muli %n, %m : i32
          %r = scf.for %c0, %n, %c1, %c0 : i32 {
          ^bb0(%i: i32, %acc: i32):
            %next = arith.addi %acc, %inv : i32
            scf.yield %next
          }
          func.return
        }
    """)


def test_a_loop_with_disable_licm_keeps_its_invariant_ops():
    # pl.range(..., disable_licm=True), Triton's loop option; the loop around it still hoists.
    check("""
        func.func @k(%n: i32, %m: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          scf.for %c0, %n, %c1 {
          ^bb0(%j: i32):
            %outer = arith.addi %n, %m : i32
            %r = scf.for %c0, %n, %c1, %c0 {pt.disable_licm = true} : i32 {
            ^bb0(%i: i32, %acc: i32):
              %inv = arith.muli %n, %m : i32
              %next = arith.addi %acc, %inv : i32
              scf.yield %next
            }
            scf.yield
          }
          func.return
        }
    """, """
        func.func @k(%n: i32, %m: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %outer = arith.addi %n, %m : i32
          scf.for %c0, %n, %c1 {
          ^bb0(%j: i32):
            %r = scf.for %c0, %n, %c1, %c0 {pt.disable_licm = true} : i32 {
            ^bb0(%i: i32, %acc: i32):
              %inv = arith.muli %n, %m : i32
              %next = arith.addi %acc, %inv : i32
              scf.yield %next
            }
            scf.yield
          }
          func.return
        }
    """)


def test_chain_of_invariants_moves_in_order():
    check("""
        func.func @k(%p: ptr<f32>, %n: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          scf.for %c0, %n, %c1 {
          ^bb0(%i: i32):
            %pid = tile.program_id {axis = 0} : i32
            %c64 = arith.constant {value = 64} : i32
            %base = arith.muli %pid, %c64 : i32
            %r = tile.arange {end = 64, start = 0} : tile<64xi32>
            %s = tile.splat %base : tile<64xi32>
            %offs = arith.addi %s, %r : tile<64xi32>
            %iv = tile.splat %i : tile<64xi32>
            %at = arith.addi %offs, %iv : tile<64xi32>
            %ps = tile.splat %p : tile<64xptr<f32>>
            %ptrs = tile.addptr %ps, %at : tile<64xptr<f32>>
            %v = tile.load %ptrs : tile<64xf32>
            tile.store %ptrs, %v
            scf.yield
          }
          func.return
        }
    """, """
        func.func @k(%p: ptr<f32>, %n: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %pid = tile.program_id {axis = 0} : i32
          %c64 = arith.constant {value = 64} : i32
          %base = arith.muli %pid, %c64 : i32
          %r = tile.arange {end = 64, start = 0} : tile<64xi32>
          %s = tile.splat %base : tile<64xi32>
          %offs = arith.addi %s, %r : tile<64xi32>
          %ps = tile.splat %p : tile<64xptr<f32>>
          scf.for %c0, %n, %c1 {
          ^bb0(%i: i32):
            %iv = tile.splat %i : tile<64xi32>
            %at = arith.addi %offs, %iv : tile<64xi32>
            %ptrs = tile.addptr %ps, %at : tile<64xptr<f32>>
            %v = tile.load %ptrs : tile<64xf32>
            tile.store %ptrs, %v
            scf.yield
          }
          func.return
        }
    """)


def test_invariants_leave_nested_loops_through_every_level():
    check("""
        func.func @k(%n: i32, %m: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %r = scf.for %c0, %n, %c1, %c0 : i32 {
          ^bb0(%i: i32, %acc: i32):
            %s = scf.for %c0, %m, %c1, %acc : i32 {
            ^bb0(%j: i32, %inner: i32):
              %both = arith.muli %n, %m : i32
              %outer_only = arith.addi %i, %both : i32
              %mine = arith.addi %j, %outer_only : i32
              %next = arith.addi %inner, %mine : i32
              scf.yield %next
            }
            scf.yield %s
          }
          func.return
        }
    """, """
        func.func @k(%n: i32, %m: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %both = arith.muli %n, %m : i32
          %r = scf.for %c0, %n, %c1, %c0 : i32 {
          ^bb0(%i: i32, %acc: i32):
            %outer_only = arith.addi %i, %both : i32
            %s = scf.for %c0, %m, %c1, %acc : i32 {
            ^bb0(%j: i32, %inner: i32):
              %mine = arith.addi %j, %outer_only : i32
              %next = arith.addi %inner, %mine : i32
              scf.yield %next
            }
            scf.yield %s
          }
          func.return
        }
    """)


def test_constants_leave_nested_loops():
    check("""
        func.func @k(%n: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          scf.for %c0, %n, %c1 {
          ^bb0(%i: i32):
            scf.for %c0, %n, %c1 {
            ^bb0(%j: i32):
              %zero = arith.constant {value = 0.0} : tile<16x16xf32>
              scf.yield
            }
            scf.yield
          }
          func.return
        }
    """, """
        func.func @k(%n: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %zero = arith.constant {value = 0.0} : tile<16x16xf32>
          scf.for %c0, %n, %c1 {
          ^bb0(%i: i32):
            scf.for %c0, %n, %c1 {
            ^bb0(%j: i32):
              scf.yield
            }
            scf.yield
          }
          func.return
        }
    """)


def test_loads_stores_and_values_of_the_iteration_stay():
    unchanged("""
        func.func @k(%p: ptr<f32>, %n: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %z = arith.constant {value = 0.0} : f32
          %r = scf.for %c0, %n, %c1, %z : f32 {
          ^bb0(%i: i32, %acc: f32):
            %v = tile.load %p : f32
            %w = arith.addf %v, %v : f32
            tile.store %p, %w
            %old = tile.atomic_rmw %p, %w {kind = "fadd"} : f32
            %sq = arith.mulf %acc, %acc : f32
            %twice = arith.addi %i, %i : i32
            %f = arith.sitofp %twice : f32
            %next = arith.addf %sq, %f : f32
            scf.yield %next
          }
          func.return
        }
    """)


def test_ops_with_regions_and_ops_inside_them_stay():
    unchanged("""
        func.func @k(%n: i32, %flag: i1) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %r = scf.for %c0, %n, %c1, %c0 : i32 {
          ^bb0(%i: i32, %acc: i32):
            %picked = scf.if %flag : i32 {
              %sq = arith.muli %n, %n : i32
              scf.yield %sq
            } {
              scf.yield %n
            }
            %next = arith.addi %acc, %picked : i32
            scf.yield %next
          }
          func.return
        }
    """)


DIVISIONS = """
    func.func @k(%n: i32, %d: i32) attributes {kernel = true} {
      %c0 = arith.constant {value = 0} : i32
      %c1 = arith.constant {value = 1} : i32
      %c4 = arith.constant {value = 4} : i32
      %cm1 = arith.constant {value = -1} : i32
      %r = scf.for %c0, %n, %c1, %c0 : i32 {
      ^bb0(%i: i32, %acc: i32):
        %by_var = arith.divsi %n, %d : i32
        %rem_var = arith.remui %n, %d : i32
        %by_zero = arith.divui %n, %c0 : i32
        %by_minus_one = arith.divsi %n, %cm1 : i32
        %by_minus_one_u = arith.divui %n, %cm1 : i32
        %by_four = arith.divsi %n, %c4 : i32
        %rem_four = arith.remsi %n, %c4 : i32
        %fdiv = arith.sitofp %d : f32
        %f = arith.divf %fdiv, %fdiv : f32
        %t = arith.addi %by_var, %rem_var : i32
        %u = arith.addi %t, %by_zero : i32
        %v = arith.addi %u, %by_minus_one : i32
        %w = arith.addi %v, %by_four : i32
        %x = arith.addi %w, %rem_four : i32
        %y = arith.addi %x, %by_minus_one_u : i32
        %next = arith.addi %acc, %y : i32
        scf.yield %next
      }
      func.return
    }
"""


def test_divisions_that_might_trap_stay_in_a_loop_that_might_not_run():
    check(DIVISIONS, """
        func.func @k(%n: i32, %d: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %c4 = arith.constant {value = 4} : i32
          %cm1 = arith.constant {value = -1} : i32
          %by_minus_one_u = arith.divui %n, %cm1 : i32
          %by_four = arith.divsi %n, %c4 : i32
          %rem_four = arith.remsi %n, %c4 : i32
          %fdiv = arith.sitofp %d : f32
          %f = arith.divf %fdiv, %fdiv : f32
          %r = scf.for %c0, %n, %c1, %c0 : i32 {
          ^bb0(%i: i32, %acc: i32):
            %by_var = arith.divsi %n, %d : i32
            %rem_var = arith.remui %n, %d : i32
            %by_zero = arith.divui %n, %c0 : i32
            %by_minus_one = arith.divsi %n, %cm1 : i32
            %t = arith.addi %by_var, %rem_var : i32
            %u = arith.addi %t, %by_zero : i32
            %v = arith.addi %u, %by_minus_one : i32
            %w = arith.addi %v, %by_four : i32
            %x = arith.addi %w, %rem_four : i32
            %y = arith.addi %x, %by_minus_one_u : i32
            %next = arith.addi %acc, %y : i32
            scf.yield %next
          }
          func.return
        }
    """)


def test_minus_one_written_as_all_ones_is_still_unsafe_for_signed_division():
    # The constant itself moves; the division by it (INT_MIN / -1 overflows) does not.
    check("""
        func.func @k(%n: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %r = scf.for %c0, %n, %c1, %c0 : i32 {
          ^bb0(%i: i32, %acc: i32):
            %all_ones = arith.constant {value = 4294967295} : i32
            %q = arith.divsi %n, %all_ones : i32
            %next = arith.addi %acc, %q : i32
            scf.yield %next
          }
          func.return
        }
    """, """
        func.func @k(%n: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %all_ones = arith.constant {value = 4294967295} : i32
          %r = scf.for %c0, %n, %c1, %c0 : i32 {
          ^bb0(%i: i32, %acc: i32):
            %q = arith.divsi %n, %all_ones : i32
            %next = arith.addi %acc, %q : i32
            scf.yield %next
          }
          func.return
        }
    """)


def test_any_division_leaves_a_loop_known_to_run():
    check("""
        func.func @k(%n: i32, %d: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %c8 = arith.constant {value = 8} : i32
          %r = scf.for %c0, %c8, %c1, %c0 : i32 {
          ^bb0(%i: i32, %acc: i32):
            %q = arith.divsi %n, %d : i32
            %next = arith.addi %acc, %q : i32
            scf.yield %next
          }
          %s = scf.for %c8, %c0, %c1, %c0 : i32 {
          ^bb0(%i: i32, %acc: i32):
            %q = arith.divsi %n, %d : i32
            %next = arith.addi %acc, %q : i32
            scf.yield %next
          }
          func.return
        }
    """, """
        func.func @k(%n: i32, %d: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %c8 = arith.constant {value = 8} : i32
          %q = arith.divsi %n, %d : i32
          %r = scf.for %c0, %c8, %c1, %c0 : i32 {
          ^bb0(%i: i32, %acc: i32):
            %next = arith.addi %acc, %q : i32
            scf.yield %next
          }
          %s = scf.for %c8, %c0, %c1, %c0 : i32 {
          ^bb0(%i_1: i32, %acc_1: i32):
            %q_1 = arith.divsi %n, %d : i32
            %next_1 = arith.addi %acc_1, %q_1 : i32
            scf.yield %next_1
          }
          func.return
        }
    """)


WHILE = """
    func.func @k(%n: i32, %d: i32, %p: ptr<i32>) attributes {kernel = true} {
      %c0 = arith.constant {value = 0} : i32
      %r = scf.while %c0 : i32 {
      ^bb0(%i: i32):
        %limit = arith.muli %n, %n : i32
        %q = arith.divsi %n, %d : i32
        %bound = arith.subi %limit, %q : i32
        %go = arith.cmpi %i, %bound {predicate = "slt"} : i1
        scf.condition %go, %i
      } {
      ^bb0(%j: i32):
        %step = arith.addi %d, %d : i32
        %scaled = arith.muli %step, %n : i32
        %slow = arith.divsi %n, %d : i32
        %v = tile.load %p : i32
        %a = arith.addi %j, %step : i32
        %b = arith.addi %a, %v : i32
        %c = arith.addi %b, %slow : i32
        scf.yield %c
      }
      func.return
    }
"""


def test_while_hoists_from_both_regions_but_keeps_traps_in_the_body():
    # The before region runs at least once, so even its division may move; the body
    # (after region) may run zero times, so its division stays.
    check(WHILE, """
        func.func @k(%n: i32, %d: i32, %p: ptr<i32>) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %limit = arith.muli %n, %n : i32
          %q = arith.divsi %n, %d : i32
          %bound = arith.subi %limit, %q : i32
          %step = arith.addi %d, %d : i32
          %scaled = arith.muli %step, %n : i32
          %r = scf.while %c0 : i32 {
          ^bb0(%i: i32):
            %go = arith.cmpi %i, %bound {predicate = "slt"} : i1
            scf.condition %go, %i
          } {
          ^bb0(%j: i32):
            %slow = arith.divsi %n, %d : i32
            %v = tile.load %p : i32
            %a = arith.addi %j, %step : i32
            %b = arith.addi %a, %v : i32
            %c = arith.addi %b, %slow : i32
            scf.yield %c
          }
          func.return
        }
    """)


def test_while_loops_can_be_left_alone():
    unchanged(WHILE, hoist_from_while=False)


def test_loop_inside_a_while_body_hoists_into_it_and_then_out():
    check("""
        func.func @k(%n: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %r = scf.while %c0 : i32 {
          ^bb0(%i: i32):
            %go = arith.cmpi %i, %n {predicate = "slt"} : i1
            scf.condition %go, %i
          } {
          ^bb0(%j: i32):
            %s = scf.for %c0, %n, %c1, %j : i32 {
            ^bb0(%k: i32, %acc: i32):
              %inv = arith.muli %n, %n : i32
              %dep = arith.addi %j, %inv : i32
              %next = arith.addi %acc, %dep : i32
              scf.yield %next
            }
            scf.yield %s
          }
          func.return
        }
    """, """
        func.func @k(%n: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %inv = arith.muli %n, %n : i32
          %r = scf.while %c0 : i32 {
          ^bb0(%i: i32):
            %go = arith.cmpi %i, %n {predicate = "slt"} : i1
            scf.condition %go, %i
          } {
          ^bb0(%j: i32):
            %dep = arith.addi %j, %inv : i32
            %s = scf.for %c0, %n, %c1, %j : i32 {
            ^bb0(%k: i32, %acc: i32):
              %next = arith.addi %acc, %dep : i32
              scf.yield %next
            }
            scf.yield %s
          }
          func.return
        }
    """)


def test_reports_what_changed():
    moved = parse_module(dedent("""
        func.func @k(%n: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          scf.for %c0, %n, %c1 {
          ^bb0(%i: i32):
            %x = arith.addi %n, %n : i32
            %y = arith.addi %x, %n : i32
            scf.yield
          }
          func.return
        }
    """))
    context = PassContext()
    preserved = LoopInvariantCodeMotion().run(moved, context)
    assert context.statistics == {"licm.hoisted": 2}
    assert not preserved.preserves_all and preserved.preserves(CallGraph)

    still = parse_module(dedent("""
        func.func @k(%n: i32) attributes {kernel = true} {
          func.return
        }
    """))
    assert LoopInvariantCodeMotion().run(still, PassContext()).preserves_all


def test_pass_options_and_spelling():
    assert LoopInvariantCodeMotion.name == "licm"
    assert LoopInvariantCodeMotion.summary
    assert LoopInvariantCodeMotion.from_options({"hoist-from-while": "off"}) == \
        LoopInvariantCodeMotion(hoist_from_while=False)
    assert LoopInvariantCodeMotion(hoist_from_while=False).spelling() == "licm{hoist-from-while=false}"


# --------------------------------------------------------------------------------------
# Loop ops that plugins define


@pytest.fixture(scope="module")
def plugin_loops():
    """Two plugin-style ops with a repeated body: ``myloop.repeat`` (registered as a loop
    that may run zero times), ``myloop.once`` (registered as one whose body runs at least
    once), and ``myloop.region`` (never registered: LICM must leave it alone)."""
    from polytile.ir import IR_REGISTRY
    from polytile.ir.constraints import IntScalar
    from polytile.ir.opdef import Operand, RegionDef, Terminator, define_op
    from polytile.ir.operation import Operation
    from polytile.passes.licm import LOOP_BODIES, LoopRegion, register_loop

    def loop_op(name: str, class_name: str) -> type:
        namespace = {"name": name, "count": Operand(IntScalar), "body": RegionDef(terminators=("myloop.next",)),
                     "__module__": __name__, "__qualname__": class_name, "__doc__": "Runs its body count times."}
        return define_op(type(class_name, (Operation,), namespace))

    next_op = define_op(type("NextOp", (Operation,), {
        "name": "myloop.next", "traits": (Terminator,), "__module__": __name__, "__qualname__": "NextOp"}))
    repeat, once, region = (loop_op("myloop.repeat", "RepeatOp"), loop_op("myloop.once", "OnceOp"),
                            loop_op("myloop.region", "RegionOp"))
    register_loop(repeat)
    register_loop(once, lambda op: [LoopRegion(op.regions[0], runs_at_least_once=True)])
    yield repeat, region
    for cls in (repeat, once):
        LOOP_BODIES.pop(cls)
    for cls in (next_op, repeat, once, region):
        IR_REGISTRY.ops._entries.pop(cls.name)


PLUGIN_LOOP = """
    func.func @k(%n: i32, %d: i32, %p: ptr<i32>) attributes {kernel = true} {
      myloop.LOOP %n {
      ^bb0(%i: i32):
        %inv = arith.muli %n, %n : i32
        %q = arith.divsi %n, %d : i32
        %v = tile.load %p : i32
        %a = arith.addi %inv, %i : i32
        %b = arith.addi %a, %v : i32
        %c = arith.addi %b, %q : i32
        tile.store %p, %c
        myloop.next
      }
      func.return
    }
"""


def test_a_registered_plugin_loop_gets_licm(plugin_loops):
    # May run zero times: the division (which may trap) stays, like in scf.while's body.
    check(PLUGIN_LOOP.replace("LOOP", "repeat"), """
        func.func @k(%n: i32, %d: i32, %p: ptr<i32>) attributes {kernel = true} {
          %inv = arith.muli %n, %n : i32
          myloop.repeat %n {
          ^bb0(%i: i32):
            %q = arith.divsi %n, %d : i32
            %v = tile.load %p : i32
            %a = arith.addi %inv, %i : i32
            %b = arith.addi %a, %v : i32
            %c = arith.addi %b, %q : i32
            tile.store %p, %c
            myloop.next
          }
          func.return
        }
    """)


def test_a_plugin_loop_that_runs_at_least_once_lets_divisions_move(plugin_loops):
    check(PLUGIN_LOOP.replace("LOOP", "once"), """
        func.func @k(%n: i32, %d: i32, %p: ptr<i32>) attributes {kernel = true} {
          %inv = arith.muli %n, %n : i32
          %q = arith.divsi %n, %d : i32
          myloop.once %n {
          ^bb0(%i: i32):
            %v = tile.load %p : i32
            %a = arith.addi %inv, %i : i32
            %b = arith.addi %a, %v : i32
            %c = arith.addi %b, %q : i32
            tile.store %p, %c
            myloop.next
          }
          func.return
        }
    """)


def test_an_unregistered_op_with_a_region_is_not_a_loop(plugin_loops):
    unchanged(PLUGIN_LOOP.replace("LOOP", "region"))
    module = parse_module(dedent(PLUGIN_LOOP.replace("LOOP", "region")))
    op = next(op for op in module.walk() if op.name == "myloop.region")
    with pytest.raises(ValueError, match="'myloop.region' is not a loop that LICM knows .*register_loop"):
        hoist_loop_invariants(op)


def test_invariants_leave_an_scf_for_nested_in_a_plugin_loop(plugin_loops):
    check("""
        func.func @k(%n: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          myloop.repeat %n {
          ^bb0(%i: i32):
            %s = scf.for %c0, %n, %c1, %i : i32 {
            ^bb0(%k: i32, %acc: i32):
              %inv = arith.muli %n, %n : i32
              %dep = arith.addi %i, %inv : i32
              %next = arith.addi %acc, %dep : i32
              scf.yield %next
            }
            myloop.next
          }
          func.return
        }
    """, """
        func.func @k(%n: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %inv = arith.muli %n, %n : i32
          myloop.repeat %n {
          ^bb0(%i: i32):
            %dep = arith.addi %i, %inv : i32
            %s = scf.for %c0, %n, %c1, %i : i32 {
            ^bb0(%k: i32, %acc: i32):
              %next = arith.addi %acc, %dep : i32
              scf.yield %next
            }
            myloop.next
          }
          func.return
        }
    """)


def test_the_core_loops_are_in_the_table_and_only_op_classes_register():
    from polytile.dialects.scf import ForOp, IfOp, WhileOp
    from polytile.passes.licm import LOOP_BODIES, register_loop

    assert ForOp in LOOP_BODIES and WhileOp in LOOP_BODIES and IfOp not in LOOP_BODIES
    with pytest.raises(TypeError, match="register_loop needs an op class"):
        register_loop("scf.for")
