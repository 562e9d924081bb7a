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

    from . import ops, types

    registry.register(Dialect(name="tma", ops=ops.TMA_OPS, types=(types.TensorDescType,),
                              doc="tensor descriptors: N-D arrays accessed in blocks"))


@hookimpl
def polytile_register_builtins(registry):
    from . import language, types

    registry.register(language.make_tensor_descriptor)
    registry.register_value_class(types.TensorDescType, language.tensor_descriptor)


@hookimpl
def polytile_register_passes(registry):
    from .lowering import LowerTensorDescriptors

    registry.register(LowerTensorDescriptors)


@hookimpl
def polytile_configure_pipeline(pipeline, target, options):
    from .lowering import LowerTensorDescriptors

    pipeline.insert_after(LOWERING_ANCHOR, LowerTensorDescriptors())


@hookimpl
def polytile_adapt_argument(value, target):
    from .host import TensorDescriptor

    if not isinstance(value, TensorDescriptor):
        return None
    from .arguments import ADAPTER

    return ADAPTER
