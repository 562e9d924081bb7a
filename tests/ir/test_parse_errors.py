"""Malformed IR text: an IRParseError with the line, the column and the line under a caret."""

from __future__ import annotations

import textwrap

import pytest

from polytile.errors import IRParseError, PolytileError
from polytile.ir import parse_module


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


CASES = [
    pytest.param(
        ir("""
            func.func @f(%a: i32) {
              %0 = arith.addi %a, %a : i32
              func.return
        """),
        "missing '}' to close the region opened at line 1", 3, 14, id="missing-close-brace"),
    pytest.param(
        ir("""
            func.func @f(%a: i32) {
              %0 = arith.adi %a, %a : i32
              func.return
            }
        """),
        "unknown op 'arith.adi'; did you mean 'arith.andi', 'arith.addi' or 'arith.divf'?", 2, 8, id="unknown-op"),
    pytest.param(
        "func.func @f(%a: i33) {\n  func.return\n}\n",
        "unknown type 'i33'; did you mean 'i32'?", 1, 18, id="unknown-type"),
    pytest.param(
        ir("""
            func.func @f(%a: i32) {
              %0 = arith.addi %a, %b : i32
              func.return
            }
        """),
        "use of undefined value '%b'", 2, 23, id="undefined-value"),
    pytest.param(
        ir("""
            func.func @f(%a: i32) {
              %0 = arith.addi %a, %a : i32
              %0 = arith.muli %a, %a : i32
              func.return
            }
        """),
        "value '%0' is already defined at line 2", 3, 3, id="defined-twice"),
    pytest.param(
        ir("""
            func.func @f(%a: i32, %a: f32) {
              func.return
            }
        """),
        "value '%a' is already defined at line 1", 1, 23, id="argument-defined-twice"),
    pytest.param(
        ir("""
            func.func @f(%a: i32) {
              %0, %1 = arith.addi %a, %a : i32
              func.return
            }
        """),
        "'arith.addi' names 2 results but lists 1 result types", 2, 12, id="result-count-vs-types"),
    pytest.param(
        ir("""
            func.func @f(%a: i32) {
              %0 = arith.addi %a, %a
              func.return
            }
        """),
        "'arith.addi' names 1 results but lists 0 result types", 2, 8, id="missing-result-types"),
    pytest.param(
        ir("""
            func.func @f() {
              %0 = tile.program_id {axis 0} : i32
              func.return
            }
        """),
        "expected '=' after attribute name 'axis', found '0} : i32'", 2, 30, id="attribute-missing-equals"),
    pytest.param(
        ir("""
            func.func @f() {
              %0 = tile.program_id {axis = 0 start = 1} : i32
              func.return
            }
        """),
        "expected ',' or '}' in the attribute dictionary, found 'start = 1} :'", 2, 34, id="attribute-missing-comma"),
    pytest.param(
        ir("""
            func.func @f() {
              %0 = tile.program_id {axis = 0, axis = 1} : i32
              func.return
            }
        """),
        "attribute 'axis' is given twice", 2, 35, id="attribute-twice"),
    pytest.param(
        ir("""
            func.func @f() {
              %0 = tile.program_id {axis = } : i32
              func.return
            }
        """),
        "expected an attribute value, found '} : i32'", 2, 32, id="attribute-missing-value"),
    pytest.param(
        ir("""
            func.func @f(%p: ptr<f32>, %v: f32) {
              tile.store %p, %v {cache = ".cg}
              func.return
            }
        """),
        "unterminated string", 2, 30, id="unterminated-string"),
    pytest.param(
        'func.func @f() {\n  func.return loc("a\\zb":1:1)\n}\n',
        "unknown escape '\\z' in string", 2, 21, id="bad-escape"),
    pytest.param(
        ir("""
            func.func @f(%t: tile<0x4xf32>) {
              func.return
            }
        """),
        "tile shape must be a non-empty tuple of positive integers, got (0, 4)", 1, 18, id="bad-tile-shape"),
    pytest.param(
        ir("""
            func.func @f(%t: tile<4xf32) {
              func.return
            }
        """),
        "expected '>' to close 'tile<', found ') {'", 1, 28, id="unclosed-tile"),
    pytest.param(
        ir("""
            func.func @f(%a: i32) {
              %0 arith.addi %a, %a : i32
              func.return
            }
        """),
        "expected '=' after the result names, found 'arith.addi %'", 2, 6, id="missing-equals"),
    pytest.param(
        ir("""
            func.func @f(%a: i32) {
              %0 = func.func @g() {
                func.return
              }
              func.return
            }
        """),
        "'func.func' has 0 results but 1 names were given", 2, 3, id="custom-op-result-names"),
    pytest.param(
        ir("""
            func.func @f(%p: tile<4xptr<f32>>, %m: tile<4xi1>) {
              %0 = tile.load %p mask(%m) mask(%m) : tile<4xf32>
              func.return
            }
        """),
        "operand group 'mask' is given twice", 2, 30, id="group-twice"),
    pytest.param(
        ir("""
            func.func @f(%p: tile<4xptr<f32>>, %m: tile<4xi1>) {
              %0 = tile.load %p mask(%m, %m) : tile<4xf32>
              func.return
            }
        """),
        "operand group 'mask' of 'tile.load' takes one value", 2, 8, id="optional-group-two-values"),
    pytest.param(
        ir("""
            func.func @f(%p: tile<4xptr<f32>>, %m: tile<4xi1>) {
              %0 = tile.load mask(%m) : tile<4xf32>
              func.return
            }
        """),
        "'tile.load' expects 1 positional operands, got 0", 2, 8, id="missing-positional-operand"),
    pytest.param(
        ir("""
            func.func @f() {
              func.return loc("k.py":3)
            }
        """),
        "expected ':', found ')'", 2, 27, id="bad-location"),
    pytest.param(
        ir("""
            func.func @f(%a: i32) {
              func.return %a,
            }
        """),
        "expected an op name, found ','", 2, 17, id="trailing-comma"),
    pytest.param(
        "func.func f() {\n}\n",
        "expected '@' before the function name, found 'f() {'", 1, 11, id="function-without-at"),
    pytest.param(
        "func.func @f(%a i32) {\n}\n",
        "expected ':' after argument '%a', found 'i32) {'", 1, 17, id="argument-without-colon"),
    pytest.param(
        "func.func @f() {\n  ^bb1(%x i32):\n}\n",
        "expected ':' after the block argument name, found 'i32):'", 2, 11, id="block-argument-without-colon"),
    pytest.param(
        "func.func @f() {\n  %0 = 12\n}\n",
        "expected an op name, found '12'", 2, 8, id="not-an-op"),
]


@pytest.mark.parametrize("text, message, line, column", CASES)
def test_malformed_text_gives_a_located_parse_error(text, message, line, column):
    with pytest.raises(IRParseError) as info:
        parse_module(text, source_name="bad.ir")
    err = info.value
    assert isinstance(err, PolytileError)
    assert err.message == message
    assert (err.line, err.column) == (line, column)
    source_line = text.split("\n")[line - 1]
    assert err.source_line == source_line
    assert str(err) == f"bad.ir:{line}:{column}: error: {message}\n  {source_line}\n  {' ' * (column - 1)}^"


def test_errors_from_parse_are_never_bare_python_exceptions():
    samples = [case.values[0] for case in CASES]
    for text in samples:
        for cut in range(0, len(text), 3):
            try:
                parse_module(text[:cut])
            except PolytileError:
                pass
