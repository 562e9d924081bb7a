"""The core dialects.  Importing this package registers them with the IR registry."""

from ..ir.registry import IR_REGISTRY
from .arith import ARITH_DIALECT
from .builtin import BUILTIN_DIALECT
from .func import FUNC_DIALECT
from .math import MATH_DIALECT
from .scf import SCF_DIALECT
from .tile import TILE_DIALECT

CORE_DIALECTS = (BUILTIN_DIALECT, FUNC_DIALECT, ARITH_DIALECT, MATH_DIALECT, SCF_DIALECT, TILE_DIALECT)

for _dialect in CORE_DIALECTS:
    if _dialect.name not in IR_REGISTRY.dialects:
        IR_REGISTRY.register(_dialect)
