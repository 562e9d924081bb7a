"""Tensor maps built on the device: ``pl.make_tensor_descriptor`` on Hopper.

A descriptor a kernel makes has no tensor map from the host, so ``lower-tensor-descriptors``
puts ``tma.create_map`` where it is made (when its block can be a bulk copy and the map
can be proven valid, see :func:`map_is_provable`), and its loads and stores become bulk
copies through that map as a host descriptor's do.

The map lives in the program's **global scratch** (128 bytes of the memory
``polytile.set_allocator`` gives each launch, see :mod:`polytile.gpu.global_scratch`):
the copy engine reads tensor maps from global, constant or parameter memory only.  It is
built as the CUDA programming guide and Triton build one:

1. warp 0 zeroes 128 bytes of shared memory (the op's scratch, rounded up to a 128-byte
   boundary);
2. thread 0 writes every field with ``tensormap.replace`` (address, rank, box, global
   dimensions, byte strides, element strides, element type, interleave, swizzle, fill);
3. warp 0 copies it to global memory with ``tensormap.cp_fenceproxy ... release.gpu``
   (the copy and the release of the generic proxy's writes to the tensor-map proxy);
4. after a barrier, every thread acquires it (``fence.proxy.tensormap::generic.acquire.gpu``)
   and thread 0 prefetches it (``prefetch.tensormap``).

Thread 0 issues the bulk copies (:mod:`.hopper`), or in a warp-specialised kernel a
producer warp: each thread acquiring the map itself is what makes either see it.

The workspace form (:mod:`.workspace`) builds its maps the same way with
``tma.write_map``, which copies the map to the address the kernel gives instead of the
global scratch; ``tma.map_at`` reads a map from such an address, and ``tma.acquire_map``
is the acquire alone, for maps other programs or kernels wrote.  The box and swizzle are
those of :func:`.bulk.box_plan`, as for a host descriptor, so the block lands in the
layout the kernel reads.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from polytile.gpu.allocation import register_scratch
from polytile.gpu.global_scratch import register_global_scratch
from polytile.gpu.lowering.context import LoweringContext, register_lowering

from .bulk import AcquireMapOp, CreateMapOp, MapAtOp, WriteMapOp, box_plan, element_code
from .hopper import _asm, _thread_zero
from .types import TENSOR_MAP_BYTES

#: The alignment of a map in global memory (the driver's CUtensorMap is 64-byte aligned;
#: Triton keeps 128) and of the shared-memory copy ``tensormap.replace`` edits.
MAP_ALIGNMENT = 128
_SWIZZLE_MODES = {0: 0, 32: 1, 64: 2, 128: 3}
_I32, _I64 = ir.IntType(32), ir.IntType(64)
register_global_scratch(CreateMapOp)(lambda op, target: (TENSOR_MAP_BYTES, MAP_ALIGNMENT))
# Shared memory for the copy being edited: 128 bytes at a 128-byte boundary inside.
register_scratch(CreateMapOp, WriteMapOp, sync="end")(
    lambda op, target, num_warps: TENSOR_MAP_BYTES + MAP_ALIGNMENT - 16)


def map_is_provable(base_info: Any, stride_infos: list, element_bits: int) -> bool:
    """Whether the copy engine can use a map of this array, from what the compiler knows
    (axis info of the base and the strides): a 16-byte aligned base, outer strides that
    are multiples of 16 bytes, a last stride of 1.  Otherwise the descriptor keeps the
    masked loads and stores every target has (the same meaning, no copy engine)."""
    size = element_bits // 8
    if base_info.divisibility[0] % 16:
        return False
    *outer, last = stride_infos
    if last.constant != 1:
        return False
    return all(info.divisibility[0] * size % 16 == 0 for info in outer)


def _when(predicate_input: str, instruction: str) -> str:
    """``instruction`` predicated on the operand ``predicate_input`` being non-zero."""
    return f"{{ .reg .pred p; setp.ne.b32 p, {predicate_input}, 0; @p {instruction} }}"


@register_lowering(CreateMapOp)
def _create_map(op: Any, operands: list, ctx: LoweringContext) -> list:
    in_global = ctx.global_scratch(op)
    _write_map(op, ctx, ctx.builder.ptrtoint(in_global, _I64))
    return [ctx.builder.addrspacecast(in_global, ir.PointerType())]


@register_lowering(WriteMapOp)
def _write_map_at(op: Any, operands: list, ctx: LoweringContext) -> list:
    _write_map(op, ctx, ctx.builder.ptrtoint(ctx.get(op.destination), _I64))
    return []


@register_lowering(MapAtOp)
def _map_at(op: Any, operands: list, ctx: LoweringContext) -> list:
    # A global address is the same number in the generic space the copies take.
    return [ctx.builder.inttoptr(ctx.builder.ptrtoint(ctx.get(op.address), _I64), ir.PointerType())]


@register_lowering(AcquireMapOp)
def _acquire_map(op: Any, operands: list, ctx: LoweringContext) -> list:
    # Every thread acquires: whichever thread issues a copy through the map (thread 0, or
    # a warp-specialised kernel's producer) has its own acquire.
    b = ctx.builder
    address = b.ptrtoint(ctx.get(op.address), _I64)
    _asm(b, "fence.proxy.tensormap::generic.acquire.gpu [$0], 128;", [address], "l")
    return []


def _write_map(op: Any, ctx: LoweringContext, global_address: Any) -> None:
    """The map of ``op`` (``tma.create_map`` or ``tma.write_map``) built in shared memory
    and copied to ``global_address`` (an i64), acquired and prefetched there."""
    b = ctx.builder
    element = op.base.type.pointee
    size = element.width // 8
    plan = box_plan(element.width, tuple(op.block))
    rank = len(op.block)
    warp0 = b.zext(b.icmp_unsigned("==", ctx.warp_id, ctx.i32(0)), _I32)
    thread0 = b.zext(_thread_zero(ctx), _I32)
    shared = b.ptrtoint(ctx.scratch(op), _I32)
    shared = b.and_(b.add(shared, ctx.i32(MAP_ALIGNMENT - 1)), ctx.i32(-MAP_ALIGNMENT))
    # Earlier ops may still read these bytes of shared memory ("end": the op's own
    # barriers synchronize everything before it and leave nothing pending).
    ctx.target.barrier(b)
    # 1. zeros: one 32-bit word per lane of warp 0.
    word = b.add(shared, b.mul(ctx.lane_id, ctx.i32(4)))
    _asm(b, _when("$1", "st.shared.b32 [$0], 0;"), [word, warp0], "r,r")
    _asm(b, "bar.warp.sync -1;", [], "")
    # 2. the fields, innermost dimension first (ordinal 0), by thread 0.
    def put(field: str, value: Any, ordinal: int | None = None) -> None:
        bits = "b64" if isinstance(value, ir.Value) and value.type == _I64 else "b32"
        where = f"[$0], {ordinal}, " if ordinal is not None else "[$0], "
        if isinstance(value, int):
            text = f"tensormap.replace.tile.{field}.shared::cta.b1024.{bits} {where}{value};"
            _asm(b, _when("$1", text), [shared, thread0], "r,r")
        else:
            text = f"tensormap.replace.tile.{field}.shared::cta.b1024.{bits} {where}$2;"
            _asm(b, _when("$1", text), [shared, thread0, value], "r,r," + ("l" if bits == "b64" else "r"))

    put("global_address", b.ptrtoint(ctx.get(op.base), _I64))
    put("rank", rank - 1)
    box = plan.box[::-1]  # (columns of one box, rows), innermost first
    for ordinal in range(rank):
        put("box_dim", int(box[ordinal]), ordinal)
    shape = [ctx.get(v) for v in op.shape][::-1]
    for ordinal in range(rank):
        put("global_dim", shape[ordinal], ordinal)
    strides = [ctx.get(v) for v in op.strides][-2::-1]  # dimensions 1 .. rank-1, innermost first
    for ordinal, stride in enumerate(strides):
        put("global_stride", b.mul(stride, _I64(size)), ordinal)
    for ordinal in range(rank):
        put("element_stride", 1, ordinal)
    put("elemtype", element_code(element))
    put("interleave_layout", 0)
    put("swizzle_mode", _SWIZZLE_MODES[plan.swizzle])
    put("fill_mode", 1 if op.padding == "nan" else 0)
    _asm(b, "bar.warp.sync -1;", [], "")
    # 3. to global memory, released to the tensor-map proxy; 4. acquired, prefetched.
    _asm(b, _when("$2", "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned "
                        "[$0], [$1], 128;"), [global_address, shared, warp0], "l,r,r")
    ctx.target.barrier(b)
    # Every thread acquires it after the barrier: whichever thread issues a copy through it
    # (a warp-specialised kernel's producer is not in warp 0) has its own acquire.
    _asm(b, "fence.proxy.tensormap::generic.acquire.gpu [$0], 128;", [global_address], "l")
    _asm(b, _when("$1", "prefetch.tensormap [$0];"), [global_address, thread0], "l,r")


__all__ = ["MAP_ALIGNMENT", "map_is_provable"]
