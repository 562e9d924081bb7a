"""What the plugin manager knows about each plugin, and what ``polytile info`` reports.

Plain data and entry-point discovery, kept apart from :mod:`polytile.plugins.manager` so
that the manager module holds only the loading and calling logic.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from ..errors import PluginError
from .registry import CORE_OWNER, PluginInfo

#: Entry point groups searched for plugins, backends first.
ENTRY_POINT_GROUPS: tuple[str, ...] = ("polytile.backends", "polytile.plugins")

LOADED = "loaded"
DISABLED = "disabled"
FAILED = "failed"


class EntryPointLike(Protocol):
    """What the manager needs of an entry point (``importlib.metadata.EntryPoint``)."""

    name: str
    value: str
    group: str

    def load(self) -> Any: ...


class PluginRecord:
    """One plugin as the manager knows it: where it came from and how it fared."""

    def __init__(self, info: PluginInfo, group: str, value: str, version: str = "", *, pluggy_name: str = ""):
        self.info = info
        #: Entry point group, ``"builtin"`` for the core, ``"direct"`` for :meth:`PluginManager.register`.
        self.group = group
        #: What the entry point names (``"polytile_amd.plugin"``); the module names for the core.
        self.value = value
        self.version = version
        self.status = LOADED
        #: One line: why the plugin is disabled or failed.
        self.reason = ""
        #: The hook that raised; empty when the plugin failed before any hook ran.
        self.hook = ""
        #: The error raised when something needs what this plugin would have provided.
        self.error: PluginError | None = None
        self.traceback = ""
        #: Failures that did not take the plugin out (a crashed device probe).
        self.problems: list[str] = []
        self.plugin: Any = None
        self.pluggy_name = pluggy_name

    def __repr__(self) -> str:
        reason = f", reason={self.reason!r}" if self.reason else ""
        return f"PluginRecord({self.info.describe()}, group={self.group!r}, status={self.status!r}{reason})"

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def distribution(self) -> str:
        return self.info.distribution

    @property
    def cache_name(self) -> str:
        if self.info == CORE_OWNER:
            return "polytile"
        return f"{self.info.distribution}:{self.info.name}"


#: What ``polytile info`` shows lives in :mod:`.reports`, imported when asked for: three
#: dataclasses less (~1 ms) in every process that only launches kernels.
_REPORTS = ("BackendReport", "PluginReport", "PolytileInfo")


def __getattr__(name: str) -> Any:
    if name in _REPORTS:
        from . import reports

        return getattr(reports, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _normalize(name: str) -> str:
    # Distribution names compare like pip compares them: "Polytile_AMD" is "polytile-amd".
    return re.sub(r"[-_.]+", "-", name).lower()


def _summary(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _distribution_of(ep: Any) -> tuple[str, str]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "unknown distribution", ""
    name = getattr(dist, "name", None)
    if not name:
        metadata = getattr(dist, "metadata", None)
        name = metadata["Name"] if metadata is not None else ""
    return name or "unknown distribution", getattr(dist, "version", "") or ""


def discover_entry_points() -> list[Any]:
    """Installed entry points of :data:`ENTRY_POINT_GROUPS`, in a deterministic order.

    Sorted by name within a group so that the target chosen on a machine with two kinds
    of device does not depend on the order of ``sys.path``; an entry point seen twice
    (a distribution on ``sys.path`` twice) counts once.
    """
    from importlib.metadata import entry_points

    found: list[Any] = []
    seen: set[tuple[str, str, str, str]] = set()
    for group in ENTRY_POINT_GROUPS:
        eps = sorted(entry_points(group=group), key=lambda ep: (ep.name, _distribution_of(ep)[0]))
        for ep in eps:
            key = (group, ep.name, ep.value, _normalize(_distribution_of(ep)[0]))
            if key not in seen:
                seen.add(key)
                found.append(ep)
    return found
