"""The rewriting toolkit: Rewriter, RewritePattern dispatch and the greedy driver."""

from __future__ import annotations

import pytest

from polytile.dialects.arith import AddIOp, ConstantOp, MulIOp, SubIOp
from polytile.dialects.scf import IfOp
from polytile.ir import parse_module, print_ir, verify
from polytile.passes.pass_base import PassContext
from polytile.passes.rewrite import (
    PatternSet,
    RewriteListener,
    RewritePattern,
    Rewriter,
    apply_patterns_greedily,
    attribute_key,
    collect_patterns,
    constant_value,
    is_side_effect_free,
    is_trivially_dead,
)
from polytile.ir_testing import dedent



def functions(module):
    return list(module.regions[0].block)


def rewrite(text: str, *patterns, context: PassContext | None = None, **options) -> str:
    """Run the driver on every function with only ``patterns`` (not the registered ones)."""
    module = parse_module(dedent(text))
    options.setdefault("registered", False)
    for function in functions(module):
        apply_patterns_greedily(function, patterns, context=context, **options)
    verify(module)
    return print_ir(module)


class MulByTwoToAdd(RewritePattern):
    """x * 2 -> x + x, built through the rewriter."""

    op_names = ("arith.muli",)

    def __init__(self):
        self.seen: list[str] = []

    def match_and_rewrite(self, op, rewriter):
        self.seen.append(op.name)
        if constant_value(op.operands[1]) != 2:
            return False
        add = rewriter.create(AddIOp, op.operands[0], op.operands[0])
        rewriter.replace_op(op, [add.result])
        return True


class SeeEverything(RewritePattern):
    op_names = None

    def __init__(self):
        self.seen: list[str] = []

    def match_and_rewrite(self, op, rewriter):
        self.seen.append(op.name)
        return False


def test_pattern_rewrites_through_the_rewriter_and_the_new_op_takes_the_name():
    pattern = MulByTwoToAdd()
    assert rewrite("""
        func.func @f(%x: i32) -> i32 attributes {kernel = true} {
          %two = arith.constant {value = 2} : i32
          %y = arith.muli %x, %two : i32
          %z = arith.addi %y, %x : i32
          func.return %z
        }
    """, pattern) == dedent("""
        func.func @f(%x: i32) -> i32 attributes {kernel = true} {
          %y = arith.addi %x, %x : i32
          %z = arith.addi %y, %x : i32
          func.return %z
        }
    """)


def test_dispatch_by_op_name():
    named, generic = MulByTwoToAdd(), SeeEverything()
    rewrite("""
        func.func @f(%x: i32) -> i32 attributes {kernel = true} {
          %c = arith.constant {value = 3} : i32
          %a = arith.muli %x, %c : i32
          %b = arith.addi %a, %x : i32
          %d = arith.muli %b, %b : i32
          func.return %d
        }
    """, named, generic, fold=False)
    assert named.seen and set(named.seen) == {"arith.muli"}
    assert {"arith.constant", "arith.muli", "arith.addi", "func.return"} <= set(generic.seen)


def test_pattern_set_orders_by_benefit_then_registration():
    class P(RewritePattern):
        op_names = ("arith.addi",)

        def __init__(self, benefit):
            self.benefit = benefit

        def match_and_rewrite(self, op, rewriter):
            return False

    low, high, also_low, generic = P(1), P(5), P(1), SeeEverything()
    patterns = PatternSet()
    for p in (low, generic, high, also_low):
        patterns.add(p)
    assert patterns.for_op("arith.addi") == (high, low, also_low, generic)
    assert patterns.for_op("arith.subi") == (generic,)
    assert len(patterns) == 4


def test_patterns_declared_on_op_classes_are_collected(monkeypatch):
    pattern = MulByTwoToAdd()
    monkeypatch.setattr(MulIOp, "canonicalization_patterns", (pattern,), raising=False)
    assert pattern in collect_patterns().for_op("arith.muli")
    assert pattern not in collect_patterns(registered=False).for_op("arith.muli")
    text = """
        func.func @f(%x: i32) -> i32 attributes {kernel = true} {
          %two = arith.constant {value = 2} : i32
          %y = arith.muli %x, %two : i32
          func.return %y
        }
    """
    assert "arith.addi %x, %x" in rewrite(text, registered=True)
    assert "arith.muli" in rewrite(text, registered=False)


def test_folding_hoists_and_shares_constants():
    # A constant made by folding inside a loop goes to the top of the function, and is
    # shared with an equal one already there.
    assert rewrite("""
        func.func @f(%n: i32, %x: i32) -> (i32, i32) attributes {kernel = true} {
          %z = arith.constant {value = 0} : i32
          %four = arith.constant {value = 4} : i32
          %one = arith.constant {value = 1} : i32
          %r = scf.for %z, %n, %one, %x : i32 {
          ^bb0(%iv: i32, %acc: i32):
            %two = arith.constant {value = 2} : i32
            %sq = arith.muli %two, %two : i32
            %five = arith.addi %sq, %one : i32
            %s = arith.addi %acc, %five : i32
            %t = arith.addi %s, %sq : i32
            scf.yield %t
          }
          func.return %r, %four
        }
    """) == dedent("""
        func.func @f(%n: i32, %x: i32) -> (i32, i32) attributes {kernel = true} {
          %z = arith.constant {value = 0} : i32
          %four = arith.constant {value = 4} : i32
          %one = arith.constant {value = 1} : i32
          %0 = arith.constant {value = 5} : i32
          %r = scf.for %z, %n, %one, %x : i32 {
          ^bb0(%iv: i32, %acc: i32):
            %s = arith.addi %acc, %0 : i32
            %t = arith.addi %s, %four : i32
            scf.yield %t
          }
          func.return %r, %four
        }
    """)


def test_fold_false_neither_folds_nor_moves_constants():
    text = """
        func.func @f(%x: i32) -> i32 attributes {kernel = true} {
          %y = arith.addi %x, %x : i32
          %a = arith.constant {value = 2} : i32
          %b = arith.addi %a, %a : i32
          %c = arith.addi %y, %b : i32
          func.return %c
        }
    """
    assert rewrite(text, fold=False) == dedent(text)


def test_dead_pure_ops_are_erased_and_effects_kept():
    assert rewrite("""
        func.func @f(%p: ptr<i32>, %x: i32) attributes {kernel = true} {
          %a = arith.addi %x, %x : i32
          %b = arith.muli %a, %a : i32
          %v = tile.load %p : i32
          tile.store %p, %x
          func.return
        }
    """, fold=False) == dedent("""
        func.func @f(%p: ptr<i32>, %x: i32) attributes {kernel = true} {
          tile.store %p, %x
          func.return
        }
    """)


def test_users_of_a_change_are_revisited_in_the_same_sweep():
    context = PassContext()
    rewrite("""
        func.func @f() -> i32 attributes {kernel = true} {
          %a = arith.constant {value = 1} : i32
          %b = arith.addi %a, %a : i32
          %c = arith.addi %b, %b : i32
          %d = arith.addi %c, %c : i32
          %e = arith.addi %d, %d : i32
          func.return %e
        }
    """, context=context)
    # One sweep does all the folding, a second finds nothing left.
    assert context.statistics["canonicalize.folded"] == 4
    assert context.statistics["canonicalize.iterations"] == 2
    assert "canonicalize.not-converged" not in context.statistics


class Flip(RewritePattern):
    """Swaps the operands of subi: never reaches a fixed point."""

    op_names = ("arith.subi",)

    def match_and_rewrite(self, op, rewriter):
        with rewriter.modify_op_in_place(op):
            op.set_operands(list(reversed(op.operands)))
        return True


def test_non_convergence_is_counted_not_raised():
    context = PassContext()
    text = """
        func.func @f(%x: i32, %y: i32) -> i32 attributes {kernel = true} {
          %r = arith.subi %x, %y : i32
          func.return %r
        }
    """
    output = rewrite(text, Flip(), context=context, max_iterations=3)
    assert output in (dedent(text), dedent(text).replace("%x, %y", "%y, %x"))
    assert context.statistics["canonicalize.iterations"] == 3
    assert context.statistics["canonicalize.not-converged"] == 1
    assert context.statistics["canonicalize.sweep-limit"] == 3


def test_statistics_prefix():
    context = PassContext()
    rewrite("""
        func.func @f() -> i32 attributes {kernel = true} {
          %a = arith.constant {value = 1} : i32
          %b = arith.addi %a, %a : i32
          func.return %b
        }
    """, context=context, statistics_prefix="my-pass")
    assert context.statistics["my-pass.folded"] == 1
    assert not any(k.startswith("canonicalize.") for k in context.statistics)


def test_returns_whether_anything_changed():
    module = parse_module(dedent("""
        func.func @f(%x: i32) -> i32 attributes {kernel = true} {
          %c = arith.constant {value = 0} : i32
          %r = arith.addi %x, %c : i32
          func.return %r
        }
    """))
    function = functions(module)[0]
    assert apply_patterns_greedily(function, registered=False) is False
    assert apply_patterns_greedily(function, [MulByTwoToAdd()], registered=False) is False


class Recorder(RewriteListener):
    def __init__(self):
        self.events: list[tuple[str, str]] = []

    def notify_op_inserted(self, op):
        self.events.append(("inserted", op.name))

    def notify_op_modified(self, op):
        self.events.append(("modified", op.name))

    def notify_op_replaced(self, op, new_values):
        self.events.append(("replaced", op.name))

    def notify_op_erased(self, op):
        self.events.append(("erased", op.name))


def _parse_function(text):
    module = parse_module(dedent(text))
    return module, functions(module)[0]


def test_rewriter_notifies_its_listener():
    module, function = _parse_function("""
        func.func @f(%x: i32) -> i32 attributes {kernel = true} {
          %a = arith.muli %x, %x : i32
          %b = arith.addi %a, %x : i32
          func.return %b
        }
    """)
    a, b, _ = function.regions[0].block
    recorder = Recorder()
    rewriter = Rewriter(recorder)
    rewriter.set_insertion_point_before(a)
    new = rewriter.create(SubIOp, a.operands[0], a.operands[1])
    rewriter.replace_op(a, [new.result])
    rewriter.set_operand(b, 1, new.result)
    assert recorder.events == [("inserted", "arith.subi"), ("replaced", "arith.muli"), ("erased", "arith.muli"),
                               ("modified", "arith.addi")]
    assert rewriter.changed
    verify(module)
    assert "%a = arith.subi %x, %x : i32\n  %b = arith.addi %a, %a : i32" in print_ir(module)


def test_rewriter_refuses_bad_replacements():
    module, function = _parse_function("""
        func.func @f(%x: i32) -> i32 attributes {kernel = true} {
          %a = arith.muli %x, %x : i32
          %b = arith.addi %a, %x : i32
          func.return %b
        }
    """)
    a = function.regions[0].block.first_op
    rewriter = Rewriter()
    with pytest.raises(ValueError, match="replacing 1 results"):
        rewriter.replace_op(a, [])
    with pytest.raises(ValueError, match="still used"):
        rewriter.erase_op(a)
    verify(module)


def test_inline_block_before():
    module, function = _parse_function("""
        func.func @f(%c: i1, %x: i32) -> i32 attributes {kernel = true} {
          %r = scf.if %c : i32 {
            %a = arith.addi %x, %x : i32
            scf.yield %a
          } {
            scf.yield %x
          }
          func.return %r
        }
    """)
    if_op = function.regions[0].block.first_op
    assert isinstance(if_op, IfOp)
    rewriter = Rewriter()
    then_block = if_op.regions[0].block
    yielded = list(then_block.last_op.operands)
    rewriter.inline_block_before(then_block, if_op)
    rewriter.replace_op(if_op, yielded)
    verify(module)
    assert print_ir(module) == dedent("""
        func.func @f(%c: i1, %x: i32) -> i32 attributes {kernel = true} {
          %a = arith.addi %x, %x : i32
          func.return %a
        }
    """)


def test_rewriter_constant_without_a_driver_is_made_in_place():
    module, function = _parse_function("""
        func.func @f(%x: f32) -> f32 attributes {kernel = true} {
          func.return %x
        }
    """)
    ret = function.regions[0].block.last_op
    rewriter = Rewriter()
    rewriter.set_insertion_point_before(ret)
    value = rewriter.constant(1.5, ret.operands[0].type)
    assert isinstance(value.defining_op, ConstantOp)
    assert value.defining_op.next_op is ret
    # A value the type cannot hold gives None, not an invalid op.
    assert rewriter.constant(1 << 40, parse_module("func.func @g(%y: i8) {\n  func.return\n}\n")
                             .regions[0].block.first_op.regions[0].block.arguments[0].type) is None


def test_pattern_constants_are_hoisted_and_shared_under_the_driver():
    class SubSelfToZero(RewritePattern):
        op_names = ("arith.subi",)

        def match_and_rewrite(self, op, rewriter):
            if op.operands[0] is not op.operands[1]:
                return False
            zero = rewriter.constant(0, op.result.type)
            rewriter.replace_op(op, [zero])
            return True

    assert rewrite("""
        func.func @f(%c: i1, %x: i32, %y: i32) -> (i32, i32) attributes {kernel = true} {
          %z = arith.constant {value = 0} : i32
          %r = scf.if %c : i32 {
            %a = arith.subi %x, %x : i32
            scf.yield %a
          } {
            %b = arith.subi %y, %y : i32
            scf.yield %b
          }
          func.return %r, %z
        }
    """, SubSelfToZero(), fold=True) == dedent("""
        func.func @f(%c: i1, %x: i32, %y: i32) -> (i32, i32) attributes {kernel = true} {
          %z = arith.constant {value = 0} : i32
          %r = scf.if %c : i32 {
            scf.yield %z
          } {
            scf.yield %z
          }
          func.return %r, %z
        }
    """)


def test_side_effect_queries():
    module, function = _parse_function("""
        func.func @f(%p: ptr<i32>, %c: i1, %x: i32) attributes {kernel = true} {
          %a = arith.addi %x, %x : i32
          %l = tile.load %p : i32
          %v = tile.load %p {volatile = true} : i32
          %r = scf.if %c : i32 {
            scf.yield %x
          } {
            %m = arith.muli %x, %x : i32
            scf.yield %m
          }
          %s = scf.if %c : i32 {
            tile.store %p, %x
            scf.yield %x
          } {
            scf.yield %x
          }
          tile.store %p, %a
          func.return
        }
    """)
    a, load, volatile, pure_if, store_if, store, ret = function.regions[0].block
    assert is_side_effect_free(a) and is_side_effect_free(load)
    assert not is_side_effect_free(volatile)
    assert is_side_effect_free(pure_if) and not is_side_effect_free(store_if)
    assert not is_side_effect_free(store)
    assert not is_trivially_dead(a)           # used by the store
    assert is_trivially_dead(load) and is_trivially_dead(pure_if)
    assert not is_trivially_dead(store_if) and not is_trivially_dead(ret)


@pytest.mark.parametrize("a, b, equal", [
    (0.0, -0.0, False),
    (float("nan"), float("nan"), True),
    (True, 1, False),
    (1, 1.0, False),
    ((1, 2.0), (1, 2.0), True),
    ((0.0,), (-0.0,), False),
    ("x", "x", True),
])
def test_attribute_key(a, b, equal):
    assert (attribute_key(a) == attribute_key(b)) is equal
