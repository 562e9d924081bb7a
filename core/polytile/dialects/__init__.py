"""The core dialects.  Importing this package registers them with the IR registry."""

import dataclasses as _dataclasses

from ..ir.registry import IR_REGISTRY
from .arith import ARITH_DIALECT
from .builtin import BUILTIN_DIALECT
from .func import FUNC_DIALECT
from .gpu import GPU_DIALECT
from .math import MATH_DIALECT
from .scf import SCF_DIALECT
from .tile import TILE_DIALECT as _TILE_CORE
from .tile_block import TILE_BLOCK_OPS
from .tile_debug import TILE_DEBUG_OPS
from .tile_shape import TILE_SHAPE_OPS

# The tile dialect's ops live in several modules (tile.py, tile_shape.py, ...), split by
# concept; the dialect registered is their union.
TILE_DIALECT = _dataclasses.replace(_TILE_CORE, ops=_TILE_CORE.ops + TILE_SHAPE_OPS + TILE_DEBUG_OPS
                                  + TILE_BLOCK_OPS)

CORE_DIALECTS = (BUILTIN_DIALECT, FUNC_DIALECT, ARITH_DIALECT, MATH_DIALECT, SCF_DIALECT, TILE_DIALECT, GPU_DIALECT)

for _dialect in CORE_DIALECTS:
    if _dialect.name not in IR_REGISTRY.dialects:
        IR_REGISTRY.register(_dialect)
