"""The func dialect: ``func.func``, ``func.call``, ``func.return``."""

from __future__ import annotations

import pytest

from polytile.dialects.func import FuncOp
from polytile.errors import VerificationError
from polytile.ir import Block, Region, parse_module, verify
from polytile.ir import types as t

from ._util import assert_roundtrip, assert_verify_error, ir

ROUNDTRIP = {
    "kernel-and-noinline-helper": ir("""
        func.func @helper(%a: f32, %b: f32) -> f32 attributes {noinline = true} {
          %0 = arith.mulf %a, %b : f32
          func.return %0
        }
        func.func @kernel(%p: ptr<f32>, %n: i32) attributes {kernel = true, pt.num_warps = 4} {
          %0 = tile.load %p : f32
          %1 = func.call %0, %0 {callee = @helper} : f32
          tile.store %p, %1
          func.return
        }
    """),
    "multiple-results-and-no-arguments": ir("""
        func.func @pair() -> (i32, tile<4xf32>) {
          %0 = arith.constant {value = 7} : i32
          %1 = arith.constant {value = 0.5} : tile<4xf32>
          func.return %0, %1
        }
        func.func @caller() {
          %0, %1 = func.call {callee = @pair} : i32, tile<4xf32>
          func.call {callee = @nothing}
          func.return
        }
        func.func @nothing() {
          func.return
        }
    """),
    "quoted-symbol-names": ir("""
        func.func @"my kernel"(%0: i32) -> i32 {
          %1 = func.call %0 {callee = @"1st helper"} : i32
          func.return %1
        }
        func.func @"1st helper"(%0: i32) -> i32 {
          func.return %0
        }
    """),
    "function-typed-results": ir("""
        func.func @f(%a: ptr<ptr<f16, 3>>) -> ((i32) -> f32) attributes {pt.sig = (f32) -> ()} {
          %0 = arith.constant {value = 0} : i32
          func.return
        }
    """),
}


@pytest.mark.parametrize("name", sorted(ROUNDTRIP))
def test_roundtrip(name):
    text = ROUNDTRIP[name]
    if name == "function-typed-results":
        # Not valid (func.return returns nothing), but the text must still round-trip.
        from polytile.ir import print_ir

        assert print_ir(parse_module(text)) == text
        return
    assert_roundtrip(text)


def test_func_parses_to_a_function_type_and_entry_arguments():
    module = parse_module(ROUNDTRIP["kernel-and-noinline-helper"])
    helper, kernel = module.body.block.ops
    assert helper.function_type == t.FunctionType((t.f32, t.f32), (t.f32,))
    assert helper.noinline is True and helper.kernel is None
    assert kernel.kernel is True and kernel.attributes["pt.num_warps"] == 4
    assert [a.name_hint for a in kernel.arguments] == ["p", "n"]
    assert kernel.entry_block is kernel.body.blocks[0]


def test_create():
    f = FuncOp.create("g", [t.i32], [t.f32], arg_names=["x"], noinline=True)
    assert f.sym_name == "g" and f.function_type == t.FunctionType((t.i32,), (t.f32,))
    assert f.arguments[0].name_hint == "x" and f.noinline is True


def test_entry_arguments_must_match_the_function_type():
    f = FuncOp.create("g", [t.i32], [])
    f.entry_block.add_argument(t.f32)
    from polytile.dialects.func import ReturnOp

    f.entry_block.append(ReturnOp.build([]))
    with pytest.raises(VerificationError) as info:
        verify(f)
    assert str(info.value) == ("error: 'func.func' op entry block arguments (i32, f32) do not match the function "
                               "type (i32) -> ()")


def test_function_type_must_be_a_function_type():
    f = FuncOp([], [], {"sym_name": "g", "function_type": t.i32}, [Region([Block()])])
    from polytile.dialects.func import ReturnOp

    f.entry_block.append(ReturnOp.build([]))
    with pytest.raises(VerificationError, match="^error: 'func.func' op attribute 'function_type' must be a function "
                                                "type, got i32$"):
        verify(f)


def test_function_needs_a_return():
    assert_verify_error(ir("""
        func.func @f(%a: i32) {
          %0 = arith.addi %a, %a : i32
        !}
    """), "func.func", "region 'body' must end with 'func.return', found 'arith.addi'")


def test_return_types_must_match():
    assert_verify_error(ir("""
        func.func @f(%a: i32) -> f32 {
          !func.return %a
        }
    """), "func.return", "returns (i32) but the function returns (f32)")


def test_return_must_be_in_a_function():
    assert_verify_error(ir("""
        func.func @f(%c: i1) {
          scf.if %c {
            func.return
          } {
            scf.yield
          !}
          func.return
        }
    """), "scf.if", "region 'then_region' must end with 'scf.yield', found 'func.return'")
    assert_verify_error("!func.return\n", "func.return", "must be inside 'func.func', found in 'builtin.module'")


def test_call_of_an_unknown_function():
    assert_verify_error(ir("""
        func.func @f(%a: i32) {
          !func.call %a {callee = @missing}
          func.return
        }
    """), "func.call", "calls '@missing', which is not a function in this module")


def test_call_argument_types():
    assert_verify_error(ir("""
        func.func @g(%x: i32) -> i32 {
          func.return %x
        }
        func.func @f(%a: f32) {
          !%0 = func.call %a {callee = @g} : i32
          func.return
        }
    """), "func.call", "argument types (f32) do not match '@g' of type (i32) -> i32")


def test_call_result_types():
    assert_verify_error(ir("""
        func.func @g(%x: i32) -> i32 {
          func.return %x
        }
        func.func @f(%a: i32) {
          !%0, %1 = func.call %a {callee = @g} : i32, i32
          func.return
        }
    """), "func.call", "result types do not match '@g' of type (i32) -> i32")


def test_call_needs_a_callee():
    assert_verify_error(ir("""
        func.func @f(%a: i32) {
          !func.call %a
          func.return
        }
    """), "func.call", "requires attribute 'callee' (a symbol reference (@name))")
    assert_verify_error(ir("""
        func.func @f(%a: i32) {
          !func.call %a {callee = "f"}
          func.return
        }
    """), "func.call", "attribute 'callee' must be a symbol reference (@name), got 'f'")
