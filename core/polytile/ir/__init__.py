"""The core IR: types, values, operations, blocks, regions, printer, parser, verifier.

See docs/ir.md for the text format.  Typical use::

    from polytile.ir import parse_module, print_ir, verify
    module = parse_module(text)
    verify(module)
    print(print_ir(module))
"""

from __future__ import annotations

import importlib
from typing import Any

#: Every name, imported from its module on first use (PEP 562).  ``polytile.language``
#: needs only :mod:`.types`, and importing ``polytile.ir.types`` runs this file first:
#: importing the operations, the printer and the registry (and through it pluggy) here
#: cost every launch from a warm disk cache, which needs none of them, ~10 ms.
_HOMES = {
    "DialectAttribute": ".attributes", "SymbolRef": ".attributes",
    "Builder": ".builder", "InsertionPoint": ".builder",
    "Block": ".operation", "Operation": ".operation", "Region": ".operation",
    "Printer": ".printer", "print_ir": ".printer",
    "IR_REGISTRY": ".registry", "Dialect": ".registry",
    "BlockPointerType": ".types", "DialectType": ".types", "FloatType": ".types", "FunctionType": ".types",
    "IntType": ".types", "PointerType": ".types", "TileType": ".types", "Type": ".types",
    "BlockArgument": ".values", "OpResult": ".values", "Value": ".values",
    "parse_module": ".parser", "parse_type": ".parser", "verify": ".verifier",
}


def __getattr__(name: str) -> Any:
    module = _HOMES.get(name)
    if module is None:
        raise AttributeError(f"module 'polytile.ir' has no attribute '{name}'")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


__all__ = sorted(_HOMES)
