"""Entry point of polytile-warpspec (group ``polytile.plugins``): the hook implementations."""

from __future__ import annotations

from polytile.plugins import hookimpl

#: Where the split runs: after async-dots, when the loop's rings, barriers and in-flight
#: dots are in place (CSE and DCE after it clean up what the split leaves).
SPLIT_ANCHOR = "distribute/async-dots"
#: Where the loops asking for it are noted: every pipeline has the tile stage's inlining.
NOTE_ANCHOR = "tile/inline"
#: Where the second dot of a loop asking for the overlap is rotated: before layouts are
#: assigned (the rotated loop's new ops get theirs like any other) and loads pipelined.
OVERLAP_ANCHOR = "distribute/assign-layouts"


@hookimpl
def polytile_register_dialects(registry):
    from polytile.ir.registry import Dialect

    from .ops import WS_OPS

    registry.register(Dialect(name="ws", ops=WS_OPS,
                              doc="warp specialization: regions run at once by different warp groups"))


@hookimpl
def polytile_register_passes(registry):
    from .overlap import OverlapDots
    from .partition import WarpSpecializeLoops
    from .report import NoteWarpSpecialize

    registry.register(WarpSpecializeLoops)
    registry.register(NoteWarpSpecialize)
    registry.register(OverlapDots)


@hookimpl
def polytile_register_settings(registry):
    from .settings import SETTINGS

    for setting in SETTINGS:
        registry.register(setting)


@hookimpl
def polytile_configure_pipeline(pipeline, target, options):
    from .partition import WarpSpecializeLoops
    from .report import NoteWarpSpecialize

    if NOTE_ANCHOR in pipeline.anchors():
        pipeline.insert_after(NOTE_ANCHOR, NoteWarpSpecialize())
    if OVERLAP_ANCHOR in pipeline.anchors():
        from .overlap import OverlapDots

        pipeline.insert_before(OVERLAP_ANCHOR, OverlapDots())
    if SPLIT_ANCHOR in pipeline.anchors():
        from . import lowering  # noqa: F401 - registers the op's GPU lowering (owned by this plugin)

        pipeline.insert_after(SPLIT_ANCHOR, WarpSpecializeLoops())


@hookimpl
def polytile_cache_key(target, options):
    from polytile import config

    # The sources name the rewrite (an edited checkout must not reuse kernels), the
    # settings the registers it asks for.
    return (f"polytile-warpspec={_source_hash()};producer={config.get('warpspec_producer_registers')};"
            f"consumer={config.get('warpspec_consumer_registers')};pingpong={config.get('warpspec_pingpong')};"
            f"overlap={config.get('warpspec_overlap')}")


_SOURCE_HASH: list = []


def _source_hash() -> str:
    if not _SOURCE_HASH:
        import hashlib
        from pathlib import Path

        digest = hashlib.sha256()
        for path in sorted(Path(__file__).parent.glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
        _SOURCE_HASH.append(digest.hexdigest()[:16])
    return _SOURCE_HASH[0]
