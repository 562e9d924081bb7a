"""The core's own plugin: registers the generic passes and the tile-level dialects through
the same hooks any third-party plugin uses (the GPU toolkit's passes and the gpu dialect:
:mod:`polytile.gpu.plugin`)."""

from __future__ import annotations

from typing import Any

from ..plugins import hookimpl


def core_pass_classes() -> list[type]:
    """The hardware-neutral passes (the GPU ones are registered by :mod:`polytile.gpu.plugin`)."""
    from .canonicalize import Canonicalize
    from .cse import CommonSubexpressionElimination
    from .dce import DeadCodeElimination
    from .inline import Inliner
    from .licm import LoopInvariantCodeMotion
    from .lower_block_pointers import LowerBlockPointers
    from .print_axis_info import TestPrintAxisInfo

    return [Canonicalize, CommonSubexpressionElimination, DeadCodeElimination, Inliner, LoopInvariantCodeMotion,
            LowerBlockPointers, TestPrintAxisInfo]


@hookimpl
def polytile_register_passes(registry: Any) -> None:
    for pass_class in core_pass_classes():
        registry.register(pass_class)


@hookimpl
def polytile_register_dialects(registry: Any) -> None:
    from ..dialects import TILE_LEVEL_DIALECTS  # the gpu dialect: polytile.gpu.plugin

    for dialect in TILE_LEVEL_DIALECTS:
        if dialect.name not in registry.dialects:
            registry.register(dialect)
