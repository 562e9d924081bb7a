"""``tile.atomic_rmw`` and ``tile.atomic_cas``: one atomic per element a thread holds.

Where a layout gives an element to several threads or registers, only the first copy
issues the atomic (as stores do: the layout's free lane and warp bits), so a tile that
wraps its layout still adds each value once.  When the result is used, the copies get
the owner's old value: through shared memory when other threads hold them (scratch
registered with the memory stage), by register copy otherwise.  A scalar atomic is
issued by thread 0 and its old value shared the same way.

What one atomic becomes is the target's business (``GpuTarget.atomic_rmw`` /
``atomic_cas``; NVIDIA: ``atom``/``red`` in inline PTX, ``red`` when the old value is
unused and the ordering allows it).  The core adds what is the same everywhere:

- float max/min through integer atomics, as Triton: a value with the sign bit clear
  is ``max`` as a signed integer, one with it set is ``umin`` (min: ``min`` and
  ``umax``), which orders IEEE floats, -0.0 below +0.0 included;
- a compare-and-swap loop for what the target has no instruction for (16-bit
  max/min/xchg, bf16 add before sm_90), over the enclosing 32-bit word for 8-bit types;
- masked-off elements do nothing and read 0, as on the interpreter.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from ...dialects import tile
from ...ir import types as t
from ..allocation import register_scratch
from .context import LoweringContext, linear_layout_of, register_lowering
from .indexing import duplicate_register_mask, duplicate_thread_masks
from .memory import thread_owner
from .target import NO_INSTRUCTION
from .tiles import tile_coordinates
from .types import UnsupportedType, bit_width, fp8_format, is_float, llvm_type

_LLVM_ORDERING = {"relaxed": "monotonic", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"}
_LLVM_FAILURE_ORDERING = {"relaxed": "monotonic", "acquire": "acquire", "release": "monotonic", "acq_rel": "acquire"}
_LLVM_RMW = {"add": "add", "fadd": "fadd", "max": "max", "min": "min", "umax": "umax", "umin": "umin",
             "and": "and", "or": "or", "xor": "xor", "xchg": "xchg"}
#: Float max/min as two integer atomics: (kind where the sign bit is clear, kind where set).
_FLOAT_MINMAX = {"max": ("max", "umin"), "min": ("min", "umax")}


def _int_type(type_: ir.Type) -> ir.IntType:
    return ir.IntType(bit_width(type_))


def _as_int(b: ir.IRBuilder, value: Any) -> Any:
    return value if isinstance(value.type, ir.IntType) else b.bitcast(value, _int_type(value.type))


def _from_int(b: ir.IRBuilder, value: Any, type_: ir.Type) -> Any:
    return value if value.type == type_ else b.bitcast(value, type_)


def _zero(type_: ir.Type) -> ir.Constant:
    return ir.Constant(type_, 0 if isinstance(type_, ir.IntType) else 0.0)


# --------------------------------------------------------------------------------------
# One element


def _combine(ctx: LoweringContext, kind: str, old: Any, value: Any) -> Any:
    """``kind`` applied to ``old`` and ``value`` in registers (the CAS loop's step)."""
    b = ctx.builder
    if kind == "xchg":
        return value
    if is_float(old.type):
        if kind in ("add", "fadd"):
            return b.fadd(old, value)
        name = {"max": "maximum", "min": "minimum"}[kind]   # NaN wins, as np.maximum
        return ctx.call(f"llvm.{name}.{_suffix(old.type)}", old.type, [old, value])
    simple = {"add": b.add, "and": b.and_, "or": b.or_, "xor": b.xor}
    if kind in simple:
        return simple[kind](old, value)
    name = {"max": "smax", "min": "smin", "umax": "umax", "umin": "umin"}[kind]
    return ctx.call(f"llvm.{name}.i{old.type.width}", old.type, [old, value])


def _suffix(type_: ir.Type) -> str:
    from .elementwise import suffix

    return suffix(type_)


def _cas(ctx: LoweringContext, ptr: Any, compare: Any, value: Any, sem: str, scope: str) -> Any:
    """One integer compare-and-swap (no mask); the old value."""
    b = ctx.builder
    hook = ctx.target.atomic_cas
    if hook is not None:
        return hook(b, ptr, compare, value, None, sem, scope)
    pair = b.cmpxchg(ptr, compare, value, _LLVM_ORDERING[sem], _LLVM_FAILURE_ORDERING[sem])
    return b.extract_value(pair, 0)


def _guarded(ctx: LoweringContext, mask: Any, result_type: ir.Type, body: Any) -> Any:
    """``body()`` where ``mask`` holds (in a branch), 0 elsewhere."""
    if mask is None:
        return body()
    b = ctx.builder
    entry = b.block
    then = b.append_basic_block("atomic.do")
    done = b.append_basic_block("atomic.done")
    b.cbranch(mask, then, done)
    b.position_at_end(then)
    result = body()
    end = b.block
    b.branch(done)
    b.position_at_end(done)
    phi = b.phi(result_type)
    phi.add_incoming(_zero(result_type), entry)
    phi.add_incoming(result, end)
    return phi


def _cas_loop(ctx: LoweringContext, kind: str, ptr: Any, value: Any, mask: Any, sem: str, scope: str) -> Any:
    """An atomic read-modify-write as a compare-and-swap loop; the old value."""
    b = ctx.builder
    width = bit_width(value.type)

    def body() -> Any:
        word_ptr, shift = ptr, None
        int_type = _int_type(value.type)
        if width < 16:
            # No 8-bit compare-and-swap: swap the aligned 32-bit word around the byte.
            address = b.ptrtoint(ptr, ir.IntType(64))
            word_ptr = b.inttoptr(b.and_(address, ir.Constant(ir.IntType(64), ~3)), ptr.type)
            shift = b.trunc(b.shl(b.and_(address, ir.Constant(ir.IntType(64), 3)), ir.Constant(ir.IntType(64), 3)),
                            ir.IntType(32))
            int_type = ir.IntType(32)
        before = b.block
        first = b.load(word_ptr, typ=int_type, align=int_type.width // 8)
        loop = b.append_basic_block("atomic.cas")
        exit_ = b.append_basic_block("atomic.cas.done")
        b.branch(loop)
        b.position_at_end(loop)
        expected = b.phi(int_type)
        expected.add_incoming(first, before)
        if shift is None:
            old = _from_int(b, expected, value.type)
            desired = _as_int(b, _combine(ctx, kind, old, value))
        else:
            byte_mask = b.shl(ir.Constant(int_type, (1 << width) - 1), shift)
            old = _from_int(b, b.trunc(b.lshr(expected, shift), ir.IntType(width)), value.type)
            new = b.zext(_as_int(b, _combine(ctx, kind, old, value)), int_type)
            desired = b.or_(b.and_(expected, b.not_(byte_mask)), b.shl(new, shift))
        seen = _cas(ctx, word_ptr, expected, desired, sem, scope)
        expected.add_incoming(seen, b.block)
        b.cbranch(b.icmp_unsigned("==", seen, expected), exit_, loop)
        b.position_at_end(exit_)
        return old

    return _guarded(ctx, mask, value.type, body)


def atomic_rmw_element(ctx: LoweringContext, kind: str, ptr: Any, value: Any, mask: Any, sem: str, scope: str,
                       returns: bool) -> Any:
    """One atomic read-modify-write of ``value`` at ``ptr`` where ``mask`` (i1 or None)
    holds; the old value (0 where masked off)."""
    b = ctx.builder
    if kind in _FLOAT_MINMAX and is_float(value.type):
        if bit_width(value.type) >= 32:
            bits = _as_int(b, value)
            clear = b.icmp_signed(">=", bits, ir.Constant(bits.type, 0))
            set_ = b.not_(clear)
            when_clear, when_set = _FLOAT_MINMAX[kind]
            masks = [clear, set_] if mask is None else [b.and_(mask, clear), b.and_(mask, set_)]
            olds = [atomic_rmw_element(ctx, k, ptr, bits, m, sem, scope, returns)
                    for k, m in zip((when_clear, when_set), masks)]
            return _from_int(b, b.select(clear, olds[0], olds[1]), value.type)
        return _cas_loop(ctx, kind, ptr, value, mask, sem, scope)
    if kind == "add" and is_float(value.type):
        kind = "fadd"
    hook = ctx.target.atomic_rmw
    if hook is not None:
        old = hook(b, kind, ptr, value, mask, sem, scope, returns)
        if old is not NO_INSTRUCTION:
            return old
        return _cas_loop(ctx, kind, ptr, value, mask, sem, scope)
    return _guarded(ctx, mask, value.type,
                    lambda: b.atomic_rmw(_LLVM_RMW[kind], ptr, value, _LLVM_ORDERING[sem]))


def atomic_cas_element(ctx: LoweringContext, ptr: Any, compare: Any, value: Any, mask: Any, sem: str,
                       scope: str) -> Any:
    """One compare-and-swap (floats compare bits); the old value (0 where masked off)."""
    b = ctx.builder
    type_ = value.type
    compare_bits, value_bits = _as_int(b, compare), _as_int(b, value)
    hook = ctx.target.atomic_cas
    if hook is not None:
        return _from_int(b, hook(b, ptr, compare_bits, value_bits, mask, sem, scope), type_)
    return _guarded(ctx, mask, type_, lambda: _from_int(b, _cas(ctx, ptr, compare_bits, value_bits, sem, scope), type_))


# --------------------------------------------------------------------------------------
# Tiles and scalars: who issues, and who gets the old values


def _shares_through_memory(op: Any) -> bool:
    """Whether copies of the old values live in threads that did not issue the atomic."""
    if not op.result.has_uses:
        return False
    if not isinstance(op.ptr.type, t.TileType):
        return True
    lanes, warps = duplicate_thread_masks(linear_layout_of(op.ptr))
    return bool(lanes or warps)


@register_scratch(tile.AtomicRMWOp, tile.AtomicCASOp)
def _scratch(op: Any, target: Any, num_warps: int) -> int:
    if not _shares_through_memory(op):
        return 0
    count = 1
    for n in t.shape_of(op.result.type):
        count *= n
    return count * max(t.element_type(op.result.type).width // 8, 1)


def _element_type(op: Any, ctx: LoweringContext) -> ir.Type:
    element = t.element_type(op.result.type)
    if fp8_format(element):
        raise ctx.unsupported(op, f"'{op.name}' on {element}")
    try:
        return llvm_type(element)
    except UnsupportedType as exc:
        raise ctx.unsupported(op, f"'{op.name}' on {exc}") from None


def _lower(op: Any, ctx: LoweringContext, operands: list, mask: Any, issue: Any) -> list:
    """Issue ``issue(register, mask)`` for each element this thread owns; give every
    register (and every thread holding a copy) its old value."""
    b = ctx.builder
    element = _element_type(op, ctx)
    if not isinstance(op.ptr.type, t.TileType):
        owner = b.icmp_unsigned("==", ctx.thread_id, ctx.i32(0))
        old = issue(None, owner if mask is None else b.and_(owner, mask))
        return [_share(op, ctx, [old], element)[0] if _shares_through_memory(op) else old]
    layout = linear_layout_of(op.ptr)
    owner = thread_owner(ctx, layout)
    duplicates = duplicate_register_mask(layout)
    registers: list[Any] = [None] * layout.num_registers
    for r in range(layout.num_registers):
        if r & duplicates:
            continue
        bit = mask[r] if mask is not None else None
        if owner is not None:
            bit = owner if bit is None else b.and_(bit, owner)
        registers[r] = issue(r, bit)
    for r in range(layout.num_registers):
        if registers[r] is None:
            registers[r] = registers[r & ~duplicates]
    if _shares_through_memory(op):
        registers = _share(op, ctx, registers, element)
    return [registers]


def _share(op: Any, ctx: LoweringContext, registers: list, element: ir.Type) -> list:
    """Every thread's registers take the value the owning thread computed: owners write
    each element at its row-major index in the op's scratch, everyone reads it back."""
    b = ctx.builder
    # An opaque pointer: llvmlite types the scratch pointer as one to the shared array.
    base = b.inttoptr(b.ptrtoint(ctx.scratch(op), ir.IntType(32)), ir.PointerType(addrspace=ctx.target.shared_address_space))
    shape = t.shape_of(op.result.type)
    if shape:
        coords = tile_coordinates(ctx, op.result)
        offsets = []
        for c in coords:
            index = c[0]
            for d in range(1, len(shape)):
                index = b.add(b.mul(index, ctx.i32(shape[d])), c[d])
            offsets.append(index)
        layout = linear_layout_of(op.result)
        owner = thread_owner(ctx, layout)
    else:
        offsets = [ctx.i32(0)]
        owner = b.icmp_unsigned("==", ctx.thread_id, ctx.i32(0))
    pointers = [b.gep(base, [o], source_etype=element) for o in offsets]
    # One barrier, between the owners' writes and everyone's reads (sync="inside"):
    # insert-barriers guards the bytes against earlier and later users where needed.
    with b.if_then(owner) if owner is not None else _nothing():
        for ptr, value in zip(pointers, registers):
            b.store(value, ptr)
    ctx.target.barrier(b)
    return [b.load(ptr, typ=element) for ptr in pointers]


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


@register_lowering(tile.AtomicRMWOp)
def _atomic_rmw(op: Any, operands: list, ctx: LoweringContext) -> list:
    ptrs, values = operands[0], operands[1]
    mask = operands[2] if op.mask is not None else None
    returns = op.result.has_uses
    kind, sem, scope = op.kind, op.sem, op.scope

    def issue(r: int | None, bit: Any) -> Any:
        pick = (lambda x: x) if r is None else (lambda x: x[r] if isinstance(x, list) else x)
        return atomic_rmw_element(ctx, kind, pick(ptrs), pick(values), bit, sem, scope, returns)

    tile_mask = mask if isinstance(mask, list) else None
    if mask is not None and not isinstance(mask, list):
        # A scalar mask on a tile: the same bit for every element.
        tile_mask = [mask] * len(ptrs) if isinstance(ptrs, list) else mask
    return _lower(op, ctx, operands, tile_mask, issue)


@register_lowering(tile.AtomicCASOp)
def _atomic_cas(op: Any, operands: list, ctx: LoweringContext) -> list:
    ptrs, compares, values = operands
    sem, scope = op.sem, op.scope

    def issue(r: int | None, bit: Any) -> Any:
        pick = (lambda x: x) if r is None else (lambda x: x[r] if isinstance(x, list) else x)
        return atomic_cas_element(ctx, pick(ptrs), pick(compares), pick(values), bit, sem, scope)

    return _lower(op, ctx, operands, None, issue)


__all__ = ["atomic_cas_element", "atomic_rmw_element"]
