"""The ``gpu`` dialect: ops that exist only once tiles have layouts (after a GPU
backend's distribute stage).

``gpu.convert_layout`` moves a tile from one distributed layout to another; the values
do not change, only which thread holds which element.  ``assign-layouts`` inserts it where
two uses of a value need different layouts; the interpreter runs it as the identity.
"""

from __future__ import annotations

from ..ir.constraints import Tile
from ..ir.opdef import Operand, Pure, Result, define_op, op_error
from ..ir.operation import Operation
from ..gpu.layouts import LAYOUT_ATTRIBUTES
from ..ir.registry import Dialect


@define_op
class ConvertLayoutOp(Operation):
    """The same tile in another layout."""

    name = "gpu.convert_layout"
    source = Operand(Tile)
    result = Result(Tile)
    traits = (Pure,)
    semantics = staticmethod(lambda x: x)

    def verify_op(self) -> None:
        src, dst = self.source.type, self.result.type
        if src.shape != dst.shape or src.element != dst.element:
            raise op_error(self, f"converts the layout only; {src} and {dst} differ in shape or element type")

    def fold(self, constants: list) -> list | None:
        if self.source.type == self.result.type:
            return [self.source]
        return None


# The layouts are attributes of this dialect, so GPU IR text parses wherever the core
# dialects are registered.  (#axis_info registers itself with its analysis: only its test
# printer writes it.)
GPU_DIALECT = Dialect("gpu", ops=(ConvertLayoutOp,), attributes=tuple(LAYOUT_ATTRIBUTES),
                      doc="Layouts of distributed tiles and the conversions between them.")

__all__ = ["ConvertLayoutOp", "GPU_DIALECT"]
