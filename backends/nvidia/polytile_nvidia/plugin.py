"""Entry point of polytile-nvidia (group ``polytile.backends``)."""

from polytile.plugins import hookimpl

from .backend import NvidiaBackend


@hookimpl
def polytile_register_backends(registry):
    registry.register(NvidiaBackend())


@hookimpl
def polytile_register_passes(registry):
    from .codegen import EmitPTX, PtxToCubin
    from .loop_offsets import KeepLoopOffsets

    registry.register(EmitPTX)
    registry.register(KeepLoopOffsets)
    registry.register(PtxToCubin)


@hookimpl
def polytile_register_settings(registry):
    from .settings import SETTINGS

    for setting in SETTINGS:
        registry.register(setting)
