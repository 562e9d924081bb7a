"""``tile.inline_asm`` on GPUs: the assembly as LLVM inline assembly, one instance per
``pack`` elements of each thread (see :mod:`polytile.dialects.tile_asm` for how elements
share registers).

The operands and results share one layout (the rule below), so an instance takes the
same registers of every operand and gives those of every result.  Where a thread holds
fewer elements than a multiple of ``pack``, the last instance repeats its last element
and what it gives for the repeats is dropped.  ``pure=False`` makes the call
``sideeffect``: LLVM then neither deletes nor merges it.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from ...dialects.tile_asm import InlineAsmOp, registers_of
from ...ir import types as t
from ..layout_rules import register_layout_rule
from .context import LoweringContext, register_lowering
from .types import llvm_type


@register_layout_rule(InlineAsmOp)
def _one_layout(op: Any, groups: Any) -> None:
    groups.union([*op.operands, *op.results])


def _register_type(element: t.Type, per_register: int) -> ir.Type:
    bits = 8 if element == t.i1 else element.width
    if per_register == 1:
        return ir.IntType(8) if element == t.i1 else llvm_type(element)
    return ir.IntType(bits * per_register)


def _pack(b: ir.IRBuilder, values: list, element: t.Type, per_register: int) -> Any:
    if isinstance(element, t.PointerType):
        return b.ptrtoint(values[0], ir.IntType(64))  # one address per register
    if element == t.i1:
        values = [b.zext(v, ir.IntType(8)) for v in values]
    if per_register == 1:
        return values[0]
    vector = ir.Constant(ir.VectorType(values[0].type, per_register), None)
    for i, v in enumerate(values):
        vector = b.insert_element(vector, v, ir.Constant(ir.IntType(32), i))
    return b.bitcast(vector, _register_type(element, per_register))


def _unpack(b: ir.IRBuilder, register: Any, element: t.Type, per_register: int) -> list:
    if per_register == 1:
        values = [register]
    else:
        lane_type = ir.IntType(8) if element == t.i1 else llvm_type(element)
        vector = b.bitcast(register, ir.VectorType(lane_type, per_register))
        values = [b.extract_element(vector, ir.Constant(ir.IntType(32), i)) for i in range(per_register)]
    if element == t.i1:
        values = [b.icmp_unsigned("!=", v, ir.Constant(v.type, 0)) for v in values]
    return values


@register_lowering(InlineAsmOp)
def _inline_asm(op: Any, operands: list, ctx: LoweringContext) -> list:
    if ctx.target.inline_asm_refusal:
        raise ctx.error(op, f"pl.inline_asm_elementwise on {ctx.target.arch}: {ctx.target.inline_asm_refusal}")
    b = ctx.builder
    pack = op.attributes.get("pack", 1)
    pure = op.attributes.get("pure", True)
    count = max((len(o) for o in operands if isinstance(o, list)), default=1)
    tiles = isinstance(op.results[0].type, t.TileType)
    inputs = [o if isinstance(o, list) else [o] * count for o in operands]
    input_elements = [t.element_type(v.type) for v in op.operands]
    output_elements = [t.element_type(r.type) for r in op.results]
    output_types = []
    for element in output_elements:
        registers, per = registers_of(element, pack)
        output_types += [_register_type(element, per)] * registers
    returned = output_types[0] if len(output_types) == 1 else ir.LiteralStructType(output_types)
    outputs: list[list[Any]] = [[None] * count for _ in op.results]
    for start in range(0, count, pack):
        slots = [min(start + i, count - 1) for i in range(pack)]
        args = []
        for element, registers_ in zip(input_elements, inputs):
            registers, per = registers_of(element, pack)
            for k in range(registers):
                args.append(_pack(b, [registers_[slots[k * per + j]] for j in range(per)], element, per))
        function_type = ir.FunctionType(returned, [a.type for a in args])
        call = b.asm(function_type, op.attributes["asm"], op.attributes["constraints"], args, side_effect=not pure)
        values = [call] if len(output_types) == 1 else [b.extract_value(call, i) for i in range(len(output_types))]
        position = 0
        for result_index, element in enumerate(output_elements):
            registers, per = registers_of(element, pack)
            for k in range(registers):
                for j, value in enumerate(_unpack(b, values[position], element, per)):
                    slot = start + k * per + j
                    if slot < count:
                        outputs[result_index][slot] = value
                position += 1
    return [o if tiles else o[0] for o in outputs]
