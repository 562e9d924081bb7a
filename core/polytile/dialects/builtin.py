"""The ``builtin`` dialect: the module that holds a program's functions."""

from __future__ import annotations

from typing import Any

from ..ir.opdef import IsolatedFromAbove, RegionDef, SymbolTable, define_op, op_error
from ..ir.operation import Operation
from ..ir.registry import Dialect


@define_op
class ModuleOp(Operation):
    """A module: top-level functions, and module-wide attributes (target, options)."""

    name = "builtin.module"
    body = RegionDef()
    traits = (IsolatedFromAbove, SymbolTable)

    def print_custom(self, printer: Any, depth: int) -> None:
        head = "module"
        if self.attributes:
            head += " attributes " + printer.format_attribute_dict(self.attributes)
        printer.emit(depth, head + " {")
        for op in self.body.block:
            printer.print_op(op, depth + 1)
        printer.emit(depth, "}" + printer.location_suffix(self))

    @classmethod
    def parse_custom(cls, parser: Any, result_names: list[str]) -> "ModuleOp":
        attributes = {}
        if parser.peek_identifier() == "attributes":
            parser.parse_identifier()
            attributes = parser.parse_attribute_dict()
        region = parser.parse_region()
        return cls([], [], attributes, [region])

    def lookup_symbol(self, name: str) -> Operation | None:
        for op in self.body.block:
            if op.attributes.get("sym_name") == name:
                return op
        return None

    def functions(self) -> list[Operation]:
        return [op for op in self.body.block if op.name == "func.func"]

    def verify_op(self) -> None:
        seen: dict[str, Operation] = {}
        for op in self.body.block:
            sym = op.attributes.get("sym_name")
            if sym is None:
                continue
            if sym in seen:
                raise op_error(op, f"redefines symbol '@{sym}'")
            seen[sym] = op
        for op in self.walk():
            verify_call = getattr(op, "verify_symbol_uses", None)
            if verify_call is not None:
                verify_call(self)


BUILTIN_DIALECT = Dialect("builtin", ops=(ModuleOp,), doc="The module container.")
