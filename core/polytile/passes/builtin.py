"""The core's own plugin: registers the generic passes and the core dialects through the
same hooks any third-party plugin uses."""

from __future__ import annotations

from typing import Any

from ..plugins import hookimpl


def core_pass_classes() -> list[type]:
    from ..analysis.axis_info import TestPrintAxisInfo
    from ..gpu.allocation import AllocateShared
    from ..gpu.distribute import AssignLayouts, RemoveRedundantConverts
    from ..gpu.membar import InsertBarriers
    from ..gpu.pipelining import PipelineLoops
    from ..gpu.lowering import LowerToLLVM
    from .canonicalize import Canonicalize
    from .cse import CommonSubexpressionElimination
    from .dce import DeadCodeElimination
    from .inline import Inliner
    from .licm import LoopInvariantCodeMotion
    from .lower_block_pointers import LowerBlockPointers

    return [Canonicalize, CommonSubexpressionElimination, DeadCodeElimination, Inliner, LoopInvariantCodeMotion,
            LowerBlockPointers, AssignLayouts, RemoveRedundantConverts, PipelineLoops, AllocateShared, InsertBarriers,
            LowerToLLVM, TestPrintAxisInfo]


@hookimpl
def polytile_register_passes(registry: Any) -> None:
    for pass_class in core_pass_classes():
        registry.register(pass_class)


@hookimpl
def polytile_register_dialects(registry: Any) -> None:
    from ..dialects import CORE_DIALECTS

    for dialect in CORE_DIALECTS:
        if dialect.name not in registry.dialects:
            registry.register(dialect)
