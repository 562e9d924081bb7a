"""Name-keyed registries that remember which plugin registered what.

Registries are handed to the registration hooks.  The plugin manager sets the current
owner around each plugin's hook call, so a clash can name both distributions and a
plugin that fails half way can have its entries removed.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Generic, Iterator, TypeVar

from .. import __version__
from ..errors import PluginConflictError, UnknownNameError

T = TypeVar("T")


@dataclass(frozen=True)
class PluginInfo:
    """Who provides something: the plugin's name, its distribution and version."""

    name: str
    distribution: str
    version: str = ""

    def describe(self) -> str:
        version = f" {self.version}" if self.version else ""
        return f"plugin '{self.name}' (distribution '{self.distribution}'{version})"


#: The owner of everything the core registers itself.
CORE_OWNER = PluginInfo("core", "polytile", __version__)


class Registry(Generic[T]):
    """A mapping from names to registered objects, each with the plugin that owns it."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, tuple[T, PluginInfo]] = {}
        self._owner: PluginInfo = CORE_OWNER

    @contextlib.contextmanager
    def owned_by(self, owner: PluginInfo) -> Iterator[None]:
        """Attribute every registration inside the ``with`` block to ``owner``."""
        previous, self._owner = self._owner, owner
        try:
            yield
        finally:
            self._owner = previous

    def add(self, name: str, obj: T, owner: PluginInfo | None = None) -> T:
        owner = owner or self._owner
        existing = self._entries.get(name)
        if existing is not None and existing[0] is not obj:
            first = existing[1]
            raise PluginConflictError(
                f"{self.kind} '{name}' is registered twice: by {first.describe()} and by {owner.describe()}; "
                "uninstall or disable one of them (setting 'disabled_plugins')",
                plugin=owner.name,
                distribution=owner.distribution,
            )
        self._entries[name] = (obj, owner)
        return obj

    def get(self, name: str, where: str = "") -> T:
        entry = self._entries.get(name)
        if entry is None:
            raise UnknownNameError(self.kind, name, self._entries, where)
        return entry[0]

    def find(self, name: str) -> T | None:
        entry = self._entries.get(name)
        return None if entry is None else entry[0]

    def owner_of(self, name: str) -> PluginInfo:
        return self._entries[name][1]

    def remove_owned_by(self, owner: PluginInfo) -> list[str]:
        """Drop everything ``owner`` registered (after its hook failed half way)."""
        names = [n for n, (_, o) in self._entries.items() if o == owner]
        for name in names:
            del self._entries[name]
        return names

    def names(self) -> list[str]:
        return list(self._entries)

    def items(self) -> list[tuple[str, T, PluginInfo]]:
        return [(n, obj, owner) for n, (obj, owner) in self._entries.items()]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[T]:
        return (obj for obj, _ in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)
