"""Entry point of polytile-tma (group ``polytile.plugins``): the hook implementations.

Each hook imports what it registers only when polytile asks (the first ``!tma.desc`` the
parser meets, the first ``pl.make_tensor_descriptor`` the frontend resolves), so a
program that never uses descriptors pays for nothing but this module.
"""

from __future__ import annotations

from polytile.plugins import hookimpl

#: Where the descriptor lowering runs: right after inlining, so that every target (the
#: interpreter included) sees only the core's ops, whatever helper made the descriptor.
LOWERING_ANCHOR = "tile/inline"


@hookimpl
def polytile_register_dialects(registry):
    from polytile.ir.registry import Dialect

    from . import bulk, ops, types, workspace

    registry.register(Dialect(name="tma", ops=ops.TMA_OPS + bulk.BULK_OPS + workspace.WORKSPACE_OPS,
                              types=(types.TensorDescType, types.TensorMapType),
                              doc="tensor descriptors: N-D arrays accessed in blocks, and Hopper's bulk copies"))


@hookimpl
def polytile_register_builtins(registry):
    from . import language, types

    from . import workspace

    registry.register(language.make_tensor_descriptor)
    registry.register_value_class(types.TensorDescType, language.tensor_descriptor)
    # Triton's first on-device TMA API (the workspace form; see .workspace).
    registry.register(workspace.experimental_device_tensormap_create2d, namespace="extra.cuda")
    registry.register(workspace.experimental_tensormap_fenceproxy_acquire, namespace="extra.cuda")
    registry.register(workspace._experimental_descriptor_load)
    registry.register(workspace._experimental_descriptor_store)


@hookimpl
def polytile_register_passes(registry):
    from .lowering import LowerTensorDescriptors
    from .staging import StageBulkLoads

    registry.register(LowerTensorDescriptors)
    registry.register(StageBulkLoads)


@hookimpl
def polytile_configure_pipeline(pipeline, target, options):
    from .lowering import LowerTensorDescriptors
    from .staging import STAGING_ANCHOR, StageBulkLoads, has_bulk_copies, has_device_maps

    bulk = has_bulk_copies(target)
    pipeline.insert_after(LOWERING_ANCHOR, LowerTensorDescriptors(device_maps=has_device_maps(target)))
    if bulk:
        # Host descriptors bring tensor maps here: their loads and stores become bulk
        # copies (lower-tensor-descriptors imports .hopper, which registers how
        # pipeline-loops fills its rings with them and their lowering, when it makes the
        # first), and stage-bulk-loads copies the rest through shared memory.
        pipeline.insert_after(STAGING_ANCHOR, StageBulkLoads())


@hookimpl
def polytile_adapt_argument(value, target):
    from .host import TensorDescriptor

    if not isinstance(value, TensorDescriptor):
        return None
    from .arguments import ADAPTER

    return ADAPTER


@hookimpl
def polytile_cache_key(target, options):
    # The distribution's version alone would let an edited checkout (``pip install -e``)
    # reuse kernels lowered by the code before the edit: the sources name the lowering.
    return f"polytile-tma={_source_hash()}"


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
