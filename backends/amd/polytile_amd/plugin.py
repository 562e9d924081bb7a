"""Entry point of polytile-amd (group ``polytile.backends``)."""

from polytile.plugins import hookimpl

from .backend import AmdBackend


@hookimpl
def polytile_register_backends(registry):
    registry.register(AmdBackend())


@hookimpl
def polytile_register_passes(registry):
    # Named, so that print_ir_after=emit-amdgcn (or link-hsaco) and `polytile passes` know them.
    from .assemble import LinkHSACO
    from .codegen import EmitAMDGCN

    registry.register(EmitAMDGCN)
    registry.register(LinkHSACO)


@hookimpl
def polytile_register_settings(registry):
    from .settings import SETTINGS

    for setting in SETTINGS:
        registry.register(setting)
