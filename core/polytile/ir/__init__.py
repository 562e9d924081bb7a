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

#: Imported on first use: writing and launching a kernel needs neither the parser nor the
#: verifier, and importing them cost every fresh process several milliseconds.
_ON_FIRST_USE = {"parse_module": ".parser", "parse_type": ".parser", "verify": ".verifier"}


def __getattr__(name: str) -> object:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module 'polytile.ir' has no attribute '{name}'")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "Block", "BlockArgument", "BlockPointerType", "Builder", "Dialect", "DialectAttribute", "DialectType",
    "FloatType", "FunctionType", "IR_REGISTRY", "InsertionPoint", "IntType", "OpResult", "Operation",
    "PointerType", "Printer", "Region", "SymbolRef", "TileType", "Type", "Value", "parse_module", "parse_type",
    "print_ir", "verify",
]
