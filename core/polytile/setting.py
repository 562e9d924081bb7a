"""How one setting is declared: its kind (type), default, environment variables and
documentation, and how a value from each source (environment, project file, code) is
checked and converted.

The registry of settings and the lookup of values are in :mod:`polytile.config`, which
re-exports everything a backend or plugin needs to declare a setting (``Setting``,
``BOOL``, ``INT``, ``STR``, ``PATH``, ``STR_LIST``, ``Choice``, ``InvalidValue``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, NamedTuple

from .target import Target, TargetError

__all__ = [
    "BOOL", "INT", "PATH", "STR", "STR_LIST", "TARGET", "Choice", "InvalidValue", "Setting", "SettingInfo",
]


class _Invalid(Exception):
    """A value failed its check; the message says what is wrong and what is allowed.

    Raised by the kinds and validators, turned into a ConfigError by the caller, which
    knows the setting and where the value came from.
    """


# Where a value came from decides how it is spelled: environment variables are text,
# project files are TOML, set() takes Python objects.  Messages use the spelling of the
# source the user wrote the value in.
_ENV, _TOML, _PYTHON = "env", "toml", "python"


class _Kind:
    """A type of setting: converts and checks values from each kind of source."""

    description = ""

    def from_env(self, raw: str) -> Any:
        return self.from_value(raw.strip(), _ENV, None)

    def from_value(self, value: Any, origin: str, base_dir: Path | None) -> Any:
        raise NotImplementedError

    def show(self, value: Any) -> str:
        return str(value)


class _Bool(_Kind):
    description = "bool"
    _TRUE = frozenset({"1", "true", "yes", "on"})
    _FALSE = frozenset({"0", "false", "no", "off"})

    def from_env(self, raw: str) -> bool:
        word = raw.strip().lower()
        if word in self._TRUE:
            return True
        if word in self._FALSE:
            return False
        raise _Invalid(f"{raw!r} is not a boolean; use 1/0, true/false, yes/no, on/off")

    def from_value(self, value: Any, origin: str, base_dir: Path | None) -> bool:
        if isinstance(value, bool):
            return value
        allowed = "true or false" if origin == _TOML else "True or False"
        raise _Invalid(f"{value!r} is not a boolean; use {allowed}")

    def show(self, value: Any) -> str:
        return "true" if value else "false"


class _Int(_Kind):
    description = "int"

    def from_env(self, raw: str) -> int:
        try:
            return int(raw.strip(), 10)
        except ValueError:
            raise _Invalid(f"{raw!r} is not an integer; use decimal digits such as 4") from None

    def from_value(self, value: Any, origin: str, base_dir: Path | None) -> int:
        # bool is an int subclass, but `jobs = true` is a mistake, not 1.
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _Invalid(f"{value!r} is not an integer")


class _Str(_Kind):
    description = "str"

    def from_value(self, value: Any, origin: str, base_dir: Path | None) -> str:
        if isinstance(value, str):
            return value
        raise _Invalid(f"{value!r} is not a string")

    def show(self, value: Any) -> str:
        return repr(value)


class _Path(_Kind):
    description = "path"

    def from_value(self, value: Any, origin: str, base_dir: Path | None) -> Path:
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if not isinstance(value, str):
            raise _Invalid(f"{value!r} is not a path; use a string such as '/opt/cuda'")
        if not value.strip():
            raise _Invalid("an empty string is not a path")
        if "\0" in value:
            raise _Invalid(f"{value!r} is not a path: it contains a NUL character")
        path = Path(os.path.expanduser(value))
        # A relative path in a project file means relative to that file, so the project
        # behaves the same from whichever subdirectory it is run.
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        return path


class _StrList(_Kind):
    description = "list of str"

    def from_env(self, raw: str) -> tuple[str, ...]:
        return tuple(item.strip() for item in raw.split(",") if item.strip())

    def from_value(self, value: Any, origin: str, base_dir: Path | None) -> tuple[str, ...]:
        # A bare string would otherwise be split into characters by tuple().
        if isinstance(value, str):
            return self.from_env(value)
        if isinstance(value, (list, tuple)):
            for item in value:
                if not isinstance(item, str):
                    raise _Invalid(f"{value!r} is not a list of strings: {item!r} is a {type(item).__name__}")
            return tuple(value)
        what = "an array of strings" if origin == _TOML else "a list of strings or a comma-separated string"
        raise _Invalid(f"{value!r} is not a list of strings; use {what}")

    def show(self, value: Any) -> str:
        return ", ".join(value) if value else "empty"


class _Choice(_Kind):
    def __init__(self, *choices: str):
        self.choices = choices
        self.description = "one of " + ", ".join(choices)

    def from_value(self, value: Any, origin: str, base_dir: Path | None) -> str:
        if isinstance(value, str) and value.strip().lower() in self.choices:
            return value.strip().lower()
        allowed = ", ".join(f"'{c}'" for c in self.choices)
        raise _Invalid(f"{value!r} is not allowed; use one of {allowed}")


class _TargetKind(_Kind):
    description = "target"

    def from_value(self, value: Any, origin: str, base_dir: Path | None) -> str:
        if isinstance(value, (str, Target)):
            try:
                return str(Target.parse(value))
            except TargetError:
                pass
        raise _Invalid(
            f"{value!r} is not a target; use 'backend:arch' such as 'nvidia:sm_90a' or "
            "'amd:gfx942', or 'interp'"
        )


BOOL, INT, STR, PATH, STR_LIST, TARGET = _Bool(), _Int(), _Str(), _Path(), _StrList(), _TargetKind()
#: What a setting's ``validator`` raises for a value its type allows but the setting does
#: not; the message says what is wrong and what is allowed, the caller adds the setting's
#: name and where the value came from.
InvalidValue = _Invalid
#: A setting whose value is one of a few words: ``Choice("auto", "native", "bindings")``.
Choice = _Choice


def _positive(value: int) -> None:
    if value < 1:
        raise _Invalid(f"{value!r} is not allowed; use a positive integer")


def _names(value: tuple[str, ...]) -> None:
    """Items of a name list: no empty names, no blanks, no commas (env lists split on them)."""
    for item in value:
        if not item or item != item.strip() or "," in item or any(c.isspace() for c in item):
            raise _Invalid(f"{item!r} is not a name; names have no spaces or commas")


class Setting(NamedTuple):
    """The declaration of one setting.

    ``env`` lists the environment variables read, first set one wins (the ``POLYTILE_*``
    variable).  ``fallback_env`` lists standard variables of other tools, read after the
    project file, first set one wins.  ``default_factory`` computes
    a default that depends on the environment (``cache_dir``); ``default_text`` is how the
    docs show such a default.  ``validator`` raises ``_Invalid`` for a converted value
    that the type alone does not rule out.  ``recompiles``: the compiled code depends on
    the value (a toolchain path, a register budget), so changing it through
    ``polytile.config`` drops the kernels compiled in this process (the on-disk cache
    must key it too: a plugin's ``polytile_cache_key``, a backend's ``versions``).
    """

    name: str
    kind: _Kind
    default: Any
    env: tuple[str, ...]
    doc: str
    optional: bool = False
    validator: Callable[[Any], None] | None = None
    default_factory: Callable[[], Any] | None = None
    default_text: str | None = None
    fallback_env: tuple[str, ...] = ()
    recompiles: bool = False

    @property
    def type_description(self) -> str:
        return f"{self.kind.description} or unset" if self.optional else self.kind.description

    @property
    def env_description(self) -> str:
        text = ", then ".join(self.env)
        if self.fallback_env:
            text += f" (after the project file: {', then '.join(self.fallback_env)})"
        return text

    def default_value(self) -> Any:
        return self.default_factory() if self.default_factory is not None else self.default

    def show_default(self) -> str:
        if self.default_text is not None:
            return self.default_text
        if self.default is None:
            return "unset"
        return self.kind.show(self.default)

    def convert(self, value: Any, origin: str, base_dir: Path | None = None) -> Any:
        """``value`` checked and converted; raises ``_Invalid``."""
        if value is None:
            if self.optional and origin == _PYTHON:
                return None
            hint = f"; use reset('{self.name}') to go back to the default" if origin == _PYTHON else ""
            raise _Invalid(f"None is not allowed, the value must be a {self.kind.description}{hint}")
        if origin == _ENV:
            converted = self.kind.from_env(value)
        else:
            converted = self.kind.from_value(value, origin, base_dir)
        if self.validator is not None:
            self.validator(converted)
        return converted


class SettingInfo(NamedTuple):
    """One row of :func:`describe`: every field is display text; ``owner`` is the
    distribution that declares the setting (``polytile`` for the core's)."""

    name: str
    type: str
    default: str
    env: str
    doc: str
    owner: str = "polytile"
