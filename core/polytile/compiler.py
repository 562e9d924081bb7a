"""The compile driver: choose the target, build its pipeline, run it.

This is the piece between a kernel in core IR and a backend: it asks the plugin manager
for the target (the configuration chain of ARCHITECTURE.md), builds the pipeline (the
core's tile stage, the backend's stages, plugins' insertions at anchors) and runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .backend import Backend, BackendOptions
from .passes.pass_base import PassContext
from .passes.pipeline import Pipeline
from .target import Target


@dataclass
class CompileResult:
    module: Any
    target: Target
    target_reason: str
    backend: Backend
    options: BackendOptions
    pipeline: Pipeline
    context: PassContext = field(repr=False)
    #: The compile cache key's components: plugin names and versions, toolchains.
    cache_key: list[str] = field(default_factory=list)

    @property
    def artifacts(self) -> dict[str, Any]:
        """What the backend's stages made besides the IR (``llvm_ir``, ``ptx``, ``cubin``...)."""
        return getattr(self.context, "artifacts", {})

    @property
    def binaries(self) -> dict[str, bytes]:
        """The artifacts a launcher loads (``{"cubin": b"..."}``): the bytes-valued ones.
        The runtime keeps them in the on-disk cache."""
        return {k: v for k, v in self.artifacts.items() if isinstance(v, (bytes, bytearray))}

    @property
    def metadata(self) -> dict[str, Any]:
        """JSON-able facts about the kernel a launcher needs (``kernel_name``,
        ``num_warps``, ``shared_bytes``): the artifacts that are plain numbers, plus the
        kernel name."""
        return {k: v for k, v in self.artifacts.items()
                if k == "kernel_name" or (isinstance(v, (int, float)) and not isinstance(v, bool))}


def compile_module(module: Any, target: "str | Target | None" = None, label: str = "module",
                   **options: Any) -> CompileResult:
    """Run the whole pipeline for ``target`` over ``module`` (changed in place)."""
    from .ir.verifier import verify
    from .passes.default_pipeline import build_pipeline
    from .passes.manager import PassManager
    from .plugins.manager import get_plugin_manager

    manager = get_plugin_manager()
    choice = manager.choose_target(target)
    backend, resolved = manager.backends.resolve(choice.target)
    parsed = backend.parse_options(options)
    verify(module)
    pipeline = build_pipeline(target=resolved, options=parsed, backend=backend)
    context = PassContext(target=resolved, options=parsed)
    PassManager(pipeline).run(module, context, label=label)
    key = manager.cache_key_components(resolved, parsed) + [f"{k}=={v}" for k, v in sorted(backend.versions().items())]
    return CompileResult(module, resolved, str(choice.reason), backend, parsed, pipeline, context, key)
