"""The ``builtin`` dialect: the module that holds a program's functions."""

from __future__ import annotations

from typing import Any, Iterator

from ..ir.attributes import format_symbol, symbol_refs_in
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

    def verify_regions(self) -> None:
        """Symbol uses, checked after every op inside has verified (so a callee's
        ``function_type`` is known to be a function type when a call is matched to it)."""
        for op in self._ops_in_this_symbol_table():
            verify_uses = getattr(op, "verify_symbol_uses", None)
            if verify_uses is not None:
                verify_uses(self)
            for key in sorted(op.attributes):
                for ref in symbol_refs_in(op.attributes[key]):
                    if self.lookup_symbol(ref.name) is None:
                        raise op_error(op, f"attribute '{key}' refers to {format_symbol(ref.name)}, "
                                           "which is not a symbol in this module")

    def _ops_in_this_symbol_table(self) -> Iterator[Operation]:
        """This module and the ops nested in it, but not inside a nested module: a nested
        symbol table resolves its own references (and checks them when it verifies)."""
        yield self
        stack = [self]
        while stack:
            for region in stack.pop().regions:
                for block in region.blocks:
                    for op in block:
                        if op.has_trait(SymbolTable):
                            continue
                        yield op
                        stack.append(op)


BUILTIN_DIALECT = Dialect("builtin", ops=(ModuleOp,), doc="The module container.")
