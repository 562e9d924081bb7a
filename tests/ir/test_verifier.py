"""The verifier's generic checks (definitions, traits, dominance) and how errors read."""

from __future__ import annotations

import textwrap

import pytest

from polytile.dialects.arith import AddIOp, ConstantOp, MulIOp
from polytile.dialects.func import FuncOp, ReturnOp
from polytile.errors import PolytileError, SourceLocation, VerificationError
from polytile.ir import Block, Builder, Region, parse_module, verify
from polytile.ir import types as t


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def verify_text(text: str) -> VerificationError:
    module = parse_module(ir(text))
    with pytest.raises(VerificationError) as info:
        verify(module)
    assert isinstance(info.value, PolytileError)
    return info.value


def test_valid_ir_verifies():
    verify(parse_module(ir("""
        func.func @f(%a: i32) -> i32 {
          %0 = arith.addi %a, %a {pt.divisibility = 16} : i32
          func.return %0
        }
    """)))


def test_error_names_the_op_and_its_location():
    err = verify_text("""
        func.func @f(%a: i32, %b: f32) {
          %0 = arith.addi %a, %b : i32 loc("kernel.py":7:13)
          func.return
        }
    """)
    assert err.op_name == "arith.addi"
    assert err.location == SourceLocation("kernel.py", 7, 13)
    assert err.message == "operand 'rhs' must be an integer or a tile of integers, got f32"
    assert str(err) == ("kernel.py:7:13: error: 'arith.addi' op operand 'rhs' must be an integer or a tile of "
                        "integers, got f32")


def test_error_without_a_location_or_with_a_named_one():
    err = verify_text("""
        func.func @f(%a: i32, %b: f32) {
          %0 = arith.addi %b, %b : f32
          func.return
        }
    """)
    assert str(err) == "error: 'arith.addi' op operand 'lhs' must be an integer or a tile of integers, got f32"
    err = verify_text("""
        func.func @f(%a: i32, %b: f32) {
          %0 = arith.addi %b, %b : f32 loc("generated")
          func.return
        }
    """)
    assert str(err).startswith("generated: error: 'arith.addi' op ")
    err = verify_text("""
        func.func @f(%a: i32, %b: f32) {
          %0 = arith.addi %b, %b : f32 loc("k.py":3:0)
          func.return
        }
    """)
    assert str(err).startswith("k.py:3: error: 'arith.addi' op ")  # column 0: unknown, not printed


@pytest.mark.parametrize("text, op, message", [
    ("""
        func.func @f(%a: i32) {
          %0 = arith.addi %a, %a, %a : i32 loc("k.py":2:3)
          func.return
        }
     """, "arith.addi", "expects 2 operands, got 3"),
    ("""
        func.func @f(%a: i32) {
          %0, %1 = arith.addi %a, %a : i32, i32 loc("k.py":2:3)
          func.return
        }
     """, "arith.addi", "expects 1 result, got 2"),
    ("""
        func.func @f(%a: i32) {
          %0 = arith.addi %a, %a : f32 loc("k.py":2:3)
          func.return
        }
     """, "arith.addi", "result 'result' must be an integer or a tile of integers, got f32"),
    ("""
        func.func @f() {
          %0 = tile.program_id : i32 loc("k.py":2:3)
          func.return
        }
     """, "tile.program_id", "requires attribute 'axis' (an integer)"),
    ("""
        func.func @f() {
          %0 = tile.program_id {axis = true} : i32 loc("k.py":2:3)
          func.return
        }
     """, "tile.program_id", "attribute 'axis' must be an integer, got True"),
    ("""
        func.func @f() {
          %0 = tile.program_id {axis = 0, stages = 3} : i32 loc("k.py":2:3)
          func.return
        }
     """, "tile.program_id", "has no attribute 'stages' (declared: axis; hints a pass attaches must be "
                              "dialect-prefixed, like 'pt.hint')"),
    ("""
        func.func @f(%c: i1) {
          scf.if %c {
            scf.yield
          } loc("k.py":2:3)
          func.return
        }
     """, "scf.if", "expects 2 regions, got 1"),
    ("""
        func.func @f(%c: i1) {
          scf.if %c {
            %0 = arith.constant {value = 1} : i32
          } {
            scf.yield
          } loc("k.py":2:3)
          func.return
        }
     """, "scf.if", "region 'then_region' must end with 'scf.yield', found 'arith.constant'"),
    ("""
        func.func @f(%c: i1) {
          scf.if %c {
          } {
            scf.yield
          } loc("k.py":2:3)
          func.return
        }
     """, "scf.if", "region 'then_region' must end with 'scf.yield', found an empty block"),
    ("""
        func.func @f(%c: i1) {
          scf.if %c {
            scf.yield loc("k.py":3:5)
            scf.yield
          } {
            scf.yield
          }
          func.return
        }
     """, "scf.yield", "is a terminator but is not last in its block"),
    ("""
        func.func @f() {
          func.return
        ^bb1:
          func.return
        } loc("k.py":1:1)
     """, "func.func", "region 'body' must have exactly one block, got 2"),
    ("""
        func.return loc("k.py":2:3)
     """, "func.return", "must be inside 'func.func', found in 'builtin.module'"),
])
def test_definition_checks(text, op, message):
    err = verify_text(text)
    assert err.op_name == op
    assert err.message == message
    if 'loc("k.py"' in text:
        assert str(err).startswith("k.py:")
        assert f"error: '{op}' op {message}" in str(err)


def test_same_operands_and_result_type_trait():
    err = verify_text("""
        func.func @f(%a: i32, %b: i64) {
          %0 = arith.addi %a, %b : i32 loc("k.py":4:1)
          func.return
        }
    """)
    assert str(err) == "k.py:4:1: error: 'arith.addi' op requires operands and results of one type, got i32, i64"


def test_same_operands_shape_trait():
    err = verify_text("""
        func.func @f(%a: tile<4xi32>) {
          %0 = arith.extsi %a : tile<8xi64> loc("k.py":4:1)
          func.return
        }
    """)
    assert err.message == "requires operands and results of one shape, got 4, 8"


def test_ops_at_the_top_level_of_a_module():
    err = verify_text('scf.yield loc("k.py":1:1)\n')
    assert str(err) == ("k.py:1:1: error: 'scf.yield' op must be inside 'scf.for' or 'scf.if' or 'scf.while', "
                        "found in 'builtin.module'")
    op = ReturnOp.build([])
    with pytest.raises(VerificationError, match="found in the top level"):
        verify(op)


# -- dominance and isolation ------------------------------------------------------------


def test_use_before_definition_is_caught():
    func = FuncOp.create("f", [t.i32])
    b = Builder.at_end(func.entry_block)
    (a,) = func.arguments
    first = b.create(AddIOp, a, a)
    second = b.create(MulIOp, a, a, location=SourceLocation("k.py", 5, 2))
    first.set_operand(0, second.result)  # now `first` uses a value defined after it
    b.create(ReturnOp, [])
    with pytest.raises(VerificationError) as info:
        verify(func)
    assert str(info.value) == ("error: 'arith.addi' op operand #0 does not dominate this use (it is defined later, "
                               "in another region, or outside an isolated function)")


def test_wrong_result_counts_built_with_the_api():
    func = FuncOp.create("f", [t.i32])
    func.entry_block.append(ReturnOp([func.arguments[0]], [t.i32], location=SourceLocation("k.py", 2, 3)))
    with pytest.raises(VerificationError) as info:
        verify(func)
    assert str(info.value) == "k.py:2:3: error: 'func.return' op has no results, but 1 were given"
    const = ConstantOp([], [], {"value": 1})
    with pytest.raises(VerificationError, match="^error: 'arith.constant' op expects 1 result, got 0$"):
        verify(const)


def test_a_value_from_a_sibling_region_is_already_a_parse_error():
    from polytile.errors import IRParseError

    with pytest.raises(IRParseError, match="use of undefined value '%1'"):
        parse_module(ir("""
            func.func @f(%c: i1) {
              %0 = scf.if %c : i32 {
                %1 = arith.constant {value = 1} : i32
                scf.yield %1
              } {
                scf.yield %1
              }
              func.return
            }
        """))


def test_sibling_region_value_built_with_the_api():
    func = FuncOp.create("f", [t.i1])
    b = Builder.at_end(func.entry_block)
    from polytile.dialects.scf import IfOp, YieldOp

    if_op = b.create(IfOp, func.arguments[0], result_types=[t.i32])
    then_b = Builder.at_end(if_op.then_region.block)
    one = then_b.create(ConstantOp, value=1, result_types=[t.i32]).result
    then_b.create(YieldOp, [one])
    Builder.at_end(if_op.else_region.block).create(YieldOp, [one], location=SourceLocation("k.py", 9, 4))
    b.create(ReturnOp, [])
    with pytest.raises(VerificationError) as info:
        verify(func)
    assert str(info.value).startswith("k.py:9:4: error: 'scf.yield' op operand #0 does not dominate this use")


def test_nested_regions_see_enclosing_values():
    verify(parse_module(ir("""
        func.func @f(%c: i1, %a: i32) -> i32 {
          %0 = scf.if %c : i32 {
            %1 = arith.addi %a, %a : i32
            scf.yield %1
          } {
            scf.yield %a
          }
          func.return %0
        }
    """)))


def test_functions_are_isolated_from_above():
    err = verify_text("""
        %0 = arith.constant {value = 1} : i32
        func.func @f() -> i32 {
          func.return %0 loc("k.py":3:3)
        }
    """)
    assert err.op_name == "func.return"
    assert err.message.startswith("operand #0 does not dominate this use")


def test_broken_parent_link_is_reported():
    func = FuncOp.create("f", [])
    ret = func.entry_block.append(ReturnOp.build([]))
    ret.parent = Block()
    with pytest.raises(VerificationError, match="'func.return' op has a broken parent link"):
        verify(func)


def test_non_attribute_values_are_reported():
    func = FuncOp.create("f", [])
    ret = func.entry_block.append(ReturnOp.build([]))
    ret.attributes["pt.bad"] = object()
    with pytest.raises(VerificationError, match="'func.return' op attribute 'pt.bad' holds object, which is not an "
                                                "IR attribute"):
        verify(func)


def test_region_count_built_with_the_api():
    func = FuncOp([], [], {"sym_name": "f", "function_type": t.FunctionType((), ())}, [Region([Block()]),
                                                                                      Region([Block()])])
    with pytest.raises(VerificationError, match="'func.func' op expects 1 regions, got 2"):
        verify(func)


def test_verifier_stops_at_the_first_error_in_program_order():
    err = verify_text("""
        func.func @f(%a: i32, %b: f32) {
          %0 = arith.addi %b, %b : f32 loc("k.py":2:1)
          %1 = arith.addf %a, %a : i32 loc("k.py":3:1)
          func.return
        }
    """)
    assert err.location == SourceLocation("k.py", 2, 1)
