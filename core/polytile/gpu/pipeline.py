"""The stages every GPU backend runs, in one place: a backend adds only its assemble stage.

``distribute`` gives tiles layouts, ``memory`` places shared memory and synchronizes it,
``llvm`` lowers to LLVM IR; the backend's own ``assemble`` passes turn that into a binary
(PTX and a cubin, an AMDGCN object and an HSACO).  Each pass is a named anchor where
plugins insert, replace or remove passes.
"""

from __future__ import annotations

from typing import Any, Sequence


def add_gpu_stages(pipeline: Any, assemble: Sequence[Any]) -> None:
    """Append ``distribute``, ``memory``, ``llvm`` and ``assemble`` (with the backend's
    ``assemble`` passes) to ``pipeline``."""
    from ..passes.cse import CommonSubexpressionElimination
    from ..passes.dce import DeadCodeElimination
    from ..passes.lower_block_pointers import LowerBlockPointers
    from .allocation import AllocateShared
    from .async_dots import AsyncDots
    from .hoist_operands import HoistDotOperands
    from .distribute import AssignLayouts, RemoveRedundantConverts
    from .membar import InsertBarriers
    from .pipelining import PipelineLoops
    from .unbatch_dots import UnbatchDots
    from .lowering import LowerToLLVM

    pipeline.add_stage("distribute", [LowerBlockPointers(), UnbatchDots(), AssignLayouts(), RemoveRedundantConverts(),
                                      PipelineLoops(), HoistDotOperands(), AsyncDots(),
                                      CommonSubexpressionElimination(), DeadCodeElimination()])
    pipeline.add_stage("memory", [AllocateShared(), InsertBarriers()])
    pipeline.add_stage("llvm", [LowerToLLVM()])
    pipeline.add_stage("assemble", list(assemble))


__all__ = ["add_gpu_stages"]
