"""``tile`` ops for debugging kernels: ``tile.print``, ``tile.assert``, ``tile.barrier``;
and ``tile.assume``, what the author promises holds.

They have side effects (no ``Pure`` trait), so no pass deletes, merges or hoists them.
"""

from __future__ import annotations

from ..ir.constraints import AnyType, BoolLike
from ..ir.opdef import Attr, Operand, define_op, op_error
from ..ir.operation import Operation


@define_op
class PrintOp(Operation):
    """Prints ``prefix`` and the values (every element of a tile) at run time, with the
    program id, as Triton's ``device_print``."""

    name = "tile.print"
    values = Operand(AnyType, variadic=True)
    prefix = Attr(str, default="")
    hex = Attr(bool, default=False)

    def verify_op(self) -> None:
        shapes = {getattr(v.type, "shape", ()) for v in self.values if getattr(v.type, "shape", ())}
        if len(shapes) > 1:
            raise op_error(self, "prints tiles of one shape (scalars may be mixed in)")


@define_op
class AssertOp(Operation):
    """Fails the launch with ``message`` where ``condition`` is false."""

    name = "tile.assert"
    condition = Operand(BoolLike)
    message = Attr(str, default="")
    #: Checked in every build, not only with ``debug=True`` (``pl.device_assert``'s rule):
    #: for rules whose breaking would corrupt memory or hang, which lowerings emit.  Without
    #: debug a GPU stops the kernel with a trap (no message); with it, as any assertion.
    always = Attr(bool, default=False)


@define_op
class BarrierOp(Operation):
    """Synchronizes the threads of a program (``debug_barrier``); nothing on the
    interpreter, which runs a program as one thread."""

    name = "tile.barrier"


@define_op
class AssumeOp(Operation):
    """``condition`` holds (``pl.assume``): on GPUs a hint the code generator may rely on
    (``llvm.assume``, never checked); the interpreter checks it as an assertion, so that a
    false promise is found there rather than as wrong results on a GPU."""

    name = "tile.assume"
    condition = Operand(BoolLike)


TILE_DEBUG_OPS = (PrintOp, AssertOp, BarrierOp, AssumeOp)
