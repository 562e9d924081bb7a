"""The builtin dialect: ``builtin.module``."""

from __future__ import annotations

import pytest

from polytile.dialects.builtin import ModuleOp
from polytile.ir import parse_module, print_ir

from ._util import assert_roundtrip, assert_verify_error, ir

ROUNDTRIP = {
    "module-with-attributes": ir("""
        module attributes {pt.num_warps = 4, pt.target = "nvidia:sm_90a"} {
          func.func @a() {
            func.return
          }
          func.func @b(%x: i32) -> i32 {
            func.return %x
          }
        }
    """),
    "nested-modules": ir("""
        module attributes {pt.outer = 1} {
          module attributes {pt.inner = 2} {
          }
        }
    """),
}


@pytest.mark.parametrize("name", sorted(ROUNDTRIP))
def test_roundtrip(name):
    assert_roundtrip(ROUNDTRIP[name])


def test_symbol_lookup_and_functions():
    module = parse_module(ROUNDTRIP["module-with-attributes"])
    assert isinstance(module, ModuleOp)
    assert module.lookup_symbol("b").sym_name == "b"
    assert module.lookup_symbol("c") is None
    assert [f.sym_name for f in module.functions()] == ["a", "b"]


def test_an_explicit_module_without_attributes_is_the_module_itself():
    module = parse_module("module {\n  func.func @a() {\n    func.return\n  }\n}\n")
    assert [op.name for op in module.body.block] == ["func.func"]
    assert print_ir(module) == "func.func @a() {\n  func.return\n}\n"


def test_symbols_must_be_unique():
    assert_verify_error(ir("""
        func.func @a() {
          func.return
        }
        func.func @a(%x: i32) {
          func.return
        !}
    """), "func.func", "redefines symbol '@a'")


# -- every symbol reference must name a symbol of the module -----------------------------


@pytest.mark.parametrize("text, op, message", [
    (ir("""
        func.func @k(%x: i32) attributes {kernel = true, pt.callback = @helper} {
          func.return
        !}
    """), "func.func", "attribute 'pt.callback' refers to @helper, which is not a symbol in this module"),
    (ir("""
        func.func @helper() {
          func.return
        }
        func.func @k() {
          !%0 = arith.constant {pt.table = [1, [@helper, @gone]], value = 1} : i32
          func.return
        }
    """), "arith.constant", "attribute 'pt.table' refers to @gone, which is not a symbol in this module"),
    (ir("""
        module attributes {pt.entry = @main} {
          func.func @k() {
            func.return
          }
        !}
    """), "builtin.module", "attribute 'pt.entry' refers to @main, which is not a symbol in this module"),
    (ir("""
        func.func @k(%x: i32) {
          !%0 = func.call %x {callee = @nowhere} : i32
          func.return
        }
    """), "func.call", "calls '@nowhere', which is not a function in this module"),
])
def test_symbol_references_must_name_a_symbol_of_the_module(text, op, message):
    assert_verify_error(text, op, message)


def test_symbol_references_that_resolve_verify():
    from polytile.ir import verify

    verify(parse_module(ir("""
        func.func @helper(%a: i32) -> i32 {
          func.return %a
        }
        func.func @k(%x: i32) attributes {kernel = true, pt.callback = @helper} {
          %0 = arith.constant {pt.refs = [@helper, @k], value = 1} : i32
          func.return
        }
    """)))


def test_a_nested_module_resolves_its_own_references():
    from polytile.ir import verify

    verify(parse_module(ir("""
        module {
          func.func @outer() {
            func.return
          }
          module {
            func.func @inner() attributes {pt.peer = @inner} {
              func.return
            }
          }
        }
    """)))
    # ... and an outer reference into it does not resolve (flat references, as in MLIR).
    assert_verify_error(ir("""
        module {
          func.func @outer() attributes {pt.peer = @inner} {
            func.return
          !}
          module {
            func.func @inner() {
              func.return
            }
          }
        }
    """), "func.func", "attribute 'pt.peer' refers to @inner, which is not a symbol in this module")


def test_a_call_to_a_callee_with_a_malformed_function_type_is_a_verification_error():
    # The callee verifies before calls are matched to it: no AttributeError on '.inputs'.
    from polytile.dialects.func import CallOp, FuncOp, ReturnOp
    from polytile.errors import VerificationError
    from polytile.ir import Block, Builder, Region, SymbolRef, verify
    from polytile.ir import types as t

    module = ModuleOp.build()
    kernel = FuncOp.create("k", [t.i32])
    b = Builder.at_end(kernel.entry_block)
    b.create(CallOp, [kernel.arguments[0]], callee=SymbolRef("h"), result_types=[])
    b.create(ReturnOp, [])
    helper = FuncOp([], [], {"sym_name": "h", "function_type": t.i32}, [Region([Block()])])
    Builder.at_end(helper.body.blocks[0]).create(ReturnOp, [])
    module.body.block.append(kernel)  # the call comes first in program order
    module.body.block.append(helper)
    with pytest.raises(VerificationError) as info:
        verify(module)
    assert info.value.op_name == "func.func"
    assert info.value.message == "attribute 'function_type' must be a function type, got i32"
