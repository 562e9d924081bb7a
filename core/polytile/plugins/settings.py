"""What the settings and the failure policy tell the plugin manager, and the registry of
settings that plugins declare through ``polytile_register_settings``.

The settings ``disabled_plugins`` and ``strict_plugins``, read through
``polytile.config`` as found in ``sys.modules`` on every call (tests put a stand-in
configuration there), and how a plugin taking a name of the core's is told apart from
two plugins clashing.  Apart from :mod:`.manager` to keep that module about loading and
calling plugins.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Mapping

from ..errors import PluginConflictError
from .records import LOADED, PluginRecord
from .registry import CORE_OWNER, PluginInfo, Registry


def _clean_names(names: Any) -> tuple[str, ...]:
    if isinstance(names, str):
        names = names.split(",")
    return tuple(n.strip() for n in names if n and n.strip())


def _config() -> Any:
    """``polytile.config``, looked up in ``sys.modules`` on every call (not imported
    once) so that tests can put a stand-in configuration there; None without one."""
    config = sys.modules.get("polytile.config")
    if config is None:
        try:
            config = importlib.import_module("polytile.config")
        except ModuleNotFoundError as exc:
            if exc.name != "polytile.config":
                raise
            return None
    return config


def _configured_disabled() -> tuple[str, ...]:
    """The setting ``disabled_plugins``; raises ConfigError for an invalid value."""
    config = _config()
    # The configuration has checked the names already (no blanks, no commas).
    return tuple(config.get("disabled_plugins") or ()) if config is not None else ()


def strict_plugins() -> bool:
    """The setting ``strict_plugins``: a failing plugin raises instead of being disabled."""
    config = _config()
    return bool(config.get("strict_plugins")) if config is not None else False


def _takes_a_core_name(exc: BaseException, record: PluginRecord) -> bool:
    """Whether ``exc`` is ``record``'s plugin registering a name the core registered."""
    owners = getattr(exc, "owners", None)
    return (isinstance(exc, PluginConflictError) and owners is not None and owners[0] == CORE_OWNER
            and record.info != CORE_OWNER)


def _core_name_reason(exc: BaseException) -> str:
    kind, name = getattr(exc, "kind", "name"), getattr(exc, "name", "?")
    return (f"it registers {kind} '{name}', which polytile itself provides ({CORE_OWNER.describe()}); "
            f"a plugin's {kind} needs a name of its own (prefix it with the plugin's name)")


# -- the settings registry ---------------------------------------------------------------


#: Who declared each plugin setting met in this process, kept after the plugin is
#: disabled, so that asking for the setting can name the plugin and why it is missing.
_DECLARED_BY: dict[str, tuple[PluginInfo, Any]] = {}


class SettingRegistry(Registry[Any]):
    """Every setting: the core's (:data:`polytile.config.SETTINGS`, owned by the core) and
    those plugins declare with ``polytile_register_settings``.

    A plugin's setting leaves with the plugin (the manager removes what a disabled or
    failed plugin registered); a name or an environment variable of another setting is a
    conflict naming both owners.
    """

    def __init__(self, core: Mapping[str, Any]):
        super().__init__("setting")
        for name, setting in core.items():
            self.add(name, setting, CORE_OWNER)

    def register(self, setting: Any) -> Any:
        """Declare ``setting`` (a :class:`polytile.config.Setting`) for the current plugin."""
        from ..config import Setting

        if not isinstance(setting, Setting):
            raise TypeError(f"registry.register() takes a polytile.config.Setting, got {type(setting).__qualname__}")
        if not setting.env or not all(v.startswith("POLYTILE_") for v in setting.env):
            raise ValueError(f"setting '{setting.name}' must be read from POLYTILE_* environment variables, "
                             f"got {setting.env!r}")
        self.add(setting.name, setting)
        owner = self.owner_of(setting.name)
        for other, declared, other_owner in self.items():
            if other != setting.name and set(declared.env) & set(setting.env):
                self._entries.pop(setting.name)
                shared = ", ".join(sorted(set(declared.env) & set(setting.env)))
                conflict = PluginConflictError(
                    f"environment variable {shared} is read by setting '{other}' of {other_owner.describe()} and by "
                    f"setting '{setting.name}' of {owner.describe()}; uninstall or disable one of them "
                    "(setting 'disabled_plugins')", plugin=owner.name, distribution=owner.distribution)
                conflict.owners, conflict.kind, conflict.name = (other_owner, owner), "environment variable", shared
                raise conflict
        if owner != CORE_OWNER:
            _DECLARED_BY[setting.name] = (owner, setting)
        return setting


def why_missing(name: str = "", variable: str = "") -> str:
    """Why the setting ``name`` (or the setting reading environment ``variable``) is not in
    the registry although a plugin may declare it: the plugin that declared it earlier in
    this process (or, not knowing, every plugin that is not loaded) and why that one is not
    loaded, as a clause starting with ``"; "``.  Empty when every plugin is loaded."""
    from .manager import get_plugin_manager

    try:
        records = get_plugin_manager().plugins()
    except Exception:  # the plugins are broken: the caller's error must still come out
        return ""
    missing = [r for r in records if r.status != LOADED]
    for declared_name, (owner, setting) in _DECLARED_BY.items():
        if declared_name == name or (variable and variable in setting.env):
            for record in missing:
                if record.info == owner:
                    what = f"read by setting '{declared_name}' of" if variable else "it is a setting of"
                    return f"; {what} {owner.describe()}, which is not loaded: {record.reason}"
    if not missing:
        return ""
    which = "; ".join(f"{r.info.describe()}: {r.reason}" for r in missing)
    return f"; it may belong to a plugin that is not loaded ({which})"


def load_plugin_settings(registry: SettingRegistry) -> SettingRegistry:
    """``registry`` with the settings of every loaded plugin (their hooks run once per
    plugin manager; a manager that replaces another updates the same registry)."""
    from .manager import get_plugin_manager

    return get_plugin_manager().run_registration("polytile_register_settings", registry)
