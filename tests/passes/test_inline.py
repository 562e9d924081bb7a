"""The inliner: IR text in, exact IR text out."""

from __future__ import annotations

import pytest

from polytile.errors import CompilationError, SourceLocation
from polytile.ir import Block, parse_module, print_ir, verify
from polytile.passes.inline import Inliner
from polytile.passes.pass_base import PassContext
from polytile.ir_testing import apply_passes, dedent


def check(before: str, after: str, **options) -> None:
    assert apply_passes(before, Inliner(**options)) == dedent(after)


def test_single_call_is_inlined_and_the_helper_removed():
    check("""
        func.func @add(%a: i32, %b: i32) -> i32 {
          %s = arith.addi %a, %b : i32
          func.return %s
        }
        func.func @k(%n: i32) attributes {kernel = true} {
          %c = arith.constant {value = 4} : i32
          %r = func.call %n, %c {callee = @add} : i32
          %d = arith.muli %r, %r : i32
          func.return
        }
    """, """
        func.func @k(%n: i32) attributes {kernel = true} {
          %c = arith.constant {value = 4} : i32
          %r = arith.addi %n, %c : i32
          %d = arith.muli %r, %r : i32
          func.return
        }
    """)


def test_nested_calls_are_inlined_bottom_up():
    check("""
        func.func @k(%n: i32) attributes {kernel = true} {
          %r = func.call %n {callee = @outer} : i32
          %s = func.call %r {callee = @outer} : i32
          func.return
        }
        func.func @outer(%x: i32) -> i32 {
          %y = func.call %x {callee = @inner} : i32
          %z = arith.addi %y, %x : i32
          func.return %z
        }
        func.func @inner(%v: i32) -> i32 {
          %sq = arith.muli %v, %v : i32
          func.return %sq
        }
    """, """
        func.func @k(%n: i32) attributes {kernel = true} {
          %y = arith.muli %n, %n : i32
          %r = arith.addi %y, %n : i32
          %y_1 = arith.muli %r, %r : i32
          %s = arith.addi %y_1, %r : i32
          func.return
        }
    """)


def test_multiple_results_and_arguments_returned_unchanged():
    check("""
        func.func @divmod(%a: i32, %b: i32) -> (i32, i32, i32) {
          %q = arith.divsi %a, %b : i32
          %m = arith.remsi %a, %b : i32
          func.return %q, %m, %a
        }
        func.func @k(%x: i32, %y: i32) attributes {kernel = true} {
          %d, %r, %same = func.call %x, %y {callee = @divmod} : i32, i32, i32
          %t = arith.addi %d, %r : i32
          %u = arith.addi %t, %same : i32
          func.return
        }
    """, """
        func.func @k(%x: i32, %y: i32) attributes {kernel = true} {
          %d = arith.divsi %x, %y : i32
          %r = arith.remsi %x, %y : i32
          %t = arith.addi %d, %r : i32
          %u = arith.addi %t, %x : i32
          func.return
        }
    """)


def test_call_inside_a_loop_is_inlined_into_the_loop_body():
    check("""
        func.func @step(%acc: f32, %p: ptr<f32>) -> f32 {
          %v = tile.load %p : f32
          %s = arith.addf %acc, %v : f32
          func.return %s
        }
        func.func @k(%p: ptr<f32>, %n: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %z = arith.constant {value = 0.0} : f32
          %sum = scf.for %c0, %n, %c1, %z : f32 {
          ^bb0(%i: i32, %acc: f32):
            %next = func.call %acc, %p {callee = @step} : f32
            scf.yield %next
          }
          tile.store %p, %sum
          func.return
        }
    """, """
        func.func @k(%p: ptr<f32>, %n: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %z = arith.constant {value = 0.0} : f32
          %sum = scf.for %c0, %n, %c1, %z : f32 {
          ^bb0(%i: i32, %acc: f32):
            %v = tile.load %p : f32
            %next = arith.addf %acc, %v : f32
            scf.yield %next
          }
          tile.store %p, %sum
          func.return
        }
    """)


def test_call_without_results_is_inlined():
    check("""
        func.func @put(%p: ptr<f32>, %v: f32) {
          tile.store %p, %v
          func.return
        }
        func.func @k(%p: ptr<f32>) attributes {kernel = true} {
          %one = arith.constant {value = 1.0} : f32
          func.call %p, %one {callee = @put}
          func.call %p, %one {callee = @put}
          func.return
        }
    """, """
        func.func @k(%p: ptr<f32>) attributes {kernel = true} {
          %one = arith.constant {value = 1.0} : f32
          tile.store %p, %one
          tile.store %p, %one
          func.return
        }
    """)


def test_callee_with_regions_is_cloned_with_its_nested_ops():
    check("""
        func.func @sum_to(%n: i32) -> i32 {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %total = scf.for %c0, %n, %c1, %c0 : i32 {
          ^bb0(%i: i32, %acc: i32):
            %next = arith.addi %acc, %i : i32
            scf.yield %next
          }
          func.return %total
        }
        func.func @k(%n: i32) attributes {kernel = true} {
          %a = func.call %n {callee = @sum_to} : i32
          %b = func.call %a {callee = @sum_to} : i32
          func.return
        }
    """, """
        func.func @k(%n: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %a = scf.for %c0, %n, %c1, %c0 : i32 {
          ^bb0(%i: i32, %acc: i32):
            %next = arith.addi %acc, %i : i32
            scf.yield %next
          }
          %c0_1 = arith.constant {value = 0} : i32
          %c1_1 = arith.constant {value = 1} : i32
          %b = scf.for %c0_1, %a, %c1_1, %c0_1 : i32 {
          ^bb0(%i_1: i32, %acc_1: i32):
            %next_1 = arith.addi %acc_1, %i_1 : i32
            scf.yield %next_1
          }
          func.return
        }
    """)


def test_helper_names_are_kept_and_made_unique_in_the_caller():
    check("""
        func.func @twice(%v: i32) -> i32 {
          %tmp = arith.addi %v, %v : i32
          %out = arith.muli %tmp, %tmp : i32
          func.return %out
        }
        func.func @k(%tmp: i32) attributes {kernel = true} {
          %out = arith.addi %tmp, %tmp : i32
          %res = func.call %out {callee = @twice} : i32
          %4 = func.call %res {callee = @twice} : i32
          func.return
        }
    """, """
        func.func @k(%tmp: i32) attributes {kernel = true} {
          %out = arith.addi %tmp, %tmp : i32
          %tmp_1 = arith.addi %out, %out : i32
          %res = arith.muli %tmp_1, %tmp_1 : i32
          %tmp_2 = arith.addi %res, %res : i32
          %out_1 = arith.muli %tmp_2, %tmp_2 : i32
          func.return
        }
    """)


def test_noinline_callee_stays_a_function_and_its_calls_stay():
    check("""
        func.func @slow(%a: i32) -> i32 attributes {noinline = true} {
          %s = arith.muli %a, %a : i32
          func.return %s
        }
        func.func @k(%n: i32) attributes {kernel = true} {
          %r = func.call %n {callee = @slow} : i32
          func.return
        }
    """, """
        func.func @slow(%a: i32) -> i32 attributes {noinline = true} {
          %s = arith.muli %a, %a : i32
          func.return %s
        }
        func.func @k(%n: i32) attributes {kernel = true} {
          %r = func.call %n {callee = @slow} : i32
          func.return
        }
    """)


def test_helpers_called_by_a_noinline_function_are_inlined_into_it():
    check("""
        func.func @k(%n: i32) attributes {kernel = true} {
          %r = func.call %n {callee = @slow} : i32
          %s = func.call %r {callee = @fast} : i32
          func.return
        }
        func.func @slow(%a: i32) -> i32 attributes {noinline = true} {
          %b = func.call %a {callee = @fast} : i32
          func.return %b
        }
        func.func @fast(%x: i32) -> i32 {
          %y = arith.addi %x, %x : i32
          func.return %y
        }
    """, """
        func.func @k(%n: i32) attributes {kernel = true} {
          %r = func.call %n {callee = @slow} : i32
          %s = arith.addi %r, %r : i32
          func.return
        }
        func.func @slow(%a: i32) -> i32 attributes {noinline = true} {
          %b = arith.addi %a, %a : i32
          func.return %b
        }
    """)


def test_noinline_calls_inside_an_inlined_helper_reach_the_caller():
    check("""
        func.func @leaf(%x: i32) -> i32 attributes {noinline = true} {
          func.return %x
        }
        func.func @wrap(%x: i32) -> i32 {
          %y = func.call %x {callee = @leaf} : i32
          func.return %y
        }
        func.func @k(%n: i32) attributes {kernel = true} {
          %r = func.call %n {callee = @wrap} : i32
          func.return
        }
    """, """
        func.func @leaf(%x: i32) -> i32 attributes {noinline = true} {
          func.return %x
        }
        func.func @k(%n: i32) attributes {kernel = true} {
          %r = func.call %n {callee = @leaf} : i32
          func.return
        }
    """)


DEAD_CODE = """
    func.func @used(%x: i32) -> i32 {
      func.return %x
    }
    func.func @never_called(%x: i32) -> i32 {
      %y = func.call %x {callee = @only_from_dead} : i32
      func.return %y
    }
    func.func @only_from_dead(%x: i32) -> i32 attributes {noinline = true} {
      func.return %x
    }
    func.func @second_kernel(%x: i32) attributes {kernel = true} {
      func.return
    }
    func.func @k(%n: i32) attributes {kernel = true} {
      %r = func.call %n {callee = @used} : i32
      %s = arith.addi %r, %r : i32
      func.return
    }
"""


def test_dead_functions_are_removed_but_kernels_kept():
    check(DEAD_CODE, """
        func.func @second_kernel(%x: i32) attributes {kernel = true} {
          func.return
        }
        func.func @k(%n: i32) attributes {kernel = true} {
          %s = arith.addi %n, %n : i32
          func.return
        }
    """)


def test_a_function_named_by_an_attribute_is_not_dead():
    # Only a call used to count: @helper went and @k's pt.callback named nothing.
    check("""
        func.func @helper(%x: i32) -> i32 {
          %y = func.call %x {callee = @inlined_into_helper} : i32
          func.return %y
        }
        func.func @inlined_into_helper(%x: i32) -> i32 {
          func.return %x
        }
        func.func @k(%x: i32) attributes {kernel = true, pt.callback = @helper} {
          func.return
        }
    """, """
        func.func @helper(%x: i32) -> i32 {
          func.return %x
        }
        func.func @k(%x: i32) attributes {kernel = true, pt.callback = @helper} {
          func.return
        }
    """)


def test_dead_functions_are_kept_when_asked():
    check(DEAD_CODE, """
        func.func @used(%x: i32) -> i32 {
          func.return %x
        }
        func.func @never_called(%x: i32) -> i32 {
          %y = func.call %x {callee = @only_from_dead} : i32
          func.return %y
        }
        func.func @only_from_dead(%x: i32) -> i32 attributes {noinline = true} {
          func.return %x
        }
        func.func @second_kernel(%x: i32) attributes {kernel = true} {
          func.return
        }
        func.func @k(%n: i32) attributes {kernel = true} {
          %s = arith.addi %n, %n : i32
          func.return
        }
    """, remove_dead_functions=False)


def test_recursion_through_a_noinline_function_is_allowed():
    check("""
        func.func @k(%n: i32) attributes {kernel = true} {
          %r = func.call %n {callee = @ping} : i32
          func.return
        }
        func.func @ping(%x: i32) -> i32 attributes {noinline = true} {
          %y = func.call %x {callee = @pong} : i32
          func.return %y
        }
        func.func @pong(%x: i32) -> i32 {
          %y = func.call %x {callee = @ping} : i32
          func.return %y
        }
    """, """
        func.func @k(%n: i32) attributes {kernel = true} {
          %r = func.call %n {callee = @ping} : i32
          func.return
        }
        func.func @ping(%x: i32) -> i32 attributes {noinline = true} {
          %y = func.call %x {callee = @ping} : i32
          func.return %y
        }
    """)


def test_recursion_is_an_error_at_the_recursive_call():
    text = """
        func.func @k(%n: i32) attributes {kernel = true} {
          %r = func.call %n {callee = @a} : i32 loc("kern.py":20:9)
          func.return
        }
        func.func @a(%x: i32) -> i32 {
          %y = func.call %x {callee = @b} : i32 loc("kern.py":5:12)
          func.return %y
        }
        func.func @b(%x: i32) -> i32 {
          %y = func.call %x {callee = @a} : i32 loc("kern.py":9:12)
          func.return %y
        }
    """
    with pytest.raises(CompilationError) as info:
        apply_passes(text, Inliner())
    assert info.value.location == SourceLocation("kern.py", 9, 12)
    assert info.value.message == "recursive calls are not supported: a -> b -> a"
    assert str(info.value) == "kern.py:9:12: error: recursive calls are not supported: a -> b -> a"


def test_self_recursion_is_an_error_and_shows_the_source_line(tmp_path):
    source = tmp_path / "kern.py"
    source.write_text("def f(x):\n    return f(x - 1)\n")
    text = f"""
        func.func @f(%x: i32) -> i32 {{
          %y = func.call %x {{callee = @f}} : i32 loc("{source}":2:12)
          func.return %y
        }}
        func.func @k(%n: i32) attributes {{kernel = true}} {{
          %r = func.call %n {{callee = @f}} : i32
          func.return
        }}
    """
    with pytest.raises(CompilationError) as info:
        apply_passes(text, Inliner())
    assert info.value.message == "recursive calls are not supported: f -> f"
    assert str(info.value) == (f"{source}:2:12: error: recursive calls are not supported: f -> f\n"
                               "        return f(x - 1)\n"
                               "               ^")


def test_the_module_is_untouched_when_inlining_fails():
    text = dedent("""
        func.func @k(%n: i32) attributes {kernel = true} {
          %r = func.call %n {callee = @ok} : i32
          %s = func.call %n {callee = @loop} : i32
          func.return
        }
        func.func @ok(%x: i32) -> i32 {
          func.return %x
        }
        func.func @loop(%x: i32) -> i32 {
          %y = func.call %x {callee = @loop} : i32
          func.return %y
        }
    """)
    module = parse_module(text)
    with pytest.raises(CompilationError):
        Inliner().run(module, PassContext())
    assert print_ir(module) == text


def test_inlined_ops_keep_the_helpers_source_locations():
    module = parse_module(dedent("""
        func.func @helper(%a: i32) -> i32 {
          %s = arith.addi %a, %a : i32 loc("helpers.py":3:11)
          %t = arith.muli %s, %s : i32
          func.return %t
        }
        func.func @k(%n: i32) attributes {kernel = true} {
          %r = func.call %n {callee = @helper} : i32 loc("kern.py":10:8)
          func.return loc("kern.py":11:4)
        }
    """))
    Inliner().run(module, PassContext())
    verify(module)
    # The op the helper located stays at the helper's line; the one without a
    # location is blamed on the call site rather than nowhere.
    assert print_ir(module, print_locations=True) == dedent("""
        func.func @k(%n: i32) attributes {kernel = true} {
          %s = arith.addi %n, %n : i32 loc("helpers.py":3:11)
          %r = arith.muli %s, %s : i32 loc("kern.py":10:8)
          func.return loc("kern.py":11:4)
        }
    """)


def test_multi_block_callee_is_a_clear_error():
    module = parse_module(dedent("""
        func.func @branchy(%a: i32) -> i32 {
          func.return %a
        }
        func.func @k(%n: i32) attributes {kernel = true} {
          %r = func.call %n {callee = @branchy} : i32
          func.return
        }
    """))
    # The text form (and the verifier) only know single-block functions; build one
    # by hand the way a lowering bug might.
    module.lookup_symbol("branchy").body.add_block(Block())
    with pytest.raises(CompilationError, match=r"cannot inline '@branchy': its body has 2 blocks"):
        Inliner().run(module, PassContext())


def test_reports_what_changed():
    context = PassContext()
    module = parse_module(dedent(DEAD_CODE))
    preserved = Inliner().run(module, context)
    assert not preserved.preserves_all
    assert context.statistics == {"inline.inlined-calls": 1, "inline.removed-functions": 3}

    unchanged = parse_module(dedent("""
        func.func @k(%n: i32) attributes {kernel = true} {
          func.return
        }
    """))
    assert Inliner().run(unchanged, PassContext()).preserves_all


def test_pass_options_and_spelling():
    assert Inliner.name == "inline"
    assert Inliner.summary
    assert Inliner.from_options({"remove-dead-functions": "false"}) == Inliner(remove_dead_functions=False)
    assert Inliner(remove_dead_functions=False).spelling() == "inline{remove-dead-functions=false}"


def test_a_module_without_kernels_keeps_its_functions():
    # A library of helpers has no known entry points: inlining must not empty it.
    text = """\
func.func @helper(%a: i32) -> i32 {
  %b = arith.addi %a, %a : i32
  func.return %b
}
func.func @user(%x: i32) -> i32 {
  %r = func.call %x {callee = @helper} : i32
  func.return %r
}
"""
    assert apply_passes(text, Inliner()) == """\
func.func @helper(%a: i32) -> i32 {
  %b = arith.addi %a, %a : i32
  func.return %b
}
func.func @user(%x: i32) -> i32 {
  %r = arith.addi %x, %x : i32
  func.return %r
}
"""
