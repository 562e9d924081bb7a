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
    # Every compilation, on every target: run the pass right after the core's CSE in
    # the tile stage, while the IR is still hardware neutral.  "tile/cse" names the tile
    # stage's CSE; GPU backends run CSE again in their "distribute" stage
    # ("distribute/cse"), and a bare "cse" would mean the first, the same one.
    pipeline.insert_after("tile/cse", MulToShift())


@hookimpl
def polytile_cache_key(target, options):
    # The plugin's name and version enter the cache key automatically; return
    # anything else that changes the code this plugin produces.
    return f"max-shift={MulToShift.max_shift}"
