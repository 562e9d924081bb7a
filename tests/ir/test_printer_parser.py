"""The printer and the parser: canonical text round-trips, names, locations, modules."""

from __future__ import annotations

import textwrap

import pytest

from polytile.dialects.builtin import ModuleOp
from polytile.dialects.func import FuncOp
from polytile.errors import IRParseError, SourceLocation
from polytile.ir import Block, Printer, Region, parse_module, print_ir, verify
from polytile.ir import types as t
from polytile.ir_testing import roundtrip


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def assert_roundtrip(text: str, *, locations: bool = False, check: bool = True) -> None:
    module = parse_module(text)
    if check:
        verify(module)
    assert print_ir(module, print_locations=locations) == text
    again = parse_module(print_ir(module, print_locations=locations))
    assert print_ir(again, print_locations=locations) == text


ADD_KERNEL = ir("""
    func.func @add_kernel(%x: ptr<f32>, %y: ptr<f32>, %out: ptr<f32>, %n: i32) attributes {kernel = true} {
      %pid = tile.program_id {axis = 0} : i32
      %c = arith.constant {value = 1024} : i32
      %start = arith.muli %pid, %c : i32
      %r = tile.arange {end = 1024, start = 0} : tile<1024xi32>
      %s = tile.splat %start : tile<1024xi32>
      %offs = arith.addi %s, %r : tile<1024xi32>
      %ns = tile.splat %n : tile<1024xi32>
      %mask = arith.cmpi %offs, %ns {predicate = "slt"} : tile<1024xi1>
      %xp = tile.splat %x : tile<1024xptr<f32>>
      %xo = tile.addptr %xp, %offs : tile<1024xptr<f32>>
      %xv = tile.load %xo mask(%mask) : tile<1024xf32>
      %yp = tile.splat %y : tile<1024xptr<f32>>
      %yo = tile.addptr %yp, %offs : tile<1024xptr<f32>>
      %yv = tile.load %yo mask(%mask) {cache = ".cg"} : tile<1024xf32>
      %sum = arith.addf %xv, %yv : tile<1024xf32>
      %op = tile.splat %out : tile<1024xptr<f32>>
      %oo = tile.addptr %op, %offs : tile<1024xptr<f32>>
      tile.store %oo, %sum mask(%mask)
      %0, %1 = scf.for %pid, %n, %c, %c, %start : i32, i32 {
      ^bb0(%iv: i32, %a: i32, %b: i32):
        %2 = arith.addi %a, %iv : i32
        scf.yield %2, %b
      }
      func.return
    }
""")

CALLS = ir("""
    func.func @helper(%a: f32, %b: f32) -> f32 attributes {noinline = true} {
      %0 = arith.mulf %a, %b : f32
      func.return %0
    }
    func.func @pair(%a: f32) -> (f32, i1) {
      %0 = func.call %a, %a {callee = @helper} : f32
      %1 = arith.cmpf %0, %a {predicate = "olt"} : i1
      func.return %0, %1
    }
    func.func @main(%a: f32) {
      %0, %1 = func.call %a {callee = @pair} : f32, i1
      func.call {callee = @nothing}
      func.return
    }
    func.func @nothing() {
      func.return
    }
""")

NESTED = ir("""
    func.func @nested(%n: i32, %c: i1, %t: tile<4x8xf32>) -> f32 {
      %0 = arith.constant {value = 0} : i32
      %1 = arith.constant {value = 1} : i32
      %2 = arith.constant {value = 0.0} : f32
      %3 = scf.for %0, %n, %1, %2 : f32 {
      ^bb0(%i: i32, %acc: f32):
        %4 = scf.if %c : f32 {
          %5 = tile.reduce %t {axis = 1} : tile<4xf32> {
          ^bb0(%p: f32, %q: f32):
            %6 = arith.addf %p, %q : f32
            tile.reduce_return %6
          }
          %7 = tile.reduce %5 {axis = 0} : f32 {
          ^bb0(%p_1: f32, %q_1: f32):
            %8 = arith.maxnumf %p_1, %q_1 : f32
            tile.reduce_return %8
          }
          scf.yield %7
        } {
          scf.yield %acc
        }
        scf.yield %4
      }
      %9 = scf.while %n : i32 {
      ^bb0(%k: i32):
        %10 = arith.cmpi %k, %0 {predicate = "sgt"} : i1
        scf.condition %10, %k
      } {
      ^bb0(%k_1: i32):
        %11 = arith.subi %k_1, %1 : i32
        scf.yield %11
      }
      func.return %3
    }
""")

TOP_LEVEL_OPS = ir("""
    %0 = arith.constant {value = 3} : i32
    %1 = arith.addi %0, %0 : i32
    func.func @f() {
      %0 = arith.constant {value = 1.5} : f32
      func.return
    }
    %2 = arith.muli %1, %0 : i32
""")


@pytest.mark.parametrize("text", [ADD_KERNEL, CALLS, NESTED], ids=["add_kernel", "calls", "nested"])
def test_programs_round_trip(text):
    assert_roundtrip(text)


def test_top_level_ops_are_wrapped_in_a_module_and_keep_their_numbering():
    module = parse_module(TOP_LEVEL_OPS)
    assert isinstance(module, ModuleOp)
    assert [op.name for op in module.body.block] == ["arith.constant", "arith.addi", "func.func", "arith.muli"]
    assert print_ir(module) == TOP_LEVEL_OPS


def test_explicit_module_with_attributes_round_trips_and_functions_keep_their_names():
    text = ir("""
        module attributes {pt.num_warps = 4, pt.target = "interp"} {
          func.func @f(%x: i32) {
            %0 = arith.addi %x, %x : i32
            func.return
          }
          func.func @g(%x: i32) {
            %0 = arith.muli %x, %x : i32
            func.return
          }
        }
    """)
    module = parse_module(text)
    assert module.attributes == {"pt.num_warps": 4, "pt.target": "interp"}
    assert_roundtrip(text)


def test_a_module_without_attributes_prints_bare():
    text = "module {\n  func.func @f() {\n    func.return\n  }\n}\n"
    assert print_ir(parse_module(text)) == "func.func @f() {\n  func.return\n}\n"


def test_nested_module_round_trips():
    text = ir("""
        module attributes {pt.outer = true} {
          module attributes {pt.inner = 1} {
            func.func @f() {
              func.return
            }
          }
        }
    """)
    assert_roundtrip(text)


def test_a_lone_module_inside_a_module_keeps_its_nesting():
    text = "module {\n  module {\n    func.func @f() {\n      func.return\n    }\n  }\n}\n"
    module = parse_module(text)
    assert [op.name for op in module.body.block] == ["builtin.module"]
    assert print_ir(module) == text
    assert_roundtrip(text)


def test_empty_module():
    module = parse_module("")
    assert isinstance(module, ModuleOp) and len(module.body.block) == 0
    assert len(parse_module(print_ir(module)).body.block) == 0
    verify(module)


def test_comments_and_whitespace_are_not_kept():
    text = ir("""
        // a comment line
        func.func   @f( %a : i32 ,%b:i32 )->i32 {   // trailing comment
          %s=arith.addi %a,%b:i32
          func.return   %s
        }
    """)
    assert roundtrip(text) == "func.func @f(%a: i32, %b: i32) -> i32 {\n  %s = arith.addi %a, %b : i32\n  func.return %s\n}\n"


def test_numbered_values_are_renumbered_in_order_per_function():
    text = ir("""
        func.func @f(%7: i32) {
          %42 = arith.addi %7, %7 : i32
          %x.1 = arith.muli %42, %42 : i32
          func.return
        }
        func.func @g(%3: f32) {
          %9 = arith.addf %3, %3 : f32
          func.return
        }
    """)
    assert roundtrip(text) == ir("""
        func.func @f(%0: i32) {
          %1 = arith.addi %0, %0 : i32
          %2 = arith.muli %1, %1 : i32
          func.return
        }
        func.func @g(%0: f32) {
          %1 = arith.addf %0, %0 : f32
          func.return
        }
    """)


def test_clashing_name_hints_get_suffixes():
    func = FuncOp.create("f", [t.i32, t.i32], arg_names=["x", "x"])
    from polytile.dialects.arith import AddIOp
    from polytile.dialects.func import ReturnOp
    from polytile.ir import Builder

    b = Builder.at_end(func.entry_block)
    a, c = func.arguments
    s = b.create(AddIOp, a, c).result
    s.name_hint = "x_1"
    b.create(ReturnOp, [])
    text = print_ir(func)
    assert text == ir("""
        func.func @f(%x: i32, %x_1: i32) {
          %x_1_1 = arith.addi %x, %x_1 : i32
          func.return
        }
    """)
    assert_roundtrip(text)


def test_keyworded_operand_groups_print_in_definition_order():
    text = ir("""
        func.func @f(%p: tile<4xptr<f32>>, %m: tile<4xi1>, %o: tile<4xf32>) {
          %0 = tile.load %p other(%o) mask(%m) : tile<4xf32>
          func.return
        }
    """)
    out = roundtrip(text)
    assert "%0 = tile.load %p mask(%m) other(%o) : tile<4xf32>" in out
    load = parse_module(text).body.block.first_op.entry_block.first_op
    assert load.ptr.name_hint == "p" and load.mask.name_hint == "m" and load.other.name_hint == "o"


def test_an_empty_region_is_not_mistaken_for_an_attribute_dictionary():
    # An `scf.if` with empty blocks is invalid, but must still print and parse back as two regions.
    text = ir("""
        func.func @f(%c: i1) {
          scf.if %c {
          } {
          }
          func.return
        }
    """)
    module = parse_module(text)
    if_op = module.body.block.first_op.entry_block.first_op
    assert len(if_op.regions) == 2 and all(len(r.block) == 0 for r in if_op.regions)
    assert print_ir(module) == text


def test_attributes_before_regions_are_recognised():
    text = ir("""
        func.func @f(%t: tile<4xf32>) -> f32 {
          %0 = tile.reduce %t {axis = 0, pt.hint = [1, 2]} : f32 {
          ^bb0(%a: f32, %b: f32):
            %1 = arith.addf %a, %b : f32
            tile.reduce_return %1
          }
          func.return %0
        }
    """)
    assert_roundtrip(text)


def test_multi_block_regions_print_block_headers():
    text = ir("""
        func.func @f(%a: i32) {
          func.return
        ^bb1(%b: i32, %c: f32):
          %0 = arith.addi %b, %a : i32
          func.return
        ^bb2:
          func.return
        }
    """)
    module = parse_module(text)
    func = module.body.block.first_op
    assert len(func.body.blocks) == 3
    assert [len(b.arguments) for b in func.body.blocks] == [1, 2, 0]
    assert print_ir(module) == text


def test_str_of_a_single_op_names_unknown_values_by_number():
    module = parse_module(ADD_KERNEL)
    ops = module.body.block.first_op.entry_block.ops
    assert str(ops[2]) == "%start = arith.muli %pid, %c : i32"
    assert str(ops[-2]) == ir("""
        %0, %1 = scf.for %pid, %n, %c, %c, %start : i32, i32 {
        ^bb0(%iv: i32, %a: i32, %b: i32):
          %2 = arith.addi %a, %iv : i32
          scf.yield %2, %b
        }""")
    add = ops[-2].body.block.first_op
    add.results[0].name_hint = None
    add.operands[0].name_hint = None
    assert str(add) == "%0 = arith.addi %1, %iv : i32"


def test_printer_indent_is_configurable():
    module = parse_module(CALLS)
    text = Printer(indent="    ").print_module_text(module)
    assert "\n    %0 = arith.mulf %a, %b : f32\n" in text


# -- locations -------------------------------------------------------------------------

LOCATED = ir("""
    module attributes {pt.num_warps = 4} {
      func.func @k(%x: i32) -> i32 attributes {kernel = true} {
        %0 = arith.addi %x, %x : i32 loc("kernel.py":12:9)
        %1 = scf.for %x, %x, %x, %0 : i32 {
        ^bb0(%i: i32, %a: i32):
          scf.yield %a loc("kernel.py":14:13)
        } loc("kernel.py":13:5)
        func.return %1 loc("kernel.py":15:5)
      } loc("kernel.py":10:1)
      func.func @h() {
        func.return loc("gen")
      } loc("other file.py":1:0)
    } loc("kernel.py":1:1)
""")


def test_locations_round_trip_for_ops_functions_and_modules():
    assert_roundtrip(LOCATED, locations=True)
    module = parse_module(LOCATED)
    assert module.location == SourceLocation("kernel.py", 1, 1)
    k, h = module.body.block.ops
    assert k.location == SourceLocation("kernel.py", 10, 1)
    assert h.location == SourceLocation("other file.py", 1, 0)
    add, loop, ret = k.entry_block.ops
    assert add.location == SourceLocation("kernel.py", 12, 9)
    assert loop.location == SourceLocation("kernel.py", 13, 5)
    assert loop.body.block.first_op.location == SourceLocation("kernel.py", 14, 13)
    assert h.entry_block.first_op.location == "gen"


def test_locations_are_left_out_unless_asked_for():
    text = print_ir(parse_module(LOCATED))
    assert "loc(" not in text
    assert text.startswith("module attributes {pt.num_warps = 4} {\n  func.func @k(")


def test_a_module_with_only_a_location_is_printed_explicitly():
    module = parse_module("func.func @f() {\n  func.return\n}\n")
    module.location = SourceLocation("m.py", 1, 1)
    text = print_ir(module, print_locations=True)
    assert text == 'module {\n  func.func @f() {\n    func.return\n  }\n} loc("m.py":1:1)\n'
    assert parse_module(text).location == SourceLocation("m.py", 1, 1)
    assert print_ir(module) == "func.func @f() {\n  func.return\n}\n"


def test_location_file_names_are_escaped():
    module = parse_module('func.func @f() {\n  func.return loc("a\\"b\\\\c.py":1:2)\n}\n')
    ret = module.body.block.first_op.entry_block.first_op
    assert ret.location == SourceLocation('a"b\\c.py', 1, 2)
    assert 'loc("a\\"b\\\\c.py":1:2)' in print_ir(module, print_locations=True)


# -- regions of several blocks ------------------------------------------------------------


def _multi_block(*blocks: Block) -> ModuleOp:
    from ._testdialect import MultiBlockOp

    module = ModuleOp.build()
    module.body.block.append(MultiBlockOp([], [], {}, [Region(list(blocks))]))
    return module


def test_an_empty_entry_block_before_a_second_block_is_kept():
    # Without a '^bb0:' header the entry block vanished: '^bb1' became the entry block.
    module = _multi_block(Block(), Block([t.i32]))
    verify(module)
    text = print_ir(module)
    assert text == "test.multi_block {\n^bb0:\n^bb1(%0: i32):\n}\n"
    again = parse_module(text)
    assert [len(b.arguments) for b in again.body.block.first_op.regions[0].blocks] == [0, 1]
    assert print_ir(again) == text


@pytest.mark.parametrize("text", [
    ir("""
        test.multi_block {
        ^bb0:
          %0 = arith.constant {value = 1} : i32
        ^bb1:
        ^bb2(%a: i32):
          %1 = arith.addi %a, %a : i32
        }
    """),
    ir("""
        test.multi_block {
        ^bb0:
        ^bb1:
        }
    """),
    ir("""
        test.multi_block {
        ^bb0(%a: i32):
        ^bb1:
        }
    """),
])
def test_regions_of_several_blocks_round_trip(text):
    assert_roundtrip(text)


def test_a_single_entry_block_without_arguments_has_no_header():
    assert print_ir(_multi_block(Block())) == "test.multi_block {\n}\n"
    # A leading label names the entry block; the printer leaves it out for a lone block.
    assert roundtrip("test.multi_block {\n^bb0:\n}\n") == "test.multi_block {\n}\n"


def test_a_function_without_arguments_keeps_an_empty_entry_block():
    # func.func declares its entry block in its signature: '^bb1' inside is the second block.
    text = ir("""
        func.func @f() {
        ^bb1:
          func.return
        }
    """)
    module = parse_module(text)
    assert [len(b) for b in module.body.block.first_op.body.blocks] == [0, 1]
    assert print_ir(module) == text


# -- the empty module ----------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "\n", "  // only a comment\n"])
def test_empty_text_is_the_empty_module_and_prints_as_empty_text(text):
    module = parse_module(text)
    assert len(module.body.block) == 0
    assert print_ir(module) == ""
    assert print_ir(parse_module(print_ir(module))) == ""


# -- value names: no shadowing ---------------------------------------------------------


def test_redefining_an_enclosing_value_in_a_nested_region_is_a_parse_error():
    text = ir("""
        func.func @k(%a: i32, %c: i1) {
          %x = arith.addi %a, %a : i32
          scf.if %c {
            %x = arith.muli %a, %a : i32
            scf.yield
          } {
            scf.yield
          }
          func.return
        }
    """)
    with pytest.raises(IRParseError) as info:
        parse_module(text)
    err = info.value
    assert err.message == "value '%x' is already defined at line 2"
    assert (err.line, err.column) == (4, 5)


def test_a_block_argument_may_not_shadow_an_enclosing_value():
    text = ir("""
        func.func @k(%lo: i32, %i: i32) {
          scf.for %lo, %lo, %lo {
          ^bb0(%i: i32):
            scf.yield
          }
          func.return
        }
    """)
    with pytest.raises(IRParseError, match=r"value '%i' is already defined at line 1"):
        parse_module(text)


def test_sibling_regions_and_isolated_ops_may_reuse_names():
    # Sibling regions do not see each other, and a function starts a fresh namespace,
    # as the printer assumes when it numbers each function from %0.
    text = ir("""
        %0 = arith.constant {value = 1} : i32
        func.func @f(%a: i32, %c: i1) {
          %0 = arith.addi %a, %a : i32
          scf.if %c {
            %x = arith.muli %a, %a : i32
            scf.yield
          } {
            %x = arith.subi %a, %a : i32
            scf.yield
          }
          func.return
        }
        func.func @g(%a: i32) {
          %0 = arith.addi %a, %a : i32
          func.return
        }
    """)
    module = parse_module(text)
    verify(module)
    assert print_ir(module).count("%0 = ") == 3


# -- declared defaults: never stored, never printed -------------------------------------


def test_an_explicit_default_in_the_text_is_not_stored():
    text = ir("""
        func.func @f(%p: tile<4xptr<f32>>) {
          %a = tile.load %p {cache = "", evict = "evict_last", volatile = false} : tile<4xf32>
          func.return
        }
    """)
    module = parse_module(text)
    load = module.body.block.first_op.entry_block.first_op
    assert load.attributes == {"evict": "evict_last"}
    assert load.cache == "" and load.volatile is False
    assert print_ir(module) == text.replace('{cache = "", evict = "evict_last", volatile = false}',
                                            '{evict = "evict_last"}')


def test_built_and_parsed_ops_are_the_same_op():
    from polytile.dialects.tile import DotOp
    from polytile.ir import Builder
    from polytile.passes.cse import CommonSubexpressionElimination
    from polytile.passes.pass_base import PassContext

    module = parse_module(ir("""
        func.func @f(%a: tile<16x16xf16>, %b: tile<16x16xf16>, %c: tile<16x16xf32>) -> tile<16x16xf32> {
          %d = tile.dot %a, %b, %c : tile<16x16xf32>
          func.return %d
        }
    """))
    func = module.body.block.first_op
    ret = func.entry_block.last_op
    a, b, c = func.arguments
    built = Builder.before(ret).create(DotOp, a, b, c, input_precision="tf32")  # the default, spelled out
    assert built.attributes == {} and built.input_precision == "tf32" and built.max_num_imprecise_acc == 0
    assert str(built) == "%0 = tile.dot %a, %b, %c : tile<16x16xf32>"
    ret.set_operand(0, built.result)
    CommonSubexpressionElimination().run(module, PassContext())
    assert len(func.entry_block) == 2  # CSE merged the two spellings


def test_set_attr_to_the_default_removes_it_and_the_printer_never_writes_a_default():
    from polytile.dialects.tile import LoadOp

    module = parse_module("func.func @f(%p: ptr<f32>) {\n  %0 = tile.load %p : f32\n  func.return\n}\n")
    load = module.body.block.first_op.entry_block.first_op
    assert isinstance(load, LoadOp)
    load.set_attr("volatile", True)
    assert load.attributes == {"volatile": True}
    load.volatile = False
    assert load.attributes == {}
    # 0 is not false and -0.0 is not 0.0: only the same attribute counts as the default.
    load.set_attr("volatile", 0)
    assert load.attributes == {"volatile": 0}
    # A pass that writes into the dictionary directly still gets canonical text.
    load.attributes["volatile"] = False
    assert "tile.load %p : f32" in print_ir(module)


def test_an_op_without_operands_does_not_take_the_next_lines_result_as_its_operand():
    # `tile.barrier` takes no operands; the `%0 = ...` on the next line is the next op.
    text = ("func.func @f(%a: i32) {\n"
            "  tile.barrier\n"
            "  %0 = arith.addi %a, %a : i32\n"
            "  tile.barrier\n"
            "  %1 = arith.addi %0, %a : i32\n"
            "  func.return\n"
            "}\n")
    assert print_ir(parse_module(text)) == text
