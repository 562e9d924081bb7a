"""Hopper warpgroup MMA (``wgmma.mma_async``, sm_90a) for ``tile.dot``, both operands
from shared memory.

:func:`select_wgmma` is asked first by the NVIDIA matrix unit (``polytile_nvidia.mma``)
on architectures with ``has_wgmma`` (sm_90a) unless the backend option
``enable_wgmma=False`` turns it off.  It applies where a warpgroup (4 consecutive warps)
can own 64-row slabs of the result:

- ``num_warps`` a multiple of 4; M a multiple of 64 (per warpgroup along M);
- N a multiple of 8 per warpgroup along N (at most 256 per instruction, repeated beyond);
- K a multiple of one instruction's K (32 bytes: 16 for f16/bf16, 8 for tf32, 32 for
  fp8); f16 into f32 or f16, bf16 into f32, f32 with ``input_precision="tf32"`` into
  f32, fp8 (e4m3, e5m2) into f32 or f16.  Only 16-bit operands can be read transposed:
  tf32 and fp8 ones are stored K-major.

Everything else keeps ``mma.sync``.  The result gets ``MmaLayout(version=3)`` (warps
down M first, four per 64 rows); the operands keep the layout they were computed in (no
``#gpu.dot_operand`` conversion).  wgmma reads each from shared memory
(:func:`operand_sources`): the ring slot ``pipeline-loops`` copied it into, in place,
where that slot's swizzle is the NVMMA layout; else the dot's own scratch, which every
thread fills from its registers.  A 16-bit A that is the accumulator of a dot with the
same warps comes from registers instead (``DotOperandLayout(0, result, 2)``).  Then

1. where an operand goes through the dot's scratch: every thread stores its part,
   ``fence.proxy.async.shared::cta`` (its stores become visible to the tensor cores'
   async proxy), then a barrier (operands read in place need neither: see the lowering);
2. ``wgmma.fence``, one ``wgmma.mma_async`` per (64-row slab, N piece, K step) with
   matrix descriptors for A and B, ``wgmma.commit_group``;
3. ``wgmma.wait_group 0``, taking the accumulator registers in and out so that no read of
   them moves above it; only then can the scratch be overwritten (the dot's scratch is
   registered ``sync="inside"``: ``insert-barriers`` puts a barrier before its next writer).
   A dot that ``async-dots`` marked ``gpu.async`` (both operands in ring slots: see
   :func:`overlaps`) stops after the commit; its ``gpu.dot_wait`` is
   ``wgmma.wait_group N`` (:func:`wait_group`, the unit's ``wait_dots``).

Shared layout (:class:`OperandPlacement`, the NVMMA layout): the operand's contiguous
dimension is split into column blocks of one swizzle row (``swizzle`` bytes: 128, 64 or
32, the most the extent allows), each block stored row after row, and the 16-byte chunks
of each row XOR-swizzled by the address bits above them, which is what the descriptor's
swizzle mode tells the hardware: byte ``x`` of a block lives at ``x ^ ((x >> 7) &
(swizzle / 16 - 1)) << 4``.  The scratch is aligned to 1024 bytes at run time so that
the pattern starts with the buffer.  K-major operands (A row-major, B column-major) use
the descriptor's stride byte offset (8 rows) and ignore the leading one; MN-major
operands (transposed: ``imm-trans``) step between column blocks with the leading byte
offset.  The descriptor format is the PTX ISA's "Matrix Descriptor Format".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from polytile.dialects.gpu import ASYNC_DOT_ATTR, IN_PLACE_ATTR
from polytile.gpu.layouts import DotOperandLayout, MmaLayout
from polytile.gpu.linear_layout import log2
from polytile.gpu.lowering.context import linear_layout_of
from polytile.gpu.lowering.dot import MatrixInstruction
from polytile.gpu.lowering.indexing import (LLVMOps, contiguous_registers, coordinates, duplicate_register_mask,
                                            register_offset, thread_offsets)
from polytile.gpu.lowering.types import element_bits, llvm_type
from polytile.ir import types as t

_I32 = ir.IntType(32)
_I64 = ir.IntType(64)

#: Rows (M) of one wgmma and warps of a warpgroup.
WGMMA_M = 64
WARPGROUP = 4
#: K of one instruction for 16-bit operands (32 bytes of K for every type).
WGMMA_K = 16
MAX_N = 256
#: Swizzle bytes -> the descriptor's 2-bit mode (bits 62-63).
SWIZZLE_MODES = {0: 0, 128: 1, 64: 2, 32: 3}
#: The scratch is aligned to this at run time (the 128-byte swizzle repeats every 8 rows).
SWIZZLE_ALIGNMENT = 1024

#: (operand type, accumulator type, input precision or None for any) -> (PTX accumulator
#: type, PTX operand type).  f32 operands only with input_precision "tf32" (the tensor
#: cores read the top 19 bits; mma.sync rounds first, wgmma reads shared memory as it is).
WGMMA_TYPES: dict[tuple[t.Type, t.Type, str | None], tuple[str, str]] = {
    (t.f16, t.f32, None): ("f32", "f16"),
    (t.f16, t.f16, None): ("f16", "f16"),
    (t.bf16, t.f32, None): ("f32", "bf16"),
    (t.f32, t.f32, "tf32"): ("f32", "tf32"),
    (t.f8e4m3, t.f32, None): ("f32", "e4m3"),
    (t.f8e4m3, t.f16, None): ("f16", "e4m3"),
    (t.f8e5m2, t.f32, None): ("f32", "e5m2"),
    (t.f8e5m2, t.f16, None): ("f16", "e5m2"),
}


def instruction_k(operand: t.Type) -> int:
    """K of one instruction: 32 bytes of it (16 for f16/bf16, 8 for tf32, 32 for fp8)."""
    return 256 // operand.width


# --------------------------------------------------------------------------------------
# Which dots, and the result layout


def wgmma_warps(shape: tuple[int, ...], num_warps: int) -> tuple[int, int] | None:
    """Warps along (M, N) for a wgmma result of ``shape``: whole warpgroups down M while
    there are 64-row slabs for them, the rest across N; None where wgmma cannot cover
    the tile without repeating an element."""
    m, n = shape[0], shape[1]
    if num_warps % WARPGROUP or m % WGMMA_M:
        return None
    groups_m = min(num_warps // WARPGROUP, m // WGMMA_M)
    warps_m = WARPGROUP * groups_m
    warps_n = num_warps // warps_m
    if m % (warps_m * 16) or n % (8 * warps_n):
        return None
    per_group = n // warps_n
    if per_group > MAX_N and per_group % MAX_N:
        return None
    return warps_m, warps_n


def instruction_n(shape: tuple[int, ...], num_warps: int) -> int:
    warps = wgmma_warps(shape, num_warps)
    assert warps is not None
    return min(shape[1] // warps[1], MAX_N)


def wgmma_result_layout(shape: tuple[int, ...], num_warps: int, k: int = WGMMA_K) -> MmaLayout:
    warps = wgmma_warps(shape, num_warps)
    if warps is None:
        raise ValueError(f"no wgmma layout for a {list(shape)} result with {num_warps} warps")
    return MmaLayout(3, warps, (16, instruction_n(shape, num_warps), k))


def select_wgmma(a: t.Type, acc: t.Type, shape: tuple[int, int, int], num_warps: int,
                 input_precision: str | None = None) -> MatrixInstruction | None:
    """The wgmma instruction for a dot of ``shape = (M, N, K)``, or None (mma.sync)."""
    types = WGMMA_TYPES.get((a, acc, input_precision)) or WGMMA_TYPES.get((a, acc, None))
    m, n, k = shape
    k_step = instruction_k(a)
    if types is None or k % k_step or wgmma_warps((m, n), num_warps) is None:
        return None
    d_type, a_type = types
    instr_n = instruction_n((m, n), num_warps)
    fragment = instr_n // 2

    def lower(op: Any, operands: list, ctx: Any) -> list:
        return lower_wgmma_dot(op, operands, ctx, d_type, a_type)

    def result_layout(shape: tuple[int, ...], num_warps: int) -> MmaLayout:
        return wgmma_result_layout(shape, num_warps, k_step)

    sixteen_bit = a.width == 16  # A from registers: f16 and bf16 (k_width 2, mma.sync's A fragment)
    return MatrixInstruction(f"wgmma.mma_async.m64n{instr_n}k{k_step}.{d_type}.{a_type}", result_layout,
                             2 if sixteen_bit else 1, k, (0, 0, fragment), _no_tile_emit, lower=lower,
                             scratch_bytes=scratch_bytes, register_a=sixteen_bit, overlaps=overlaps,
                             reads_in_place=reads_in_place)


def overlaps(op: Any) -> bool:
    """Whether the dot ``op`` can stay in flight after its lowering (``async-dots``):
    its shared-memory operands read in place from ring slots or hoisted buffers, which
    stay put until a wait retires it (the dot's own scratch would be overwritten by the
    next dot while this one still reads it); A may come in registers (``async-dots``
    then makes sure they are written again only after the wait); and an f32 or i32
    accumulator: f16 ones travel packed two to a register, and unpacking them between
    iterations would touch registers the tensor cores still write."""
    if element_bits(op.acc.type) != 32:
        return False
    return all(source.slot_read is not None or source.in_registers for source in operand_sources(op))


def reads_in_place(op: Any, index: int, buffer: Any) -> bool:
    """Whether wgmma would read operand ``index`` of the dot ``op`` in place from a
    whole buffer of type ``buffer`` (``hoist-dot-operands`` asks before it stores one)."""
    extent = WGMMA_M if index == 0 else op.result.type.layout.instr_shape[1]
    return buffer_placement(buffer, tuple(buffer.shape), buffer.layout, 1 - index, extent) is not None


def _no_tile_emit(builder: Any, a: list, b: list, c: list) -> list:
    raise AssertionError("wgmma lowers the whole dot (MatrixInstruction.lower), never one register tile")


def _round_up(n: int, to: int) -> int:
    return (n + to - 1) // to * to


# --------------------------------------------------------------------------------------
# Shared layout and descriptors


def matrix_descriptor(address: int, leading_bytes: int, stride_bytes: int, swizzle: int) -> int:
    """The 64-bit wgmma matrix descriptor (PTX ISA, "Matrix Descriptor Format"): bits
    0-13 the start address >> 4, 16-29 the leading dimension byte offset >> 4, 32-45 the
    stride dimension byte offset >> 4, 49-51 the base offset (0: the pattern starts at a
    1024-byte boundary), 62-63 the swizzle mode (1: 128 bytes, 2: 64, 3: 32, 0: none)."""
    return descriptor_high(leading_bytes, stride_bytes, swizzle) | ((address & 0x3FFFF) >> 4)


def descriptor_high(leading_bytes: int, stride_bytes: int, swizzle: int) -> int:
    """The descriptor without its start address."""
    return (((leading_bytes >> 4) & 0x3FFF) << 16) | (((stride_bytes >> 4) & 0x3FFF) << 32) \
        | (SWIZZLE_MODES[swizzle] << 62)


@dataclass(frozen=True)
class OperandPlacement:
    """Where a wgmma operand of ``shape`` ([M, K] for A, [K, N] for B) sits in the dot's
    scratch, ``offset`` bytes after its 1024-byte aligned start (see the module docstring)."""

    shape: tuple[int, int]
    #: The dimension stored contiguously (1 for a K-major A, 0 for a K-major B).
    contiguous: int
    swizzle: int
    element_bytes: int
    offset: int
    #: The operand's K dimension (1 for A, 0 for B).
    k_dim: int

    @property
    def rows(self) -> int:
        return self.shape[1 - self.contiguous]

    @property
    def row_elements(self) -> int:
        return self.swizzle // self.element_bytes

    @property
    def k_major(self) -> bool:
        return self.contiguous == self.k_dim

    @property
    def block_bytes(self) -> int:
        return self.rows * self.swizzle

    def byte_offset(self, coords: tuple[int, int]) -> int:
        """The byte (from the aligned scratch start) of the element at ``coords``."""
        column, row = coords[self.contiguous], coords[1 - self.contiguous]
        linear = (column // self.row_elements) * self.block_bytes + row * self.swizzle \
            + (column % self.row_elements) * self.element_bytes
        return self.offset + (linear ^ (((linear >> 7) & (self.swizzle // 16 - 1)) << 4))

    def llvm_byte_offset(self, b: ir.IRBuilder, coords: list) -> Any:
        column, row = coords[self.contiguous], coords[1 - self.contiguous]
        shift = log2(self.row_elements)
        block = b.lshr(column, ir.Constant(_I32, shift))
        within = b.and_(column, ir.Constant(_I32, self.row_elements - 1))
        linear = b.add(b.add(b.mul(block, ir.Constant(_I32, self.block_bytes)),
                             b.mul(row, ir.Constant(_I32, self.swizzle))),
                       b.mul(within, ir.Constant(_I32, self.element_bytes)))
        phase = b.and_(b.lshr(linear, ir.Constant(_I32, 7)), ir.Constant(_I32, self.swizzle // 16 - 1))
        swizzled = b.xor(linear, b.shl(phase, ir.Constant(_I32, 4)))
        return b.add(swizzled, ir.Constant(_I32, self.offset)) if self.offset else swizzled

    def leading_bytes(self) -> int:
        # K-major swizzled layouts ignore it (CUTLASS and Triton put 1 there); MN-major
        # ones step from one column block to the next with it.
        return 16 if self.k_major else self.block_bytes

    def stride_bytes(self) -> int:
        """From one group of 8 rows to the next."""
        return 8 * self.swizzle

    def start(self, mn: int, k: int) -> int:
        """The byte (from the aligned scratch start) where the instruction reading rows
        (or columns) from ``mn`` and K from ``k`` starts; ``mn`` a multiple of 8 (K-major)
        or of a swizzle row (MN-major), ``k`` of 16."""
        if self.k_major:
            return mn * self.swizzle + self.k_start(k)
        return (mn // self.row_elements) * self.block_bytes + self.k_start(k)

    def k_start(self, k: int) -> int:
        """The part of :meth:`start` that does not depend on ``mn``."""
        if self.k_major:
            return self.offset + (k // self.row_elements) * self.block_bytes + (k % self.row_elements) * self.element_bytes
        return self.offset + k * self.swizzle


def _swizzle_for(extent_bytes: int) -> int:
    for swizzle in (128, 64, 32):
        if extent_bytes >= swizzle:
            return swizzle
    return 0


def place_operand(shape: tuple[int, int], k_dim: int, source_contiguous: int | None, element_bytes: int,
                  instruction_extent: int, offset: int) -> OperandPlacement:
    """The placement of an operand whose registers run along ``source_contiguous``
    (None: no dimension): the same dimension contiguous where a swizzle row fits both the
    tile and one instruction's extent along it, else K contiguous (K-major always fits:
    K is a multiple of 16, 32 bytes)."""
    contiguous = k_dim
    if source_contiguous is not None and source_contiguous != k_dim and element_bytes == 2:
        extent = min(shape[source_contiguous], instruction_extent) * element_bytes
        if _swizzle_for(extent):
            contiguous = source_contiguous
    extent = shape[contiguous] * element_bytes
    if contiguous != k_dim:
        extent = min(extent, instruction_extent * element_bytes)
    return OperandPlacement(tuple(shape), contiguous, _swizzle_for(extent), element_bytes, offset, k_dim)


def _fastest_dim(layout: Any) -> int | None:
    for basis in layout.register:
        nonzero = [d for d, c in enumerate(basis) if c]
        if nonzero:
            return nonzero[0] if len(nonzero) == 1 else None
    return None


# --------------------------------------------------------------------------------------
# PTX

FENCE_PROXY_ASYNC = "fence.proxy.async.shared::cta;"
WGMMA_FENCE = "wgmma.fence.sync.aligned;"
WGMMA_COMMIT = "wgmma.commit_group.sync.aligned;"
WGMMA_WAIT = "wgmma.wait_group.sync.aligned 0;"


def wgmma_ptx(n: int, k: int, d_type: str, a_type: str, accumulators: int, trans_a: int, trans_b: int,
              a_registers: bool = False) -> str:
    """``wgmma.mma_async`` of an m64nNkK tile: operands ``$0..`` the accumulator
    registers (outputs, then the same registers tied as inputs), then A (its descriptor,
    or with ``a_registers`` its four 32-bit words), B's descriptor and the scale-d flag.
    Only 16-bit operands take the transpose flags (A in registers has none)."""
    d = "{" + ", ".join(f"${i}" for i in range(accumulators)) + "}"
    n_ops = 2 * accumulators
    if a_registers:
        a = "{" + ", ".join(f"${n_ops + i}" for i in range(4)) + "}"
        n_ops += 3
    else:
        a = f"${n_ops}"
    sixteen_bit = a_type in ("f16", "bf16")
    flags = (f", {trans_b}" if a_registers else f", {trans_a}, {trans_b}") if sixteen_bit else ""
    return ("{\n.reg .pred p;\n"
            f"setp.ne.b32 p, ${n_ops + 2}, 0;\n"
            f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.{d_type}.{a_type}.{a_type} {d}, {a}, ${n_ops + 1}, "
            f"p, 1, 1{flags};\n}}")


def _letter(type_: ir.Type) -> str:
    return "f" if isinstance(type_, ir.FloatType) else "r"


def _asm_void(b: ir.IRBuilder, text: str) -> None:
    b.asm(ir.FunctionType(ir.VoidType(), []), text, "~{memory}", [], side_effect=True)


def _asm_tied(b: ir.IRBuilder, text: str, tied: list, extra: list) -> list:
    """Inline PTX that reads and writes the registers ``tied`` (operands ``$0...``) and
    reads ``extra`` after them; kept in program order (side effects, memory clobber)."""
    types = [v.type for v in tied]
    constraints = [f"={_letter(ty)}" for ty in types] + [str(i) for i in range(len(tied))]
    constraints += ["l" if v.type == _I64 else "r" for v in extra]
    result_type = ir.LiteralStructType(types)
    value = b.asm(ir.FunctionType(result_type, types + [v.type for v in extra]), text,
                  ",".join(constraints + ["~{memory}"]), list(tied) + list(extra), side_effect=True)
    return [b.extract_value(value, i) for i in range(len(tied))]


def _pack_f16(b: ir.IRBuilder, values: list) -> list:
    from .mma import pack32

    return pack32(b, values)


def _unpack_f16(b: ir.IRBuilder, words: list, element: ir.Type) -> list:
    from .mma import unpack32

    return unpack32(b, words, element)


# --------------------------------------------------------------------------------------
# Where each operand is read from


@dataclass(frozen=True)
class OperandSource:
    """Where wgmma reads one operand: a ring slot that ``pipeline-loops`` filled or a
    buffer ``hoist-dot-operands`` stored, already in an NVMMA layout (``slot_read``: the
    ``gpu.local_load_slot`` or ``gpu.local_load`` whose registers are then unused), the dot's scratch, which the dot fills from the registers, or (A only, no
    ``placement``) registers in ``DotOperandLayout(0, result, 2)``."""

    placement: OperandPlacement | None
    slot_read: Any = None

    @property
    def in_registers(self) -> bool:
        return self.placement is None


def slot_placement(read: Any, k_dim: int, instruction_extent: int) -> OperandPlacement | None:
    """The placement of the shared memory ``read`` reads whole (a ``gpu.local_load_slot``
    of a ring slot, or a ``gpu.local_load`` of a buffer ``hoist-dot-operands`` made),
    where it is exactly an NVMMA layout: rows of one swizzle row (32, 64 or 128 bytes),
    or column blocks of 128 bytes (``SwizzledSharedLayout.block``); else None."""
    from polytile.dialects.gpu import LocalAllocOp, LocalLoadOp
    from polytile.gpu.lowering.async_copy import slot_layout

    if isinstance(read, LocalLoadOp):
        if not read.attributes.get(IN_PLACE_ATTR) or not isinstance(read.buffer.defining_op, LocalAllocOp):
            return None
        buffer = read.buffer.type
        if len(buffer.shape) != 2:
            return None
        return buffer_placement(buffer, tuple(buffer.shape), buffer.layout, k_dim, instruction_extent)
    if read.offsets is not None:
        return None
    buffer = read.ring.type
    return buffer_placement(buffer, tuple(buffer.shape[1:]), slot_layout(buffer), k_dim, instruction_extent)


def buffer_placement(buffer: Any, shape: tuple, shared: Any, k_dim: int,
                     instruction_extent: int) -> OperandPlacement | None:
    """The NVMMA placement of a tile of ``shape`` in ``shared`` layout within ``buffer``,
    or None where wgmma cannot read it in place."""
    from polytile.gpu.allocation import BUFFER_ALIGNMENT, buffer_bytes
    from polytile.gpu.layouts import SwizzledSharedLayout

    if not isinstance(shared, SwizzledSharedLayout) or len(shared.order) != 2:
        return None
    if buffer_bytes(buffer) < BUFFER_ALIGNMENT:  # smaller buffers are not aligned for the swizzle
        return None
    bytes_ = element_bits(buffer.element) // 8
    contiguous = shared.order[0]
    row_elements = shared.block_of(shape)  # a swizzle row: the whole row or one column block
    swizzle = row_elements * bytes_
    if swizzle not in (32, 64, 128) or shared.vector * bytes_ != 16 or shared.per_phase != 128 // swizzle \
            or shared.max_phase != swizzle // 16:
        return None
    if contiguous != k_dim and (bytes_ != 2 or row_elements > instruction_extent):
        return None
    return OperandPlacement(shape, contiguous, swizzle, bytes_, 0, k_dim)


def operand_sources(op: Any) -> tuple[OperandSource, OperandSource]:
    """Where the dot ``op`` (result in its wgmma layout) reads A and B."""
    from polytile.dialects.gpu import LocalLoadOp, LocalLoadSlotOp

    m, k = op.a.type.shape
    n = op.b.type.shape[1]
    instr_n = op.result.type.layout.instr_shape[1]
    bytes_ = element_bits(op.a.type) // 8
    sources = []
    scratch_offset = 0
    for value, k_dim, shape, extent in ((op.a, 1, (m, k), WGMMA_M), (op.b, 0, (k, n), instr_n)):
        if k_dim == 1 and isinstance(value.type.layout, DotOperandLayout):
            sources.append(OperandSource(None))
            continue
        read = value.defining_op
        if isinstance(read, (LocalLoadSlotOp, LocalLoadOp)):
            placement = slot_placement(read, k_dim, extent)
            if placement is not None:
                sources.append(OperandSource(placement, read))
                continue
        placement = place_operand(shape, k_dim, _fastest_dim(linear_layout_of(value)), bytes_, extent,
                                  scratch_offset)
        scratch_offset = _round_up(scratch_offset + shape[0] * shape[1] * bytes_, SWIZZLE_ALIGNMENT)
        sources.append(OperandSource(placement))
    return sources[0], sources[1]


def scratch_bytes(op: Any) -> int:
    """The dot's scratch: the operands that do not come from a ring slot, each from a
    1024-byte boundary, and 1024 bytes to align the start at run time."""
    sources = operand_sources(op)
    ends = [s.placement.offset + s.placement.shape[0] * s.placement.shape[1] * s.placement.element_bytes
            for s in sources if s.slot_read is None and not s.in_registers]
    return max(ends) + SWIZZLE_ALIGNMENT if ends else 0


def _written_through_generic_proxy(read: Any) -> bool:
    """Whether a copy into the ring ``read`` reads from writes through the generic proxy:
    a copy op (``IssuesIntoRing``, with the ring as its ``ring``) without the
    ``WritesThroughAsyncProxy`` trait."""
    from polytile.dialects.gpu import IssuesIntoRing, WritesThroughAsyncProxy

    ring = getattr(read, "ring", None)  # None: a whole buffer (fenced where it is stored)
    return ring is not None and any(
        user.has_trait(IssuesIntoRing) and getattr(user, "ring", None) is ring
        and not user.has_trait(WritesThroughAsyncProxy) for user in ring.users())


def _makes_proxy_fence(op: Any) -> bool:
    """Whether the lowering of the wgmma dot ``op`` makes a proxy fence: it stores an
    operand to its scratch, or reads a ring slot that cp.async wrote."""
    sources = operand_sources(op)
    if any(s.slot_read is None and not s.in_registers for s in sources):
        return True
    return any(_written_through_generic_proxy(s.slot_read) for s in sources if s.slot_read is not None)


def _fenced_since_last_wait(op: Any) -> bool:
    """Whether an earlier op of ``op``'s block made a proxy fence after every wait that
    could have completed copies ``op`` reads: walking back from ``op``, a fence
    (``gpu.fence_async_shared``, or a wgmma dot that makes one) comes before any op not
    known to leave copies in flight as they were.  Known are pure ops (with their regions),
    the issue of copies into rings (``IssuesIntoRing``: issuing completes nothing), dots,
    their waits (``gpu.dot_wait``: the tensor cores' groups, not copies), reads of shared
    memory and barriers; any other op (an mbarrier or cp.async wait, a call, a plugin's
    op) may complete copies and stops the walk.  Attention's ``P @ V`` reads V's slot,
    whose copies the wait before ``Q @ K`` completed and ``Q @ K``'s fence ordered already."""
    from polytile.dialects.gpu import (BarrierOp, DotWaitOp, FenceAsyncSharedOp, IssuesIntoRing, LocalLoadOp,
                                       LocalLoadSlotOp)
    from polytile.dialects.tile import DotOp
    from polytile.ir.opdef import Pure, RecursivelyPure, ReturnLike

    def leaves_copies_alone(candidate: Any) -> bool:
        if candidate.has_trait(IssuesIntoRing) or isinstance(candidate, (BarrierOp, DotWaitOp, LocalLoadOp,
                                                                         LocalLoadSlotOp, DotOp)):
            return True
        if not any(candidate.has_trait(trait) for trait in (Pure, RecursivelyPure, ReturnLike)):
            return False
        return all(leaves_copies_alone(inner) for region in candidate.regions for block in region.blocks
                   for inner in block)

    earlier = op.prev_op
    while earlier is not None:
        if isinstance(earlier, FenceAsyncSharedOp):
            return True
        if (isinstance(earlier, DotOp) and getattr(earlier.result.type.layout, "version", None) == 3
                and _makes_proxy_fence(earlier)):
            return True
        if not leaves_copies_alone(earlier):
            return False
        earlier = earlier.prev_op
    return False


def _slot_address(ctx: Any, read: Any) -> Any:
    """The i32 shared address of what ``read`` reads: a ring slot, or a whole buffer."""
    from polytile.dialects.gpu import LocalLoadOp
    from polytile.gpu.allocation import BUFFER_OFFSET_ATTR

    b = ctx.builder
    buffer = read.buffer if isinstance(read, LocalLoadOp) else read.ring
    offset = buffer.defining_op.attributes.get(BUFFER_OFFSET_ATTR)
    if offset is None or offset % SWIZZLE_ALIGNMENT:
        raise ctx.error(read, f"internal error: the buffer '{read.name}' reads is at {offset}, not at a multiple of "
                              f"{SWIZZLE_ALIGNMENT} bytes, so wgmma cannot read its swizzled rows in place")
    base = b.add(b.ptrtoint(ctx.shared_base(), _I32), ir.Constant(_I32, offset))
    if isinstance(read, LocalLoadOp):
        return base
    slot_bytes = buffer.type.numel // buffer.type.shape[0] * element_bits(buffer.type.element) // 8
    return b.add(base, b.mul(ctx.get(read.slot), ir.Constant(_I32, slot_bytes)))


# --------------------------------------------------------------------------------------
# The lowering


def _store_operand(ctx: Any, base: Any, placement: OperandPlacement, value: Any, registers: list) -> None:
    """Every thread writes its registers of ``value`` to ``placement`` in the scratch at
    the i32 shared address ``base``, in vectors of up to 16 bytes along the contiguous
    dimension."""
    b = ctx.builder
    layout = linear_layout_of(value)
    element = llvm_type(value.type)
    bytes_ = placement.element_bytes
    width = 1
    if _fastest_dim(layout) == placement.contiguous:
        width = max(min(contiguous_registers(layout, placement.contiguous), 16 // bytes_), 1)
    coords = coordinates(LLVMOps(b), layout, ctx.lane_id, ctx.warp_id)
    duplicates = duplicate_register_mask(layout)
    vector = ir.VectorType(element, width)
    pointer = ir.PointerType(vector, addrspace=ctx.target.shared_address_space)
    for start in range(0, layout.num_registers, width):
        if start & duplicates:
            continue
        address = b.add(base, placement.llvm_byte_offset(b, coords[start]))
        packed = ir.Constant(vector, None)
        for i in range(width):
            packed = b.insert_element(packed, registers[start + i], ctx.i32(i))
        b.store(packed, b.inttoptr(address, pointer), align=width * bytes_)


def _descriptors(b: ir.IRBuilder, base: Any, placement: OperandPlacement, mn: Any) -> Callable[[int, int], Any]:
    """The descriptors of ``placement`` at the i32 shared address ``base``: a function of
    (``m0``, ``k0``) giving the one whose rows (or columns) start at ``mn + m0`` and K at
    ``k0``.  Only the first is built from the address (a shift, mask and or); every other
    is that descriptor plus its constant distance from it, over 16: one 64-bit add per
    wgmma (in uniform registers where ``mn`` is warp-uniform), as Triton builds them.
    Built word by word instead, ptxas rebuilds each register pair around every wgmma
    (two moves of the constant high word), which showed in issue-bound loops such as
    attention's.  The add cannot carry out of the 14-bit address field (bits 0-13):
    shared addresses are below 2^18."""
    high = descriptor_high(placement.leading_bytes(), placement.stride_bytes(), placement.swizzle)
    field = b.and_(b.lshr(b.add(base, _start(b, placement, mn, 0)), ir.Constant(_I32, 4)), ir.Constant(_I32, 0x3FFF))
    low = b.or_(field, ir.Constant(_I32, high & 0xFFFFFFFF))
    first = b.or_(b.zext(low, _I64), ir.Constant(_I64, high & ~0xFFFFFFFF))
    made: dict = {}

    def descriptor(m0: int, k0: int) -> Any:
        if (m0, k0) not in made:
            delta = placement.start(m0, k0) - placement.start(0, 0)
            if delta % 16 or (not placement.k_major and m0 % placement.row_elements):
                raise AssertionError(f"internal error: wgmma operand step ({m0}, {k0}) is not a whole descriptor "
                                     "step")
            made[m0, k0] = b.add(first, ir.Constant(_I64, delta >> 4)) if delta else first
        return made[m0, k0]
    return descriptor


def lower_wgmma_dot(op: Any, operands: list, ctx: Any, d_type: str, a_type: str) -> list:
    a, b_regs, acc = operands
    b = ctx.builder
    m, k = op.a.type.shape
    n = op.b.type.shape[1]
    result = linear_layout_of(op.result)
    parent = op.result.type.layout
    instr_n, k_step = parent.instr_shape[1], parent.instr_shape[2]
    fragment = instr_n // 2
    if tuple(result.warp[:2]) != ((16, 0), (32, 0)) or duplicate_register_mask(result):
        raise ctx.error(op, f"internal error: the wgmma result layout {parent} does not give each warpgroup "
                            "whole 64-row slabs")
    a_source, b_source = operand_sources(op)
    bases = []
    scratch = None
    for source, value, registers in ((a_source, op.a, a), (b_source, op.b, b_regs)):
        if source.in_registers:
            bases.append(None)
            continue
        if source.slot_read is not None:
            bases.append(_slot_address(ctx, source.slot_read))
            continue
        if scratch is None:  # aligned up to where the swizzle pattern starts
            raw = b.ptrtoint(ctx.scratch(op), _I32)
            scratch = b.and_(b.add(raw, ir.Constant(_I32, SWIZZLE_ALIGNMENT - 1)),
                             ir.Constant(_I32, -SWIZZLE_ALIGNMENT))
        _store_operand(ctx, scratch, source.placement, value, registers)
        bases.append(scratch)
    a_base, b_base = bases
    if a_source.slot_read is not None or b_source.slot_read is not None:
        _check_shared_alignment(ctx)
    a_place, b_place = a_source.placement, b_source.placement
    if scratch is not None:
        # This thread's stores above are made visible to the async proxy, then every
        # thread's are in before any warpgroup reads them.  Operands read in place need
        # no barrier here: a ring slot's copies are complete once its wait returns (an
        # mbarrier phase, or cp.async.wait_group and the barrier insert-barriers puts
        # before the read, as for any reader); a buffer hoist-dot-operands stored is
        # fenced after its store (gpu.fence_async_shared) and insert-barriers puts the
        # barrier between that store and this read.
        _asm_void(b, FENCE_PROXY_ASYNC)
        ctx.target.barrier(b)
    elif (any(_written_through_generic_proxy(s.slot_read) for s in (a_source, b_source) if s.slot_read is not None)
          and not _fenced_since_last_wait(op)):
        # cp.async writes the slot through the generic proxy and wgmma reads it through
        # the async proxy: after the slot's wait (above), a proxy fence orders the two
        # (the PTX memory model's proxy rule; TMA's bulk copies need none).  One fence
        # after the wait orders every copy it completed.  With commit groups, each thread
        # waits for its own copies, then the barrier insert-barriers puts before the read,
        # then this fence: every thread that wrote fences after its own writes completed
        # and before it reads.
        _asm_void(b, FENCE_PROXY_ASYNC)

    # Where this thread's warpgroup starts in the result (warps 0-3 of a group share it).
    group_warp = b.and_(ctx.warp_id, ir.Constant(_I32, -WARPGROUP))
    group_m, group_n = thread_offsets(LLVMOps(b), result, ir.Constant(_I32, 0), group_warp)

    f16_acc = d_type == "f16"
    element = llvm_type(op.acc.type)
    # f16 accumulators travel packed two to a 32-bit register from before the first
    # wgmma to after the wait: unpacking in between would touch registers the tensor
    # cores still write (ptxas would then wait for them, serializing the wgmmas).
    # A zero accumulator is not written at all: the first K step of each tile passes
    # scale-d = 0 (d = a * b) and undefined registers.  Zeroing them with moves would be
    # non-wgmma instructions defining accumulators while other wgmmas are in flight,
    # which makes ptxas serialize the wgmmas (C7515).
    zero_acc = _is_zero_tile(op.acc)
    if zero_acc:
        word = ir.IntType(32) if f16_acc else element
        words_out = [ir.Constant(word, ir.Undefined)] * (len(acc) // (2 if f16_acc else 1))
    else:
        words_out = _pack_f16(b, list(acc)) if f16_acc else list(acc)
    per_word = 2 if f16_acc else 1
    one, zero = ir.Constant(_I32, 1), ir.Constant(_I32, 0)
    tiles = [(start, *register_offset(result, start)) for start in range(0, result.num_registers, fragment)]
    fragments: dict = {}
    if a_source.in_registers:
        a_fragment = _a_fragments(b, op, a)
        for _, m0, _ in tiles:
            for k0 in range(0, k, k_step):
                fragments.setdefault((m0, k0), a_fragment(m0, k0))
    # Every register the wgmmas read goes through wgmma.fence (CUTLASS's
    # warpgroup_fence_operand): whatever defines them (the accumulator's scaling, A's
    # packing) then comes before the first wgmma, not between two of them, where ptxas
    # would serialize the wgmmas (C7515) to wait for it.
    pinned = [w for w in words_out if not isinstance(w, ir.Constant)]
    keys = list(fragments)
    flat = [word for key in keys for word in fragments[key]]
    fenced = _asm_tied(b, WGMMA_FENCE, pinned + flat, []) if pinned or flat else []
    it = iter(fenced[:len(pinned)])
    words_out = [w if isinstance(w, ir.Constant) else next(it) for w in words_out]
    at = len(pinned)
    for key in keys:
        count = len(fragments[key])
        fragments[key] = fenced[at:at + count]
        at += count
    if not fenced:
        _asm_void(b, WGMMA_FENCE)
    b_descriptor = _descriptors(b, b_base, b_place, group_n)
    a_descriptor = None if fragments else _descriptors(b, a_base, a_place, group_m)
    for start, m0, n0 in tiles:
        first, count = start // per_word, fragment // per_word
        tied = words_out[first:first + count]
        trans_a = 0 if a_place is None else int(not a_place.k_major)
        text = wgmma_ptx(instr_n, k_step, d_type, a_type, len(tied), trans_a, int(not b_place.k_major),
                         a_registers=a_source.in_registers)
        for k0 in range(0, k, k_step):
            a_inputs = fragments[(m0, k0)] if fragments else [a_descriptor(m0, k0)]
            scale_d = zero if zero_acc and k0 == 0 else one
            tied = _asm_tied(b, text, tied, a_inputs + [b_descriptor(n0, k0), scale_d])
        words_out[first:first + count] = tied
    _asm_void(b, WGMMA_COMMIT)
    if op.attributes.get(ASYNC_DOT_ATTR):  # in flight: a gpu.dot_wait retires it (async-dots; f32/i32 only)
        return words_out
    words = _asm_tied(b, WGMMA_WAIT, words_out, [])
    return _unpack_f16(b, words, element) if f16_acc else words


def _is_zero_tile(value: Any) -> bool:
    """Whether ``value`` is a constant tile of zeros (``pl.zeros``, a splat 0)."""
    from polytile.dialects import tile
    from polytile.passes.rewrite import constant_value

    if isinstance(value.defining_op, tile.SplatOp):
        value = value.defining_op.operands[0]
    found = constant_value(value)
    return not isinstance(found, (list, tuple)) and found == 0


def wait_group(b: ir.IRBuilder, pending: int, values: list[list]) -> list[list]:
    """``wgmma.wait_group pending`` with the registers of ``values`` (each a list of f32,
    f16 or i32 LLVM values) taken in and out, so that no read of them moves above it:
    until then the tensor cores may still write them."""
    words, shapes = [], []
    for registers in values:
        f16 = bool(registers) and isinstance(registers[0].type, ir.HalfType)
        packed = _pack_f16(b, registers) if f16 else list(registers)
        shapes.append((len(packed), f16, registers[0].type if registers else None))
        words += packed
    words = _asm_tied(b, f"wgmma.wait_group.sync.aligned {pending};", words, [])
    out, at = [], 0
    for count, f16, element in shapes:
        part = words[at:at + count]
        at += count
        out.append(_unpack_f16(b, part, element) if f16 else part)
    return out


#: The check of :func:`_check_shared_alignment`: a trap where shared memory does not start
#: on a ``SWIZZLE_ALIGNMENT`` boundary.
ALIGNMENT_TRAP = (f"{{ .reg .pred p; .reg .b32 r; and.b32 r, $0, {SWIZZLE_ALIGNMENT - 1}; setp.ne.u32 p, r, 0; "
                  "@p trap; }")


def _check_shared_alignment(ctx: Any) -> None:
    """Ring slots are swizzled from the ring's start, and wgmma swizzles by address bits:
    they agree only where shared memory starts on a 1024-byte boundary (it does: polytile
    has no static shared memory).  A kernel where it did not would stop with a trap
    rather than compute with scrambled operands.

    The check is inline assembly with side effects, so it stays where the dot is, inside
    its loop, rather than being hoisted (an LLVM branch to ``llvm.trap`` was, in some
    kernels and not others).  ptxas 13.0 serializes every wgmma of a loop whose body is
    one basic block and keeps a wgmma group in flight across its back edge (C7514:
    attention's ``P @ V`` waited for in the next iteration, with K and V through tensor
    maps); a trap inside the loop makes it a loop with an exit, which it does not
    serialize (tests/backends/nvidia/test_wgmma_ptx.py)."""
    b = ctx.builder
    start = b.ptrtoint(ctx.shared_base(), _I32)
    b.asm(ir.FunctionType(ir.VoidType(), [_I32]), ALIGNMENT_TRAP, "r", [start], side_effect=True)


def _a_fragments(b: ir.IRBuilder, op: Any, registers: list) -> Any:
    """``fragment(m0, k0)``: the four 32-bit words of A (rows ``m0 ..`` of the warpgroup,
    K ``k0 .. k0 + 15``) a thread gives wgmma, from its registers in
    ``DotOperandLayout(0, result, 2)``: the first 8 registers of that layout are one
    fragment (mma.sync's m16k16 A: rows g and g + 8, K 2t, 2t + 1 and 2t + 8, 2t + 9),
    the others repeat it along K and M."""
    from .mma import pack32

    layout = linear_layout_of(op.a)
    where: dict[tuple[int, ...], int] = {}
    for r in range(layout.num_registers):
        where.setdefault(register_offset(layout, r), r)
    offsets = [register_offset(layout, r) for r in range(8)]

    def fragment(m0: int, k0: int) -> list:
        return pack32(b, [registers[where[(m0 ^ dm, k0 ^ dk)]] for dm, dk in offsets])
    return fragment


def _start(b: ir.IRBuilder, placement: OperandPlacement, mn: Any, k0: int) -> Any:
    """``placement.start(mn, k0)`` for a run-time ``mn``."""
    constant = ir.Constant(_I32, placement.k_start(k0))
    if placement.k_major:
        return b.add(b.mul(mn, ir.Constant(_I32, placement.swizzle)), constant)
    blocks = b.lshr(mn, ir.Constant(_I32, log2(placement.row_elements)))
    return b.add(b.mul(blocks, ir.Constant(_I32, placement.block_bytes)), constant)


__all__ = ["FENCE_PROXY_ASYNC", "OperandPlacement", "OperandSource", "operand_sources", "scratch_bytes",
           "slot_placement", "SWIZZLE_MODES", "WGMMA_COMMIT", "WGMMA_FENCE", "WGMMA_TYPES",
           "WGMMA_WAIT", "descriptor_high", "instruction_n", "lower_wgmma_dot", "matrix_descriptor", "place_operand",
           "buffer_placement", "overlaps", "reads_in_place", "select_wgmma", "wait_group", "wgmma_ptx", "wgmma_result_layout", "wgmma_warps"]
