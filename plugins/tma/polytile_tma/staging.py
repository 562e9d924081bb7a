"""Where descriptor loads become bulk copies: :func:`has_bulk_copies` (which targets) and
the ``stage-bulk-loads`` pass (the loads ``pipeline-loops`` left).

Kept apart from :mod:`.hopper` (the lowering, imported only when such a target compiles)
so that registering the pass costs every other compile nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from polytile.passes import Pass, PassContext, PreservedAnalyses

#: The pass ``stage-bulk-loads`` runs after (loads it did not pipeline are staged).
STAGING_ANCHOR = "distribute/pipeline-loops"


def has_bulk_copies(target: Any) -> bool:
    """Whether ``target`` (a :class:`~polytile.Target`) has the tensor memory
    accelerator: NVIDIA sm_90 and later."""
    if target is None or getattr(target, "backend", None) != "nvidia" or not target.arch:
        return False
    found = re.fullmatch(r"sm_(\d+)[a-z]?", target.arch)
    return found is not None and int(found.group(1)) >= 90


def has_device_maps(target: Any) -> bool:
    """Whether ``target`` can build tensor maps in a kernel (``tensormap.replace``): the
    arch-specific Hopper and later targets (sm_90a, sm_100a...), not plain sm_90."""
    return has_bulk_copies(target) and target.arch.endswith("a")


@dataclass
class StageBulkLoads(Pass):
    """Each ``tma.bulk_load`` that ``pipeline-loops`` left: a bulk copy into a one-slot
    buffer, a wait on its barrier, and a read of the buffer into the layout its users
    want (dot operands straight into theirs).  Each ``tma.bulk_store``: its block written
    into a buffer in the copy's layout, fenced for the copy engine, and copied out."""

    name: ClassVar[str] = "stage-bulk-loads"
    summary: ClassVar[str] = "descriptor loads outside pipelined loops and descriptor stores: bulk copies through shared memory"

    def applies_to(self, module: Any) -> bool:
        return any(op.name in ("tma.bulk_load", "tma.bulk_store") for op in module.walk())

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        from .bulk import BulkLoadOp, BulkStoreOp
        from .hopper import stage_bulk_load, stage_bulk_store

        ops = [op for op in module.walk() if isinstance(op, (BulkLoadOp, BulkStoreOp))]
        for op in ops:
            if isinstance(op, BulkLoadOp):
                stage_bulk_load(op)
                context.count("stage-bulk-loads.staged")
            else:
                stage_bulk_store(op)
                context.count("stage-bulk-loads.stores")
        return PreservedAnalyses.none() if ops else PreservedAnalyses.all()


__all__ = ["STAGING_ANCHOR", "StageBulkLoads", "has_bulk_copies"]
