"""The compile driver: choose the target, build its pipeline, run it.

This is the piece between a kernel in core IR and a backend: it asks the plugin manager
for the target (the configuration chain of ARCHITECTURE.md), builds the pipeline (the
core's tile stage, the backend's stages, plugins' insertions at anchors) and runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import MutableMapping
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
    #: With ``compile_module(record_stages=True)``: the IR before the pipeline (stage
    #: ``"input"``) and after each stage, with the artifacts each made (``StageOutput``).
    stages: list[Any] = field(default_factory=list, repr=False)
    #: Plugins that failed during this compile (disabled, one warning each): the result
    #: was made without them, so a cache key naming them must not be stored with it.
    plugins_failed: list[str] = field(default_factory=list)

    @property
    def artifacts(self) -> "MutableMapping[str, Any]":
        """Everything the stages left besides the IR, by key (``"llvm_ir"``, ``"ptx"``,
        ``"cubin"``, ``"llvm_module"``, ``"num_warps"``...): see :class:`PassContext`.
        An artifact a backend makes only when asked (AMDGCN assembly) is made when read
        here (:mod:`polytile.passes.artifacts`)."""
        from .passes.artifacts import ArtifactsView

        return ArtifactsView(self.context.artifacts)

    @property
    def binaries(self) -> dict[str, bytes]:
        """The artifacts that are bytes (``{"cubin": b"..."}``, ``{"hsaco": ...}``): what
        a launcher loads; empty for the interpreter."""
        return {key: value for key, value in self.context.artifacts.items() if isinstance(value, bytes)}

    @property
    def metadata(self) -> dict[str, Any]:
        """The artifacts that are JSON values and not files (``kernel_name``,
        ``num_warps``, ``shared_bytes`` and what a backend adds): what a launcher needs
        besides the binary, kept in the on-disk cache with it."""
        from .passes.instrumentation import artifact_extension

        return {key: value for key, value in self.context.artifacts.items()
                if _is_json(value) and artifact_extension(key, value) is None}


def _is_json(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False


def compile_module(module: Any, target: "str | Target | None" = None, label: str = "module", *,
                   record_stages: bool = False, target_source: str = "target= argument",
                   **options: Any) -> CompileResult:
    """Run the whole pipeline for ``target`` over ``module`` (changed in place).

    ``record_stages``: keep the IR before the pipeline and after each stage, with the
    artifacts each stage made, in :attr:`CompileResult.stages` (ahead-of-time compiles
    and tools that show every stage ask for it; it prints the IR once per stage)."""
    from .ir.verifier import verify
    from .passes.default_pipeline import build_pipeline
    from .passes.instrumentation import StageRecorder, instrumentation_from_config
    from .passes.manager import PassManager
    from .plugins.manager import get_plugin_manager
    from .warp_specialize import hinted_loops, record_unspecialised

    manager = get_plugin_manager()
    failed_before = _failed_plugins(manager)
    choice = manager.choose_target(target, source=target_source)
    backend, resolved = manager.backends.resolve(choice.target)
    parsed = backend.parse_options(options)
    verify(module)
    pipeline = build_pipeline(target=resolved, options=parsed, backend=backend)
    context = PassContext(target=resolved, options=parsed)
    instruments = instrumentation_from_config(artifacts=context.artifacts)
    recorder = StageRecorder(context.artifacts) if record_stages else None
    if recorder is not None:
        instruments.append(recorder)
    hinted = hinted_loops(module)  # before the pipeline, which may rebuild loops without their hints
    PassManager(pipeline, instruments).run(module, context, label=label)
    _add_plugin_metadata(manager, label, resolved, context)
    record_unspecialised(hinted, context.artifacts)
    key = manager.cache_key_components(resolved, parsed) + [f"{k}=={v}" for k, v in sorted(backend.versions().items())]
    failed = [name for name in _failed_plugins(manager) if name not in failed_before]
    return CompileResult(module, resolved, str(choice.reason), backend, parsed, pipeline, context, key,
                         recorder.stages if recorder is not None else [], failed)


def _failed_plugins(manager: Any) -> list[str]:
    return [record.info.describe() for record in manager.plugins() if record.status == "failed"]


def _add_plugin_metadata(manager: Any, kernel_name: str, target: Target, context: PassContext) -> None:
    """Let plugins add to the compiled kernel's metadata (hook ``polytile_compile_metadata``):
    new JSON keys join the artifacts; changing or removing the core's and the backend's
    keys is refused."""
    from .errors import PolytileError
    from .passes.instrumentation import artifact_extension, register_artifact_extension

    before = {key: value for key, value in context.artifacts.items()
              if _is_json(value) and artifact_extension(key, value) is None}
    metadata = dict(before)
    # Plugin by plugin: one that raises is disabled (PluginManager.call_hook) and what it
    # added before raising is taken back.
    kept = dict(metadata)
    arguments = {"kernel_name": kernel_name, "target": target, "metadata": metadata}
    for _ in manager.call_each_plugin("polytile_compile_metadata", arguments,
                                      undo=lambda: (metadata.clear(), metadata.update(kept))):
        kept = dict(metadata)
    for key, value in before.items():
        if metadata.get(key, _MISSING) != value:
            raise PolytileError(f"kernel '{kernel_name}': a polytile_compile_metadata hook changed or removed the "
                                f"metadata entry '{key}'; plugins may only add entries (prefixed with their name)")
    for key, value in metadata.items():
        if key not in before:
            if not isinstance(key, str) or not _is_json(value):
                raise PolytileError(f"kernel '{kernel_name}': a polytile_compile_metadata hook added '{key}' = "
                                    f"{value!r}, which is not a JSON value (metadata is stored in the on-disk cache)")
            if isinstance(value, str):
                register_artifact_extension(key, None)  # a value, not a text file
            context.artifacts[key] = value


_MISSING = object()
