"""The core IR: types, values, operations, blocks, regions, printer, parser, verifier.

See docs/ir.md for the text format.  Typical use::

    from polytile.ir import parse_module, print_ir, verify
    module = parse_module(text)
    verify(module)
    print(print_ir(module))
"""

from .attributes import DialectAttribute, SymbolRef
from .builder import Builder, InsertionPoint
from .operation import Block, Operation, Region
from .parser import parse_module, parse_type
from .printer import Printer, print_ir
from .registry import IR_REGISTRY, Dialect
from .types import (
    BlockPointerType,
    DialectType,
    FloatType,
    FunctionType,
    IntType,
    PointerType,
    TileType,
    Type,
)
from .values import BlockArgument, OpResult, Value
from .verifier import verify

__all__ = [
    "Block", "BlockArgument", "BlockPointerType", "Builder", "Dialect", "DialectAttribute", "DialectType",
    "FloatType", "FunctionType", "IR_REGISTRY", "InsertionPoint", "IntType", "OpResult", "Operation",
    "PointerType", "Printer", "Region", "SymbolRef", "TileType", "Type", "Value", "parse_module", "parse_type",
    "print_ir", "verify",
]
