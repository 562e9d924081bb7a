"""Language names and value classes that plugins add (``polytile_register_builtins``).

A plugin registers, through the hook's registry:

* builtins, ``registry.register(fn)``: ``fn`` (decorated with ``@builtin``) becomes
  ``pl.<fn.__name__>``; a name the core defines is a conflict, not an override;
* value classes, ``registry.register_value_class(TypeClass, cls)``: every kernel value
  whose IR type is a ``TypeClass`` (a :class:`~polytile.ir.types.DialectType` the plugin
  defines) is wrapped in ``cls``, a subclass of :class:`polytile.language.tensor`, so its
  methods and properties (``desc.load(...)``, ``desc.shape``) exist wherever the value
  goes: a parameter, a builtin's result, a helper's return value.

The hook runs once per process, the first time the frontend meets a ``pl.`` name the core
does not define or a value of a type no value class is known for; a program that never
does pays nothing.  Names that well-known plugins provide (:data:`PROVIDED_BY`) get an
error that says which distribution to install when no installed plugin defines them.
"""

from __future__ import annotations

from typing import Any

from ..plugins.registry import Registry

#: Language names of plugins polytile knows of, with the distribution providing each:
#: only for the error message when none is installed (a plugin need not be listed).
PROVIDED_BY = {
    "make_tensor_descriptor": "polytile-tma",
    "_experimental_descriptor_load": "polytile-tma",
    "_experimental_descriptor_store": "polytile-tma",
    "extra.cuda.experimental_device_tensormap_create2d": "polytile-tma",
    "extra.cuda.experimental_tensormap_fenceproxy_acquire": "polytile-tma",
}


class BuiltinRegistry:
    """What ``polytile_register_builtins`` fills: builtins by name, value classes by the
    name of the IR type they wrap."""

    def __init__(self) -> None:
        self.functions: Registry[Any] = Registry("language builtin")
        self.value_classes: Registry[type] = Registry("value class")

    def register(self, fn: Any, namespace: str = "") -> Any:
        """Make ``fn`` (a ``@builtin`` function) ``pl.<fn.__name__>``, or with a
        ``namespace`` (``"extra.cuda"``) ``pl.<namespace>.<fn.__name__>`` (Triton's
        ``tl.extra.cuda`` names, say)."""
        from . import _HOMES
        from .core import is_builtin

        if not is_builtin(fn):
            raise TypeError(f"{fn!r} is not a language builtin: decorate it with polytile.language.core.builtin")
        name = f"{namespace}.{fn.__name__}" if namespace else fn.__name__
        top = name.split(".", 1)[0]
        # pl.extra is the core's package, open to plugins (pl.extra.cuda.<name>): there a
        # name conflicts only with what the core defines in it (pl.extra.cuda.libdevice).
        if _core_defines(name) if top in OPEN_NAMESPACES else (top in _HOMES or top in _core_names()):
            from ..errors import PluginConflictError

            owner = self.functions._owner
            raise PluginConflictError(f"language builtin '{name}' is the core's (pl.{name}); {owner.describe()} "
                                      "cannot define it again: give the builtin another name",
                                      plugin=owner.name, distribution=owner.distribution)
        return self.functions.add(name, fn)

    def register_value_class(self, type_class: type, value_class: type) -> type:
        """Wrap every kernel value whose IR type is a ``type_class`` in ``value_class``."""
        from ..ir.types import DialectType
        from .core import tensor

        if not (isinstance(type_class, type) and issubclass(type_class, DialectType) and type_class.type_name):
            raise TypeError(f"register_value_class takes a DialectType subclass with a type_name, not {type_class!r}")
        if not (isinstance(value_class, type) and issubclass(value_class, tensor)):
            raise TypeError(f"a value class must subclass polytile.language.tensor, not {value_class!r}")
        return self.value_classes.add(type_class.type_name, value_class)


#: The core's namespaces of builtins that plugins may add names to.
OPEN_NAMESPACES = ("extra",)


def _core_defines(name: str) -> bool:
    """Whether the core's own modules define ``pl.<name>`` (a dotted name in an open namespace)."""
    import importlib

    path = name.split(".")
    module_name = "polytile.language." + ".".join(path[:-1])
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return False
    return path[-1] in getattr(module, "__dict__", {}) or path[-1] in getattr(module, "_SUBMODULES", ())


def namespace_attribute(module_name: str, path: str, attribute: str) -> Any:
    """``pl.<path>.<attribute>`` of the core's open namespace package ``module_name``
    (``polytile.language.extra.cuda``): a builtin a plugin registered there, else an
    AttributeError that names the distribution providing it, when one is known."""
    if attribute.startswith("__"):
        raise AttributeError(f"module '{module_name}' has no attribute '{attribute}'")
    found = plugin_builtin(f"{path}.{attribute}")
    if found is None:
        message = missing_name_message(f"{path}.{attribute}")
        prefix = f"module 'polytile.language' has no attribute '{path}.{attribute}'"
        raise AttributeError(f"'pl.{path}' has no attribute '{attribute}'" + message[len(prefix):])
    return found


def namespace_names(path: str) -> list[str]:
    """The names plugins registered directly under ``pl.<path>`` (for ``dir``)."""
    _load()
    prefix = path + "."
    return sorted({n[len(prefix):].split(".", 1)[0] for n in BUILTINS.functions.names() if n.startswith(prefix)})


def _core_names() -> set[str]:
    from . import __all__ as names

    return set(names)


BUILTINS = BuiltinRegistry()
_loaded = False


def _load() -> None:
    global _loaded
    if not _loaded:
        from ..plugins.manager import get_plugin_manager

        get_plugin_manager().run_registration("polytile_register_builtins", BUILTINS)
        _loaded = True


def plugin_builtin(name: str) -> Any:
    """The builtin an installed plugin defines as ``pl.<name>`` (or the namespace of
    builtins ``pl.<name>.*``), or None."""
    _load()
    found = BUILTINS.functions.find(name)
    # A namespace some plugin fills, or one a known plugin would: its missing names then
    # say which distribution provides them (pl.extra.cuda.<name>).
    if found is None and any(n.startswith(name + ".") for n in (*BUILTINS.functions.names(), *PROVIDED_BY)):
        return BuiltinNamespace(name)
    return found


class BuiltinNamespace:
    """``pl.extra``, ``pl.extra.cuda``: the builtins plugins registered under a dotted
    namespace, looked up by attribute."""

    __slots__ = ("_path",)

    def __init__(self, path: str):
        self._path = path

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return namespace_attribute(f"pl.{self._path}", self._path, attribute)

    def __dir__(self) -> list[str]:
        return namespace_names(self._path)

    def __repr__(self) -> str:
        return f"<polytile.language namespace pl.{self._path}>"


def value_class(ir_type: Any) -> type | None:
    """The value class a plugin registered for ``ir_type``'s type class, or None."""
    _load()
    return BUILTINS.value_classes.find(type(ir_type).type_name)


def missing_name_message(name: str) -> str:
    """Why ``pl.<name>`` does not exist, naming the distribution to install if known."""
    message = f"module 'polytile.language' has no attribute '{name}'"
    distribution = PROVIDED_BY.get(name)
    if distribution is not None:
        from ..plugins import distributions  # the scan plugin discovery reads (importlib.metadata's rules)

        if distributions.version(distribution) is None:
            return message + f": pl.{name} comes with the plugin distribution '{distribution}', which is not " \
                             f"installed (pip install {distribution})"
        message += f": pl.{name} comes with the plugin distribution '{distribution}', which is installed but " \
                   "disabled or failed to load (see `polytile info`; the setting disabled_plugins)"
    return message


def reset() -> None:
    """Forget what plugins registered (tests that change the installed plugins)."""
    global _loaded, BUILTINS
    BUILTINS = BuiltinRegistry()
    _loaded = False
