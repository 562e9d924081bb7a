"""What the settings and the failure policy tell the plugin manager.

The settings ``disabled_plugins`` and ``strict_plugins``, read through
``polytile.config`` as found in ``sys.modules`` on every call (tests put a stand-in
configuration there), and how a plugin taking a name of the core's is told apart from
two plugins clashing.  Apart from :mod:`.manager` to keep that module about loading and
calling plugins.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from ..errors import PluginConflictError
from .records import PluginRecord
from .registry import CORE_OWNER


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
