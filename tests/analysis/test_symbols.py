"""Symbol references and function reachability, shared by ``inline`` and ``dce``."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from polytile.analysis.symbols import is_kernel, referenced_symbols, symbol_refs, unreachable_functions
from polytile.ir import parse_module
from polytile.ir.attributes import DialectAttribute, SymbolRef
from polytile.passes.dce import DeadCodeElimination
from polytile.passes.inline import Inliner
from polytile.ir_testing import apply_passes, dedent


def names(ops) -> list[str]:
    return [op.attributes["sym_name"] for op in ops]


@dataclass(frozen=True)
class _CallbackAttr(DialectAttribute):
    """What a plugin attribute naming a function looks like (never registered: only
    :func:`symbol_refs` sees it)."""

    attribute_name = "test.callback"
    target: SymbolRef
    extra: tuple = ()


def test_symbol_refs_finds_references_in_tuples_and_dialect_attributes():
    assert list(symbol_refs(SymbolRef("a"))) == ["a"]
    assert list(symbol_refs((1, (SymbolRef("b"), "c"), SymbolRef("d")))) == ["b", "d"]
    assert list(symbol_refs(_CallbackAttr(SymbolRef("e"), (SymbolRef("f"),)))) == ["e", "f"]
    assert list(symbol_refs("@not_a_ref")) == [] and list(symbol_refs(3)) == []


REFERENCES = """
func.func @by_call(%x: i32) -> i32 {
  func.return %x
}
func.func @by_callback(%x: i32) -> i32 {
  func.return %x
}
func.func @by_nested_list(%x: i32) -> i32 {
  func.return %x
}
func.func @from_dead(%x: i32) -> i32 {
  func.return %x
}
func.func @dead(%x: i32) -> i32 attributes {pt.peer = @from_dead} {
  func.return %x
}
func.func @self_named(%x: i32) -> i32 attributes {pt.me = @self_named} {
  func.return %x
}
func.func @k(%x: i32, %p: ptr<i32>) attributes {kernel = true, pt.callback = @by_callback} {
  %c = arith.constant {value = 1, pt.table = [1, [@by_nested_list]]} : i32
  %y = func.call %x {callee = @by_call} : i32
  tile.store %p, %c
  tile.store %p, %y
  func.return
}
"""


def test_referenced_symbols_sees_every_attribute_of_every_nested_op():
    module = parse_module(dedent(REFERENCES))
    kernel = next(op for op in module.walk() if op.attributes.get("sym_name") == "k")
    assert referenced_symbols(kernel) == {"by_call", "by_callback", "by_nested_list"}
    assert is_kernel(kernel)


def test_any_reference_keeps_a_function_and_dead_chains_go():
    module = parse_module(dedent(REFERENCES))
    # @dead names @from_dead, but nothing live names @dead; @self_named only itself.
    assert names(unreachable_functions(module)) == ["from_dead", "dead", "self_named"]


def test_a_module_without_kernels_has_no_unreachable_functions():
    module = parse_module(dedent(REFERENCES.replace("kernel = true, ", "")))
    assert unreachable_functions(module) == []


# Both passes remove functions by the same rule, so both give the same module here.
KEPT_BY_REFERENCE = """
    func.func @helper(%x: i32) -> i32 {
      func.return %x
    }
    func.func @in_table(%x: i32) -> i32 {
      func.return %x
    }
    func.func @unused(%x: i32) -> i32 {
      func.return %x
    }
    func.func @k(%x: i32, %p: ptr<i32>) attributes {kernel = true, pt.callback = @helper} {
      %c = arith.constant {value = 1, pt.table = [[@in_table]]} : i32
      tile.store %p, %c
      func.return
    }
"""


@pytest.mark.parametrize("pass_", [Inliner(), DeadCodeElimination()], ids=["inline", "dce"])
def test_inline_and_dce_keep_functions_named_by_attributes(pass_):
    assert apply_passes(KEPT_BY_REFERENCE, pass_) == dedent("""
        func.func @helper(%x: i32) -> i32 {
          func.return %x
        }
        func.func @in_table(%x: i32) -> i32 {
          func.return %x
        }
        func.func @k(%x: i32, %p: ptr<i32>) attributes {kernel = true, pt.callback = @helper} {
          %c = arith.constant {pt.table = [[@in_table]], value = 1} : i32
          tile.store %p, %c
          func.return
        }
    """)
