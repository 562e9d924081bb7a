"""The IR registry: which ops, types and attributes exist, by name, and who owns them.

The core's dialects register on import of :mod:`polytile.dialects`; plugins register
theirs through the ``polytile_register_dialects`` hook.  The parser asks the registry by
name; on a miss it imports the core's dialects (:attr:`IRRegistry.providers`), then
loads plugins once (see :attr:`IRRegistry.on_miss`) before giving up.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

from ..plugins.registry import Registry


@dataclass(frozen=True)
class Dialect:
    """A named group of ops, types and attributes that a plugin registers at once."""

    name: str
    ops: tuple[type, ...] = ()
    types: tuple[type, ...] = ()
    attributes: tuple[type, ...] = ()
    doc: str = ""
    constant_materializer: Callable[..., Any] | None = field(default=None, compare=False)


class IRRegistry:
    def __init__(self) -> None:
        self.ops: Registry[type] = Registry("op")
        self.types: Registry[type] = Registry("type")
        self.attributes: Registry[type] = Registry("attribute")
        self.dialects: Registry[Dialect] = Registry("dialect")
        #: The modules that register the core's dialects, imported on the first lookup
        #: miss (so the parser imports nothing for them, and a kernel that only builds
        #: IR never looks them up by name).
        self.providers: tuple[str, ...] = ("polytile.dialects",)
        #: Called once with no arguments on the first lookup miss, then the lookup is
        #: retried: by default it loads the plugins' dialects, so the parser knows ops
        #: that installed plugins define without importing every plugin up front.
        self.on_miss: Callable[[], None] | None = _load_plugin_dialects

    def register_op(self, cls: type) -> None:
        existing = self.ops.find(cls.name)
        if existing is not None and existing.__qualname__ == cls.__qualname__ and existing.__module__ == cls.__module__:
            # A module imported twice (tests reloading) redefines the same op: keep the new one.
            self.ops._entries[cls.name] = (cls, self.ops.owner_of(cls.name))
            return
        self.ops.add(cls.name, cls)

    def register(self, dialect: Dialect) -> None:
        """Register a plugin's dialect (called from ``polytile_register_dialects``)."""
        self.dialects.add(dialect.name, dialect)
        for op in dialect.ops:
            if self.ops.find(op.name) is op:
                # Defined (and so registered) when the plugin module was imported:
                # attribute it to the plugin now that we know who that is.
                self.ops._entries[op.name] = (op, self.ops._owner)
            else:
                self.ops.add(op.name, op)
        for type_cls in dialect.types:
            self.types.add(type_cls.type_name, type_cls)
        for attr_cls in dialect.attributes:
            self.attributes.add(attr_cls.attribute_name, attr_cls)

    def _lookup(self, registry: Registry, name: str, where: str = "") -> Any:
        found = registry.find(name)
        if found is None and self.providers:
            for module in self.providers:
                importlib.import_module(module)
            self.providers = ()
            found = registry.find(name)
        if found is None and self.on_miss is not None:
            loader, self.on_miss = self.on_miss, None
            loader()
            found = registry.find(name)
        if found is None:
            registry.get(name, where)  # raises UnknownNameError with close matches
        return found

    def op(self, name: str, where: str = "") -> type:
        return self._lookup(self.ops, name, where)

    def type(self, name: str, where: str = "") -> type:
        return self._lookup(self.types, name, where)

    def attribute(self, name: str, where: str = "") -> type:
        return self._lookup(self.attributes, name, where)

    def constant_materializer(self, dialect: str) -> Callable[..., Any] | None:
        found = self.dialects.find(dialect)
        return None if found is None else found.constant_materializer


def _load_plugin_dialects() -> None:
    from ..plugins.manager import get_plugin_manager

    get_plugin_manager().run_registration("polytile_register_dialects", IR_REGISTRY)


IR_REGISTRY = IRRegistry()
