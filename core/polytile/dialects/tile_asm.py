"""``tile.inline_asm``: the target's assembly run on every element (Triton's
``inline_asm_elementwise``).

The op holds the assembly text and its constraints as the backend's inline assembly
takes them (LLVM's syntax: outputs first, ``=r,r,r``; ``$0``... name the operands in
that order).  Its operands are tiles of one shape (or scalars), its results tiles of that
shape.  ``pack`` elements go to one instance of the assembly: narrow elements share
32-bit registers (four i8s in one ``r``), wider ones take a register each, so an
instance has, per operand and per result, ``ceil(pack * bits / 32)`` registers of
``min(pack, 32 / bits)`` elements (one 64-bit register per element of 64 bits).  A
pointer operand is its address, a 64-bit integer (``l`` on NVIDIA).

No ``Pure`` trait: an instance with side effects must run, so no pass deletes, merges or
hoists it (``pure`` says whether its results are all it does: backends may use it).
"""

from __future__ import annotations

from ..ir import types as t
from ..ir.constraints import AnyType
from ..ir.opdef import Attr, Operand, Result, define_op, op_error
from ..ir.operation import Operation


def registers_of(element: t.Type, pack: int) -> tuple[int, int]:
    """(registers, elements per register) one instance passes for ``pack`` elements."""
    bits = 8 if element == t.i1 else 64 if isinstance(element, t.PointerType) else element.width
    per_register = max(1, 32 // bits) if bits <= 32 else 1
    per_register = min(per_register, pack)
    return -(-pack // per_register), per_register


@define_op
class InlineAsmOp(Operation):
    """``asm`` run on every ``pack`` elements of ``values`` (tiles of one shape, or
    scalars), giving ``outputs`` of that shape."""

    name = "tile.inline_asm"
    values = Operand(AnyType, variadic=True)
    outputs = Result(AnyType, variadic=True)
    asm = Attr(str)
    constraints = Attr(str)
    pure = Attr(bool, default=True)
    pack = Attr(int, default=1)

    def verify_op(self) -> None:
        pack = self.attributes.get("pack", 1)
        if pack < 1 or pack & (pack - 1):
            raise op_error(self, f"pack must be a power of two of at least 1, got {pack}")
        if not self.results:
            raise op_error(self, "needs at least one result")
        shapes = {tuple(getattr(v.type, "shape", ())) for v in (*self.operands, *self.results)}
        shapes.discard(())
        if len(shapes) > 1:
            raise op_error(self, f"operands and results must be tiles of one shape (or scalars), got shapes "
                                 f"{sorted(shapes)}")
        for value in self.operands:  # addresses go in as 64-bit integers (Triton's "l" operands)
            if not isinstance(t.element_type(value.type), (t.IntType, t.FloatType, t.PointerType)):
                raise op_error(self, f"takes numbers and pointers, got {value.type}")
        for value in self.results:
            if not isinstance(t.element_type(value.type), (t.IntType, t.FloatType)):
                raise op_error(self, f"gives numbers, got {value.type}")
        outputs = sum(registers_of(t.element_type(r.type), pack)[0] for r in self.results)
        inputs = sum(registers_of(t.element_type(v.type), pack)[0] for v in self.operands)
        written = [c for c in self.attributes["constraints"].split(",") if c.strip()]
        described = [c for c in written if not c.strip().startswith("~")]  # clobbers name no operand
        if len(described) != outputs + inputs:
            raise op_error(self, f"the constraints {self.attributes['constraints']!r} describe {len(described)} "
                                 f"operands, but with pack = {pack} the assembly has {outputs} output and {inputs} "
                                 f"input registers")


TILE_ASM_OPS = (InlineAsmOp,)
