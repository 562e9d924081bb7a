"""The hook implementations polytile calls (found through the entry point)."""

from __future__ import annotations

from polytile.plugins import hookimpl

from .mul_to_shift import MulToShift


@hookimpl
def polytile_register_passes(registry):
    # Makes "mul-to-shift" usable in pipeline text: polytile opt -p mul-to-shift
    registry.register(MulToShift)


@hookimpl
def polytile_configure_pipeline(pipeline, target, options):
    # Every compilation: run the pass right after the core's CSE, while the IR is
    # still hardware neutral.  "cse" is a named anchor of the core's tile stage.
    pipeline.insert_after("cse", MulToShift())


@hookimpl
def polytile_cache_key(target, options):
    # The plugin's name and version enter the cache key automatically; return
    # anything else that changes the code this plugin produces.
    return f"max-shift={MulToShift.max_shift}"
