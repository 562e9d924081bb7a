"""Attribute values: the immutable, compile-time data an operation carries.

Attributes are plain Python values wherever one fits:

========================  =============================  ======================
Python value              text                           example
========================  =============================  ======================
``bool``                  ``true`` / ``false``           ``noinline = true``
``int``                   decimal                        ``axis = 0``
``float``                 always with ``.``/``e``        ``value = 1.0``, ``inf``
``str``                   double-quoted, escaped         ``cache = "ca"``
``tuple``                 ``[a, b]``                     ``shape = [128, 64]``
:class:`~.types.Type`     the type                       ``type = f32``
:class:`SymbolRef`        ``@name``                      ``callee = @helper``
:class:`DialectAttribute` ``#name<...>``                 layouts, plugin data
========================  =============================  ======================
"""

from __future__ import annotations

import contextvars

import dataclasses
import math
import struct
from dataclasses import dataclass
from typing import Any, ClassVar

from .types import Type


@dataclass(frozen=True)
class SymbolRef:
    """A reference to a symbol (a function) by name: ``@name``."""

    name: str

    def __str__(self) -> str:
        return format_symbol(self.name)


class DialectAttribute:
    """Base for attributes that dialects and plugins register (layouts, descriptors).

    Subclasses are frozen dataclasses with an ``attribute_name`` such as
    ``"gpu.blocked"``; they print as ``#gpu.blocked<...>``.  Fields print as a
    ``key = value`` list by default; override :meth:`format_parameters` and
    :meth:`parse_parameters` for a custom spelling.
    """

    attribute_name: ClassVar[str] = ""

    def format_parameters(self) -> str:
        return ", ".join(
            f"{f.name} = {format_attribute(getattr(self, f.name))}" for f in dataclasses.fields(self)  # type: ignore[arg-type]
        )

    @classmethod
    def parse_parameters(cls, parser: Any) -> "DialectAttribute":
        values: dict[str, Any] = {}
        fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        while not parser.peek_is(">"):
            if values:
                parser.expect(",", f"or '>' in '#{cls.attribute_name}<'")
            parser.skip_space()
            key_pos = parser.pos
            key = parser.parse_identifier("a parameter name")
            if key not in fields:
                parser.error(f"'#{cls.attribute_name}' has no parameter '{key}' (it has {', '.join(sorted(fields))})",
                             key_pos)
            parser.expect("=")
            values[key] = parser.parse_attribute_value()
        try:
            return cls(**values)
        except (TypeError, ValueError) as exc:
            parser.error(f"bad parameters for '#{cls.attribute_name}': {exc}")
            raise  # unreachable: error() raises

    def __str__(self) -> str:
        return format_attribute(self)


_BARE_SYMBOL_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.$")


def format_symbol(name: str) -> str:
    if name and (name[0].isalpha() or name[0] == "_") and all(c in _BARE_SYMBOL_CHARS for c in name):
        return "@" + name
    return "@" + format_string(name)


def format_string(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


CANONICAL_NAN_BITS = 0x7FF8000000000000


def float_bits(value: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", value))[0]


def float_from_bits(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def format_float(value: float) -> str:
    if math.isnan(value):
        bits = float_bits(value)
        # A NaN's sign and payload can come out of folding; keep them exact.
        return "nan" if bits == CANONICAL_NAN_BITS else f"nan(0x{bits:016x})"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(float(value))  # shortest text that reads back as the same double


#: While the printer writes a module with layout aliases: attribute -> its alias
#: (``#blocked0``), written in its place.
ATTRIBUTE_ALIASES: contextvars.ContextVar[dict] = contextvars.ContextVar("ATTRIBUTE_ALIASES", default={})


def format_attribute(value: Any) -> str:
    """The text form of an attribute value (see the table in this module's docstring)."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format_float(value)
    if isinstance(value, str):
        return format_string(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(format_attribute(v) for v in value) + "]"
    if isinstance(value, Type):
        return str(value)
    if isinstance(value, SymbolRef):
        return str(value)
    if isinstance(value, DialectAttribute):
        alias = ATTRIBUTE_ALIASES.get().get(value)
        return alias if alias is not None else f"#{value.attribute_name}<{value.format_parameters()}>"
    raise TypeError(f"{type(value).__name__} {value!r} is not an IR attribute value")


def is_attribute_value(value: Any) -> bool:
    if isinstance(value, (bool, int, float, str, Type, SymbolRef, DialectAttribute)):
        return True
    if isinstance(value, tuple):
        return all(is_attribute_value(v) for v in value)
    return False


def symbol_refs_in(value: Any) -> list[SymbolRef]:
    """The symbol references inside an attribute value: itself, in lists, and in the
    fields of dialect attributes (a plugin attribute may name a function)."""
    if isinstance(value, SymbolRef):
        return [value]
    if isinstance(value, tuple):
        return [ref for item in value for ref in symbol_refs_in(item)]
    if isinstance(value, DialectAttribute) and dataclasses.is_dataclass(value):
        return [ref for f in dataclasses.fields(value) for ref in symbol_refs_in(getattr(value, f.name))]
    return []


def same_attribute(a: Any, b: Any) -> bool:
    """Whether two attribute values are the same IR attribute: equal and of one kind.

    Stricter than ``==``: ``0 == False`` and ``0.0 == -0.0`` in Python, but they are
    different attributes (``NaN`` is the same as a NaN of the same bits)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return float_bits(a) == float_bits(b)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same_attribute(x, y) for x, y in zip(a, b))
    return bool(a == b)


def normalize_attribute(value: Any) -> Any:
    """Lists become tuples so attributes stay immutable and hashable."""
    if isinstance(value, list):
        return tuple(normalize_attribute(v) for v in value)
    if isinstance(value, tuple):
        return tuple(normalize_attribute(v) for v in value)
    return value
