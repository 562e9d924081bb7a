"""``hoist-dot-operands``: store a loop-invariant dot operand in shared memory once.

A matrix unit that reads its operands from shared memory (NVIDIA's wgmma,
``MatrixInstruction.reads_in_place``) stores an operand computed in registers into the
dot's scratch every time the dot runs.  In a loop whose dot reads a value from before
the loop (attention's ``q`` in ``pl.dot(q, k)``), that is the same tile stored every
iteration.  The pass stores it once instead:

    %qs = gpu.local_alloc %q : !gpu.buffer<128x128xf16, #gpu.shared<...>>   // before the loop
    scf.for ... {
      %q2 = gpu.local_load %qs : tile<128x128xf16, #gpu.blocked<...>>      // read in place
      %qk = tile.dot %q2, %k, %zero
    }

The buffer's layout is the one dot operands get in shared memory
(``operand_shared_layout``: the source's contiguous dimension contiguous, 128-byte
swizzled rows, column blocks beyond that); the pass hoists only where the unit says it
reads that buffer in place, and marks the ``gpu.local_load`` ``gpu.in_place``: it only
names the buffer for the dot (its registers go unused).  A value several dots of the
loop read is stored once, followed by ``gpu.fence_async_shared`` (each thread's stores
become visible to the unit's asynchronous reads); ``insert-barriers`` puts the barrier
between the store and the first read.

A value loaded whole from a ring slot before the loop (a tensor descriptor's ``q``
arriving through a bulk copy) needs no buffer of its own: where the unit reads that slot
in place and nothing writes the ring from then until the loop ends, the dot reads the
slot itself (a ``gpu.local_load_slot`` of it in the loop, as for the loop's own ring
slots), which saves the copy and the buffer (32 KiB for attention's 128 x 128 ``q``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..dialects import scf, tile
from ..dialects.gpu import (IN_PLACE_ATTR, BufferType, FenceAsyncSharedOp, LocalAllocOp, LocalLoadOp,
                            LocalLoadSlotOp)
from ..ir import types as t
from ..ir.builder import Builder
from ..passes.pass_base import Pass, PassContext, PreservedAnalyses
from .layouts import BlockedLayout


@dataclass
class HoistDotOperands(Pass):
    """Store loop-invariant operands of shared-memory dots once, before the loop (see
    the module docstring)."""

    name: ClassVar[str] = "hoist-dot-operands"
    summary: ClassVar[str] = "loop-invariant operands of shared-memory dots stored once before the loop"

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        from .lowering.dot import select_instruction
        from .lowering.target import gpu_target_of, num_warps_of

        target = gpu_target_of(context)
        num_warps = num_warps_of(context)
        changed = False
        order = {op: index for index, op in enumerate(module.walk())}
        for loop in [op for op in module.walk() if isinstance(op, scf.ForOp)]:
            stored: dict = {}  # value -> its buffer, one per loop
            for dot in [op for op in loop.body.block if isinstance(op, tile.DotOp)]:
                instruction = select_instruction(dot, target, num_warps)
                if instruction is None or instruction.reads_in_place is None or \
                        instruction.result_layout(dot.result.type.shape, num_warps) != dot.result.type.layout:
                    continue
                for index in (0, 1):
                    if _hoist(loop, dot, index, instruction.reads_in_place, stored, order):
                        context.count("hoist-dot-operands.operands")
                        changed = True
        return PreservedAnalyses.none() if changed else PreservedAnalyses.all()


def _invariant(loop: Any, value: Any) -> bool:
    """Whether ``value`` is defined outside ``loop`` (not in its body, at any depth)."""
    op = value.defining_op
    if op is not None:
        return op is not loop and not loop.is_ancestor_of(op)
    block_op = value.parent_block.parent_op
    return block_op is not loop and (block_op is None or not loop.is_ancestor_of(block_op))


def _hoist(loop: Any, dot: Any, index: int, reads_in_place: Any, stored: dict, order: dict) -> bool:
    from .lowering.dot_operands import operand_shared_layout

    value = dot.operands[index]
    layout = value.type.layout
    if not isinstance(layout, BlockedLayout) or len(value.type.shape) != 2 or not _invariant(loop, value):
        return False
    if _read_slot_in_place(loop, dot, index, reads_in_place, order):
        return True
    buffer = stored.get(value)
    if buffer is None:
        element = t.element_type(value.type)
        shared = operand_shared_layout(layout, tuple(value.type.shape), element.width)
        buffer_type = BufferType(tuple(value.type.shape), element, shared)
        if not reads_in_place(dot, index, buffer_type):
            return False  # the dot would store it to its scratch anyway
        before = Builder.before(loop, loop.location)
        buffer = stored[value] = before.create(LocalAllocOp, value, result_types=[buffer_type]).result
        before.create(FenceAsyncSharedOp)  # the unit reads it asynchronously
    elif not reads_in_place(dot, index, buffer.type):
        return False
    read = Builder.before(dot, dot.location).create(LocalLoadOp, buffer, result_types=[value.type])
    read.set_attr(IN_PLACE_ATTR, True)
    dot.set_operand(index, read.result)
    return True


def _read_slot_in_place(loop: Any, dot: Any, index: int, reads_in_place: Any, order: dict) -> bool:
    """Where operand ``index`` of ``dot`` is a whole ring slot's load from before ``loop``,
    the unit reads that slot in place and no op but reads uses the ring after the load in
    program order (stricter than needed: a write after the loop would do no harm), read the
    slot in the loop (see the module docstring).  Rings are never yielded or passed as
    block arguments, so the ring value's users are all its uses."""
    from .lowering.async_copy import slot_layout

    value = dot.operands[index]
    load = value.defining_op
    if not isinstance(load, LocalLoadSlotOp) or load.offsets is not None:
        return False
    ring = load.ring
    slot = BufferType(tuple(ring.type.shape[1:]), ring.type.element, slot_layout(ring.type))
    if not reads_in_place(dot, index, slot):
        return False
    for user in ring.users():
        if isinstance(user, (LocalLoadSlotOp, LocalLoadOp)):
            continue  # reads
        # Any other use may write the ring: it must come before the load in program order,
        # outside the loop (a write in an enclosing loop before the load runs before each
        # run of this loop and before the load alike).
        if loop.is_ancestor_of(user) or order[user] > order[load]:
            return False
    read = Builder.before(dot, dot.location).create(LocalLoadSlotOp, ring, load.slot, result_types=[value.type])
    dot.set_operand(index, read.result)
    if not load.result.has_uses:
        load.erase()  # not pure (it reads memory), so dce would keep it; insert-barriers would count it
    return True


__all__ = ["HoistDotOperands"]
