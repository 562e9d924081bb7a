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
