"""The pass: ``x * 2**k`` becomes ``x << k`` for integers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from polytile.dialects.arith import ConstantOp, MulIOp, ShLIOp
from polytile.ir import Builder
from polytile.passes import Pass, PassContext, PreservedAnalyses



def _power_of_two(value) -> int | None:
    """k when value == 2**k (k >= 1), else None."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 2 or value & (value - 1):
        return None
    return value.bit_length() - 1


@dataclass
class MulToShift(Pass):
    """Rewrite integer multiplications by a power of two as left shifts."""

    name: ClassVar[str] = "mul-to-shift"
    summary: ClassVar[str] = "x * 2**k -> x << k for integers"
    #: Largest shift to emit; products by larger powers are left alone.
    max_shift: int = 30

    def run(self, module, context: PassContext) -> PreservedAnalyses:
        changed = 0
        for op in list(module.walk()):
            if not isinstance(op, MulIOp):
                continue
            constant = op.rhs.defining_op
            if not isinstance(constant, ConstantOp):
                continue
            shift = _power_of_two(constant.value)
            if shift is None or shift > self.max_shift:
                continue
            builder = Builder.before(op)
            amount = builder.create(ConstantOp, value=shift, result_types=[op.rhs.type]).result
            shifted = builder.create(ShLIOp, op.lhs, amount).result
            shifted.name_hint = op.result.name_hint
            op.result.replace_all_uses_with(shifted)
            op.erase()
            changed += 1
        context.count("mul-to-shift.rewritten", changed)
        return PreservedAnalyses.none() if changed else PreservedAnalyses.all()


