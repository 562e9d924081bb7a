"""The core's "tile" stage: hardware-neutral clean-up before a backend takes over."""

from __future__ import annotations

from .pipeline import Pipeline, Stage

#: The passes of the tile stage, in order, as pipeline text.
TILE_STAGE = "inline,canonicalize,cse,licm,canonicalize,dce"


def tile_stage() -> Stage:
    from .pipeline import parse_pipeline

    return Stage("tile", parse_pipeline(TILE_STAGE).stages[0].passes)


def build_pipeline(target: object = None, options: object = None, backend: object = None) -> Pipeline:
    """The whole pipeline for ``target``: the tile stage, then the backend's stages, then
    whatever plugins insert, replace or remove at anchors (``polytile_configure_pipeline``)."""
    from ..plugins.manager import get_plugin_manager

    manager = get_plugin_manager()
    pipeline = Pipeline([tile_stage()])
    if backend is not None:
        before = pipeline.snapshot()
        backend.configure_pipeline(pipeline=pipeline, target=target, options=options)  # type: ignore[attr-defined]
        owner = _backend_owner(manager, backend)
        if owner is not None:
            for pass_ in Pipeline.added_since(before, pipeline):
                pipeline.attribute(pass_, owner)
    # Plugin by plugin, so that each pass is attributed to the plugin that inserted it
    # (the pass manager names it if the pass fails), and a hook that raises half way has
    # its edits undone before the plugin is disabled (see PluginManager.call_hook).
    state = {"before": pipeline.snapshot()}
    arguments = {"pipeline": pipeline, "target": target, "options": options}
    for owner, _ in manager.call_each_plugin("polytile_configure_pipeline", arguments,
                                             undo=lambda: pipeline.restore(state["before"])):
        for pass_ in Pipeline.added_since(state["before"], pipeline):
            pipeline.attribute(pass_, owner)
        state["before"] = pipeline.snapshot()
    return pipeline


def _backend_owner(manager: object, backend: object) -> object:
    """The plugin that provides ``backend``, or None when the registry does not know it."""
    try:
        return manager.backends.owner_of(backend.name)  # type: ignore[attr-defined]
    except (KeyError, AttributeError):
        return None
