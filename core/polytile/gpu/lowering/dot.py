"""``tile.dot``: on a vendor's matrix instructions where the backend offers one, else as
fused multiply-adds.

A backend describes its matrix instructions with a :class:`MatrixUnit`, registered under
its ``GpuTarget.backend_name`` with :func:`register_matrix_unit` (NVIDIA: ``mma.sync`` in
``polytile_nvidia.mma``).  ``assign-layouts`` asks the unit which instruction a dot uses
(:func:`select_instruction`) and gives the dot's result the instruction's accumulator
layout, its operands the matching ``#gpu.dot_operand`` layouts.  A dot the unit has no
instruction for (``input_precision = "ieee"`` on f32, f64 where there is none, an int8
dot with K < 32) gets the FMA layouts: the result blocked, each thread holding the whole
K extent of its rows of A and columns of B.

The lowering is the same for every instruction: a thread's accumulator registers come in
groups of ``instruction.c_registers`` (one instruction's fragment, in the order the
accumulator layout lists them); for each group and each K step the operands' fragments
are found by coordinates in the operand layouts, and the unit's ``emit`` multiplies them.
Nothing here knows a fragment table: the layouts carry it (see ``MmaLayout`` and
``DotOperandLayout``), and tests check them against the vendor's tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from llvmlite import ir

from ...dialects import tile
from ...dialects.gpu import DotWaitOp, FenceAsyncSharedOp
from ...ir import types as t
from ...plugins.tables import OwnedTable
from ..allocation import register_scratch
from ..layouts import BlockedLayout, DistributedLayout, DotOperandLayout
from .context import LoweringContext, layout_of, linear_layout_of, register_lowering
from .indexing import register_offset
from .types import UnsupportedType, llvm_type

#: ``emit(builder, a, b, c) -> c``: one instruction tile; a, b, c are the thread's fragment
#: registers (LLVM scalars of the operand / accumulator element type) in layout order.
EmitMatrix = Callable[[Any, list, list, list], list]


@dataclass(frozen=True)
class MatrixInstruction:
    """A warp-level matrix instruction (or a fixed sequence of them) that computes one
    ``instr_shape[0] x instr_shape[1]`` accumulator tile over ``k`` elements of K."""

    #: Shown in messages and dumps, e.g. "mma.sync.m16n8k16.f32.f16".
    name: str
    #: The accumulator layout of a result of ``shape`` with ``num_warps`` warps.
    result_layout: Callable[[tuple[int, ...], int], DistributedLayout]
    #: K elements each lane holds consecutively in an operand (``DotOperandLayout.k_width``).
    k_width: int
    #: K covered by one instruction tile.
    k: int
    #: Registers of one instruction's A, B and accumulator fragments, per thread: the
    #: first registers of each layout, in the order ``emit`` takes them.
    fragments: tuple[int, int, int]
    emit: EmitMatrix
    #: ``lower(op, operands, ctx) -> result registers``: the instruction lowers the whole
    #: dot itself, its operands in whatever layout they were computed in (no dot operand
    #: conversion; NVIDIA's wgmma writes them to shared memory and reads them from there).
    #: ``k`` is then the dot's whole K (one piece: pipeline-loops does not slice it).
    lower: Callable[[Any, list, Any], list] | None = None
    #: ``scratch_bytes(op)``: shared memory the dot ``op`` needs while it runs (with
    #: ``lower``), bytes; None: none.
    scratch_bytes: Callable[[Any], int] | None = None
    #: With ``lower``: A may come in registers, ``DotOperandLayout(0, result, k_width)``;
    #: assign-layouts gives it that layout where A is the accumulator of a dot with the
    #: same warps (attention's ``P @ V``), a conversion that stays in registers.
    register_a: bool = False
    #: With ``lower``: ``overlaps(op) -> bool``, whether the dot ``op`` can be left in
    #: flight when its lowering returns (``async-dots`` marks it ``gpu.async``; a
    #: ``gpu.dot_wait`` retires it): its operands stay where the unit reads them until
    #: then.  The unit then defines ``wait_dots``.  None: never.
    overlaps: Callable[[Any], bool] | None = None
    #: With ``lower``: ``reads_in_place(op, index, buffer_type) -> bool``, whether the unit
    #: reads operand ``index`` of ``op`` in place from a whole buffer of that type (read
    #: through a ``gpu.local_load`` marked ``gpu.in_place``): an operand from before a
    #: loop is then better stored there once (``hoist-dot-operands``) than by the dot
    #: every iteration.  None: the unit takes its operands as they come.
    reads_in_place: Callable[[Any, int, Any], bool] | None = None

    def operand_layout(self, op_idx: int, result_layout: DistributedLayout) -> DotOperandLayout | None:
        """The layout operand ``op_idx`` is converted to; None: it stays as it is."""
        if self.lower is not None:
            return None
        return DotOperandLayout(op_idx, result_layout, self.k_width)


class MatrixUnit(Protocol):
    """What a backend says about its matrix instructions."""

    def select(self, a: t.Type, acc: t.Type, input_precision: str, shape: tuple[int, int, int], arch: str,
               num_warps: int) -> MatrixInstruction | None:
        """The instruction for a dot of ``a`` elements accumulating in ``acc`` with
        ``shape = (M, N, K)``; None: multiply-adds (the FMA lowering)."""

    # Optional: ``explain(a, acc, shape, arch) -> str | None``, what a dot whose operand
    # type has no multiply-add lowering would need to get an instruction (for the error).
    #
    # Optional, for instructions with ``overlaps``: ``wait_dots(ctx, pending, values) ->
    # values``, the lowering of ``gpu.dot_wait``: wait until at most ``pending`` groups
    # of asynchronous dots are in flight; ``values`` are the registers of each waited
    # value (LLVM values of its element type), returned as the outputs.
    #
    # Optional, for units that read shared memory asynchronously: ``fence_async_shared(
    # builder)``, the lowering of ``gpu.fence_async_shared`` (this thread's shared-memory
    # writes become visible to those reads).
    #
    # Optional: ``store_rows(ctx, base, registers, layout, element, placement) -> bool``,
    # store a thread's registers of a tile in ``layout`` (a LinearLayout) at the i8
    # shared-memory pointer ``base`` as the ``PaddedPlacement`` of a layout conversion
    # places them, with the unit's own instruction (NVIDIA: ``stmatrix``); False where it
    # does not apply, and the conversion stores element by element.


#: ``GpuTarget.backend_name`` -> its matrix unit, owned by the backend that registered it
#: (where it builds its GpuTarget): it leaves with the backend.
MATRIX_UNITS: OwnedTable[MatrixUnit] = OwnedTable("matrix unit")


def register_matrix_unit(backend_name: str, unit: MatrixUnit) -> MatrixUnit:
    MATRIX_UNITS.add(backend_name, unit)
    return unit


#: Operand types the FMA lowering multiplies (in the accumulator's type).
FMA_TYPES = (t.f16, t.f32, t.f64, t.i8, t.i16, t.i32)


def dot_shape(op: Any) -> tuple[int, int, int]:
    (m, k), n = op.a.type.shape, op.b.type.shape[1]
    return m, n, k


def select_instruction(op: Any, target: Any, num_warps: int) -> MatrixInstruction | None:
    """The matrix instruction of ``op`` (a ``tile.dot``) on ``target``, or None."""
    unit = MATRIX_UNITS.get(target.backend_name)
    if unit is None:
        return None
    return unit.select(t.element_type(op.a.type), t.element_type(op.acc.type), op.input_precision,
                       dot_shape(op), target.arch, num_warps, **getattr(target, "matrix_options", {}))


def fma_layouts(result_layout: BlockedLayout) -> tuple[DotOperandLayout, DotOperandLayout]:
    return DotOperandLayout(0, result_layout), DotOperandLayout(1, result_layout)


# --------------------------------------------------------------------------------------
# Finding a fragment's registers


def _registers_by_offset(layout: Any) -> dict[tuple[int, ...], int]:
    """Register-part coordinates -> the first register holding them."""
    where: dict[tuple[int, ...], int] = {}
    for r in range(layout.num_registers):
        where.setdefault(register_offset(layout, r), r)
    return where


def _xor(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(x ^ y for x, y in zip(a, b))


@dataclass(frozen=True)
class TilePlan:
    """Which registers each instruction reads and writes, for one thread (the same in
    every thread: lanes and warps only shift the coordinates).  ``steps[i]`` is
    ``(c_registers, [(a_registers, b_registers) per K step])``."""

    steps: list[tuple[list[int], list[tuple[list[int], list[int]]]]]


def plan_tiles(result: Any, a: Any, b: Any, instruction: "MatrixInstruction") -> TilePlan:
    """The instruction tiles of a dot whose result, A and B have the linear layouts
    ``result``, ``a``, ``b``.  One instruction's fragments are the first registers of each
    layout (the layouts list them first); a repetition's registers are found by the
    coordinates of its first element, shifted by the fragment's own offsets."""
    a_size, b_size, c_size = instruction.fragments
    a_frag = [register_offset(a, r) for r in range(a_size)]
    b_frag = [register_offset(b, r) for r in range(b_size)]
    a_where, b_where = _registers_by_offset(a), _registers_by_offset(b)
    seen, steps = set(), []
    for start in range(0, result.num_registers, c_size):
        m0, n0 = register_offset(result, start)
        if (m0, n0) in seen:
            continue  # a copy the layout holds twice: computed once, copied after
        seen.add((m0, n0))
        k_steps = []
        for k0 in range(0, a.shape[1], instruction.k):
            a_regs = [a_where[_xor((m0, k0), off)] for off in a_frag]
            b_regs = [b_where[_xor((k0, n0), off)] for off in b_frag]
            k_steps.append((a_regs, b_regs))
        steps.append(([start + i for i in range(c_size)], k_steps))
    return TilePlan(steps)


# --------------------------------------------------------------------------------------
# The lowering


@register_lowering(tile.DotOp)
def _dot(op: Any, operands: list, ctx: LoweringContext) -> list:
    a_layout, b_layout = layout_of(op.a), layout_of(op.b)
    result_layout = layout_of(op.result)
    whole = _whole_dot_instruction(op, ctx.target, ctx.num_warps)
    if whole is not None and whole.result_layout(op.result.type.shape, ctx.num_warps) == result_layout:
        return [whole.lower(op, operands, ctx)]
    for value, layout, idx in ((op.a, a_layout, 0), (op.b, b_layout, 1)):
        if not isinstance(layout, DotOperandLayout) or layout.op_idx != idx or layout.parent != result_layout:
            raise ctx.error(op, f"internal error: operand {'ab'[idx]} of 'tile.dot' has layout {layout}, not "
                                f"the dot operand layout of the result's {result_layout}; assign-layouts must "
                                "convert it")
    try:
        llvm_type(op.a.type), llvm_type(op.acc.type)
    except UnsupportedType as exc:
        raise ctx.unsupported(op, f"'tile.dot' of {exc}") from None
    if isinstance(result_layout, BlockedLayout):
        element = t.element_type(op.a.type)
        if element not in FMA_TYPES:
            unit = MATRIX_UNITS.get(ctx.target.backend_name)
            explain = getattr(unit, "explain", None)
            why = explain(element, t.element_type(op.acc.type), dot_shape(op), ctx.target.arch) if explain else None
            error = ctx.unsupported(op, f"'tile.dot' of {element} tiles with multiply-adds")
            if why:
                error = ctx.error(op, f"'tile.dot' of {element} tiles has no multiply-add lowering, and {why}")
            raise error
        return [_fma_dot(op, operands, ctx)]
    instruction = select_instruction(op, ctx.target, ctx.num_warps)
    if instruction is None or instruction.result_layout(op.result.type.shape, ctx.num_warps) != result_layout:
        raise ctx.unsupported(op, f"'tile.dot' of {t.element_type(op.a.type)} into {t.element_type(op.acc.type)} "
                                  f"with the result in {result_layout}")
    return [_matrix_dot(op, operands, ctx, instruction)]


@register_lowering(DotWaitOp)
def _dot_wait(op: Any, operands: list, ctx: LoweringContext) -> list:
    unit = MATRIX_UNITS.get(ctx.target.backend_name)
    wait = getattr(unit, "wait_dots", None)
    if wait is None:
        raise ctx.unsupported(op, "'gpu.dot_wait' (this target's dots are not asynchronous)")
    values = [operands[i] for i in range(*op.operand_group_slice(0))]
    return wait(ctx, op.pending, values)


@register_lowering(FenceAsyncSharedOp)
def _fence_async_shared(op: Any, operands: list, ctx: LoweringContext) -> list:
    fence = getattr(MATRIX_UNITS.get(ctx.target.backend_name), "fence_async_shared", None)
    if fence is not None:  # a unit without it reads no shared memory asynchronously
        fence(ctx.builder)
    return []


def _whole_dot_instruction(op: Any, target: Any, num_warps: int) -> MatrixInstruction | None:
    instruction = select_instruction(op, target, num_warps)
    return instruction if instruction is not None and instruction.lower is not None else None


@register_scratch(tile.DotOp, sync="inside")
def _dot_scratch(op: Any, target: Any, num_warps: int) -> int:
    """A dot lowered whole (wgmma) writes its operands to shared memory, synchronizes and
    reads them there: "inside", as a layout conversion."""
    instruction = _whole_dot_instruction(op, target, num_warps)
    if instruction is None or instruction.scratch_bytes is None:
        return 0
    return instruction.scratch_bytes(op)


def _matrix_dot(op: Any, operands: list, ctx: LoweringContext, instruction: MatrixInstruction) -> list:
    a, b, acc = operands
    result = linear_layout_of(op.result)
    plan = plan_tiles(result, linear_layout_of(op.a), linear_layout_of(op.b), instruction)
    out = list(acc)
    done: dict[tuple[int, ...], int] = {}
    for c_regs, k_steps in plan.steps:
        values = [acc[r] for r in c_regs]
        for a_regs, b_regs in k_steps:
            values = instruction.emit(ctx.builder, [a[r] for r in a_regs], [b[r] for r in b_regs], values)
        for r, v in zip(c_regs, values):
            out[r] = v
            done[register_offset(result, r)] = r
    # Registers that repeat an element (a tile smaller than the warps' footprint) take
    # the value computed for its first copy.
    for r in range(result.num_registers):
        first = done[register_offset(result, r)]
        if first != r:
            out[r] = out[first]
    return out


def _fma_dot(op: Any, operands: list, ctx: LoweringContext) -> list:
    """``acc[m, n] += a[m, k] * b[k, n]`` over K, one element at a time, in the
    accumulator's type (Triton's FMA dot)."""
    a, b, acc = operands
    b_ = ctx.builder
    result = linear_layout_of(op.result)
    a_where, b_where = _registers_by_offset(linear_layout_of(op.a)), _registers_by_offset(linear_layout_of(op.b))
    acc_type = llvm_type(op.acc.type)
    k_total = op.a.type.shape[1]
    widen = _widen(ctx, t.element_type(op.a.type), acc_type)
    a_wide = {r: widen(a[r]) for r in set(a_where.values())}
    b_wide = {r: widen(b[r]) for r in set(b_where.values())}
    out = []
    computed: dict[tuple[int, ...], Any] = {}
    for r in range(result.num_registers):
        m, n = register_offset(result, r)
        if (m, n) in computed:
            out.append(computed[(m, n)])
            continue
        value = acc[r]
        for k in range(k_total):
            x, y = a_wide[a_where[(m, k)]], b_wide[b_where[(k, n)]]
            if isinstance(acc_type, ir.IntType):
                value = b_.add(value, b_.mul(x, y))
            else:
                value = ctx.call(f"llvm.fmuladd.{_float_suffix(acc_type)}", acc_type, [x, y, value])
        computed[(m, n)] = value
        out.append(value)
    return out


def _float_suffix(type_: ir.Type) -> str:
    return {ir.HalfType: "f16", ir.FloatType: "f32", ir.DoubleType: "f64"}[type(type_)]


def _widen(ctx: LoweringContext, element: t.Type, acc_type: ir.Type) -> Callable[[Any], Any]:
    b = ctx.builder
    if isinstance(acc_type, ir.IntType):
        signed = not (isinstance(element, t.IntType) and not element.signed)
        return lambda v: v if v.type == acc_type else (b.sext(v, acc_type) if signed else b.zext(v, acc_type))
    return lambda v: v if v.type == acc_type else b.fpext(v, acc_type)


__all__ = ["MATRIX_UNITS", "MatrixInstruction", "MatrixUnit", "TilePlan", "dot_shape", "fma_layouts", "plan_tiles",
           "register_matrix_unit", "select_instruction"]
