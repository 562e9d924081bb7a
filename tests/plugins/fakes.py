"""Stand-ins for installed plugins: entry points and plugin modules."""

from __future__ import annotations

import types
from dataclasses import dataclass

from polytile.plugins import hookimpl


@dataclass
class FakeDist:
    name: str
    version: str = "1.0"


class FakeEntryPoint:
    """Looks like importlib.metadata.EntryPoint; ``load`` returns or raises ``target``,
    or, when ``target`` is a function, returns what calling it returns (an import)."""

    def __init__(self, name, target, dist, group="polytile.plugins", value=None):
        self.name = name
        self.group = group
        self.value = value or f"{dist.replace('-', '_')}.plugin"
        self.dist = FakeDist(dist, "1.2")
        self._target = target
        self.loads = 0

    def load(self):
        self.loads += 1
        if isinstance(self._target, BaseException):
            raise self._target
        if isinstance(self._target, types.FunctionType):
            return self._target()
        return self._target


def make_plugin(name="fake_plugin", **hooks):
    """A module whose functions are hook implementations."""
    module = types.ModuleType(name)
    for hook_name, function in hooks.items():
        setattr(module, hook_name, hookimpl(function))
    return module
