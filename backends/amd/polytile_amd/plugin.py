"""Entry point of polytile-amd (group ``polytile.backends``)."""

from polytile.plugins import hookimpl

from .backend import AmdBackend


@hookimpl
def polytile_register_backends(registry):
    registry.register(AmdBackend())


@hookimpl
def polytile_register_settings(registry):
    from .settings import SETTINGS

    for setting in SETTINGS:
        registry.register(setting)
