"""Which tile element each register of each thread holds, as integer arithmetic.

A linear layout gives an element's coordinates as the XOR of the bases of the set bits of
its register, lane and warp indices.  The lane and warp part is computed at run time
(:func:`thread_offsets`), grouping the bits that move by the same shift into one
``and`` + shift; the register part is a compile-time constant XORed in per register.

The arithmetic goes through a small interface (:class:`IntOps`) so that the same code
runs on LLVM values (:class:`LLVMOps`) and on Python integers (:class:`PyOps`): tests
check the emitted index math against the layout itself, thread by thread.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..linear_layout import LinearLayout, log2


class IntOps:
    """Integer operations on run-time values (``x``) and constants (``c``)."""

    def const(self, c: int) -> Any: raise NotImplementedError
    def and_(self, x: Any, c: int) -> Any: raise NotImplementedError
    def shl(self, x: Any, c: int) -> Any: raise NotImplementedError
    def shr(self, x: Any, c: int) -> Any: raise NotImplementedError
    def mul(self, x: Any, c: int) -> Any: raise NotImplementedError
    def xor(self, x: Any, y: Any) -> Any: raise NotImplementedError


class PyOps(IntOps):
    def const(self, c): return c
    def and_(self, x, c): return x & c
    def shl(self, x, c): return x << c
    def shr(self, x, c): return x >> c
    def mul(self, x, c): return x * c
    def xor(self, x, y): return x ^ y


class LLVMOps(IntOps):
    """i32 arithmetic through an llvmlite builder."""

    def __init__(self, builder: Any):
        from llvmlite import ir

        self.b = builder
        self.i32 = ir.IntType(32)

    def const(self, c):
        from llvmlite import ir

        return ir.Constant(self.i32, c)

    def and_(self, x, c): return self.b.and_(x, self.const(c))
    def shl(self, x, c): return self.b.shl(x, self.const(c))
    def shr(self, x, c): return self.b.lshr(x, self.const(c))
    def mul(self, x, c): return self.b.mul(x, self.const(c))
    def xor(self, x, y): return self.b.xor(x, y)


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _contribution(ops: IntOps, index: Any, bases: Sequence[tuple[int, ...]], dim: int) -> Any | None:
    """The XOR, over the set bits ``b`` of ``index``, of ``bases[b][dim]``."""
    by_shift: dict[int, int] = {}
    terms = []
    for bit, basis in enumerate(bases):
        c = basis[dim]
        if c == 0:
            continue
        if _is_power_of_two(c):
            shift = log2(c) - bit
            by_shift[shift] = by_shift.get(shift, 0) | (1 << bit)
        else:
            terms.append(ops.mul(ops.and_(ops.shr(index, bit), 1), c))
    for shift, mask in sorted(by_shift.items()):
        masked = ops.and_(index, mask)
        terms.append(ops.shl(masked, shift) if shift > 0 else ops.shr(masked, -shift) if shift < 0 else masked)
    if not terms:
        return None
    total = terms[0]
    for term in terms[1:]:
        total = ops.xor(total, term)
    return total


def thread_offsets(ops: IntOps, layout: LinearLayout, lane: Any, warp: Any) -> list[Any]:
    """Per dimension, the coordinate of register 0 of the thread (``lane``, ``warp``)."""
    offsets = []
    for d in range(len(layout.shape)):
        parts = [p for p in (_contribution(ops, lane, layout.lane, d), _contribution(ops, warp, layout.warp, d))
                 if p is not None]
        offsets.append(ops.xor(*parts) if len(parts) == 2 else parts[0] if parts else ops.const(0))
    return offsets


def register_offset(layout: LinearLayout, register: int) -> tuple[int, ...]:
    """The register part of the coordinates of ``register`` (a constant)."""
    return layout.apply(register, 0, 0)


def coordinates(ops: IntOps, layout: LinearLayout, lane: Any, warp: Any) -> list[list[Any]]:
    """``coords[r][d]``: coordinate ``d`` of the element in register ``r`` of the thread."""
    base = thread_offsets(ops, layout, lane, warp)
    result = []
    for r in range(layout.num_registers):
        constant = register_offset(layout, r)
        result.append([base[d] if constant[d] == 0 else ops.xor(base[d], ops.const(constant[d]))
                       for d in range(len(layout.shape))])
    return result


# --------------------------------------------------------------------------------------
# Moving registers between layouts inside a thread


def register_map(source: LinearLayout, result: LinearLayout,
                 project: Callable[[tuple[int, ...]], tuple[int, ...]]) -> list[int] | None:
    """For each register of ``result``, the register of ``source`` that holds the element
    at ``project(coordinates)`` in the same thread, for every thread; None when some
    element would have to come from another thread (a real layout conversion)."""
    if tuple(map(project, result.lane)) != source.lane or tuple(map(project, result.warp)) != source.warp:
        return None
    where: dict[tuple[int, ...], int] = {}
    for r in range(source.num_registers):
        where.setdefault(register_offset(source, r), r)
    mapping = []
    for r in range(result.num_registers):
        found = where.get(project(register_offset(result, r)))
        if found is None:
            return None
        mapping.append(found)
    return mapping


def duplicate_register_mask(layout: LinearLayout) -> int:
    """Register index bits that only repeat an element the thread already holds."""
    return sum(1 << i for i, basis in enumerate(layout.register) if not any(basis))


def duplicate_thread_masks(layout: LinearLayout) -> tuple[int, int]:
    """(lane bits, warp bits) whose threads hold only copies of what the thread with the
    bit clear holds: stores skip them so each element is written once."""
    lanes = sum(1 << i for i, basis in enumerate(layout.lane) if not any(basis))
    warps = sum(1 << i for i, basis in enumerate(layout.warp) if not any(basis))
    return lanes, warps


def contiguous_registers(layout: LinearLayout, dim: int) -> int:
    """How many consecutive registers (from any multiple of that count) hold elements
    consecutive along ``dim`` and starting at a multiple of that count: the widest
    vector one thread can access."""
    count = 0
    while count < len(layout.register) and layout.register[count] == tuple(
            (1 << count) if d == dim else 0 for d in range(len(layout.shape))):
        count += 1
    width = 1 << count
    others = layout.register[count:] + layout.lane + layout.warp
    while width > 1 and any(basis[dim] % width for basis in others):
        width //= 2
    return width
