"""The ``scf`` dialect: structured control flow.

``scf.for`` runs its body for ``lower <= iv < upper`` by ``step`` and threads loop-carried
values through block arguments and ``scf.yield``; ``scf.if`` has a then and an else region,
each ending in ``scf.yield``; ``scf.while`` has a "before" region ending in
``scf.condition`` and an "after" region ending in ``scf.yield``.  Loop hints
(``num_stages``, ...) are discardable ``pt.*`` attributes.
"""

from __future__ import annotations

from typing import Any

from ..ir.constraints import AnyType, BoolLike, Index
from ..ir.opdef import (
    HasParent,
    Operand,
    RecursivelyPure,
    RegionDef,
    Result,
    ReturnLike,
    Terminator,
    define_op,
    op_error,
)
from ..ir.operation import Block, Operation, Region
from ..ir.registry import Dialect
from ..ir.types import i1


def _types(values) -> str:
    return "(" + ", ".join(str(v.type) for v in values) + ")"


@define_op
class ForOp(Operation):
    """A counted loop with loop-carried values."""

    name = "scf.for"
    lower = Operand(Index)  # i32 or i64, as in Triton: backends compute the trip count in these widths
    upper = Operand(Index)
    step = Operand(Index)
    init_args = Operand(AnyType, variadic=True)
    outputs = Result(AnyType, variadic=True)
    body = RegionDef(terminators=("scf.yield",))
    traits = (RecursivelyPure,)

    @classmethod
    def create(cls, lower, upper, step, init_args=(), *, location: Any = None, iv_name: str | None = None) -> "ForOp":
        block = Block([lower.type] + [v.type for v in init_args], [iv_name] + [None] * len(init_args))
        return cls([lower, upper, step, *init_args], [v.type for v in init_args], {}, [Region([block])], location)

    @property
    def induction_variable(self):
        return self.body.block.arguments[0]

    @property
    def region_iter_args(self):
        return self.body.block.arguments[1:]

    def verify_op(self) -> None:
        iv_type = self.lower.type
        if self.upper.type != iv_type or self.step.type != iv_type:
            raise op_error(self, f"lower, upper and step must have one type, got {_types(self.operands[:3])}")
        args = self.body.block.arguments
        if not args or args[0].type != iv_type:
            raise op_error(self, f"the body's first argument must be the induction variable of type {iv_type}")
        carried = [a.type for a in args[1:]]
        if carried != [v.type for v in self.init_args] or carried != [r.type for r in self.results]:
            raise op_error(self, f"loop-carried types differ: init {_types(self.init_args)}, body "
                                 f"{_types(args[1:])}, results {_types(self.results)}")
        yielded = self.body.block.last_op
        if yielded is not None and [v.type for v in yielded.operands] != carried:
            raise op_error(yielded, f"yields {_types(yielded.operands)} but the loop carries {_types(args[1:])}")


@define_op
class IfOp(Operation):
    """Runs the then region when ``condition`` holds, else the else region."""

    name = "scf.if"
    condition = Operand(BoolLike)
    outputs = Result(AnyType, variadic=True)
    then_region = RegionDef(terminators=("scf.yield",))
    else_region = RegionDef(terminators=("scf.yield",))
    traits = (RecursivelyPure,)

    @classmethod
    def create(cls, condition, result_types=(), *, location: Any = None) -> "IfOp":
        regions = [Region([Block()]), Region([Block()])]
        return cls([condition], list(result_types), {}, regions, location)

    def verify_op(self) -> None:
        if self.condition.type != i1:
            raise op_error(self, f"condition must be an i1 scalar, got {self.condition.type}")
        expected = [r.type for r in self.results]
        for label, region in (("then", self.then_region), ("else", self.else_region)):
            last = region.block.last_op
            if last is not None and [v.type for v in last.operands] != expected:
                raise op_error(last, f"the {label} branch yields {_types(last.operands)} but the if returns "
                                     f"({', '.join(map(str, expected))})")


@define_op
class WhileOp(Operation):
    """``before`` computes a condition and the values passed on; ``after`` is the body."""

    name = "scf.while"
    init_args = Operand(AnyType, variadic=True)
    outputs = Result(AnyType, variadic=True)
    before = RegionDef(terminators=("scf.condition",))
    after = RegionDef(terminators=("scf.yield",))
    traits = (RecursivelyPure,)

    def verify_op(self) -> None:
        before_args = [a.type for a in self.before.block.arguments]
        if before_args != [v.type for v in self.init_args]:
            raise op_error(self, f"the before region takes {_types(self.before.block.arguments)} but the loop starts "
                                 f"with {_types(self.init_args)}")
        condition = self.before.block.last_op
        if condition is not None:
            passed = [v.type for v in condition.operands[1:]]
            if passed != [a.type for a in self.after.block.arguments] or passed != [r.type for r in self.results]:
                raise op_error(condition, "passes values whose types differ from the after region's arguments "
                                          "or the loop's results")
        yielded = self.after.block.last_op
        if yielded is not None and [v.type for v in yielded.operands] != before_args:
            raise op_error(yielded, f"yields {_types(yielded.operands)} but the before region takes "
                                    f"{_types(self.before.block.arguments)}")


@define_op
class ConditionOp(Operation):
    """Ends ``scf.while``'s before region: continue when ``condition``, passing ``args``."""

    name = "scf.condition"
    condition = Operand(BoolLike)
    args = Operand(AnyType, variadic=True)
    traits = (Terminator, HasParent("scf.while"))

    def verify_op(self) -> None:
        # One loop decision, not one per lane: a tile condition has no meaning here.
        if self.condition.type != i1:
            raise op_error(self, f"condition must be an i1 scalar, got {self.condition.type}")


@define_op
class YieldOp(Operation):
    """Ends a region of ``scf.for``, ``scf.if`` or ``scf.while``, handing back values."""

    name = "scf.yield"
    values = Operand(AnyType, variadic=True)
    traits = (Terminator, ReturnLike, HasParent("scf.for", "scf.if", "scf.while"))


SCF_DIALECT = Dialect("scf", ops=(ForOp, IfOp, WhileOp, ConditionOp, YieldOp), doc="Structured control flow.")
