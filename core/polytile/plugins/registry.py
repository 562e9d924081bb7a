"""Name-keyed registries that remember which plugin registered what.

Registries are handed to the registration hooks.  The plugin manager sets the current
owner around each plugin's hook call, so a clash can name both distributions and a
plugin that fails half way can have its entries removed.

Some registrations happen when a plugin's module is imported, not in a hook: an op class
is registered by ``define_op`` when the class statement runs.  The manager imports each
plugin inside :func:`importing_plugin`, and every registry attributes what is registered
during that import to the plugin, whichever registry it is and whether or not it existed
before the import began.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from typing import Any, Generic, Iterator, NamedTuple, TypeVar

from .. import __version__
from ..errors import PluginConflictError, UnknownNameError

T = TypeVar("T")


class PluginInfo(NamedTuple):
    """Who provides something: the plugin's name, its distribution and version."""

    name: str
    distribution: str
    version: str = ""

    def describe(self) -> str:
        version = f" {self.version}" if self.version else ""
        return f"plugin '{self.name}' (distribution '{self.distribution}'{version})"


#: The owner of everything the core registers itself.
CORE_OWNER = PluginInfo("core", "polytile", __version__)


class ImportScope:
    """A plugin module being imported, and what the import registered (see
    :func:`importing_plugin`)."""

    def __init__(self, owner: PluginInfo):
        self.owner = owner
        #: ``(registry, name, object)`` for every registration attributed to ``owner``.
        self.added: list[tuple[Registry[Any], str, Any]] = []
        #: What ``added`` holds, so that a registration made again (a hook that runs on
        #: every compile) is remembered once.
        self.seen: set[tuple[int, Any, int]] = set()

    def remember(self, registry: "Registry[Any]", name: Any, obj: Any) -> None:
        key = (id(registry), name, id(obj))
        if key not in self.seen:
            self.seen.add(key)
            self.added.append((registry, name, obj))

    def registries(self) -> list["Registry[Any]"]:
        found: list[Registry[Any]] = []
        for registry, _, _ in self.added:
            if not any(registry is r for r in found):
                found.append(registry)
        return found


# A context variable, not a global: another thread defining ops while a plugin is being
# imported must not have them attributed to that plugin.
_IMPORTING: contextvars.ContextVar[ImportScope | None] = contextvars.ContextVar("polytile_importing_plugin",
                                                                                 default=None)


@contextlib.contextmanager
def importing_plugin(owner: PluginInfo) -> Iterator[ImportScope]:
    """Attribute registrations made while the ``with`` block imports a plugin to ``owner``.

    An explicit :meth:`Registry.owned_by` still wins.  So does the core: a core module that
    the plugin's import happens to import first (``polytile.dialects``, say) registers its
    ops as the core's.
    """
    scope = ImportScope(owner)
    token = _IMPORTING.set(scope)
    try:
        yield scope
    finally:
        _IMPORTING.reset(token)


def _importing_module() -> str:
    # The module whose top-level code is running: the nearest "<module>" frame.  During an
    # import that is the module being imported (a class statement's decorator runs in it).
    frame: Any = sys._getframe()
    while frame is not None and frame.f_code.co_name != "<module>":
        frame = frame.f_back
    return "" if frame is None else str(frame.f_globals.get("__name__", ""))


def _core_module_importing() -> bool:
    """Whether the registration comes from a core module's top-level code while it is
    imported: a lazily imported core module (``polytile.dialects.gpu``, first needed
    inside a plugin's hook) registers its ops as the core's, whoever caused the import."""
    module = _importing_module()
    if module != "polytile" and not module.startswith("polytile."):
        return False
    spec = getattr(sys.modules.get(module), "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


#: Package -> the plugin it belongs to, claimed by the plugin manager as it imports each
#: plugin (``polytile_lds`` -> polytile-lds, from the entry point ``polytile_lds.plugin``).
#: A plugin module imported later, lazily inside a hook or a pass, registers as the
#: plugin's whose package is the longest prefix of its name.  A package two plugins
#: claim (None here) belongs to neither.
_PACKAGE_OWNERS: dict[str, PluginInfo | None] = {}
#: What such lazily imported modules registered, by owner: ``(registry, name, object)``,
#: so that withdrawing the plugin takes it out and enabling it again puts it back.
LATE_REGISTRATIONS: dict[PluginInfo, list[tuple["Registry[Any]", Any, Any]]] = {}
_LATE_SCOPES: dict[PluginInfo, ImportScope] = {}


def claim_package(package: str, owner: PluginInfo) -> None:
    """Attribute what modules of ``package`` register at import to ``owner`` (not the core's
    packages: a plugin importing ``polytile.x`` leaves it the core's)."""
    if not package or package == "polytile" or package.startswith("polytile."):
        return
    if package in _PACKAGE_OWNERS and _PACKAGE_OWNERS[package] not in (None, owner):
        _PACKAGE_OWNERS[package] = None  # two plugins in one package: neither is named for it
        return
    _PACKAGE_OWNERS[package] = owner


def _package_owner(module: str) -> PluginInfo | None:
    """The plugin whose claimed package is the longest prefix of ``module``, or None."""
    name = module
    while name:
        if name in _PACKAGE_OWNERS:
            return _PACKAGE_OWNERS[name]
        name = name.rpartition(".")[0]
    return None


#: The plugin whose hook implementation is running (set by the plugin manager).
_CALLING: contextvars.ContextVar[PluginInfo | None] = contextvars.ContextVar("polytile_calling_plugin",
                                                                             default=None)


@contextlib.contextmanager
def calling_plugin(owner: PluginInfo) -> Iterator[None]:
    """Attribute registrations made while ``owner``'s hook runs (outside any import) to it."""
    token = _CALLING.set(owner)
    try:
        yield
    finally:
        _CALLING.reset(token)


def _import_scope_owner() -> tuple[PluginInfo, ImportScope | None]:
    scope = _IMPORTING.get()
    module = _importing_module()
    if module == "polytile" or module.startswith("polytile."):
        return CORE_OWNER, None
    if scope is None:
        owner = _package_owner(module) or _CALLING.get()
        if owner is None:
            return CORE_OWNER, None
        late = _LATE_SCOPES.get(owner)
        if late is None:
            late = _LATE_SCOPES[owner] = ImportScope(owner)
            LATE_REGISTRATIONS[owner] = late.added
        return owner, late
    return scope.owner, scope


class Registry(Generic[T]):
    """A mapping from names to registered objects, each with the plugin that owns it."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, tuple[T, PluginInfo]] = {}
        self._explicit_owner: PluginInfo | None = None

    @property
    def _owner(self) -> PluginInfo:
        """Who a registration without an ``owner`` argument belongs to: the core when a core
        module's import makes it; else the plugin of the enclosing :meth:`owned_by`, else
        the plugin being imported, else the core."""
        return self._registration_owner(None)[0]

    @contextlib.contextmanager
    def owned_by(self, owner: PluginInfo) -> Iterator[None]:
        """Attribute every registration inside the ``with`` block to ``owner``."""
        previous, self._explicit_owner = self._explicit_owner, owner
        try:
            yield
        finally:
            self._explicit_owner = previous

    def _registration_owner(self, owner: PluginInfo | None) -> tuple[PluginInfo, ImportScope | None]:
        """Who a registration belongs to (``owner`` if given, see :attr:`_owner`), and the
        import scope that must remember it (None: none)."""
        if owner is not None:
            return owner, None
        if self._explicit_owner is None:
            return _import_scope_owner()
        return (CORE_OWNER if _core_module_importing() else self._explicit_owner), None

    def add(self, name: str, obj: T, owner: PluginInfo | None = None) -> T:
        owner, scope = self._registration_owner(owner)
        existing = self._entries.get(name)
        if existing is not None and existing[0] is not obj:
            first = existing[1]
            conflict = PluginConflictError(
                f"{self.kind} '{name}' is registered twice: by {first.describe()} and by {owner.describe()}; "
                "uninstall or disable one of them (setting 'disabled_plugins')",
                plugin=owner.name,
                distribution=owner.distribution,
            )
            # What the plugin manager needs to tell a plugin taking a core name from two
            # plugins clashing: the owners (first, second), the kind and the name.
            conflict.owners, conflict.kind, conflict.name = (first, owner), self.kind, name
            raise conflict
        self._entries[name] = (obj, owner)
        if scope is not None:
            scope.remember(self, name, obj)
        return obj

    def get(self, name: str, where: str = "") -> T:
        entry = self._entries.get(name)
        if entry is None:
            raise UnknownNameError(self.kind, name, self._entries, where)
        return entry[0]

    def holds(self, name: Any, obj: Any) -> bool:
        """Whether ``obj`` is registered under ``name``."""
        entry = self._entries.get(name)
        return entry is not None and entry[0] is obj

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
