"""``noinline`` functions as device functions (a PTX ``.func``), and ``func.call``.

A ``func.func`` without ``kernel`` becomes, the first time a call to it is lowered, an
LLVM function with internal linkage and the ``noinline`` attribute:

- each argument is lowered per register: a scalar is one parameter, a tile one
  parameter per register of its layout (register 0 first);
- one more ``i32`` parameter, last: the byte offset of the callee's shared memory.  The
  memory stage reserved ``[gpu.scratch_offset, + callee's gpu.shared_bytes)`` at each call
  site; the callee's own pieces are placed from 0, so it adds this base to each of them.
  A call from inside a callee adds the caller's base to the call's offset;
- results come back as one LLVM struct of every result's registers (void when none).

Tiles cross the call in registers, so the callee's argument and result layouts must be
the call site's: the call's operand and result types (layouts included) are the
callee's, which the IR verifier checks.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from ...dialects import func
from ...ir import types as t
from ..allocation import SCRATCH_OFFSET_ATTR
from .context import LoweringContext, linear_layout_of, register_lowering
from .shared import shared_pointer
from .target import NUM_WARPS_ATTR, warp_index
from .types import UnsupportedType, llvm_type


class CalleeContext(LoweringContext):
    """The lowering of a noinline function: its shared memory starts at ``scratch_base``
    (an i32 parameter) instead of at 0."""

    scratch_base: Any = None

    def scratch(self, op: Any) -> Any:
        offset = op.attributes.get(SCRATCH_OFFSET_ATTR)
        if offset is None:
            return super().scratch(op)  # reports the missing memory stage
        return shared_pointer(self, offset)


def _width(value: Any) -> int:
    """LLVM values one IR value becomes (a tile: one per register)."""
    return linear_layout_of(value).num_registers if isinstance(value.type, t.TileType) else 1


def _types(values: list, types: list, where: Any, ctx: LoweringContext) -> list:
    flat = []
    for value, type_ in zip(values, types):
        try:
            element = llvm_type(type_)
        except UnsupportedType as exc:
            raise ctx.unsupported(where, f"passing {exc} to or from a noinline function") from None
        flat.extend([element] * _width(value))
    return flat


def _flatten(lowered: list) -> list:
    flat = []
    for value in lowered:
        flat.extend(value if isinstance(value, list) else [value])
    return flat


def _unflatten(flat: list, like: list) -> list:
    result, i = [], 0
    for value in like:
        if isinstance(value.type, t.TileType):
            n = _width(value)
            result.append(flat[i:i + n])
            i += n
        else:
            result.append(flat[i])
            i += 1
    return result


def _callee(op: Any) -> Any:
    module = op.parent_op
    while module is not None and module.name != "builtin.module":
        module = module.parent_op
    found = module.lookup_symbol(op.attributes["callee"].name) if module is not None else None
    if found is None:
        raise RuntimeError(f"'{op.name}' calls '@{op.attributes['callee'].name}', which is not in the module")
    return found


def device_function(callee: Any, ctx: LoweringContext, call: Any) -> ir.Function:
    """The LLVM function of the noinline ``callee`` (a ``func.func``), lowered on first use."""
    from .module import lower_op

    name = callee.attributes["sym_name"]
    found = ctx.module.globals.get(name)
    if found is not None:
        return found
    arguments = list(callee.arguments)
    returned = list(callee.entry_block.last_op.operands) if isinstance(callee.entry_block.last_op, func.ReturnOp) else []
    parameters = _types(arguments, [a.type for a in arguments], call, ctx) + [ir.IntType(32)]
    results = _types(returned, [v.type for v in returned], call, ctx)
    return_type = ir.LiteralStructType(results) if results else ir.VoidType()
    fn = ir.Function(ctx.module, ir.FunctionType(return_type, parameters), name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    inner = CalleeContext(ctx.module, fn, builder, ctx.target, name,
                          callee.attributes.get(NUM_WARPS_ATTR, ctx.num_warps), ctx.axis_info)
    inner.scratch_base = fn.args[-1]
    inner.scratch_base.name = "shared_base"
    for arg, lowered in zip(arguments, _unflatten(list(fn.args[:-1]), arguments)):
        inner.set(arg, lowered)
    inner.thread_id = ctx.target.read_id(builder, "thread_id", 0)
    inner.lane_id = builder.and_(inner.thread_id, inner.i32(ctx.target.warp_size - 1))
    inner.warp_id = warp_index(ctx.target, builder, inner.thread_id)
    for op in callee.entry_block:
        if isinstance(op, func.ReturnOp):
            _return(op, inner, return_type)
            break
        lower_op(op, inner)
    if not builder.block.is_terminated:
        builder.ret_void()
    return fn


def _return(op: Any, ctx: LoweringContext, return_type: ir.Type) -> None:
    b = ctx.builder
    if isinstance(return_type, ir.VoidType):
        b.ret_void()
        return
    packed = ir.Constant(return_type, None)
    for i, value in enumerate(_flatten([ctx.get(v) for v in op.operands])):
        packed = b.insert_value(packed, value, i)
    b.ret(packed)


@register_lowering(func.CallOp)
def _call(op: Any, operands: list, ctx: LoweringContext) -> list:
    callee = _callee(op)
    if callee.attributes.get("kernel"):
        raise ctx.error(op, f"calls the kernel '{callee.attributes['sym_name']}'; a kernel is launched, not called")
    fn = device_function(callee, ctx, op)
    offset = ctx.i32(op.attributes.get(SCRATCH_OFFSET_ATTR, 0))
    base = getattr(ctx, "scratch_base", None)
    if base is not None:
        offset = ctx.builder.add(base, offset)
    returned = ctx.builder.call(fn, _flatten(operands) + [offset])
    if not op.results:
        return []
    flat = [ctx.builder.extract_value(returned, i) for i in range(len(fn.function_type.return_type.elements))]
    return _unflatten(flat, list(op.results))


__all__ = ["CalleeContext", "device_function"]
