"""polytile's plugin system, built on pluggy.

Plugins mark hook implementations with :data:`hookimpl`::

    from polytile.plugins import hookimpl

    @hookimpl
    def polytile_register_passes(registry):
        registry.register(MyPass)

Every hook is documented in :mod:`polytile.plugins.hookspecs`.
"""

import pluggy

PROJECT_NAME = "polytile"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

__all__ = ["hookimpl", "hookspec", "PROJECT_NAME"]
