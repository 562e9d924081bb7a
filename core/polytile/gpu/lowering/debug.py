"""``tile.print`` (``device_print``) and ``tile.assert`` (``device_assert``) on GPUs.

A print writes one line per element, in the interpreter's format
(``pid (0, 0, 0) idx (3) x 7, 1``), through the target's ``printf`` hook (NVIDIA:
``vprintf``).  Each element is printed once, by the thread holding its first copy, so
the lines are the interpreter's lines, in another order (threads print concurrently).
The tiles printed together share a layout (a layout rule below), so one thread holds
every value of a line.  Integers print in decimal (or ``0x``-padded hex with
``hex=True``), booleans as True/False, floats with ``%f`` as Triton does (the
interpreter prints Python's shortest repr).

An assertion, as in Triton, is compiled only with ``debug=True`` (the interpreter always
checks): where the condition is false for an element the thread holds, the target's
``assert_fail`` hook reports the message with the kernel's file, line and name, and the
launch fails.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from ...dialects import tile_debug
from ...errors import SourceLocation
from ...ir import types as t
from ..layout_rules import register_layout_rule
from .context import LoweringContext, linear_layout_of, register_lowering
from .indexing import duplicate_register_mask
from .memory import thread_owner
from .tiles import tile_coordinates
from .types import bit_width, fp8_format, is_float

_I32, _I64, _F64 = ir.IntType(32), ir.IntType(64), ir.DoubleType()


@register_layout_rule(tile_debug.PrintOp)
def _print_layouts(op: Any, groups: Any) -> None:
    groups.union(op.operands)


def _format_and_argument(ctx: LoweringContext, value: Any, type_: t.Type, hex_: bool) -> tuple[str, Any]:
    """The printf conversion for one element and the promoted argument (C varargs: ints
    to at least 32 bits, floats to double)."""
    b = ctx.builder
    element = t.element_type(type_)
    if fp8_format(element):
        from .elementwise import fp8_to_float

        value, element = fp8_to_float(ctx, value, element.kind, _F64), t.f64
    if element == t.i1 and not hex_:
        return "%s", _bool_text(ctx, value)
    if isinstance(element, t.IntType):
        width = max(element.width, 8)
        wide = _I64 if width > 32 else _I32
        extend = b.sext if element.signed and element != t.i1 else b.zext
        argument = value if value.type == wide else extend(value, wide)
        if hex_:
            if element.signed and width < 32:  # print the value's own bits, not the sign extension
                argument = b.and_(argument, ir.Constant(wide, (1 << width) - 1))
            return f"0x%0{width // 4}{'ll' if width > 32 else ''}x", argument
        return ("%lld" if width > 32 else "%d") if element.signed else ("%llu" if width > 32 else "%u"), argument
    if is_float(value.type):
        return "%f", value if value.type == _F64 else b.fpext(value, _F64)
    return "%p", value  # pointers


def _bool_text(ctx: LoweringContext, bit: Any) -> Any:
    module = ctx.module
    strings = []
    for text in ("True", "False"):
        name = f"polytile.bool.{text}"
        variable = module.globals.get(name)
        if variable is None:
            data = bytearray(text.encode()) + b"\0"
            variable = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(8), len(data)), name,
                                         addrspace=ctx.target.global_address_space)
            variable.global_constant = True
            variable.linkage = "private"
            variable.initializer = ir.Constant(variable.value_type, data)
        strings.append(ctx.builder.addrspacecast(variable, ir.PointerType()))
    return ctx.builder.select(bit, strings[0], strings[1])


@register_lowering(tile_debug.PrintOp)
def _print(op: Any, operands: list, ctx: LoweringContext) -> list:
    if ctx.target.printf is None:
        raise ctx.unsupported(op, "device_print")
    b = ctx.builder
    prefix, hex_ = op.attributes.get("prefix", "") or "", bool(op.attributes.get("hex", False))
    pid = [ctx.target.read_id(b, "block_id", axis) for axis in range(3)]
    tiles = [v for v in op.operands if isinstance(v.type, t.TileType)]
    head = "pid (%d, %d, %d)"
    if not tiles:
        owner = b.icmp_unsigned("==", ctx.thread_id, ctx.i32(0))
        with b.if_then(owner):
            _print_line(ctx, head, pid, [], op, operands, None, prefix, hex_)
        return []
    layout = linear_layout_of(tiles[0])
    coords = tile_coordinates(ctx, tiles[0])
    duplicates = duplicate_register_mask(layout)
    owner = thread_owner(ctx, layout)
    index = " idx (" + ", ".join(["%d"] * len(tiles[0].type.shape)) + ")"
    with b.if_then(owner) if owner is not None else _Always():
        for r in range(layout.num_registers):
            if not r & duplicates:
                _print_line(ctx, head + index, pid, coords[r], op, operands, r, prefix, hex_)
    return []


def _print_line(ctx: LoweringContext, head: str, pid: list, coords: list, op: Any, operands: list, register: Any,
                prefix: str, hex_: bool) -> None:
    parts, arguments = [], [*pid, *coords]
    for value, lowered in zip(op.operands, operands):
        element = lowered[register] if isinstance(lowered, list) else lowered
        spec, argument = _format_and_argument(ctx, element, value.type, hex_)
        parts.append(spec)
        arguments.append(argument)
    text = head + " " + prefix.replace("%", "%%") + ", ".join(parts) + "\n"  # one line per element
    ctx.target.printf(ctx.builder, text, arguments)


class _Always:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


@register_lowering(tile_debug.AssertOp)
def _assert(op: Any, operands: list, ctx: LoweringContext) -> list:
    if not ctx.target.debug and not op.always:
        return []  # Triton's rule: assertions are checked only when compiled with debug=True
    b = ctx.builder
    condition = operands[0]
    bits = condition if isinstance(condition, list) else [condition]
    holds = bits[0]
    for bit in bits[1:]:
        holds = b.and_(holds, bit)
    if not ctx.target.debug or (op.always and ctx.target.assert_fail is None):
        # A check a lowering asks for in every build stops the kernel with the target's
        # trap: the message needs the runtime's assertion call (where the target has one),
        # and on Hopper any call makes ptxas serialize the kernel's wgmma, so only
        # debug=True prints it.
        trap = b.module.declare_intrinsic("llvm.trap", fnty=ir.FunctionType(ir.VoidType(), []))
        with b.if_then(b.not_(holds), likely=False):
            b.call(trap, [])
        return []
    if ctx.target.assert_fail is None:
        raise ctx.unsupported(op, "device_assert")
    location = op.location if isinstance(op.location, SourceLocation) else None
    file, line = (location.file, location.line) if location is not None else ("<unknown>", 0)
    message = op.attributes.get("message", "") or "device assertion failed"
    with b.if_then(b.not_(holds), likely=False):
        ctx.target.assert_fail(b, message, file, line, ctx.kernel)
    return []


@register_lowering(tile_debug.AssumeOp)
def _assume(op: Any, operands: list, ctx: LoweringContext) -> list:
    # One llvm.assume per element this thread holds: LLVM may fold what follows from it
    # (bounds, branches) and emits no code for it.
    b = ctx.builder
    assume = b.module.declare_intrinsic("llvm.assume", fnty=ir.FunctionType(ir.VoidType(), [ir.IntType(1)]))
    condition = operands[0]
    for bit in dict.fromkeys(condition if isinstance(condition, list) else [condition]):
        b.call(assume, [bit])
    return []


__all__: list[str] = []
