"""NVIDIA tensor cores for ``tile.dot``: which ``mma.sync`` instruction serves which
operand and accumulator types, the PTX of each, and ``ldmatrix``.  On sm_90a, dots that
fit a warpgroup take ``wgmma.mma_async`` instead (``polytile_nvidia.wgmma``).

:data:`NVIDIA_MMA` is the matrix unit of the NVIDIA backend (registered by
:mod:`.codegen`; see :mod:`polytile.gpu.lowering.dot`).  Every architecture polytile targets is
sm_80 or later, so every instruction here exists on all of them but fp8's, which needs
sm_89 (Ada) or later:

=================  =========================================  =====================
operands           instruction                                ``k_width`` (per lane)
=================  =========================================  =====================
f16 (f32 or f16)   ``mma.sync.m16n8k16`` .f32/.f16 .f16        2
bf16               ``mma.sync.m16n8k16.f32.bf16``              2
f32, tf32          ``mma.sync.m16n8k8.f32.tf32``               1
f32, tf32x3        three of them on the split inputs           1
i8 (K >= 32)       ``mma.sync.m16n8k32.s32.s8``                4
fp8 (K >= 32)      ``mma.sync.m16n8k32`` .f32/.f16 .e4m3/.e5m2  4  (sm_89 and later)
f64                four ``mma.sync.m8n8k4.f64`` per 16x8x8     1
=================  =========================================  =====================

f32 with ``input_precision = "ieee"`` and int8 with K < 32 take the FMA lowering; fp8
has no FMA lowering (a CompilationError says so) below sm_89 or with K < 32.  fp8's
fragments are int8's (8-bit elements, the PTX ISA's ``.e4m3``/``.e5m2`` tables for
m16n8k32 are the ``.s8`` ones).  The
fragments are the ``MmaLayout(version=2)`` / ``DotOperandLayout`` registers in order; the
PTX ISA's fragment tables (``mma.sync`` "Matrix Fragments") say the same, which
tests/gpu/test_lowering_dot.py checks.

Operands come out of shared memory through ``ldmatrix.x4`` (:meth:`NvidiaMma.load_operand`,
planned by :func:`ldmatrix_plan` from the operand's linear layout): 16-bit operands
always (``.trans`` where K is not the contiguous dimension), 8- and 32-bit ones where K
is contiguous; the others are read element by element.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from polytile.gpu.layouts import DotOperandLayout, MmaLayout
from polytile.gpu.linear_layout import LinearLayout, log2
from polytile.gpu.lowering.context import linear_layout_of
from polytile.gpu.lowering.dot import MatrixInstruction
from polytile.gpu.lowering.dot_operands import shared_offset
from polytile.gpu.lowering.indexing import LLVMOps, coordinates
from polytile.gpu.lowering.shared import LLVMAddOps, PaddedPlacement, register_offsets
from polytile.gpu.lowering.types import BFloatType, bit_width, element_bits, llvm_type
from polytile.ir import types as t

from .architectures import ARCHITECTURES
from .wgmma import select_wgmma

_I32 = ir.IntType(32)
_F32 = ir.FloatType()
_F64 = ir.DoubleType()

#: The accumulator tile of one mma.sync (the layout's instr_shape).
INSTR_SHAPE = (16, 8)


def warps_per_tile(shape: tuple[int, int], num_warps: int) -> tuple[int, int]:
    """Warps along (M, N) for a result of ``shape`` (Triton's ``warpsPerTileV2``): the
    registers a warp needs are ``4 repM repK + 2 repN repK`` for its operands, so the
    warps go where the repetitions are more numerous, M on a tie (A's fragment is the
    larger)."""
    reps = [max(shape[0] // INSTR_SHAPE[0], 1), max(shape[1] // INSTR_SHAPE[1], 1)]
    warps = [1, 1]
    while warps[0] * warps[1] < num_warps:
        if reps[0] >= reps[1]:
            warps[0] *= 2
            if reps[0] != 1:
                reps[0] //= 2
        else:
            warps[1] *= 2
            reps[1] //= 2
    return warps[0], warps[1]


def result_layout(shape: tuple[int, ...], num_warps: int) -> MmaLayout:
    return MmaLayout(2, warps_per_tile((shape[0], shape[1]), num_warps), INSTR_SHAPE)


# --------------------------------------------------------------------------------------
# PTX


def mma_ptx(shape: str, d: str, a: str, b: str, c: str, counts: tuple[int, int, int, int]) -> str:
    """``mma.sync.aligned.<shape>.row.col.<d>.<a>.<b>.<c>`` with operands ``$0...`` in the
    order D, A, B, C; ``counts`` are the registers of each."""
    groups, n = [], 0
    for count in counts:
        groups.append("{" + ", ".join(f"${n + i}" for i in range(count)) + "}")
        n += count
    return f"mma.sync.aligned.{shape}.row.col.{d}.{a}.{b}.{c} " + ", ".join(groups) + ";"


#: ``ldmatrix``: four 8x8 matrices of 16-bit elements; each lane gives the address of one
#: row (lanes 8q..8q+7: matrix q) and gets one 32-bit register per matrix.
LDMATRIX_X4 = "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {$0, $1, $2, $3}, [$4];"
LDMATRIX_X4_TRANS = "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {$0, $1, $2, $3}, [$4];"
#: ``stmatrix`` (sm_90 and later), the reverse: each lane gives the address of one row and
#: one 32-bit register per matrix, which the row's lanes' registers fill.
STMATRIX_X4 = "stmatrix.sync.aligned.m8n8.x4.shared.b16 [$0], {$1, $2, $3, $4};"
#: Round to tf32 (nearest, ties away), as tf32x3's split does.
CVT_TF32 = "cvt.rna.tf32.f32 $0, $1;"



def _asm(builder: ir.IRBuilder, text: str, outputs: list[ir.Type], inputs: list, reads_memory: bool = False) -> list:
    """Inline PTX with ``outputs`` (registers) and ``inputs``; returns the outputs.
    ``reads_memory``: the asm reads shared memory, so LLVM must keep it after the barriers
    and ``cp.async`` waits before it (a memory clobber)."""
    letter = lambda ty: "d" if isinstance(ty, ir.DoubleType) else "f" if isinstance(ty, ir.FloatType) else "r"  # noqa: E731
    constraints = ",".join([f"={letter(o)}" for o in outputs] + [letter(v.type) for v in inputs]
                           + (["~{memory}"] if reads_memory else []))
    result_type = outputs[0] if len(outputs) == 1 else ir.LiteralStructType(outputs)
    value = builder.asm(ir.FunctionType(result_type, [v.type for v in inputs]), text, constraints, inputs,
                        side_effect=False)
    if len(outputs) == 1:
        return [value]
    return [builder.extract_value(value, i) for i in range(len(outputs))]


def _bits(builder: ir.IRBuilder, value: Any) -> Any:
    """The value as an integer of its width (f16 -> i16, bf16 stays its 16 bits)."""
    if isinstance(value.type, ir.IntType):
        return value
    return builder.bitcast(value, ir.IntType(bit_width(value.type)))


def pack32(builder: ir.IRBuilder, values: list) -> list:
    """Elements packed into 32-bit registers, the first in the low bits."""
    if values and isinstance(values[0].type, (ir.HalfType, BFloatType, ir.IntType)) and \
            getattr(values[0].type, "width", 16) == 16 and len(values) % 2 == 0:
        # Two 16-bit elements as a vector: LLVM packs them in one instruction (and a pair
        # of f32 -> f16 or bf16 conversions becomes one cvt.rn.f16x2.f32/.bf16x2.f32),
        # where shifts and ors take four.
        vector = ir.VectorType(values[0].type, 2)
        words = []
        for start in range(0, len(values), 2):
            pair = ir.Constant(vector, ir.Undefined)
            for i in range(2):
                pair = builder.insert_element(pair, values[start + i], ir.Constant(_I32, i))
            words.append(builder.bitcast(pair, _I32))
        return words
    bits = [_bits(builder, v) for v in values]
    width = bits[0].type.width
    per = 32 // width
    words = []
    for start in range(0, len(bits), per):
        word = None
        for i, v in enumerate(bits[start:start + per]):
            part = builder.zext(v, _I32) if width < 32 else v
            if i:
                part = builder.shl(part, ir.Constant(_I32, i * width))
            word = part if word is None else builder.or_(word, part)
        words.append(word)
    return words


def unpack32(builder: ir.IRBuilder, words: list, element: ir.Type) -> list:
    """The inverse of :func:`pack32` for 16-bit elements."""
    values = []
    for word in words:
        for i in range(2):
            half = builder.trunc(builder.lshr(word, ir.Constant(_I32, 16 * i)) if i else word, ir.IntType(16))
            values.append(builder.bitcast(half, element) if not isinstance(element, ir.IntType) else half)
    return values


# --------------------------------------------------------------------------------------
# Instructions


def _m16n8(shape: str, a_type: str, d_type: str, a_regs: int, b_regs: int) -> Any:
    """Emit for a 32-bit accumulator (f32 or s32) m16n8 instruction."""
    def emit(builder: ir.IRBuilder, a: list, b: list, c: list) -> list:
        out = c[0].type
        text = mma_ptx(shape, d_type, a_type, a_type, d_type, (4, a_regs, b_regs, 4))
        return _asm(builder, text, [out] * 4, pack32(builder, a) + pack32(builder, b) + list(c))
    return emit


def _f16_accumulator(builder: ir.IRBuilder, a: list, b: list, c: list) -> list:
    text = mma_ptx("m16n8k16", "f16", "f16", "f16", "f16", (2, 4, 2, 2))
    words = _asm(builder, text, [_I32] * 2, pack32(builder, a) + pack32(builder, b) + pack32(builder, c))
    return unpack32(builder, words, c[0].type)


def _fp8_into_f16(kind: str) -> Any:
    """fp8 operands into an f16 accumulator: m16n8k32, the accumulator packed in two words."""
    def emit(builder: ir.IRBuilder, a: list, b: list, c: list) -> list:
        text = mma_ptx("m16n8k32", "f16", kind, kind, "f16", (2, 4, 2, 2))
        words = _asm(builder, text, [_I32] * 2, pack32(builder, a) + pack32(builder, b) + pack32(builder, c))
        return unpack32(builder, words, c[0].type)
    return emit


def _tf32(builder: ir.IRBuilder, values: list) -> list:
    return [_asm(builder, CVT_TF32, [_I32], [v])[0] for v in values]


def _tf32_mma(builder: ir.IRBuilder, a_words: list, b_words: list, c: list) -> list:
    text = mma_ptx("m16n8k8", "f32", "tf32", "tf32", "f32", (4, 4, 2, 4))
    return _asm(builder, text, [_F32] * 4, list(a_words) + list(b_words) + list(c))


def _tf32_emit(builder: ir.IRBuilder, a: list, b: list, c: list) -> list:
    # The tensor core reads the top 19 bits of each f32; rounding first halves the error.
    return _tf32_mma(builder, _tf32(builder, a), _tf32(builder, b), c)


def _split(builder: ir.IRBuilder, values: list) -> tuple[list, list]:
    """x = big + small, each a tf32: big keeps the top bits, small the next ones."""
    big = _tf32(builder, values)
    small = _tf32(builder, [builder.fsub(v, builder.bitcast(w, _F32)) for v, w in zip(values, big)])
    return big, small


def _tf32x3_emit(builder: ir.IRBuilder, a: list, b: list, c: list) -> list:
    # a b ~ a_big b_big + a_big b_small + a_small b_big (Triton's tf32x3); the small terms
    # go first so they are not lost against the large one.
    a_big, a_small = _split(builder, a)
    b_big, b_small = _split(builder, b)
    c = _tf32_mma(builder, a_small, b_big, c)
    c = _tf32_mma(builder, a_big, b_small, c)
    return _tf32_mma(builder, a_big, b_big, c)


#: A 16x8x8 f64 tile as four m8n8k4: (A register, B register, accumulator registers) of
#: each.  Rows 0-7 are a0 / a2 and c0 c1, rows 8-15 a1 / a3 and c2 c3; K 0-3 is a0 a1 with
#: b0, K 4-7 a2 a3 with b1 (m8n8k4's A is (row groupID, k threadID_in_group), B the same
#: transposed, C two neighbours of row groupID).
F64_STEPS = ((0, 0, (0, 1)), (1, 0, (2, 3)), (2, 1, (0, 1)), (3, 1, (2, 3)))


def _f64_emit(builder: ir.IRBuilder, a: list, b: list, c: list) -> list:
    text = mma_ptx("m8n8k4", "f64", "f64", "f64", "f64", (2, 1, 1, 2))
    c = list(c)
    for a_reg, b_reg, (c0, c1) in F64_STEPS:
        c[c0], c[c1] = _asm(builder, text, [_F64] * 2, [a[a_reg], b[b_reg], c[c0], c[c1]])
    return c


@dataclass(frozen=True)
class _Spec:
    name: str
    k_width: int
    emit: Any
    #: The oldest compute capability with the instruction.
    min_capability: tuple[int, int] = (8, 0)


#: (operand type, accumulator type, precision or None for any) -> instruction.
_SPECS: dict[tuple[t.Type, t.Type, str | None], _Spec] = {
    (t.f16, t.f32, None): _Spec("mma.sync.m16n8k16.f32.f16", 2, _m16n8("m16n8k16", "f16", "f32", 4, 2)),
    (t.f16, t.f16, None): _Spec("mma.sync.m16n8k16.f16.f16", 2, _f16_accumulator),
    (t.bf16, t.f32, None): _Spec("mma.sync.m16n8k16.f32.bf16", 2, _m16n8("m16n8k16", "bf16", "f32", 4, 2)),
    (t.f32, t.f32, "tf32"): _Spec("mma.sync.m16n8k8.f32.tf32", 1, _tf32_emit),
    (t.f32, t.f32, "tf32x3"): _Spec("mma.sync.m16n8k8.f32.tf32 x3", 1, _tf32x3_emit),
    (t.i8, t.i32, None): _Spec("mma.sync.m16n8k32.s32.s8", 4, _m16n8("m16n8k32", "s8", "s32", 4, 2)),
    (t.f8e4m3, t.f32, None): _Spec("mma.sync.m16n8k32.f32.e4m3", 4, _m16n8("m16n8k32", "e4m3", "f32", 4, 2),
                                   min_capability=(8, 9)),
    (t.f8e5m2, t.f32, None): _Spec("mma.sync.m16n8k32.f32.e5m2", 4, _m16n8("m16n8k32", "e5m2", "f32", 4, 2),
                                   min_capability=(8, 9)),
    (t.f8e4m3, t.f16, None): _Spec("mma.sync.m16n8k32.f16.e4m3", 4, _fp8_into_f16("e4m3"), min_capability=(8, 9)),
    (t.f8e5m2, t.f16, None): _Spec("mma.sync.m16n8k32.f16.e5m2", 4, _fp8_into_f16("e5m2"), min_capability=(8, 9)),
    (t.f64, t.f64, None): _Spec("mma.sync.m8n8k4.f64 x4", 1, _f64_emit),
}


class NvidiaMma:
    """The NVIDIA matrix unit (``MatrixUnit``): ``mma.sync`` on sm_80 and later."""

    def select(self, a: t.Type, acc: t.Type, input_precision: str, shape: tuple[int, int, int], arch: str,
               num_warps: int, wgmma: bool = True) -> MatrixInstruction | None:
        """wgmma where the architecture has it (sm_90a), ``wgmma`` (the backend option
        ``enable_wgmma``) allows it and the shape fits (see ``polytile_nvidia.wgmma``);
        else ``mma.sync``."""
        if wgmma and getattr(ARCHITECTURES.get(arch), "has_wgmma", False):
            found = select_wgmma(a, acc, shape, num_warps, input_precision)
            if found is not None:
                return found
        spec = _SPECS.get((a, acc, input_precision)) or _SPECS.get((a, acc, None))
        architecture = ARCHITECTURES.get(arch)
        if spec is None or architecture is None or architecture.compute_capability < spec.min_capability:
            return None
        k = 8 * spec.k_width
        m, n, k_total = shape
        if m < INSTR_SHAPE[0] or n < INSTR_SHAPE[1] or k_total < k:
            return None
        kw = spec.k_width
        return MatrixInstruction(spec.name, result_layout, kw, k, (4 * kw, 2 * kw, 4), spec.emit)


    def fence_async_shared(self, builder: ir.IRBuilder) -> None:
        """``gpu.fence_async_shared``: wgmma reads shared memory through the async proxy."""
        from .wgmma import FENCE_PROXY_ASYNC, _asm_void

        _asm_void(builder, FENCE_PROXY_ASYNC)

    def wait_dots(self, ctx: Any, pending: int, values: list[list]) -> list[list]:
        """``gpu.dot_wait``: only wgmma issues asynchronously (``wgmma.wait_group``)."""
        from .wgmma import wait_group

        return wait_group(ctx.builder, pending, values)

    def explain(self, a: t.Type, acc: t.Type, shape: tuple[int, int, int], arch: str) -> str | None:
        """Why no instruction takes a dot of ``a`` elements (for its error), or None."""
        spec = _SPECS.get((a, acc, None))
        architecture = ARCHITECTURES.get(arch)
        if spec is None or architecture is None:
            return None
        if architecture.compute_capability < spec.min_capability:
            major, minor = spec.min_capability
            return (f"its tensor-core instruction ({spec.name}) needs sm_{major}{minor} or later: {arch} has none; "
                    f"compile for sm_{major}{minor}, sm_90 or sm_90a, or convert the operands to f16 first")
        k = 8 * spec.k_width
        if shape[0] < INSTR_SHAPE[0] or shape[1] < INSTR_SHAPE[1] or shape[2] < k:
            return (f"its tensor-core instruction ({spec.name}) needs M >= {INSTR_SHAPE[0]}, N >= {INSTR_SHAPE[1]} "
                    f"and K >= {k}; this dot is {shape[0]}x{shape[1]}x{shape[2]} (M x N x K)")
        return None

    def store_rows(self, ctx: Any, base: Any, registers: list, layout: LinearLayout, element: t.Type,
                   placement: Any) -> bool:
        """Store a thread's ``registers`` of a tile in ``layout`` as the padded row-major
        ``placement`` of a layout conversion places them, with ``stmatrix.x4`` (sm_90 and
        later, 16-bit elements in 8x8 matrix fragments: the MMA accumulators an epilogue
        converts).  One instruction moves 16 bytes a thread where plain stores move the
        4 bytes of two consecutive elements.  False where it does not apply (the caller
        stores element by element)."""
        architecture = ARCHITECTURES.get(ctx.target.arch)
        if architecture is None or architecture.compute_capability < (9, 0):
            return False
        plan = stmatrix_plan(layout, placement, element_bits(element))
        if plan is None:
            return False
        emit_stmatrix(ctx, base, placement, plan, registers)
        return True

    def load_operand(self, ctx: Any, base: Any, shared: Any, op: Any, origin: tuple = (),
                     tile_shape: tuple = ()) -> list | None:
        """Read a dot operand from shared memory with ``ldmatrix`` (None where it does not
        apply; the caller then reads element by element).  ``origin``: where the operand
        starts in a larger shared tile of ``tile_shape`` (a K slice of a ring slot)."""
        layout = op.result.type.layout
        if not isinstance(layout, DotOperandLayout) or not isinstance(layout.parent, MmaLayout):
            return None
        bits = element_bits(op.result.type)
        plan = ldmatrix_plan(linear_layout_of(op.result), shared, bits)
        if plan is None:
            return None
        return emit_ldmatrix(ctx, base, shared, plan, llvm_type(op.result.type), bits, origin, tile_shape)


# --------------------------------------------------------------------------------------
# ldmatrix


@dataclass(frozen=True)
class LdmatrixPlan:
    """How ``ldmatrix.x4`` fills a thread's registers of a dot operand layout.

    A 32-bit word is ``per_word`` consecutive registers.  Call ``c`` fills registers
    ``c * 4 * per_word ...`` (four words, one per 8x8 matrix); lane ``L`` gives the
    address of row ``L % 8`` of matrix ``L // 8``, whose coordinates are
    ``address.apply(c, L, warp)``.  Without ``trans`` a word's elements and lanes ``4t..``
    run along the contiguous dimension of shared memory (rows are lanes ``4g``); with
    ``trans`` they run along the other one and a stored row is a column of the matrix."""

    trans: bool
    per_word: int
    address: LinearLayout


def ldmatrix_plan(layout: LinearLayout, shared: Any, bits: int) -> LdmatrixPlan | None:
    """The plan for reading a tile of ``layout`` from ``shared`` (a ``SwizzledSharedLayout``),
    or None when ldmatrix cannot deliver it."""
    # Every 16-byte row starts on a 16-byte boundary: one swizzle vector holds it whole.
    if shared.vector * bits < 128:
        return None
    return _matrix_rows_plan(layout, shared.order[0], bits, transposed_ok=True)


def _matrix_rows_plan(layout: LinearLayout, inner: int, bits: int, transposed_ok: bool) -> LdmatrixPlan | None:
    """How ``ldmatrix``/``stmatrix`` ``.x4`` move the registers of ``layout`` to or from
    16-byte rows along dimension ``inner`` (see :class:`LdmatrixPlan`); None when the
    registers and lanes are not 8x8 matrix fragments."""
    if bits not in (8, 16, 32) or len(layout.lane) != 5:
        return None
    per_word = 32 // bits
    word_bits = log2(per_word)
    if len(layout.register) < word_bits + 2:
        return None
    row_elements = 128 // bits  # 16 bytes

    def unit(basis: tuple, dim: int, step: int) -> bool:
        return basis[dim] == step and all(c == 0 for d, c in enumerate(basis) if d != dim)

    word, t_lanes, g_lanes = layout.register[:word_bits], layout.lane[:2], layout.lane[2:]
    matrices, calls = layout.register[word_bits:word_bits + 2], layout.register[word_bits + 2:]
    along_row = word + t_lanes          # what one lane's word and its 4 neighbours cover
    if all(unit(b, inner, 1 << i) for i, b in enumerate(along_row)):
        trans, row_lanes = False, g_lanes
    elif transposed_ok and bits == 16 and all(unit(b, 1 - inner, 1 << i) for i, b in enumerate(along_row)) and \
            all(unit(b, inner, 1 << i) for i, b in enumerate(g_lanes)):
        trans, row_lanes = True, along_row
    else:
        return None
    if any(b[inner] % row_elements for b in (*row_lanes, *matrices, *calls, *layout.warp)):
        return None
    address = LinearLayout(layout.shape, tuple(calls), tuple(row_lanes) + tuple(matrices), layout.warp)
    return LdmatrixPlan(trans, per_word, address)


def emit_ldmatrix(ctx: Any, base: Any, shared: Any, plan: LdmatrixPlan, element: ir.Type, bits: int,
                  origin: tuple = (), tile_shape: tuple = ()) -> list:
    b = ctx.builder
    shape = tuple(tile_shape) or plan.address.shape
    coords = coordinates(LLVMOps(b), plan.address, ctx.lane_id, ctx.warp_id)
    if any(origin):
        coords = [[b.add(c, ir.Constant(_I32, o)) if o else c for c, o in zip(call, origin)] for call in coords]
    base_address = b.ptrtoint(base, _I32)
    text = LDMATRIX_X4_TRANS if plan.trans else LDMATRIX_X4
    registers = []
    for call in coords:
        offset = shared_offset(LLVMOps(b), shared, call, shape)
        byte_offset = b.shl(offset, ir.Constant(_I32, log2(bits // 8))) if bits > 8 else offset
        words = _asm(b, text, [_I32] * 4, [b.add(base_address, byte_offset)], reads_memory=True)
        for word in words:
            for e in range(plan.per_word):
                part = b.lshr(word, ir.Constant(_I32, e * bits)) if e else word
                value = b.trunc(part, ir.IntType(bits)) if bits < 32 else part
                registers.append(value if isinstance(element, ir.IntType) else b.bitcast(value, element))
    return registers


def stmatrix_plan(layout: LinearLayout, placement: Any, bits: int) -> LdmatrixPlan | None:
    """The plan for storing a tile of ``layout`` into a ``PaddedPlacement`` with
    ``stmatrix.x4`` (16-bit elements, not transposed), or None where it does not apply:
    every row of 8 elements must start on a 16-byte boundary of the placement."""
    if bits != 16 or not isinstance(placement, PaddedPlacement) or placement.row % 8 or \
            placement.shape[placement.inner] < 8:
        return None
    return _matrix_rows_plan(layout, placement.inner, bits, transposed_ok=False)


def emit_stmatrix(ctx: Any, base: Any, placement: Any, plan: LdmatrixPlan, registers: list) -> None:
    b = ctx.builder
    # Each call's row address; where they differ by constants (they do in a padded
    # placement), one address and immediate offsets, as the conversion's plain stores get.
    calls = range(plan.address.num_registers)
    offsets = register_offsets(LLVMAddOps(b), plan.address, placement, calls, ctx.lane_id, ctx.warp_id)
    base_address = b.ptrtoint(base, _I32)
    asm_type = ir.FunctionType(ir.VoidType(), [_I32] * 5)
    words_per_call = 4 * plan.per_word
    for c, offset in zip(calls, offsets):
        byte_offset = b.shl(offset, ir.Constant(_I32, 1))
        values = registers[c * words_per_call:(c + 1) * words_per_call]
        words = pack32(b, values)
        # A memory clobber: the loads after the conversion's barrier must read what it wrote.
        b.asm(asm_type, STMATRIX_X4, "r,r,r,r,r,~{memory}", [b.add(base_address, byte_offset), *words],
              side_effect=True)


NVIDIA_MMA = NvidiaMma()

__all__ = ["CVT_TF32", "F64_STEPS", "LdmatrixPlan", "STMATRIX_X4", "emit_ldmatrix", "emit_stmatrix", "ldmatrix_plan", "stmatrix_plan", "INSTR_SHAPE", "LDMATRIX_X4", "LDMATRIX_X4_TRANS", "NVIDIA_MMA", "NvidiaMma", "mma_ptx",
           "pack32", "result_layout", "unpack32", "warps_per_tile"]
