"""The plugin manager: finds, loads and calls polytile's plugins.

It wraps ``pluggy.PluginManager("polytile")``.  On first use it registers the core's own
plugin modules (:data:`BUILTIN_PLUGINS`), then every entry point of the groups
``polytile.backends`` and ``polytile.plugins`` that the setting ``disabled_plugins``
does not name.

Each plugin module is imported inside :func:`~polytile.plugins.registry.importing_plugin`,
so what it registers at import time (an op class, which ``define_op`` registers when the
class statement runs) belongs to the plugin, as what it registers from its hooks does.

A plugin that fails (cannot be imported, has malformed hooks, raises in any hook, claims
a name polytile itself registers) is disabled for the process with one warning naming
it, its distribution and the error: its hooks are no longer called and whatever it
registered is removed again (a hook that raised half way through editing a pipeline has
its edits undone), and the compile goes on without it.  Nothing fails until something
needs what the plugin would have provided; then the plugin's own error is raised,
naming it and its distribution.  Other plugins keep working.  With the setting
``strict_plugins`` (CI) the failure raises at once instead.  Two plugins claiming one
name is a hard error at once.  The core's registration hooks run before any plugin's,
so a plugin can never take a name of the core's (its pass list stays whole).

The process-wide manager follows the setting ``disabled_plugins``: when the setting
changes, :func:`get_plugin_manager` (and ``polytile.config.set``) replace the manager by
one that loads the plugins now enabled and leaves out those now disabled, and update the
registries the old one had filled (the pass registry, the IR registry) to match.

Most code needs only :func:`get_plugin_manager`::

    manager = get_plugin_manager()
    backend, target = manager.backends.resolve("amd:gfx942")
    manager.run_registration("polytile_register_passes", PASS_REGISTRY)
    extra = manager.call_hook("polytile_cache_key", target=target, options=options)
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import sys
import threading
import traceback
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

import pluggy

from .. import __version__
from ..errors import CompilationError, PluginConflictError, PluginError, PolytileError, did_you_mean
from ..target import Target
from . import PROJECT_NAME, distributions, hookspecs
from .backends import BackendRegistry, describe_device
from .records import (
    DISABLED,
    ENTRY_POINT_GROUPS,
    FAILED,
    LOADED,
    _REPORTS,
    EntryPointLike,
    PluginRecord,
    _distribution_of,
    _normalize,
    _summary,
)
from .registry import (CORE_OWNER, LATE_REGISTRATIONS, ImportScope, PluginInfo, Registry, calling_plugin,
                       claim_package, importing_plugin)
from .settings import _clean_names, _configured_disabled, _core_name_reason, _takes_a_core_name, strict_plugins

if TYPE_CHECKING:
    from .reports import PolytileInfo

#: The core's own plugin modules, registered before any entry point, owned by the core.
#: A module of this list that does not exist (yet) is skipped.
BUILTIN_PLUGINS: list[str] = [
    "polytile.interpreter.plugin",
    "polytile.passes.builtin",
    "polytile.gpu.plugin",
]

REGISTRATION_HOOKS = tuple(hookspecs.REGISTRATION_HOOKS)
HOOK_NAMES = tuple(sorted(name for name in vars(hookspecs) if name.startswith("polytile_")))

log = logging.getLogger("polytile.plugins")

#: What each plugin's module registered while it was imported: ``(registry, name, object)``.
#: Kept for the life of the process, because a module is imported once: a manager that
#: enables a plugin again after another disabled it puts these entries back.
_IMPORTED: dict[PluginInfo, list[tuple[Registry[Any], str, Any]]] = {}


def _registered_at_import(owner: PluginInfo) -> list[tuple[Any, Any, Any]]:
    """What ``owner``'s modules registered when imported: its entry point's module, and
    its modules imported later (lazily, inside a hook or a pass)."""
    return [*_IMPORTED.get(owner, ()), *LATE_REGISTRATIONS.get(owner, ())]


def _forget_imported(owner: PluginInfo) -> None:
    """Take what ``owner`` registered at import time (and later) out of those registries."""
    done: list[Any] = []
    for registry, _, _ in _registered_at_import(owner):
        if not any(registry is r for r in done):
            done.append(registry)
            registry.remove_owned_by(owner)


def _restore_imported(owner: PluginInfo) -> None:
    """Put back what ``owner`` registered at import time, where a manager had removed it."""
    for registry, name, obj in _registered_at_import(owner):
        if not registry.holds(name, obj):
            registry.add(name, obj, owner)


class _Filled:
    """A registry that a registration hook has filled, kept to withdraw failed plugins."""

    def __init__(self, hook: str, registry: Any, parts: list[Any], done: set[PluginInfo] | None = None):
        self.hook = hook
        self.registry = registry
        self.parts = parts
        self.error: PluginError | None = None
        #: Plugins whose implementation has run for this registry.
        self.done: set[PluginInfo] = set() if done is None else done


def _registry_parts(registry: Any) -> list[Any]:
    """The :class:`Registry` objects that ``registry`` consists of.

    A registry object with its own ``owned_by``/``remove_owned_by`` counts as one; an
    object holding several registries as attributes (the IR registry: ops, types,
    attributes, dialects) counts as those.
    """
    if isinstance(registry, Registry):
        return [registry]
    if callable(getattr(registry, "owned_by", None)) and callable(getattr(registry, "remove_owned_by", None)):
        return [registry]
    parts = [value for value in getattr(registry, "__dict__", {}).values() if isinstance(value, Registry)]
    if not parts:
        raise TypeError(
            "run_registration() needs a polytile.plugins.registry.Registry or an object holding "
            f"Registry attributes, got {type(registry).__qualname__}"
        )
    return parts


class PluginManager:
    """polytile's plugins: loading, attribution, failures, and calling hooks.

    :param entry_points: the entry points to load (objects with ``name``, ``value``,
        ``group``, ``dist`` and ``load()``); ``None`` discovers the installed ones.
    :param builtins: the core's plugin modules, as dotted names or module objects;
        ``None`` means :data:`BUILTIN_PLUGINS`.
    :param disabled: names of plugins not to load (entry point or distribution
        names); ``None`` reads the setting ``disabled_plugins``.

    Nothing is imported or loaded until first use.
    """

    def __init__(
        self,
        *,
        entry_points: Iterable[EntryPointLike] | None = None,
        builtins: Sequence[Any] | None = None,
        disabled: Iterable[str] | None = None,
    ):
        self._pm = pluggy.PluginManager(PROJECT_NAME)
        self._pm.add_hookspecs(hookspecs)
        self._entry_points = None if entry_points is None else list(entry_points)
        self._builtins = None if builtins is None else list(builtins)
        self._disabled_setting = None if disabled is None else _clean_names(disabled)
        #: Set on managers that get_plugin_manager() made: they follow the configuration.
        self._follows_config = False
        #: The manager this one replaces; its registries are taken over when this one loads.
        self._predecessor: PluginManager | None = None
        self._lock = threading.RLock()
        self._loaded = False
        self._load_error: BaseException | None = None
        self._records: list[PluginRecord] = []
        self._by_pluggy_name: dict[str, PluginRecord] = {}
        self._unknown_disabled: list[str] = []
        self._filled: dict[tuple[str, int], _Filled] = {}
        self._backends: BackendRegistry | None = None
        self._backends_ready = False

    @property
    def pluggy_manager(self) -> pluggy.PluginManager:
        """The underlying pluggy manager, for diagnostics; call hooks through this class."""
        return self._pm

    # -- loading --------------------------------------------------------------------

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            with self._lock:
                if not self._loaded:
                    try:
                        self._load()
                    except Exception as exc:
                        # Loading again would register the plugins that did load twice.
                        self._load_error = exc
                        raise
                    finally:
                        self._loaded = True
                    return
        if self._load_error is not None:
            raise self._load_error

    def _load(self) -> None:
        disabled = self._disabled_names()
        self._load_builtins()
        used: set[str] = set()
        entry_points = discover_entry_points() if self._entry_points is None else self._entry_points
        for ep in entry_points:
            distribution, version = _distribution_of(ep)
            info = PluginInfo(ep.name, distribution, version)
            record = PluginRecord(info, ep.group, ep.value, version, pluggy_name=f"{ep.group}:{distribution}:{ep.name}")
            self._records.append(record)
            matched = next(
                (n for n in disabled if _normalize(n) in (_normalize(ep.name), _normalize(distribution))), None
            )
            if matched is not None:
                used.add(matched)
                self._disable(record, matched)
                continue
            plugin = self._import(ep, record)
            if plugin is not None:
                self._register_plugin(plugin, record)
        self._unknown_disabled = [n for n in disabled if n not in used]
        predecessor, self._predecessor = self._predecessor, None
        if predecessor is not None:
            self._take_over(predecessor)

    def _import(self, ep: EntryPointLike, record: PluginRecord) -> Any:
        """``ep.load()``, with what the import registers attributed to the plugin; ``None``
        when the import failed (the plugin is then recorded as failed)."""
        scope: ImportScope | None = None
        # The plugin's package (its entry point module's): its modules imported later
        # register as the plugin's too.
        module = record.value.split(":", 1)[0].strip()
        claim_package(module.rpartition(".")[0] or module, record.info)
        try:
            with importing_plugin(record.info) as scope:
                plugin = ep.load()
        except Exception as exc:
            # A half-imported module is gone from sys.modules; so must be what it registered.
            for registry in scope.registries() if scope is not None else ():
                registry.remove_owned_by(record.info)
            if _takes_a_core_name(exc, record):
                self._fail(record, exc, hook="", reason=_core_name_reason(exc))
                return None
            if isinstance(exc, PluginConflictError):
                # Two plugins claiming one name is a hard error, as in a registration hook.
                record.status, record.reason, record.error = FAILED, str(exc), exc
                raise
            self._fail(record, exc, hook="")
            return None
        if scope.added:
            _IMPORTED.setdefault(record.info, []).extend(scope.added)
        else:
            _restore_imported(record.info)  # imported before, by a manager that later withdrew it
        return plugin

    def _disabled_names(self) -> list[str]:
        if self._disabled_setting is not None:
            return list(self._disabled_setting)
        return list(_configured_disabled())

    def _load_builtins(self) -> None:
        builtins = list(BUILTIN_PLUGINS) if self._builtins is None else self._builtins
        record = PluginRecord(CORE_OWNER, "builtin", "", __version__)
        self._records.append(record)
        modules: list[str] = []
        for item in builtins:
            if isinstance(item, str):
                try:
                    plugin = importlib.import_module(item)
                except ModuleNotFoundError as exc:
                    if exc.name == item:
                        continue
                    raise self._core_error(f"polytile's builtin plugin module '{item}' failed to import", exc) from exc
                except Exception as exc:
                    raise self._core_error(f"polytile's builtin plugin module '{item}' failed to import", exc) from exc
                name = item
            else:
                plugin, name = item, getattr(item, "__name__", type(item).__qualname__)
            try:
                self._pm.register(plugin, name=f"builtin:{name}")
            except (pluggy.PluginValidationError, ValueError) as exc:
                raise self._core_error(f"polytile's builtin plugin module '{name}' has malformed hooks", exc) from exc
            self._by_pluggy_name[f"builtin:{name}"] = record
            problem = self._hook_problems(plugin)
            if problem:
                raise PluginError(f"polytile's builtin plugin module '{name}' {problem}; this is a bug in polytile",
                                  plugin=CORE_OWNER.name, distribution=CORE_OWNER.distribution)
            modules.append(name)
        record.value = ", ".join(modules)

    @staticmethod
    def _core_error(what: str, exc: BaseException, hook: str = "") -> PluginError:
        return PluginError(f"{what}: {_summary(exc)}; this is a bug in polytile, please report it",
                           plugin=CORE_OWNER.name, distribution=CORE_OWNER.distribution, hook=hook)

    def _register_plugin(self, plugin: Any, record: PluginRecord) -> None:
        record.plugin = plugin
        if self._pm.is_registered(plugin):
            # Two entry points naming one module (one per group): its hooks run once.
            other = self._pm.get_name(plugin)
            record.reason = f"same module as {self._by_pluggy_name[other].info.describe()}"
            return
        try:
            self._pm.register(plugin, name=record.pluggy_name)
        except pluggy.PluginValidationError as exc:
            self._fail(record, exc, hook="", reason=f"its hook implementations do not match polytile's hooks: {exc}")
            return
        except ValueError as exc:
            self._fail(record, exc, hook="")
            return
        self._by_pluggy_name[record.pluggy_name] = record
        problem = self._hook_problems(plugin)
        if problem:
            self._fail(record, None, hook="", reason=problem)

    def _hook_problems(self, plugin: Any) -> str:
        for caller in self._pm.get_hookcallers(plugin) or []:
            if caller.spec is None:
                return f"implements unknown hook '{caller.name}'{did_you_mean(caller.name, HOOK_NAMES)}"
            for impl in caller.get_hookimpls():
                if impl.plugin is plugin and (impl.hookwrapper or getattr(impl, "wrapper", False)):
                    return f"implements hook '{caller.name}' as a hook wrapper, which polytile does not support"
        return ""

    def _disable(self, record: PluginRecord, setting_name: str) -> None:
        _forget_imported(record.info)  # an earlier manager may have imported it
        record.status = DISABLED
        record.reason = f"disabled by the setting 'disabled_plugins' (entry '{setting_name}')"
        record.error = PluginError(
            f"{record.info.describe()} is disabled by the setting 'disabled_plugins' (entry '{setting_name}'); "
            "remove that entry to use it",
            plugin=record.info.name, distribution=record.info.distribution,
        )

    def _fail(self, record: PluginRecord, exc: BaseException | None, hook: str, reason: str = "") -> None:
        reason = reason or (_summary(exc) if exc is not None else "unknown failure")
        where = f"failed in hook '{hook}'" if hook else "failed to load"
        record.status = FAILED
        record.reason = reason
        record.hook = hook
        record.error = PluginError(
            f"{record.info.describe()} {where}: {reason}; fix or uninstall it, "
            f"or disable it with the setting 'disabled_plugins' (add '{record.info.name}')",
            plugin=record.info.name, distribution=record.info.distribution, hook=hook,
        )
        if exc is not None:
            record.error.__cause__ = exc
            record.traceback = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self._withdraw(record)
        if strict_plugins():
            raise record.error
        log.warning("%s %s and is disabled for this process: %s (see `polytile info`; the setting "
                    "strict_plugins, POLYTILE_STRICT_PLUGINS=1, makes this an error)", record.info.describe(), where,
                    reason)

    def _withdraw(self, record: PluginRecord) -> None:
        _forget_imported(record.info)
        for filled in self._filled.values():
            for part in filled.parts:
                part.remove_owned_by(record.info)
        if record.plugin is not None and self._pm.get_name(record.plugin) == record.pluggy_name:
            self._pm.unregister(record.plugin)

    def register(self, plugin: Any, info: PluginInfo, *, value: str = "") -> PluginRecord:
        """Register a plugin object directly (tests, embedding applications).

        ``info`` names it (use the distribution your code ships in).  Registries that
        were already filled get the plugin's registrations at once.
        """
        self._ensure_loaded()
        with self._lock:
            name = f"direct:{info.distribution}:{info.name}:{len(self._records)}"
            record = PluginRecord(info, "direct", value or getattr(plugin, "__name__", type(plugin).__qualname__),
                                  info.version, pluggy_name=name)
            self._records.append(record)
            self._register_plugin(plugin, record)
            for filled in list(self._filled.values()):
                if record.status != LOADED or filled.error is not None:
                    continue
                for impl in self._impls(filled.hook):
                    if impl.plugin is plugin:
                        self._register_from(impl, filled)
        return record

    # -- registration hooks -----------------------------------------------------------

    def run_registration(self, hook_name: str, registry: Any) -> Any:
        """Call registration hook ``hook_name`` with ``registry=registry``; return ``registry``.

        Each plugin's implementation runs inside ``owned_by(plugin)`` on every part of
        ``registry`` (a :class:`Registry`, or an object with Registry attributes), so
        each entry is attributed.  An implementation that raises is withdrawn (see the
        module docstring).  A conflict between two plugins raises
        :class:`~polytile.errors.PluginConflictError` now and again on every later call.
        Calling this again for the same registry object does nothing.
        """
        if hook_name not in REGISTRATION_HOOKS:
            raise ValueError(
                f"'{hook_name}' is not a registration hook; registration hooks are {', '.join(REGISTRATION_HOOKS)}"
            )
        self._ensure_loaded()
        with self._lock:
            key = (hook_name, id(registry))
            filled = self._filled.get(key)
            if filled is None:
                filled = _Filled(hook_name, registry, _registry_parts(registry))
                self._filled[key] = filled
                try:
                    for impl in self._core_first(self._impls(hook_name)):
                        self._register_from(impl, filled)
                except PluginError as exc:
                    filled.error = exc
                    raise
            elif filled.error is not None:
                raise filled.error
        return registry

    def _core_first(self, impls: list[Any]) -> list[Any]:
        """The core's implementations first, the rest in pluggy's order: the core claims
        its names before any plugin can (a plugin's 'cse' fails, the core's stays)."""
        def is_core(impl: Any) -> bool:
            record = self._by_pluggy_name.get(impl.plugin_name)
            return record is not None and record.info == CORE_OWNER

        return [i for i in impls if is_core(i)] + [i for i in impls if not is_core(i)]

    def _register_from(self, impl: Any, filled: _Filled) -> None:
        record = self._by_pluggy_name.get(impl.plugin_name)
        if record is None or record.status != LOADED:
            return
        kwargs = self._arguments(impl, {"registry": filled.registry}, filled.hook, record)
        with contextlib.ExitStack() as stack:
            for part in filled.parts:
                stack.enter_context(part.owned_by(record.info))
            try:
                with calling_plugin(record.info):
                    impl.function(**kwargs)
            except PluginConflictError as exc:
                if not _takes_a_core_name(exc, record):
                    raise
                self._fail(record, exc, filled.hook, reason=_core_name_reason(exc))
            except Exception as exc:
                self._registration_failed(record, exc, filled.hook)
        filled.done.add(record.info)

    def _take_over(self, old: "PluginManager") -> None:
        """Make the registries ``old`` filled match this manager's plugins.

        Entries of plugins loaded by both managers stay as they are (running their hooks
        again would register new objects under the same names: a conflict with
        themselves).  Entries of every other plugin are removed, and the hooks of the
        plugins this manager loaded that have not filled the registry run now.  A
        conflict is kept and raised by the next :meth:`run_registration` of the registry.
        """
        loaded_old = {r.info for r in old._records if r.status == LOADED}
        loaded_new = {r.info for r in self._records if r.status == LOADED}
        owners = {r.info for r in old._records} | {r.info for r in self._records}
        for (hook, key), filled in old._filled.items():
            if filled.registry is old._backends:
                continue  # each manager has its own backend registry
            keep = filled.done & loaded_old & loaded_new
            mine = _Filled(hook, filled.registry, filled.parts, done=set(keep))
            self._filled[(hook, key)] = mine
            for owner in owners - keep - {CORE_OWNER}:
                for part in filled.parts:
                    part.remove_owned_by(owner)
            try:
                for owner in loaded_new:
                    _restore_imported(owner)
                for impl in self._impls(hook):
                    record = self._by_pluggy_name.get(impl.plugin_name)
                    if record is not None and record.info not in keep:
                        self._register_from(impl, mine)
            except PluginError as exc:
                mine.error = exc

    def _registration_failed(self, record: PluginRecord, exc: Exception, hook: str) -> None:
        if record.info == CORE_OWNER:
            raise self._core_error(f"polytile's own hook '{hook}' failed", exc, hook) from exc
        self._fail(record, exc, hook)

    # -- calling hooks ----------------------------------------------------------------

    def _impls(self, hook_name: str) -> list[Any]:
        # pluggy calls the last registered implementation first (tryfirst/trylast aside).
        return list(reversed(getattr(self._pm.hook, hook_name).get_hookimpls()))

    @staticmethod
    def _arguments(impl: Any, kwargs: dict[str, Any], hook_name: str, record: PluginRecord) -> dict[str, Any]:
        # Like pluggy: an implementation receives only the arguments it names.
        try:
            return {name: kwargs[name] for name in impl.argnames}
        except KeyError as exc:
            raise PluginError(
                f"{record.info.describe()} implements hook '{hook_name}' with argument '{exc.args[0]}', "
                f"which the hook does not have (it has: {', '.join(kwargs) or 'none'})",
                plugin=record.info.name, distribution=record.info.distribution, hook=hook_name,
            ) from None

    def _caller(self, hook_name: str, kwargs: dict[str, Any]) -> Any:
        if hook_name in REGISTRATION_HOOKS:
            raise ValueError(f"'{hook_name}' fills a registry: call run_registration('{hook_name}', registry)")
        caller = getattr(self._pm.hook, hook_name, None)
        if caller is None or caller.spec is None:
            raise ValueError(f"unknown hook '{hook_name}'{did_you_mean(hook_name, HOOK_NAMES)}")
        expected = set(caller.spec.argnames)
        if set(kwargs) != expected:
            missing, extra = sorted(expected - set(kwargs)), sorted(set(kwargs) - expected)
            raise TypeError(f"hook '{hook_name}' takes the keyword arguments {', '.join(sorted(expected))}; "
                            f"missing: {', '.join(missing) or 'none'}, unexpected: {', '.join(extra) or 'none'}")
        return caller

    def _call_each(self, hook_name: str, kwargs: dict[str, Any],
                   undo: Callable[[], None] | None = None) -> Iterator[tuple[PluginRecord, Any]]:
        """Call each loaded plugin's implementation in turn.  One that raises is disabled
        for the process with one warning (``undo()`` first takes back what it changed)
        and the others go on; with ``strict_plugins`` the error is raised instead.  A
        mistake in the user's kernel (:class:`~polytile.errors.CompilationError`) and an
        error naming another plugin pass through unchanged."""
        # The caller has checked the hook and its arguments with _caller().
        self._ensure_loaded()
        for impl in self._impls(hook_name):
            record = self._by_pluggy_name.get(impl.plugin_name)
            if record is None or record.status != LOADED:
                continue
            arguments = self._arguments(impl, kwargs, hook_name, record)
            try:
                with calling_plugin(record.info):
                    result = impl.function(**arguments)
            except CompilationError:
                raise
            except PluginError as exc:
                if exc.plugin and exc.plugin != record.info.name:  # names another plugin at fault
                    raise
                self._hook_failed(record, hook_name, exc, undo)
                continue
            except Exception as exc:
                self._hook_failed(record, hook_name, exc, undo)
                continue
            yield record, result

    def _hook_failed(self, record: PluginRecord, hook_name: str, exc: Exception,
                     undo: Callable[[], None] | None) -> None:
        if undo is not None:
            undo()
        if record.info == CORE_OWNER:
            raise self._core_error(f"polytile's own hook '{hook_name}' failed", exc, hook_name) from exc
        with self._lock:
            if strict_plugins():
                raise self._hook_error(record, hook_name, exc) from exc
            self._fail(record, exc, hook_name)

    def call_each_plugin(self, hook_name: str, arguments: dict[str, Any], *,
                         undo: Callable[[], None] | None = None) -> Iterator[tuple[PluginInfo, Any]]:
        """Call a non-registration hook plugin by plugin, yielding ``(plugin, result)``
        after each implementation that returned.

        For callers that need to know which plugin did what (the pipeline builder
        attributes each inserted pass to its plugin).  An implementation that raises is
        handled as in :meth:`call_hook`, after ``undo()`` has taken back its half-made
        changes to the arguments.
        """
        self._caller(hook_name, arguments)
        for record, result in self._call_each(hook_name, dict(arguments), undo):
            yield record.info, result

    @staticmethod
    def _hook_error(record: PluginRecord, hook_name: str, exc: BaseException) -> PluginError:
        return PluginError(f"{record.info.describe()} failed in hook '{hook_name}': {_summary(exc)}",
                           plugin=record.info.name, distribution=record.info.distribution, hook=hook_name)

    def call_hook(self, hook_name: str, /, **kwargs: Any) -> Any:
        """Call a non-registration hook with keyword arguments.

        Returns the list of non-``None`` results in call order, or for a
        ``firstresult`` hook the first non-``None`` result (``None`` if there is none).
        A plugin whose implementation raises is disabled for the process with one warning
        naming it, its distribution and the error, and the call goes on without it.
        With the setting ``strict_plugins`` the exception is raised instead, as a
        :class:`~polytile.errors.PluginError` naming the plugin, its distribution and the
        hook, the cause chained.
        """
        firstresult = bool(self._caller(hook_name, kwargs).spec.opts.get("firstresult"))
        results = []
        for _, result in self._call_each(hook_name, kwargs):
            if result is not None:
                if firstresult:
                    return result
                results.append(result)
        return None if firstresult else results

    # -- what the rest of polytile asks -----------------------------------------------

    @property
    def backends(self) -> BackendRegistry:
        """Every installed backend; ``polytile_register_backends`` runs on first access."""
        if self._backends_ready:
            return self._backends  # type: ignore[return-value]
        with self._lock:
            if self._backends is None:
                self._backends = BackendRegistry(explain_missing=self.failure_for, report_problem=self._record_problem)
            self.run_registration("polytile_register_backends", self._backends)
            self._backends_ready = True
            return self._backends

    def plugins(self) -> list[PluginRecord]:
        """Every plugin: the core first, then entry points in load order, with status."""
        self._ensure_loaded()
        return list(self._records)

    def failure_for(self, name: str) -> PluginError | None:
        """The error of the failed or disabled plugin called ``name`` (entry point or
        distribution name), or ``None``.  Registries raise it when asked for a name such
        a plugin would have provided."""
        self._ensure_loaded()
        wanted = _normalize(name)
        for record in self._records:
            if record.status != LOADED and wanted in (_normalize(record.info.name), _normalize(record.info.distribution)):
                return record.error
        return None

    def _record_problem(self, owner: PluginInfo, message: str) -> None:
        log.warning("%s: %s", owner.describe(), message)
        for record in self._records:
            if record.info == owner and message not in record.problems:
                record.problems.append(message)

    def cache_key_components(self, target: Target, options: Any) -> list[str]:
        """Sorted strings for the compile cache key: ``"name==version"`` of every loaded
        plugin (the core as ``polytile==<version>``), and ``"name: <string>"`` for each
        string a plugin returned from ``polytile_cache_key``."""
        self._ensure_loaded()
        parts: set[str] = set()
        kwargs = {"target": target, "options": options}
        self._caller("polytile_cache_key", kwargs)
        for record, result in self._call_each("polytile_cache_key", kwargs):
            if result is None:
                continue
            if not isinstance(result, str):  # the plugin's bug: it fails, as if its hook raised
                self._hook_failed(record, "polytile_cache_key", TypeError(
                    f"it returned {type(result).__name__} from hook 'polytile_cache_key'; it must return a string "
                    "or None"), None)
                continue
            parts.add(f"{record.cache_name}: {result}")
        # Named after the hooks ran: a plugin whose hook failed is disabled, and the code
        # compiled under this key is made without it.
        parts.update(f"{r.cache_name}=={r.version}" for r in self._records if r.status == LOADED)
        return sorted(parts)

    def choose_target(self, explicit: "str | Target | None" = None, source: str = "target= argument") -> Any:
        """The target to compile for, and why (a ``polytile.config.TargetChoice``).

        The order of precedence is the configuration's (:func:`polytile.config.resolve_target`);
        the devices it falls back on come from :meth:`BackendRegistry.describe_devices`.
        The chosen target is then checked against the installed backends and completed
        with the backend's default architecture.
        """
        from .. import config

        backends = self.backends
        choice = config.resolve_target(explicit, active_devices=backends.describe_devices, source=source)
        _, target = backends.resolve(choice.target, where=str(choice.reason))
        if target != choice.target:
            choice = choice._replace(target=target)
        return choice

    def info(self, refresh_devices: bool = False) -> PolytileInfo:
        """What ``polytile info`` shows; never raises for a plugin's failure."""
        from .reports import BackendReport, PluginReport, PolytileInfo

        load_error = ""
        try:
            self._ensure_loaded()
        except PluginError as exc:  # two plugins define one op: show what did load, and why not the rest
            load_error = str(exc)
        report = PolytileInfo(__version__, [], [], list(self._unknown_disabled), load_error=load_error)
        try:
            backends: BackendRegistry | None = self.backends
        except PluginError as exc:
            backends = None
            report.backends_error = str(exc)
            report.target_error = f"no target can be chosen: {exc}"
        if backends is not None:
            # Before the plugin reports: a crashing probe adds a problem to its plugin.
            for backend in backends.ordered():
                probe = backends.probe(backend.name, refresh=refresh_devices)
                report.backends.append(BackendReport(
                    backend.name, backend.description, backends.owner_of(backend.name), tuple(backend.architectures),
                    backend.default_architecture, [describe_device(backend, d) for d in probe.devices],
                    probe.reason, probe.failed,
                ))
            try:
                choice = self.choose_target()
                report.target, report.target_reason = str(choice.target), str(choice.reason)
            except Exception as exc:  # info must show a broken setup, not crash on it
                report.target_error = str(exc) if isinstance(exc, PolytileError) else _summary(exc)
        provides: dict[PluginInfo, dict[str, list[str]]] = {}
        for filled in list(self._filled.values()):
            for part in filled.parts:
                kind = getattr(part, "kind", filled.hook)
                for name, _, owner in part.items() if callable(getattr(part, "items", None)) else ():
                    provides.setdefault(owner, {}).setdefault(kind, []).append(name)
        for r in self._records:
            registered = provides.get(r.info, {}) if r.status == LOADED else {}
            report.plugins.append(PluginReport(
                r.info.name, r.info.distribution, r.version, r.group, r.value, r.status, r.reason, r.hook,
                list(r.problems), {kind: sorted(names) for kind, names in registered.items()}, r.traceback,
            ))
        return report


def discover_entry_points() -> list[Any]:
    """Installed entry points of :data:`ENTRY_POINT_GROUPS`, sorted by name within a
    group, each once (:func:`polytile.plugins.distributions.discover_entry_points`)."""
    return distributions.discover_entry_points(ENTRY_POINT_GROUPS)


_manager: PluginManager | None = None
_manager_lock = threading.RLock()


def get_plugin_manager() -> PluginManager:
    """The process-wide plugin manager, created on first call (plugins load on first use).

    It follows the setting ``disabled_plugins``: when the setting no longer matches what
    the manager loaded with, a new manager replaces it (see the module docstring).  An
    invalid value of the setting raises :class:`~polytile.errors.ConfigError`.  A manager
    installed with :func:`reset_plugin_manager` is returned as it is.
    """
    global _manager
    manager = _manager
    if manager is not None and not manager._follows_config:
        return manager
    disabled = _configured_disabled()  # a dict lookup or two when nothing changed
    if manager is not None and manager._disabled_setting == disabled:
        return manager
    with _manager_lock:
        manager = _manager
        if manager is None:
            manager = _manager = _following(disabled)
        elif manager._follows_config and manager._disabled_setting != disabled:
            successor = _following(disabled)
            if manager._loaded and manager._load_error is None:
                successor._predecessor = manager
            manager = _manager = successor
            if successor._predecessor is not None:
                # Load now: the registries the old manager filled are cached by their
                # owners (pass_registry()), and must not go on offering disabled plugins.
                try:
                    successor._ensure_loaded()
                except PolytileError:
                    pass  # kept by the manager and raised where it is next used
    return manager


def _following(disabled: tuple[str, ...]) -> PluginManager:
    manager = PluginManager(disabled=disabled)
    manager._follows_config = True
    return manager


def _configuration_changed() -> None:
    """Called by polytile.config when ``disabled_plugins`` may have changed."""
    manager = _manager
    if manager is None or not manager._follows_config or not manager._loaded:
        return  # nothing loaded yet: the next get_plugin_manager() reads the setting
    try:
        get_plugin_manager()
    except PolytileError:
        pass  # an invalid value: raised by the next get_plugin_manager()


def _watch_configuration() -> None:
    try:
        config = importlib.import_module("polytile.config")
    except ModuleNotFoundError:
        return
    watch = getattr(config, "watch", None)
    if callable(watch):
        watch("disabled_plugins", _configuration_changed)


def reset_plugin_manager(manager: PluginManager | None = None) -> PluginManager | None:
    """Replace the process-wide manager (tests): with ``manager``, or with none so that the
    next :func:`get_plugin_manager` builds a fresh one.  Returns the previous manager.

    A manager installed here is kept as it is: it does not follow ``disabled_plugins``."""
    global _manager
    with _manager_lock:
        previous, _manager = _manager, manager
    return previous


_watch_configuration()


def __getattr__(name: str) -> Any:
    # The report classes, imported from .reports when asked for (see .records).
    if name in _REPORTS:
        from . import reports

        return getattr(reports, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BUILTIN_PLUGINS", "ENTRY_POINT_GROUPS", "DISABLED", "FAILED", "LOADED", "BackendReport", "PluginManager",
    "PluginRecord", "PluginReport", "PolytileInfo", "discover_entry_points", "get_plugin_manager",
    "reset_plugin_manager",
]
