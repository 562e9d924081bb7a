"""A plugin-style dialect used by the IR tests: one op, two types and two attributes.

It is registered the way a plugin does it (``IR_REGISTRY.register(Dialect(...))`` under
the plugin's ownership), once per test session.
"""

from __future__ import annotations

import contextlib

from dataclasses import dataclass
from typing import Any

from polytile.ir import IR_REGISTRY, Dialect, DialectAttribute, DialectType, Type
from polytile.ir.constraints import AnyType, IntScalar, Tile
from polytile.ir.opdef import Attr, Operand, Pure, RegionDef, Result, define_op, op_error
from polytile.ir.operation import Operation
from polytile.plugins.registry import PluginInfo

TEST_PLUGIN = PluginInfo("test-plugin", "polytile-test-plugin", "1.0")


@dataclass(frozen=True)
class DescType(DialectType):
    """A tensor descriptor: block shape and element type, default ``<...>`` spelling."""

    type_name = "test.desc"
    block: tuple
    element: Type


@dataclass(frozen=True)
class TokenType(DialectType):
    """A type with a custom spelling: ``!test.token<3 x "name">``."""

    type_name = "test.token"
    count: int
    label: str

    def format_parameters(self) -> str:
        from polytile.ir.attributes import format_string

        return f"{self.count} x {format_string(self.label)}"

    @classmethod
    def parse_parameters(cls, parser: Any) -> "TokenType":
        count = parser.parse_integer("a count")
        if parser.peek_identifier() != "x":
            parser.error("expected 'x' in '!test.token'")
        parser.parse_identifier()
        return cls(count, parser.parse_string())


@dataclass(frozen=True)
class LayoutAttr(DialectAttribute):
    """A layout with ``key = value`` parameters: ``#test.layout<warps = 4, order = [1, 0]>``."""

    attribute_name = "test.layout"
    warps: int
    order: tuple = (1, 0)


@dataclass(frozen=True)
class SwizzleAttr(DialectAttribute):
    attribute_name = "test.swizzle"
    vec: int
    per_phase: int = 1


@define_op
class MakeDescOp(Operation):
    """Makes a descriptor from a base pointer and (optionally) strides and offsets."""

    name = "test.make_desc"
    base = Operand(AnyType)
    strides = Operand(IntScalar, variadic=True)
    offsets = Operand(IntScalar, variadic=True)
    result = Result(AnyType)
    swizzle = Attr(int, default=0)

    def verify_op(self) -> None:
        if not isinstance(self.result.type, DescType):
            raise op_error(self, f"result must be a '!test.desc', got {self.result.type}")
        if len(self.strides) != len(self.result.type.block):
            raise op_error(self, f"needs {len(self.result.type.block)} strides, got {len(self.strides)}")


@define_op
class UseTileOp(Operation):
    """A pure op on a tile; its result is the operand's type."""

    name = "test.use_tile"
    source = Operand(Tile)
    result = Result(Tile)
    traits = (Pure,)
    infer_result_types = staticmethod(lambda operands, attributes: [operands["source"].type])


@define_op
class MultiBlockOp(Operation):
    """An op whose region may hold several blocks (the core's structured ops have one)."""

    name = "test.multi_block"
    body = RegionDef(single_block=False)


TEST_DIALECT = Dialect(
    "test",
    ops=(MakeDescOp, UseTileOp, MultiBlockOp),
    types=(DescType, TokenType),
    attributes=(LayoutAttr, SwizzleAttr),
    doc="Test plugin dialect.",
)


def register() -> None:
    """Register the test dialect once, owned by the test plugin (as the plugin manager does)."""
    if "test" in IR_REGISTRY.dialects:
        return
    with contextlib.ExitStack() as stack:
        for registry in (IR_REGISTRY.ops, IR_REGISTRY.types, IR_REGISTRY.attributes, IR_REGISTRY.dialects):
            stack.enter_context(registry.owned_by(TEST_PLUGIN))
        IR_REGISTRY.register(TEST_DIALECT)

register()
