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

    pipeline = Pipeline([tile_stage()])
    if backend is not None:
        backend.configure_pipeline(pipeline=pipeline, target=target, options=options)  # type: ignore[attr-defined]
    get_plugin_manager().call_hook("polytile_configure_pipeline", pipeline=pipeline, target=target, options=options)
    return pipeline
