"""docs/ir.md stays accurate: its Python examples run, its IR examples round-trip and
verify, and the error texts it shows are the ones polytile prints."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from polytile.errors import IRParseError, VerificationError
from polytile.ir import parse_module, print_ir, verify

DOC = Path(__file__).resolve().parents[2] / "docs" / "ir.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```\n", re.S | re.M)


def blocks(kind: str) -> list[str]:
    return [body for lang, body in FENCE.findall(DOC.read_text()) if lang == kind]


@pytest.fixture(scope="module")
def doc_namespace():
    module = types.ModuleType("polytile_docs_ir")  # dataclasses want their module in sys.modules
    module.text = blocks("ir")[0]
    sys.modules[module.__name__] = module
    try:
        for source in blocks("python"):
            exec(compile(source, str(DOC), "exec"), module.__dict__)  # noqa: S102
    finally:
        del sys.modules[module.__name__]
    return module.__dict__


def test_the_doc_has_examples():
    assert len(blocks("python")) >= 6 and len(blocks("ir")) >= 5


def test_python_examples_run(doc_namespace):
    assert "DEMO_DIALECT" in doc_namespace and "EraseUnusedPure" in doc_namespace


@pytest.mark.parametrize("index", range(len(blocks("ir"))))
def test_ir_examples_round_trip_and_verify(doc_namespace, index):
    text = blocks("ir")[index]
    module = parse_module(text)
    verify(module)
    assert print_ir(module, print_locations="loc(" in text, layout_aliases=text.startswith("#")) == text


def test_error_examples_are_what_polytile_prints():
    shown = [b for b in blocks("text") if "error:" in b]
    assert len(shown) == 2
    with pytest.raises(IRParseError) as parse_error:
        parse_module("func.func @f(%a: i32) {\n  %0 = arith.adi %a, %a : i32\n  func.return\n}\n",
                     source_name="kernel.ir")
    assert str(parse_error.value) + "\n" == shown[0]
    with pytest.raises(VerificationError) as verify_error:
        verify(parse_module('func.func @f(%a: i32, %b: f32) {\n  %0 = arith.addi %a, %b : i32 '
                            'loc("kernel.py":7:13)\n  func.return\n}\n'))
    assert str(verify_error.value) + "\n" == shown[1]
