"""What ``polytile info`` reports about the plugins and the backends, as plain data.

Apart from :mod:`.records` so that a process that only launches kernels does not create
these classes (``polytile.plugins.records`` and ``.manager`` still provide the names).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .registry import PluginInfo


@dataclass
class BackendReport:
    name: str
    description: str
    provided_by: PluginInfo
    architectures: tuple[str, ...]
    default_architecture: str | None
    devices: list[str]
    #: Why there is no device; empty when there are devices.
    no_device_reason: str = ""
    probe_failed: bool = False


@dataclass
class PluginReport:
    name: str
    distribution: str
    version: str
    group: str
    value: str
    status: str
    reason: str = ""
    hook: str = ""
    problems: list[str] = field(default_factory=list)
    #: What the plugin registered, by registry kind: ``{"backend": ["amd"], "pass": [...]}``.
    provides: dict[str, list[str]] = field(default_factory=dict)
    traceback: str = ""


@dataclass
class PolytileInfo:
    """Everything ``polytile info`` shows, as plain data."""

    version: str
    plugins: list[PluginReport]
    backends: list[BackendReport]
    #: Names in the setting ``disabled_plugins`` that match no installed plugin.
    unknown_disabled: list[str]
    #: Set when loading the plugins stopped (two plugins define the same op at import).
    load_error: str = ""
    #: Set when the backends could not be listed (two plugins claim one backend).
    backends_error: str = ""
    target: str = ""
    target_reason: str = ""
    target_error: str = ""
