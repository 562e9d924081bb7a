"""Program ids, ranges, splats, constants, and the shape ops that keep every element in
the thread that holds it (broadcast, expand_dims, register-only layout conversions)."""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from ...dialects import arith, tile, tile_clock, tile_debug
from ...ir import types as t
from .context import LoweringContext, linear_layout_of, register_lowering
from .indexing import LLVMOps, coordinates, register_map
from .types import UnsupportedType, constant


@register_lowering(tile.ProgramIdOp)
def _program_id(op: Any, operands: list, ctx: LoweringContext) -> list:
    return [ctx.target.read_id(ctx.builder, "block_id", op.axis)]


@register_lowering(tile.NumProgramsOp)
def _num_programs(op: Any, operands: list, ctx: LoweringContext) -> list:
    return [ctx.target.read_id(ctx.builder, "num_blocks", op.axis)]


@register_lowering(tile_clock.ReadClockOp)
def _read_clock(op: Any, operands: list, ctx: LoweringContext) -> list:
    # LLVM's target-independent counters: NVPTX %globaltimer / %clock64, AMDGPU the
    # real-time counter (s_memrealtime, or a message on gfx11) / s_memtime.
    b = ctx.builder
    i64 = ir.IntType(64)
    name = "llvm.readsteadycounter" if op.clock == "global" else "llvm.readcyclecounter"
    function = b.module.globals.get(name) or ir.Function(b.module, ir.FunctionType(i64, []), name)
    reading = b.call(function, [])
    period = ctx.target.steady_clock_period_ns
    if op.clock == "global" and period != 1:
        reading = b.mul(reading, ir.Constant(i64, period))
    return [reading]


@register_lowering(tile_clock.ProcessorIdOp)
def _processor_id(op: Any, operands: list, ctx: LoweringContext) -> list:
    if ctx.target.read_processor_id is None:
        raise ctx.unsupported(op, f"'{op.name}' (the processor a program runs on)")
    return [ctx.target.read_processor_id(ctx.builder)]


def tile_coordinates(ctx: LoweringContext, value: Any) -> list[list[Any]]:
    """``coords[r][d]`` (i32) of every register of ``value`` in this thread."""
    return coordinates(LLVMOps(ctx.builder), linear_layout_of(value), ctx.lane_id, ctx.warp_id)


@register_lowering(tile.ArangeOp)
def _arange(op: Any, operands: list, ctx: LoweringContext) -> list:
    start = ir.Constant(ir.IntType(32), op.start)
    coords = tile_coordinates(ctx, op.result)
    return [[ctx.builder.add(c[0], start) if op.start else c[0] for c in coords]]


@register_lowering(tile.SplatOp)
def _splat(op: Any, operands: list, ctx: LoweringContext) -> list:
    return [[operands[0]] * linear_layout_of(op.result).num_registers]


@register_lowering(arith.ConstantOp)
def _constant(op: Any, operands: list, ctx: LoweringContext) -> list:
    value, type_ = op.attributes["value"], op.result.type
    if isinstance(value, tuple):
        raise ctx.unsupported(op, "a constant tile with different elements")
    try:
        scalar = constant(type_, value)
    except UnsupportedType as exc:
        raise ctx.unsupported(op, f"constants of {exc}") from None
    if isinstance(type_, t.TileType):
        return [[scalar] * linear_layout_of(op.result).num_registers]
    return [scalar]


def _moved(op: Any, operands: list, ctx: LoweringContext, project: Any) -> list:
    source, result = op.operands[0], op.results[0]
    mapping = register_map(linear_layout_of(source), linear_layout_of(result), project)
    if mapping is None:
        raise ctx.unsupported(op, f"'{op.name}' from {source.type} to {result.type}, which moves data between "
                                  "threads (through shared memory),")
    return [[operands[0][r] for r in mapping]]


@register_lowering(tile.BroadcastOp)
def _broadcast(op: Any, operands: list, ctx: LoweringContext) -> list:
    shape = op.source.type.shape
    return _moved(op, operands, ctx, lambda c: tuple(x & (n - 1) for x, n in zip(c, shape)))


@register_lowering(tile.ExpandDimsOp)
def _expand_dims(op: Any, operands: list, ctx: LoweringContext) -> list:
    axis = op.axis
    return _moved(op, operands, ctx, lambda c: c[:axis] + c[axis + 1:])


@register_lowering(tile_debug.BarrierOp)
def _barrier(op: Any, operands: list, ctx: LoweringContext) -> list:
    ctx.target.barrier(ctx.builder)
    return []
