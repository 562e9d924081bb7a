"""The GPU toolkit's own plugin: registers the passes of the stages every GPU backend
runs (``distribute``, ``memory``, ``llvm``: see :mod:`polytile.gpu.pipeline`) and the
``gpu`` dialect with its layout attributes, through the same hooks any third-party plugin
uses.  Builtin, owned by the core; the passes' modules
are imported when the pass registry is first asked for (the dialect when IR names
something not registered yet), not at ``import polytile``."""

from __future__ import annotations

from typing import Any

from ..plugins import hookimpl


def gpu_pass_classes() -> list[type]:
    from .allocation import AllocateShared
    from .async_dots import AsyncDots
    from .hoist_operands import HoistDotOperands
    from .distribute import AssignLayouts, RemoveRedundantConverts
    from .lowering import LowerToLLVM
    from .membar import InsertBarriers
    from .pipelining import PipelineLoops
    from .unbatch_dots import UnbatchDots

    return [UnbatchDots, AssignLayouts, RemoveRedundantConverts, PipelineLoops, HoistDotOperands, AsyncDots, AllocateShared, InsertBarriers, LowerToLLVM]


@hookimpl
def polytile_register_passes(registry: Any) -> None:
    for pass_class in gpu_pass_classes():
        registry.register(pass_class)


@hookimpl
def polytile_register_dialects(registry: Any) -> None:
    from ..dialects.gpu import GPU_DIALECT
    from .layouts import LAYOUT_ATTRIBUTES

    if GPU_DIALECT.name not in registry.dialects:
        registry.register(GPU_DIALECT)
    for attribute in LAYOUT_ATTRIBUTES:  # registered by importing .layouts, unless a test took them out
        if attribute.attribute_name not in registry.attributes:
            registry.attributes.add(attribute.attribute_name, attribute)
