"""Passes and their typed options.  (Analyses, their manager and what a pass preserves
live in :mod:`polytile.analysis.manager`; they are named here too.)

A pass is a dataclass whose fields are its options::

    @dataclass
    class Unroll(Pass):
        '''Unroll small constant-trip-count loops.'''
        name: ClassVar[str] = "unroll"
        max_trip_count: int = 8

        def run(self, module, context):
            ...
            return PreservedAnalyses.none()

Options are ``int``, ``float``, ``bool``, ``str``, a ``Literal[...]`` of strings, or a
``tuple[str, ...]``; the pipeline text sets them as ``unroll{max-trip-count=4}`` (field
names with ``-`` or ``_`` both work).
"""

from __future__ import annotations

import dataclasses
import re
import typing
from typing import Any, ClassVar

from ..analysis.manager import Analysis, AnalysisManager, PreservedAnalyses
from ..errors import ConfigError, UnknownNameError

_KEBAB = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


@dataclasses.dataclass
class PassContext:
    """What a running pass may use besides the IR."""

    analyses: AnalysisManager = dataclasses.field(default_factory=AnalysisManager)
    target: Any = None
    options: Any = None
    #: Counters a pass may bump ("cse.erased": 3); the pass manager hands them to the
    #: instruments when the pipeline ends, and ``--time-passes`` (PassTimer) prints them.
    statistics: dict[str, int] = dataclasses.field(default_factory=dict)
    #: What the stages make besides the IR, by name: the LLVM module and its text, the
    #: PTX, the cubin ("llvm_ir", "ptx", ...).  Later passes read what earlier ones left.
    artifacts: dict[str, Any] = dataclasses.field(default_factory=dict)

    def count(self, key: str, amount: int = 1) -> None:
        self.statistics[key] = self.statistics.get(key, 0) + amount


class Pass:
    """Base class of every pass.  Subclasses are dataclasses; their fields are options."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses | None:
        """Transform ``module`` in place; return what stays valid (None: nothing)."""
        raise NotImplementedError

    def applies_to(self, module: Any) -> bool:
        """Whether the pass may have anything to do on ``module`` (by default, yes).  A pass
        that answers no is not run, and, having changed nothing, not checked: a plugin's
        lowering of ops a kernel does not use costs no verification of the kernel.  Answer
        without changing the module."""
        return True

    # -- options ----------------------------------------------------------------------
    @classmethod
    def option_fields(cls) -> list[dataclasses.Field]:
        if not dataclasses.is_dataclass(cls):
            return []
        return [f for f in dataclasses.fields(cls) if f.init]

    @classmethod
    def option_types(cls) -> dict[str, Any]:
        hints = typing.get_type_hints(cls)
        return {f.name: hints.get(f.name, str) for f in cls.option_fields()}

    @classmethod
    def describe_options(cls) -> list[tuple[str, str, Any, str]]:
        """(name, type, default, doc) for every option, for ``polytile passes``."""
        types = cls.option_types()
        rows = []
        for f in cls.option_fields():
            default = f.default if f.default is not dataclasses.MISSING else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else None)  # type: ignore[misc]
            rows.append((option_spelling(f.name), describe_option_type(types[f.name]), default,
                         f.metadata.get("doc", "")))
        return rows

    @classmethod
    def from_options(cls, options: dict[str, str], where: str = "") -> "Pass":
        """Make the pass from option text (``{"threshold": "4"}``), checking each value."""
        types = cls.option_types()
        by_spelling = {option_spelling(name): name for name in types}
        values: dict[str, Any] = {}
        for key, text in options.items():
            field_name = by_spelling.get(option_spelling(key))
            if field_name is None:
                raise UnknownNameError(f"option of pass '{cls.name}'", key, by_spelling, where)
            values[field_name] = parse_option_value(cls.name, option_spelling(field_name), types[field_name], text)
        return cls(**values)

    def non_default_options(self) -> list[tuple[str, Any]]:
        changed = []
        for f in self.option_fields():
            value = getattr(self, f.name)
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
                default = f.default_factory()  # type: ignore[misc]
            else:
                default = dataclasses.MISSING
            if value != default:
                changed.append((option_spelling(f.name), value))
        return changed

    def spelling(self) -> str:
        """This pass as pipeline text: ``name`` or ``name{opt=value ...}``."""
        changed = self.non_default_options()
        if not changed:
            return self.name
        return self.name + "{" + " ".join(f"{k}={format_option_value(v)}" for k, v in changed) + "}"


def option_spelling(name: str) -> str:
    return name.replace("_", "-")


def describe_option_type(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return " | ".join(str(a) for a in typing.get_args(tp))
    if origin in (tuple, list):
        return "list of " + describe_option_type(typing.get_args(tp)[0])
    return getattr(tp, "__name__", str(tp))


def parse_option_value(pass_name: str, option: str, tp: Any, text: str) -> Any:
    where = f"option '{option}' of pass '{pass_name}'"
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        allowed = [str(a) for a in typing.get_args(tp)]
        if text not in allowed:
            raise ConfigError(f"{where}: '{text}' is not allowed; use one of {', '.join(allowed)}")
        return text
    if origin in (tuple, list):
        inner = typing.get_args(tp)[0]
        items = tuple(parse_option_value(pass_name, option, inner, part) for part in text.split(",") if part)
        return items if origin is tuple else list(items)
    if tp is bool:
        lowered = text.lower()
        if lowered in ("true", "1", "on", "yes"):
            return True
        if lowered in ("false", "0", "off", "no"):
            return False
        raise ConfigError(f"{where}: '{text}' is not a boolean; use true or false")
    if tp is int:
        try:
            return int(text, 0)
        except ValueError:
            raise ConfigError(f"{where}: '{text}' is not an integer") from None
    if tp is float:
        try:
            return float(text)
        except ValueError:
            raise ConfigError(f"{where}: '{text}' is not a number") from None
    return text


def format_option_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return ",".join(format_option_value(v) for v in value)
    return str(value)


def check_pass_class(cls: type) -> None:
    """Reject a pass class that could not work, with a message for its author."""
    if not isinstance(cls, type) or not issubclass(cls, Pass):
        raise TypeError(f"{cls!r} is not a subclass of polytile.passes.Pass")
    if not cls.name or not _KEBAB.match(cls.name):
        raise ValueError(f"pass class {cls.__qualname__} needs a kebab-case name such as 'my-pass', got {cls.name!r}")
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"pass '{cls.name}' ({cls.__qualname__}) must be a @dataclass: its fields are its options")
    if cls.run is Pass.run:
        raise TypeError(f"pass '{cls.name}' ({cls.__qualname__}) does not define run(module, context)")
    for name, tp in cls.option_types().items():
        supported = tp in (int, float, bool, str) or typing.get_origin(tp) in (typing.Literal, tuple, list)
        if not supported:
            raise TypeError(f"option '{name}' of pass '{cls.name}' has type {tp!r}; options are int, float, bool, "
                            "str, Literal[...] or tuple[str, ...]")
        field = next(f for f in cls.option_fields() if f.name == name)
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:  # type: ignore[misc]
            raise TypeError(f"option '{name}' of pass '{cls.name}' needs a default value")
