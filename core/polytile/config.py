"""Every setting and environment variable of polytile, in one registry.

Each setting is declared once, with its type, default, environment variable and
documentation: the core's in :data:`SETTINGS`, a backend's or plugin's through the hook
``polytile_register_settings`` (the NVIDIA backend's ``nvidia_assembler``, say).  Both
land in one registry that knows each setting's owner; the docs page and ``polytile
config`` are generated from it through :func:`describe`.  A plugin's settings are read
exactly like the core's.  They are declared the first time a name that the core does not
declare is met, so ``import polytile`` and reading a core setting load no plugin.  A
value is looked up, first match wins, in:

1. ``polytile.config.set(...)`` (or an :func:`override` block),
2. the setting's environment variable (``POLYTILE_*``),
3. the project file: ``[tool.polytile]`` in the nearest ``pyproject.toml`` or the
   top-level keys of the nearest ``polytile.toml``, searching from the current directory
   upwards,
4. for a few settings, standard variables of other tools (the NVIDIA backend's
   ``cuda_home`` reads ``CUDA_HOME``):
   they are set machine-wide, so a project that names its toolkit must win over them,
5. the default.

``set(name=None)`` on an optional setting means "unset here": it hides every source below
it; ``reset(name)`` goes back to them.

The target has one more source in front, the ``target=`` argument of a call, and two
behind, the first active device and then the interpreter: see :func:`resolve_target`.

Paths are checked for syntax only.  Whether a tool's path exists is checked by the code
that runs it, which can name the setting and :func:`source_of` in its error; checking here
would make every ``get`` fail on a machine where a stale ``CUDA_HOME`` points nowhere even
when nothing there needs CUDA.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

from .errors import ConfigError, UnknownSettingError, did_you_mean

from .setting import (  # noqa: F401 - re-exported: plugins declare settings through polytile.config
    _ENV, _PYTHON, _TOML, BOOL, INT, PATH, STR, STR_LIST, TARGET, Choice, InvalidValue, Setting, SettingInfo,
    _Choice, _Invalid, _names, _positive,
)
from .target import Target

__all__ = [
    "BOOL", "Choice", "Config", "INT", "InvalidValue", "PATH", "STR", "STR_LIST", "Setting", "SettingInfo",
    "SETTINGS", "TARGET", "TargetChoice", "UnknownSettingError", "check_environment", "describe", "get", "notes",
    "override", "owner_of", "problems", "project_file", "reload", "reset", "resolve_target", "set", "settings",
    "source_of", "watch", "watch_recompiling",
]


def _default_cache_dir() -> Path:
    # The XDG spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "polytile"
    return Path(os.path.expanduser("~")) / ".cache" / "polytile"


def _declare(*settings: Setting) -> dict[str, Setting]:
    return {s.name: s for s in settings}


#: The core's settings.  A backend or plugin declares its own through the hook
#: ``polytile_register_settings``; :func:`settings` lists both.
SETTINGS: dict[str, Setting] = _declare(
    Setting(
        "target", TARGET, None, ("POLYTILE_TARGET",), optional=True,
        doc="The target to compile for when a call does not pass target=, as 'backend:arch' (for example "
        "'nvidia:sm_90a', 'amd:gfx942') or 'interp'. Only the syntax is checked here; whether an installed backend "
        "knows the target is checked when compiling. When unset, polytile uses the first active device of an "
        "installed backend, else the interpreter.",
    ),
    Setting(
        "disabled_plugins", STR_LIST, (), ("POLYTILE_DISABLE_PLUGINS",), validator=_names,
        doc="Plugins and backends that are not loaded, by entry-point name or by distribution name (for example "
        "'polytile-tma'). Use it to work around a broken plugin or to compare results with and without one.",
    ),
    Setting(
        "strict_plugins", BOOL, False, ("POLYTILE_STRICT_PLUGINS",),
        doc="Raise when a plugin fails (cannot be imported, raises in a hook, claims a name of polytile's own) "
        "instead of disabling it for the process with one warning and going on. For CI: a broken plugin fails "
        "the run rather than a compile quietly going on without it.",
    ),
    Setting(
        "dump_ir", BOOL, False, ("POLYTILE_DUMP_IR",),
        doc="Print the IR before the pipeline and after every pass while compiling, to stderr or to dump_ir_dir, "
        "with the artifacts each pass makes (LLVM IR, PTX, AMDGCN assembly; binaries such as a cubin only to "
        "dump_ir_dir, as files).",
    ),
    Setting(
        "dump_ir_dir", PATH, None, ("POLYTILE_DUMP_IR_DIR",), optional=True,
        doc="Write the IR dumps asked for by dump_ir, print_ir_before and print_ir_after, and the artifacts dumped "
        "with them, to files in this directory (created when needed) instead of stderr.",
    ),
    Setting(
        "print_ir_before", STR_LIST, (), ("POLYTILE_PRINT_IR_BEFORE",), validator=_names,
        doc="Print the IR before each of these passes (pass names, or 'all'). The pass manager reports a name that "
        "no pass has.",
    ),
    Setting(
        "print_ir_after", STR_LIST, (), ("POLYTILE_PRINT_IR_AFTER",), validator=_names,
        doc="Print the IR after each of these passes (pass names, or 'all'), with the artifacts the pass made (the "
        "PTX after emit-ptx, say). The pass manager reports a name that no pass has.",
    ),
    Setting(
        "time_passes", BOOL, False, ("POLYTILE_TIME_PASSES",),
        doc="After each compilation, print how long every pass took.",
    ),
    Setting(
        "verify_each", BOOL, False, ("POLYTILE_VERIFY_EACH",),
        doc="Run the IR verifier after every pass, so a pass that breaks the IR is named at once. Slower; the test "
        "suite turns it on.",
    ),
    Setting(
        "cache_dir", PATH, None, ("POLYTILE_CACHE_DIR",),
        default_factory=_default_cache_dir,
        default_text="$XDG_CACHE_HOME/polytile, or ~/.cache/polytile",
        doc="Directory of the on-disk cache of compiled kernels (entries under kernels/; deleting that folder "
        "clears the cache). The default follows XDG_CACHE_HOME when it is set to an absolute path. Read at each "
        "compilation, so a change applies to the next kernel compiled.",
    ),
    Setting(
        "cache", BOOL, True, ("POLYTILE_CACHE",),
        doc="Read and write the on-disk kernel cache. Turn it off to force every kernel to be compiled again; "
        "kernels are still kept in memory for the life of the process. Read at each compilation.",
    ),
    Setting(
        "cache_lock_timeout", INT, 120, ("POLYTILE_CACHE_LOCK_TIMEOUT",), validator=_positive,
        doc="Seconds a process waits for another one compiling the same kernel into the on-disk cache (it then "
        "reads that kernel instead of compiling it too). After that it warns, naming the other process, and "
        "compiles the kernel itself.",
    ),
    Setting(
        "interpreter_bounds_check", BOOL, True, ("POLYTILE_INTERP_BOUNDS_CHECK",),
        doc="In the interpreter, report a load or store outside its array (naming the kernel line) instead of "
        "reading or writing out of bounds. Turn it off only to measure the interpreter's speed.",
    ),
    Setting(
        "interpreter_mode", _Choice("auto", "per_program"), "auto", ("POLYTILE_INTERP_MODE",),
        doc="How the interpreter walks the grid: 'auto' runs a batch of programs at once, op by op, whenever the "
        "kernel allows it, and one program at a time otherwise (an op without a batched rule, or a while loop "
        "holding an atomic or a volatile load, such as a spin lock); 'per_program' always runs one program after "
        "the other, in program order. Both give the same results unless programs race on plain loads and stores; "
        "use 'per_program' to compare, or to debug a plugin's interpreter rule.",
    ),
    Setting(
        "interpreter_batch_elements", INT, 1 << 20, ("POLYTILE_INTERP_BATCH_ELEMENTS",), validator=_positive,
        doc="In the interpreter's batched mode, how many tile elements one value may hold for a whole batch: a "
        "batch takes this number divided by the size of the kernel's largest tile programs (at least one), so "
        "memory stays bounded on large grids. Larger is faster until memory runs short.",
    ),
)


class TargetChoice(NamedTuple):
    """The target :func:`resolve_target` chose and, in words, why."""

    target: Target
    reason: str

    def __str__(self) -> str:
        return f"{self.target} ({self.reason})"


_SET_SOURCE = "polytile.config.set()"
_CORE_DISTRIBUTION = "polytile"
#: How :func:`polytile.plugins.settings.why_missing` starts when it knows the owner.
_OWNED_HINT = "; it is a setting of "
_DEFAULT_SOURCE = "default"
_NOT_FOUND = object()


def _encode_env_key(variable: str) -> Any:
    # os.environ.get() encodes the key and decodes the value on every call, which is most
    # of the cost of get() on the launch path.  os.environ keeps the encoded mapping in
    # _data (bytes on POSIX, upper-cased str on Windows); looking the pre-encoded key up
    # there sees every change made through os.environ at a fraction of the cost.  Where
    # that private mapping is missing, _env_raw falls back to os.environ itself.
    encode = getattr(os.environ, "encodekey", None)
    return encode(variable) if callable(encode) else variable


class _ProjectFile(NamedTuple):
    """A project file that was found: where, and its values already checked.

    ``pending`` holds the keys the core does not declare until the plugins' settings are
    known (:meth:`Config._settle`); ``notes`` says which keys were ignored and why.
    """

    path: Path
    source: str
    values: dict[str, Any]
    pending: dict[str, Any]
    notes: list[str]


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            raise ConfigError(
                f"cannot read {path}: reading TOML on Python 3.10 needs the 'tomli' package "
                "(pip install tomli)"
            ) from None
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"cannot read {path}: it is not valid TOML: {e}") from None
    except UnicodeDecodeError as e:  # tomllib decodes the whole file before parsing it
        line = e.object[:e.start].count(b"\n") + 1
        raise ConfigError(f"cannot read {path}: it is not UTF-8 text (byte 0x{e.object[e.start]:02x} at line "
                          f"{line}, offset {e.start}); TOML files must be UTF-8") from None
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None


def _may_configure_polytile(text: bytes) -> bool:
    """Whether TOML ``text`` may hold the table ``tool.polytile``: it has a ``[tool]``
    table (whose keys may name it), a header or dotted key ``tool.polytile`` (bare or
    quoted parts, blanks around the dot), or an inline table assigned to ``tool``.
    A superset of the files that have the table (keys spelled with escapes aside), so
    only a file that certainly has none is passed over unparsed."""
    import re

    return re.search(rb"""(?mx)
        ^[ \t]*\[[ \t]*["']?tool["']?[ \t]*\]         # [tool]
      | tool["']?[ \t]*\.[ \t]*["']?polytile          # tool.polytile, "tool"."polytile"
      | (?:^|[{,])[ \t]*["']?tool["']?[ \t]*=          # tool = { polytile = ... }
    """, text) is not None


class Config:
    """Programmatic values, caches of parsed environment values and project files.

    The module-level functions act on one global instance, which has the core's settings
    and those the plugins declare.  Another instance over its own table of settings (and
    no plugin's) is only useful in tests.
    """

    def __init__(self, table: Mapping[str, Setting] | None = None):
        self._table: Mapping[str, Setting] = SETTINGS if table is None else dict(table)
        self._with_plugins = table is None
        #: The SettingRegistry (core and plugin settings), made when a name that the core
        #: does not declare is first met; and the plugin manager that last filled it.
        self._registry: Any = None
        self._registry_manager: Any = None
        self._registries: Any = None  # plugin manager -> its SettingRegistry (a WeakKeyDictionary)
        self._filling: dict[Any, Any] = {}
        self._set: dict[str, Any] = {}
        # name -> (variable, raw value, parsed value).  The raw value is compared on every
        # read, so a change to os.environ is seen without re-parsing unchanged values.
        self._env_cache: dict[str, tuple[str, str, Any]] = {}
        self._project_cache: dict[str, _ProjectFile | None] = {}
        # name -> (setting, ((variable, encoded key), ...)), filled on first use.
        self._env_keys: dict[str, tuple[Setting, tuple[tuple[str, Any], ...]]] = {}
        self._fallback_keys: dict[str, tuple[Setting, tuple[tuple[str, Any], ...]]] = {}
        self._watchers: dict[str, list[Callable[[], None]]] = {}
        self._recompile_watchers: list[Callable[[], None]] = []

    # -- reading ---------------------------------------------------------------------

    def get(self, name: str) -> Any:
        """The current value of the setting ``name``."""
        value = self._set.get(name, _NOT_FOUND)
        if value is _NOT_FOUND:
            setting = self._setting(name)
            value = self._env_value(setting, False)
            if value is _NOT_FOUND:
                value = self._project_value(name)
                if value is _NOT_FOUND:
                    if setting.fallback_env:
                        value = self._env_value(setting, True)
                    if value is _NOT_FOUND:
                        value = setting.default_value()
        # Tuples are stored so that a caller cannot change a cached list in place.
        return list(value) if isinstance(value, tuple) else value

    def source_of(self, name: str) -> str:
        """Where the current value of ``name`` comes from, in words."""
        setting = self._setting(name)
        if name in self._set:
            return _SET_SOURCE
        # The environment is not parsed here, so that a bad value can still be explained.
        variable, _ = self._env_raw(setting, False)
        if variable is not None:
            return f"environment variable {variable}"
        project = self._project()
        if project is not None and name in project.values:
            return project.source
        variable, _ = self._env_raw(setting, True)
        if variable is not None:
            return f"environment variable {variable}"
        return _DEFAULT_SOURCE

    def project_file(self) -> Path | None:
        """The project file that applies in the current directory, if any."""
        project = self._project()
        return project.path if project is not None else None

    def notes(self) -> list[str]:
        """Keys of the project file that are ignored, and why: a setting of a backend or
        plugin that is not installed or is disabled.  Each is also logged once as a warning
        (logger ``polytile.config``) when the file is read."""
        try:
            project = self._project()
        except ConfigError:
            return []
        return list(project.notes) if project is not None else []

    def owner_of(self, name: str) -> str:
        """The distribution that declares the setting ``name``: ``polytile`` for the
        core's, else the backend's or plugin's (``polytile-nvidia``)."""
        self._setting(name)
        if name in self._table or self._registry is None:
            return _CORE_DISTRIBUTION
        return str(self._registry.owner_of(name).distribution)

    def all_settings(self) -> list[Setting]:
        """Every setting: the core's in table order, then each plugin's, grouped by
        owner (owners sorted by distribution name), each in the order declared."""
        if not self._with_plugins:
            return list(self._table.values())
        registry = self._plugin_registry()
        by_owner: dict[str, list[Setting]] = {}
        for name, setting, owner in registry.items():
            if name not in self._table:
                by_owner.setdefault(str(owner.distribution), []).append(setting)
        return [*self._table.values(), *(s for owner in sorted(by_owner) for s in by_owner[owner])]

    # -- writing ---------------------------------------------------------------------

    def set(self, **values: Any) -> None:
        """Set values from code; they win over every other source but a call argument.

        All values are checked before any is applied, so a bad one changes nothing.
        ``None`` for an optional setting means "unset here": the environment and the
        project file are not consulted for it (``set(target=None)``: the first active
        device, else the interpreter).  Use :meth:`reset` to consult them again.
        """
        checked = self._check_programmatic(values)
        before = self._recompiling_values(checked)
        self._set.update(checked)
        self._notify(checked, before)

    def reset(self, *names: str) -> None:
        """Forget values given to :meth:`set`; with no names, forget all of them."""
        if not names:
            names = tuple(self._set)
            before = self._recompiling_values(names)
            self._set.clear()
            self._notify(names, before)
            return
        for name in names:
            self._setting(name, where="passed to polytile.config.reset()")
        before = self._recompiling_values(names)
        for name in names:
            self._set.pop(name, None)
        self._notify(names, before)

    def override(self, **values: Any) -> "_Override":
        """A ``with`` block in which ``values`` are set; on exit the previous state returns."""
        return _Override(self, self._check_programmatic(values))

    def reload(self) -> None:
        """Forget cached environment values and project-file lookups.

        Project files are looked up once per working directory; call this after editing one
        in a running process.
        """
        self._env_cache.clear()
        self._project_cache.clear()
        self._notify(tuple(self._watchers), everything=True)

    def watch(self, name: str, callback: Callable[[], None]) -> None:
        """Call ``callback()`` after :meth:`set`, :meth:`reset`, :meth:`override` or
        :meth:`reload` may have changed the setting ``name``.

        The callback compares the value itself; changes to ``os.environ`` are not
        announced (a reader that caches a setting compares it when it is next used).
        """
        self._setting(name, where="passed to polytile.config.watch()")
        self._watchers.setdefault(name, []).append(callback)

    def watch_recompiling(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once after :meth:`set`, :meth:`reset` or :meth:`override`
        changed the value of a setting declared ``recompiles`` (the compiled code depends
        on it), whoever declares it, and after every :meth:`reload` (the environment may
        have changed anything)."""
        self._recompile_watchers.append(callback)

    def _recompiling_values(self, names: Iterable[str]) -> dict[str, Any]:
        """The current values of those of ``names`` declared ``recompiles``."""
        values = {}
        for name in names:
            if self._recompile_watchers and self._recompiles(name):
                try:
                    values[name] = self.get(name)
                except ConfigError:  # an invalid value in the environment: it counts as changed
                    values[name] = _NOT_FOUND
        return values

    def _notify(self, names: Iterable[str], before: dict[str, Any] | None = None, everything: bool = False) -> None:
        names = tuple(names)
        for name in names:
            for callback in list(self._watchers.get(name, ())):
                callback()
        if everything or (before and self._recompiling_values(before) != before):
            for callback in list(self._recompile_watchers):
                callback()

    def _recompiles(self, name: str) -> bool:
        try:
            return self._setting(name).recompiles
        except UnknownSettingError:  # a plugin's setting, set before its plugin was disabled
            return False

    def problems(self) -> list[str]:
        """Every invalid value in the environment and the project file, one message each.

        :meth:`get` raises for the first one it meets; this lists them all, for
        ``polytile info`` and ``polytile config``.  Empty when every value is fine.
        """
        found: list[str] = []
        try:
            declared = self.all_settings()
        except ConfigError:  # the plugins load after disabled_plugins, which a bad value hides: listed below
            declared = list(self._table.values())
        for setting in declared:
            for fallback in (False, True):
                variable, _ = self._env_raw(setting, fallback)
                if variable is not None:
                    try:
                        self._convert(setting, os.environ.get(variable, ""), _ENV, f"environment variable {variable}")
                    except ConfigError as e:
                        found.append(str(e))
        try:
            project = self._find_project(Path(os.getcwd()), found)
            if project is not None:
                self._settle(project, found)
        except ConfigError as e:
            found.append(str(e))
        except OSError:  # the working directory was deleted: there is no project file
            pass
        return found

    # -- target ------------------------------------------------------------------------

    def resolve_target(
        self,
        explicit: "str | Target | None" = None,
        *,
        active_devices: Callable[[], Sequence[tuple[Target, str]]] | None = None,
        source: str = "target= argument",
    ) -> TargetChoice:
        """Choose the target: argument, set(), environment, project file, device, interpreter.

        ``active_devices`` returns ``(target, description)`` pairs in priority order; it is
        slow (it may initialize drivers), so it is called only when nothing earlier chose.
        """
        if explicit is not None:  # ``source`` names where it came from in messages ("--target")
            return TargetChoice(Target.parse(explicit, where=source), source)
        value = self.get("target")
        if value is not None:
            return TargetChoice(Target.parse(value), self.source_of("target"))
        # set(target=None) skips the environment and the project file: say so, since the
        # user may not remember that a library call did that.
        asked = f"; {self._target_none_note()}" if "target" in self._set else ""
        if active_devices is None:
            return TargetChoice(Target("interp"), f"devices were not looked for; using the interpreter{asked}")
        for target, description in active_devices():
            target = Target.parse(target, where="active_devices")
            return TargetChoice(target, f"first active device: {description} (backend '{target.backend}'){asked}")
        none = "no installed backend has an active device; using the interpreter"
        return TargetChoice(Target("interp"), none + asked)

    def _target_none_note(self) -> str:
        hidden = []
        variable, _ = self._env_raw(self._table["target"], False)
        if variable is not None:
            hidden.append(f"environment variable {variable}")
        try:
            project = self._project()
        except ConfigError:
            project = None
        if project is not None and "target" in project.values:
            hidden.append(project.source)
        note = "polytile.config.set(target=None) asked for the first active device or the interpreter"
        return note + (f", ignoring {' and '.join(hidden)}" if hidden else "")

    # -- internals -----------------------------------------------------------------------

    def _setting(self, name: str, where: str = "") -> Setting:
        try:
            return self._table[name]
        except (KeyError, TypeError):
            pass
        if self._with_plugins and isinstance(name, str):
            setting = self._plugin_registry().find(name)
            if setting is not None:
                return setting
        raise self._unknown(name, where)

    def _plugin_registry(self) -> Any:
        """The registry of every setting, with the settings of the plugins now loaded.

        Imported and filled only here, on the first name the core does not declare: the
        plugin system (pluggy, the plugins' modules) costs nothing to a program that reads
        only the core's settings.
        """
        from .plugins.manager import get_plugin_manager

        manager = get_plugin_manager()
        if manager is not self._registry_manager:
            # One registry per plugin manager, filled by the plugins that manager loaded: a
            # manager that replaces another (disabled_plugins changed) has no setting of a
            # plugin it does not load.
            if self._registries is None:
                import weakref  # not at module level: `import polytile` stays fast

                self._registries = weakref.WeakKeyDictionary()
            registry = self._registries.get(manager)
            if registry is None:
                filling = self._filling.get(manager)
                if filling is not None:
                    return filling  # a plugin's hook reading a setting while the registry fills
                from .plugins.settings import SettingRegistry

                registry = self._filling[manager] = SettingRegistry(self._table)
                try:
                    manager.run_registration("polytile_register_settings", registry)
                finally:
                    del self._filling[manager]
                # Kept only once filled: a conflict between two plugins is raised again.
                self._registries[manager] = registry
            if self._registry_manager is not None:
                # Other plugins now: the project file's keys are checked against them anew.
                self._project_cache.clear()
            self._registry, self._registry_manager = registry, manager
        return self._registry

    def _unknown(self, name: Any, where: str) -> UnknownSettingError:
        """The error for a name no setting has; it names the plugin a setting of a disabled
        or failed plugin belongs to."""
        known = self._registry.names() if self._registry is not None else self._table
        error = UnknownSettingError("setting", str(name), known, where=where)
        if self._with_plugins and isinstance(name, str):
            from .plugins.settings import why_missing

            note = why_missing(name)
            if note:
                error.args = (error.args[0] + note,)
        return error

    def _check_programmatic(self, values: Mapping[str, Any]) -> dict[str, Any]:
        checked = {}
        for name, value in values.items():
            setting = self._setting(name, where="passed to polytile.config.set()")
            checked[name] = self._convert(setting, value, _PYTHON, _SET_SOURCE)
        return checked

    @staticmethod
    def _convert(setting: Setting, value: Any, origin: str, source: str, base_dir: Path | None = None) -> Any:
        try:
            return setting.convert(value, origin, base_dir)
        except _Invalid as e:
            raise ConfigError(f"setting '{setting.name}' from {source}: {e}") from None

    def _keys(self, setting: Setting, fallback: bool) -> tuple[tuple[str, Any], ...]:
        """``(variable, encoded key)`` for each of the setting's variables (its fallback ones
        with ``fallback``).  Cached per setting object: a plugin enabled again may declare
        its setting anew."""
        cache = self._fallback_keys if fallback else self._env_keys
        entry = cache.get(setting.name)
        if entry is None or entry[0] is not setting:
            variables = setting.fallback_env if fallback else setting.env
            entry = cache[setting.name] = (setting, tuple((v, _encode_env_key(v)) for v in variables))
        return entry[1]

    def _env_raw(self, setting: Setting, fallback: bool) -> tuple[str | None, Any]:
        """The first of the setting's variables (its fallback ones with ``fallback``) that
        is set, and its raw (maybe undecoded) text."""
        keys = self._keys(setting, fallback)
        data = getattr(os.environ, "_data", None)
        if not isinstance(data, dict):
            data = os.environ
            for variable, _ in keys:
                raw = data.get(variable)
                # An empty variable counts as unset, as `FOO= cmd` is the usual way to unset one.
                if raw and not raw.isspace():
                    return variable, raw
            return None, None
        for variable, key in keys:
            raw = data.get(key)
            if raw and not raw.isspace():
                return variable, raw
        return None, None

    def _env_value(self, setting: Setting, fallback: bool) -> Any:
        variable, raw = self._env_raw(setting, fallback)
        if variable is None:
            return _NOT_FOUND
        cached = self._env_cache.get(setting.name)
        if cached is not None and cached[0] == variable and cached[1] == raw:
            return cached[2]
        text = os.environ.get(variable, "")
        value = self._convert(setting, text, _ENV, f"environment variable {variable}")
        self._env_cache[setting.name] = (variable, raw, value)
        return value

    def _project_value(self, name: str) -> Any:
        project = self._project()
        if project is None:
            return _NOT_FOUND
        return project.values.get(name, _NOT_FOUND)

    def _project(self) -> _ProjectFile | None:
        try:
            cwd = os.getcwd()
        except OSError:  # the working directory was deleted
            return None
        try:
            return self._project_cache[cwd]
        except KeyError:
            pass
        # A broken file is not cached, so that fixing it takes effect without reload().
        project = self._find_project(Path(cwd))
        self._project_cache[cwd] = project
        if project is not None and project.pending:
            # Cached first: loading the plugins reads disabled_plugins, from this file too.
            try:
                self._settle(project)
            except BaseException:
                self._project_cache.pop(cwd, None)
                raise
            if project.notes:
                import logging

                for note in project.notes:
                    logging.getLogger("polytile.config").warning("%s", note)
        return project

    def _settle(self, project: _ProjectFile, errors: list[str] | None = None) -> None:
        """Check the project file's keys that the core does not declare against the
        plugins' settings.  A key of a plugin that is not loaded, or that no installed
        plugin declares and that is not close to a known name, is ignored with a note (the
        project may be used where that backend is not installed); a key close to a known
        name is a typo and an error.  With ``errors``, mistakes are collected, not raised."""
        pending = dict(project.pending)
        project.pending.clear()
        try:
            registry = self._plugin_registry()
            known: Iterable[str] = registry.names()
        except ConfigError:
            # The plugins load after disabled_plugins, which a bad value (reported on its
            # own) hides: the keys are checked against the core's names only.
            registry, known = None, self._table
        for key, value in pending.items():
            try:
                setting = registry.find(key) if registry is not None else None
                if setting is not None:
                    project.values[key] = self._convert(setting, value, _TOML, project.source, project.path.parent)
                    continue
                from .plugins.settings import why_missing

                hint = why_missing(key)
                if hint.startswith(_OWNED_HINT):  # declared by a plugin that is disabled or failed
                    project.notes.append(f"setting '{key}' in {project.source} is ignored: {hint[2:]}")
                    continue
                if did_you_mean(key, known):
                    raise UnknownSettingError("setting", key, known, where=f"in {project.source}")  # a typo
                project.notes.append(
                    f"setting '{key}' in {project.source} is ignored: neither polytile nor an installed and enabled "
                    f"plugin declares it; install or enable the backend or plugin that does (`polytile info` lists "
                    f"them){hint}")
            except ConfigError as e:
                if errors is None:
                    raise
                errors.append(str(e))

    def _find_project(self, start: Path, errors: list[str] | None = None) -> _ProjectFile | None:
        for directory in (start, *start.parents):
            candidate = directory / "polytile.toml"
            if candidate.is_file():
                return self._read_project(candidate, _load_toml(candidate), str(candidate), errors)
            candidate = directory / "pyproject.toml"
            if candidate.is_file():
                table = self._polytile_table(candidate)
                if table is not None:
                    return self._read_project(candidate, table, f"[tool.polytile] in {candidate}", errors)
        return None

    @staticmethod
    def _polytile_table(path: Path) -> dict[str, Any] | None:
        """``[tool.polytile]`` of a pyproject.toml, or None when it has none.

        A pyproject.toml without that table belongs to a project that does not configure
        polytile (or to some enclosing project), so the search goes on past it.
        """
        try:
            text = path.read_bytes()
        except OSError:
            return None
        # Most pyproject.toml files never mention polytile, and most that do (a project
        # depending on it) have no [tool.polytile]: skip them without parsing, since
        # importing tomllib and parsing cost every process that launches a kernel ~2 ms.
        if b"polytile" not in text or not _may_configure_polytile(text):
            return None
        tool = _load_toml(path).get("tool")
        if not isinstance(tool, dict) or "polytile" not in tool:
            return None
        table = tool["polytile"]
        if not isinstance(table, dict):
            raise ConfigError(f"[tool.polytile] in {path} must be a table of settings, got {table!r}")
        return table

    def _read_project(self, path: Path, table: dict[str, Any], source: str,
                      errors: list[str] | None = None) -> _ProjectFile:
        """The file's checked values; the first mistake raises, unless ``errors`` collects
        every mistake (and the values without one are kept)."""
        values, pending = {}, {}
        for key, value in table.items():
            try:
                if self._with_plugins and key not in self._table:
                    if isinstance(value, dict):  # no setting's value is a table: a misplaced [tool.polytile]
                        raise UnknownSettingError("setting", str(key), self._table, where=f"in {source}")
                    pending[key] = value  # a plugin's setting, or a mistake: see _settle
                    continue
                setting = self._setting(key, where=f"in {source}")
                values[key] = self._convert(setting, value, _TOML, source, base_dir=path.parent)
            except ConfigError as e:
                if errors is None:
                    raise
                errors.append(str(e))
        return _ProjectFile(path, source, values, pending, [])


class _Override:
    """Restores exactly the programmatic values that were there before, including absence."""

    __slots__ = ("_config", "_values", "_saved")

    def __init__(self, config: Config, values: dict[str, Any]):
        self._config = config
        self._values = values
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> None:
        state = self._config._set
        self._saved = {name: state.get(name, _NOT_FOUND) for name in self._values}
        before = self._config._recompiling_values(self._values)
        state.update(self._values)
        self._config._notify(self._values, before)

    def __exit__(self, *exc: object) -> None:
        state = self._config._set
        before = self._config._recompiling_values(self._saved)
        for name, previous in self._saved.items():
            if previous is _NOT_FOUND:
                state.pop(name, None)
            else:
                state[name] = previous
        self._config._notify(self._saved, before)


def _describe(table: Iterable[Setting]) -> list[SettingInfo]:
    return [SettingInfo(s.name, s.type_description, s.show_default(), s.env_description, s.doc) for s in table]


def describe(*, plugins: bool = True) -> list[SettingInfo]:
    """Every setting as ``(name, type, default, env, doc, owner)`` display text: the core's
    in table order, then each installed and enabled plugin's, grouped by owner (with
    ``plugins=False``, the core's only: nothing is loaded)."""
    if not plugins:
        return _describe(SETTINGS.values())
    return [info._replace(owner=_config.owner_of(info.name)) for info in _describe(_config.all_settings())]


def settings() -> list[Setting]:
    """Every setting's declaration, the core's and the loaded plugins', as :func:`describe`."""
    return _config.all_settings()


def check_environment(environ: Mapping[str, str] | None = None) -> list[str]:
    """Warnings for ``POLYTILE_*`` variables that no setting reads (usually typos).

    A variable the core does not read is looked up among the plugins' settings before it
    is called unknown, so a backend's variable is known whether or not the backend's
    modules were imported yet."""
    environ = os.environ if environ is None else environ
    variables = sorted(v for v in environ if v.startswith("POLYTILE_"))
    known = {variable for s in SETTINGS.values() for variable in s.env}
    if any(v not in known for v in variables):
        known = {variable for s in _config.all_settings() for variable in s.env}
    warnings = []
    for variable in variables:
        if variable not in known:
            from .plugins.settings import why_missing

            hint = why_missing(variable=variable)
            if not hint.startswith("; read by"):  # not a variable of a known plugin: maybe a typo
                hint = did_you_mean(variable, known) + hint
            warnings.append(f"environment variable {variable} is not read by polytile{hint}")
    return warnings


_config = Config()

get = _config.get
set = _config.set  # noqa: A001 - the API is polytile.config.set(...)
reset = _config.reset
override = _config.override
source_of = _config.source_of
project_file = _config.project_file
reload = _config.reload
resolve_target = _config.resolve_target
watch = _config.watch
watch_recompiling = _config.watch_recompiling
problems = _config.problems
notes = _config.notes
owner_of = _config.owner_of
