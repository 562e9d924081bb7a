"""Shared memory: which ops need scratch space, and where in the program's shared memory
each one gets it.

An op that moves data between threads (a layout conversion, a reduction across warps, a
scan) needs a piece of shared memory while it runs.  Its lowering registers how many
bytes with :func:`register_scratch`; the ``allocate-shared`` pass (memory stage) gives
every such op an offset (op attribute ``gpu.scratch_offset``, bytes) and records each
kernel's total (function attribute ``gpu.shared_bytes``), which the launcher passes as the
dynamic shared memory size.  The lowering reads an op's piece with
``LoweringContext.scratch(op)``.

Offsets come from liveness: an op's scratch is live only while the op runs, so pieces
of ops that do not run at the same time share bytes.  Today every op runs alone, so
every piece starts at offset 0 and the total is the largest piece; buffers that live
across ops (pipelining) will take their own intervals here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from ..passes.pass_base import Pass, PassContext, PreservedAnalyses

#: Op attribute: the byte offset of the op's scratch in the program's shared memory.
SCRATCH_OFFSET_ATTR = "gpu.scratch_offset"
#: Function attribute: the bytes of shared memory the kernel needs (dynamic shared memory).
SHARED_BYTES_ATTR = "gpu.shared_bytes"
#: Every piece starts at a multiple of this, so that 16-byte vector accesses stay aligned.
SCRATCH_ALIGNMENT = 16

#: ``fn(op, target, num_warps) -> bytes`` (0 when this instance needs none), by op class.
ScratchSize = Callable[[Any, Any, int], int]
SCRATCH_BYTES: dict[type, ScratchSize] = {}


def register_scratch(*op_classes: type) -> Callable[[ScratchSize], ScratchSize]:
    """Decorator: ``@register_scratch(MyOp)`` says how many bytes of shared memory an op of
    that class needs while it runs (given the op, the ``GpuTarget`` and ``num_warps``)."""
    def register(fn: ScratchSize) -> ScratchSize:
        for cls in op_classes:
            SCRATCH_BYTES[cls] = fn
        return fn
    return register


def scratch_bytes(op: Any, target: Any, num_warps: int) -> int:
    size = SCRATCH_BYTES.get(type(op))
    return 0 if size is None else int(size(op, target, num_warps))


def _align(n: int) -> int:
    return (n + SCRATCH_ALIGNMENT - 1) // SCRATCH_ALIGNMENT * SCRATCH_ALIGNMENT


def allocate_function(function: Any, target: Any, num_warps: int) -> int:
    """Give the ops of ``function`` that need scratch their offsets; return the total."""
    total = 0
    for op in function.walk():
        size = scratch_bytes(op, target, num_warps)
        if size:
            op.set_attr(SCRATCH_OFFSET_ATTR, 0)
            total = max(total, _align(size))
    function.set_attr(SHARED_BYTES_ATTR, total)
    return total


@dataclass
class AllocateShared(Pass):
    """Place each op's shared-memory scratch; record each kernel's shared memory size."""

    name: ClassVar[str] = "allocate-shared"
    summary: ClassVar[str] = "shared memory offsets of scratch buffers (gpu.scratch_offset, gpu.shared_bytes)"

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        from . import lowering  # noqa: F401  (the lowerings register their scratch needs on import)
        from .lowering.target import NUM_WARPS_ATTR, gpu_target_of, num_warps_of

        target = gpu_target_of(context)
        for function in [op for op in module.walk() if op.name == "func.func"]:
            allocate_function(function, target, function.attributes.get(NUM_WARPS_ATTR, num_warps_of(context)))
        return PreservedAnalyses.all()


__all__ = ["AllocateShared", "SCRATCH_BYTES", "SCRATCH_OFFSET_ATTR", "SHARED_BYTES_ATTR", "allocate_function",
           "register_scratch", "scratch_bytes"]
