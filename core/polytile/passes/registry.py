"""The pass registry: every pass by name, with the plugin that provides it.

The core's own passes and every plugin's arrive through the ``polytile_register_passes``
hook; :func:`pass_registry` runs it once, lazily.
"""

from __future__ import annotations

from ..errors import UnknownNameError
from ..plugins.registry import Registry
from .pass_base import Pass, check_pass_class


class PassRegistry(Registry[type]):
    def __init__(self) -> None:
        super().__init__("pass")

    def register(self, pass_class: type) -> type:
        """Add a pass class (a @dataclass subclass of Pass with a kebab-case name)."""
        check_pass_class(pass_class)
        return self.add(pass_class.name, pass_class)

    def create(self, name: str, options: dict[str, str] | None = None, where: str = "") -> Pass:
        """A configured instance of the pass ``name``; unknown names and options list
        close matches."""
        return self.get(name, where).from_options(options or {}, where)

    def get(self, name: str, where: str = "") -> type:
        try:
            return super().get(name, where)
        except UnknownNameError as exc:
            notes = _unavailable_plugins_note()
            if notes:
                exc.args = (exc.args[0] + notes,)
            raise


def _unavailable_plugins_note() -> str:
    """A pass nobody registered may belong to a plugin that failed or is disabled: say so,
    so the user does not hunt for a typo that is not there."""
    from ..plugins.manager import get_plugin_manager

    lines = []
    for record in get_plugin_manager().plugins():
        if record.status == "failed":
            lines.append(f"\nnote: {record.info.describe()} failed to load, so its passes are missing: {record.reason}")
        elif record.status == "disabled":
            lines.append(f"\nnote: {record.info.describe()} is disabled ({record.reason})")
    return "".join(lines)


_REGISTRY: PassRegistry | None = None


def pass_registry() -> PassRegistry:
    """The registry of every installed pass (the plugins are loaded on first use)."""
    global _REGISTRY
    if _REGISTRY is None:
        from ..plugins.manager import get_plugin_manager

        registry = PassRegistry()
        get_plugin_manager().run_registration("polytile_register_passes", registry)
        _REGISTRY = registry
    return _REGISTRY


def reset_pass_registry() -> None:
    """Forget the registry (tests that install or disable plugins)."""
    global _REGISTRY
    _REGISTRY = None
