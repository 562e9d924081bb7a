"""Writing a pass test with IR text in and IR text out (the example in docs/ir.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from polytile.errors import VerificationError
from polytile.ir.opdef import Pure
from polytile.passes import Pass, PassContext, PreservedAnalyses
from polytile.ir_testing import apply_passes, dedent, roundtrip


@dataclass
class EraseUnusedPure(Pass):
    """Erase pure ops whose results nobody uses."""

    name: ClassVar[str] = "erase-unused-pure"

    def run(self, module, context: PassContext) -> PreservedAnalyses:
        for op in module.walk(post_order=True):
            if op.has_trait(Pure) and op.results and not any(r.uses for r in op.results):
                op.erase()
                context.count("erase-unused-pure.erased")
        return PreservedAnalyses.none()


@dataclass
class BreakTheIR(Pass):
    name: ClassVar[str] = "break-the-ir"

    def run(self, module, context):
        func = module.regions[0].block.first_op
        func.entry_block.last_op.detach()  # drop func.return: the function has no terminator
        return None


def test_apply_passes_text_in_text_out():
    context = PassContext()
    out = apply_passes("""
        func.func @f(%a: i32) -> i32 {
          %0 = arith.addi %a, %a : i32
          %1 = arith.muli %0, %0 : i32
          %2 = arith.subi %a, %a : i32
          func.return %0
        }
    """, EraseUnusedPure(), context=context)
    assert out == dedent("""
        func.func @f(%a: i32) -> i32 {
          %0 = arith.addi %a, %a : i32
          func.return %0
        }
    """)
    assert context.statistics == {"erase-unused-pure.erased": 2}


def test_apply_passes_verifies_after_each_pass():
    text = "func.func @f() {\n  func.return\n}\n"
    with pytest.raises(VerificationError, match="region 'body' must end with 'func.return', found an empty block"):
        apply_passes(text, BreakTheIR())
    assert apply_passes(text, BreakTheIR(), verify_each=False) == "func.func @f() {\n}\n"


def test_roundtrip_helper_dedents():
    assert roundtrip("""
        func.func @f() {
          func.return
        }
    """) == "func.func @f() {\n  func.return\n}\n"
