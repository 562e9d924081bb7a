"""The ``func`` dialect: functions, calls and returns.

A kernel is a ``func.func`` with ``kernel = true``; a helper marked ``noinline = true``
stays a function (the inliner leaves it alone) and is called with ``func.call``.
"""

from __future__ import annotations

from typing import Any

from ..ir.attributes import SymbolRef, format_symbol
from ..ir.constraints import AnyType
from ..ir.opdef import (
    Attr,
    HasParent,
    IsolatedFromAbove,
    Operand,
    RegionDef,
    Result,
    ReturnLike,
    Symbol,
    Terminator,
    define_op,
    op_error,
)
from ..ir.operation import Block, Operation, Region
from ..ir.printer import format_result_types
from ..ir.registry import Dialect
from ..ir.types import FunctionType, Type
from ..ir.values import Value

_SIGNATURE_ATTRIBUTES = ("sym_name", "function_type")


@define_op
class FuncOp(Operation):
    """A function.  ``kernel`` marks an entry point; ``noinline`` keeps a callee a function."""

    name = "func.func"
    sym_name = Attr(str)
    function_type = Attr(Type)
    kernel = Attr(bool, optional=True)
    noinline = Attr(bool, optional=True)
    body = RegionDef(terminators=("func.return",))
    traits = (IsolatedFromAbove, Symbol)

    @classmethod
    def create(cls, name: str, inputs: list[Type], results: list[Type] = (), *, arg_names=None,
               location: Any = None, **attributes: Any) -> "FuncOp":
        block = Block(inputs, arg_names)
        attrs = {"sym_name": name, "function_type": FunctionType(tuple(inputs), tuple(results)), **attributes}
        return cls([], [], attrs, [Region([block])], location)

    @property
    def arguments(self) -> list[Value]:
        return self.body.blocks[0].arguments

    @property
    def entry_block(self) -> Block:
        return self.body.blocks[0]

    def verify_op(self) -> None:
        ftype = self.function_type
        if not isinstance(ftype, FunctionType):
            raise op_error(self, f"attribute 'function_type' must be a function type, got {ftype}")
        args = self.body.blocks[0].arguments
        if [a.type for a in args] != list(ftype.inputs):
            raise op_error(self, "entry block arguments (" + ", ".join(str(a.type) for a in args)
                           + ") do not match the function type " + str(ftype))

    def print_custom(self, printer: Any, depth: int) -> None:
        ftype: FunctionType = self.function_type
        block = self.body.blocks[0]
        head = f"func.func {format_symbol(self.sym_name)}({printer.format_block_arguments(block)})"
        if ftype.results:
            head += " -> " + format_result_types(ftype.results)
        extra = {k: v for k, v in self.attributes.items() if k not in _SIGNATURE_ATTRIBUTES}
        if extra:
            head += " attributes " + printer.format_attribute_dict(extra)
        printer.emit(depth, head + " {")
        for op in block:
            printer.print_op(op, depth + 1)
        for index, other in enumerate(self.body.blocks[1:], start=1):
            printer.print_block_header(other, index, depth)
            for op in other:
                printer.print_op(op, depth + 1)
        printer.emit(depth, "}" + printer.location_suffix(self))

    @classmethod
    def parse_custom(cls, parser: Any, result_names: list[str]) -> "FuncOp":
        parser.expect("@", "before the function name")
        name = parser.parse_string() if parser.peek_is('"') else parser.parse_identifier("a function name")
        parser.expect("(", "to open the argument list")
        arguments: list[tuple[str, Type, int]] = []
        if not parser.accept(")"):
            while True:
                parser.skip_space()
                pos = parser.pos
                if not parser.accept("%"):
                    parser.error("expected an argument like '%x: i32'")
                numbered = parser.text[parser.pos:parser.pos + 1].isdigit()
                arg_name = str(parser.parse_integer()) if numbered else parser.parse_identifier("an argument name")
                parser.expect(":", f"after argument '%{arg_name}'")
                arguments.append((arg_name, parser.parse_type(), pos))
                if parser.accept(")"):
                    break
                parser.expect(",", "or ')' in the argument list")
        results: list[Type] = []
        if parser.accept("->"):
            results = parser.parse_result_types()
        attributes: dict[str, Any] = {}
        if parser.peek_identifier() == "attributes":
            parser.parse_identifier()
            attributes = parser.parse_attribute_dict()
        region = parser.parse_region(entry_arguments=arguments)
        ftype = FunctionType(tuple(t for _, t, _ in arguments), tuple(results))
        return cls([], [], {"sym_name": name, "function_type": ftype, **attributes}, [region])


@define_op
class CallOp(Operation):
    """Calls the function named by ``callee`` in the same module."""

    name = "func.call"
    args = Operand(AnyType, variadic=True)
    outputs = Result(AnyType, variadic=True)
    callee = Attr(SymbolRef)

    def verify_symbol_uses(self, module: Operation) -> None:
        if not isinstance(self.callee, SymbolRef):
            return  # the op's own verification reports the missing or malformed 'callee'
        target = module.lookup_symbol(self.callee.name)  # type: ignore[attr-defined]
        if target is None or target.name != "func.func":
            raise op_error(self, f"calls '@{self.callee.name}', which is not a function in this module")
        ftype: FunctionType = target.function_type
        if [v.type for v in self.operands] != list(ftype.inputs):
            raise op_error(self, f"argument types ({', '.join(str(v.type) for v in self.operands)}) do not match "
                                 f"'@{self.callee.name}' of type {ftype}")
        if [r.type for r in self.results] != list(ftype.results):
            raise op_error(self, f"result types do not match '@{self.callee.name}' of type {ftype}")


@define_op
class ReturnOp(Operation):
    """Returns from a function."""

    name = "func.return"
    values = Operand(AnyType, variadic=True)
    traits = (Terminator, ReturnLike, HasParent("func.func"))

    def verify_op(self) -> None:
        func = self.parent_op
        expected = list(func.function_type.results)  # type: ignore[union-attr]
        got = [v.type for v in self.operands]
        if got != expected:
            raise op_error(self, f"returns ({', '.join(map(str, got))}) but the function returns "
                                 f"({', '.join(map(str, expected))})")


FUNC_DIALECT = Dialect("func", ops=(FuncOp, CallOp, ReturnOp), doc="Functions, calls, returns.")
