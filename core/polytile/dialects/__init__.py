"""The core dialects.  Importing this package registers them with the IR registry.

The ``gpu`` dialect (layouts, shared memory) is registered when first needed, by
``import polytile.dialects.gpu`` or by asking this package for ``GPU_DIALECT`` or
``CORE_DIALECTS``: a kernel module (``import polytile.language``) and a launch from the
disk cache need none of it, and its layout machinery is a good part of the import time.
"""

import dataclasses as _dataclasses

from ..ir.registry import IR_REGISTRY
from .arith import ARITH_DIALECT
from .builtin import BUILTIN_DIALECT
from .func import FUNC_DIALECT
from .math import MATH_DIALECT
from .scf import SCF_DIALECT
from .tile import TILE_DIALECT as _TILE_CORE
from .tile_asm import TILE_ASM_OPS
from .tile_block import TILE_BLOCK_OPS
from .tile_clock import TILE_CLOCK_OPS
from .tile_debug import TILE_DEBUG_OPS
from .tile_shape import TILE_SHAPE_OPS

# The tile dialect's ops live in several modules (tile.py, tile_shape.py, ...), split by
# concept; the dialect registered is their union.
TILE_DIALECT = _dataclasses.replace(_TILE_CORE, ops=_TILE_CORE.ops + TILE_SHAPE_OPS + TILE_DEBUG_OPS
                                  + TILE_BLOCK_OPS + TILE_ASM_OPS + TILE_CLOCK_OPS)

TILE_LEVEL_DIALECTS = (BUILTIN_DIALECT, FUNC_DIALECT, ARITH_DIALECT, MATH_DIALECT, SCF_DIALECT, TILE_DIALECT)

for _dialect in TILE_LEVEL_DIALECTS:
    if _dialect.name not in IR_REGISTRY.dialects:
        IR_REGISTRY.register(_dialect)


def __getattr__(name: str):
    if name in ("GPU_DIALECT", "CORE_DIALECTS"):
        from .gpu import GPU_DIALECT  # registers itself

        globals()["GPU_DIALECT"] = GPU_DIALECT
        globals()["CORE_DIALECTS"] = (*TILE_LEVEL_DIALECTS, GPU_DIALECT)
        return globals()[name]
    raise AttributeError(f"module 'polytile.dialects' has no attribute '{name}'")
