"""Tables keyed by op class (or any hashable key) that remember who registered each entry.

The GPU lowering tables (``LOWERINGS``, ``ELEMENTWISE``, ``CONVERSIONS``,
``LAYOUT_RULES``, scratch and buffer-access declarations), the interpreter's ``RULES``
and the loop ops LICM knows are :class:`OwnedTable` objects.  A registration is
attributed the way :class:`~polytile.plugins.registry.Registry` attributes one: to the
core when a core module makes it, else to the plugin being imported or named by
:meth:`~polytile.plugins.registry.Registry.owned_by`.  So when the plugin manager
withdraws a plugin (disabled, failed, uninstalled in a later process), what it put in
any of these tables leaves with it, and an entry of the core that it had replaced comes
back.

A plugin may replace the core's entry for a key (its own lowering of a core op, say);
two plugins registering one key is a :class:`~polytile.errors.PluginConflictError`, as
for names.  Reads are a dict's: ``table[key]``, ``table.get(key)``, ``key in table``.

Where the core's entries come from is declared with the table: ``providers`` names the
modules whose import registers them (the lowering modules for ``LOWERINGS``, the rule
modules for ``RULES``), and the table imports them itself, once, on its first read
(:meth:`OwnedTable.load_providers`).  So no module imports another only to fill a table,
the table is complete whoever reads it first, and a program that never reads it (an
``interp`` run never reads the GPU tables) never imports them.  A plugin registers its
entries from its own modules or hooks, as before; the order does not matter, since a
plugin's entry stands over the core's whichever came first.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any, Generic, Hashable, Iterable, Iterator, TypeVar

from ..errors import PluginConflictError
from .registry import CORE_OWNER, PluginInfo, Registry

V = TypeVar("V")


def key_name(key: Any) -> str:
    """How a key reads in a message: an op class by its op name, a tuple item by item."""
    if isinstance(key, tuple):
        return "(" + ", ".join(key_name(k) for k in key) + ")"
    if isinstance(key, type):
        name = getattr(key, "name", None)
        return name if isinstance(name, str) else key.__qualname__
    return str(key)


class OwnedTable(Registry, Generic[V]):
    """A dict from keys to entries, each entry with its owner, where a plugin's entry may
    stand over the core's for the same key (see the module docstring)."""

    def __init__(self, kind: str, providers: Iterable[str] = ()):
        """``providers``: the modules (absolute names) whose import registers the core's
        entries, imported on the first read (see the module docstring)."""
        super().__init__(kind)
        self._providers = tuple(providers)
        #: Whether the providers are still to be imported (the reads' one check).
        self._pending = bool(self._providers)
        self._loading = threading.Lock()
        self._loader: int | None = None  # the thread importing the providers
        #: key -> entries, the one in force last: at most the core's, then one plugin's.
        self._layers: dict[Hashable, list[tuple[V, PluginInfo]]] = {}
        #: key -> the entry in force: what reads look at (``get`` is its ``dict.get``:
        #: tables are read in compile and interpreter loops).
        self._current: dict[Hashable, V] = {}
        # Until the providers are loaded, ``get`` loads them first.
        self.get = self._get_after_loading if self._pending else self._current.get  # type: ignore[method-assign]
        #: Bumped on every change, and ``on_change`` callbacks called: caches derived
        #: from the table (the interpreter's plans) are made again.
        self.version = 0
        self._listeners: list[Any] = []

    # -- the core's entries, from the declared providers ----------------------------
    def load_providers(self) -> None:
        """Import the modules that provide the core's entries (once; a no-op after that).

        Reads call it; call it yourself to list a table whole.  A read made while the
        providers are being imported (a provider reading the table) sees the entries
        registered so far; another thread waits until they are all in.
        """
        if not self._pending or self._loader == threading.get_ident():
            return
        with self._loading:
            if not self._pending:  # another thread loaded them while this one waited
                return
            self._loader = threading.get_ident()
            try:  # a broken install, an interrupted import: still pending, the next read tries again
                for module in self._providers:
                    importlib.import_module(module)
            finally:
                self._loader = None
            self._pending = False
            self.get = self._current.get  # type: ignore[method-assign]

    @property
    def providers(self) -> tuple[str, ...]:
        """The modules that provide the core's entries."""
        return self._providers

    def _get_after_loading(self, key: Hashable, default: Any = None) -> Any:
        self.load_providers()
        return self._current.get(key, default)

    def on_change(self, callback: Any) -> Any:
        """Call ``callback()`` after every change (a registration or a withdrawal)."""
        self._listeners.append(callback)
        return callback

    def _changed(self, key: Hashable) -> None:
        layers = self._layers.get(key)
        if layers:
            self._entries[key] = layers[-1]
            self._current[key] = layers[-1][0]
        else:
            self._layers.pop(key, None)
            self._entries.pop(key, None)
            self._current.pop(key, None)
        self.version += 1
        for callback in self._listeners:
            callback()

    # -- registering ---------------------------------------------------------------
    def add(self, name: Hashable, obj: V, owner: PluginInfo | None = None) -> V:  # type: ignore[override]
        owner, scope = self._registration_owner(owner)
        layers = self._layers.setdefault(name, [])
        for index, (held, held_by) in enumerate(layers):
            if held_by == owner:  # an owner registering again replaces its own entry
                if held is obj:  # the same again (a hook that runs on every compile): no change
                    if scope is not None:
                        scope.remember(self, name, obj)
                    return obj
                layers[index] = (obj, owner)
                break
        else:
            plugins = [held_by for _, held_by in layers if held_by != CORE_OWNER]
            if plugins and owner != CORE_OWNER:
                conflict = PluginConflictError(
                    f"{self.kind} of '{key_name(name)}' is registered twice: by {plugins[0].describe()} and by "
                    f"{owner.describe()}; uninstall or disable one of them (setting 'disabled_plugins')",
                    plugin=owner.name, distribution=owner.distribution)
                conflict.owners, conflict.kind, conflict.name = (plugins[0], owner), self.kind, key_name(name)
                raise conflict
            # The core's entry stays under a plugin's, whichever came first.
            layers.insert(0, (obj, owner)) if owner == CORE_OWNER else layers.append((obj, owner))
        self._changed(name)
        if scope is not None:
            scope.remember(self, name, obj)
        return obj

    def __setitem__(self, key: Hashable, value: V) -> None:
        self.add(key, value)

    def remove_owned_by(self, owner: PluginInfo) -> list[str]:
        """Drop every entry of ``owner``; where it stood over the core's, the core's is back."""
        removed = []
        for key in list(self._layers):
            layers = [entry for entry in self._layers[key] if entry[1] != owner]
            if len(layers) == len(self._layers[key]):
                continue
            removed.append(key)
            self._layers[key] = layers
            self._changed(key)
        return removed

    def entry_of(self, key: Hashable, owner: PluginInfo) -> V | None:
        """``owner``'s entry for ``key`` (in force or under a plugin's), or None."""
        if self._pending:
            self.load_providers()
        return next((obj for obj, held_by in self._layers.get(key, ()) if held_by == owner), None)

    def remove(self, key: Hashable, owner: PluginInfo) -> bool:
        """Drop ``owner``'s entry for ``key``, if it has one (the one under it is back)."""
        layers = self._layers.get(key, [])
        kept = [entry for entry in layers if entry[1] != owner]
        if len(kept) == len(layers):
            return False
        self._layers[key] = kept
        self._changed(key)
        return True

    def pop(self, key: Hashable, *default: Any) -> Any:
        """Drop the entry in force for ``key`` (the one under it, if any, is back) and
        return it; as ``dict.pop``, ``default`` when there is none."""
        if self._pending:
            self.load_providers()
        layers = self._layers.get(key)
        if not layers:
            if default:
                return default[0]
            raise KeyError(key)
        value, _ = layers.pop()
        self._changed(key)
        return value

    def __delitem__(self, key: Hashable) -> None:
        self.pop(key)

    def holds(self, name: Hashable, obj: Any) -> bool:
        # Whether this object is registered: the providers' entries are other objects
        # (the manager asks this of a plugin's entries without filling the table).
        return any(entry is obj for entry, _ in self._layers.get(name, ()))

    # -- reading, as a dict --------------------------------------------------------
    def __getitem__(self, key: Hashable) -> V:
        if self._pending:
            self.load_providers()
        return self._current[key]

    def __contains__(self, key: object) -> bool:
        if self._pending:
            self.load_providers()
        return key in self._current

    def find(self, name: Hashable) -> V | None:  # type: ignore[override]
        if self._pending:
            self.load_providers()
        return self._current.get(name)

    def keys(self) -> list[Hashable]:
        if self._pending:
            self.load_providers()
        return list(self._current)

    def values(self) -> list[V]:
        if self._pending:
            self.load_providers()
        return list(self._current.values())

    def entries(self) -> list[tuple[Hashable, V]]:
        """``(key, entry in force)`` pairs, as ``dict.items()``."""
        if self._pending:
            self.load_providers()
        return list(self._current.items())

    def __iter__(self) -> Iterator[Hashable]:  # type: ignore[override]
        if self._pending:
            self.load_providers()
        return iter(list(self._current))

    def __len__(self) -> int:
        if self._pending:
            self.load_providers()
        return len(self._current)

    def owner_of(self, name: Hashable) -> PluginInfo:  # type: ignore[override]
        if self._pending:
            self.load_providers()
        return super().owner_of(name)  # type: ignore[arg-type]

    def items(self) -> list[tuple[Hashable, V, PluginInfo]]:  # type: ignore[override]
        if self._pending:
            self.load_providers()
        return super().items()  # type: ignore[return-value]


__all__ = ["OwnedTable", "key_name"]
