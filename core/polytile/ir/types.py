"""IR types.

Types are immutable and compared by value.  The builtin ones print as::

    i1 i8 i16 i32 i64 u8 u16 u32 u64      integers (i = signed or signless, u = unsigned)
    f16 bf16 f32 f64 f8e4m3 f8e5m2        floats
    ptr<f32>  ptr<f16, 3>                 pointers (default address space 1, global)
    tile<128x64xf16>  tile<128xf32, #l>   tiles, with an optional layout attribute
    block_ptr<64x64xf16>                  block pointers (make_block_ptr)
    (i32, f32) -> (f32)                   function types

Plugins add their own types by subclassing :class:`DialectType` (printed ``!name<...>``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Iterable


class Type:
    """Base of every IR type."""

    __slots__ = ()

    def __str__(self) -> str:
        return format_type(self)

    def __repr__(self) -> str:
        return f"Type({self})"


class ScalarType(Type):
    __slots__ = ()
    width: int


@dataclass(frozen=True, repr=False)
class IntType(ScalarType):
    width: int
    signed: bool = True

    def __post_init__(self) -> None:
        if self.width not in (1, 8, 16, 32, 64) or (self.width == 1 and not self.signed):
            raise ValueError(f"unsupported integer type {'i' if self.signed else 'u'}{self.width} "
                             "(use i1, i8..i64 or u8..u64)")

    @property
    def spelling(self) -> str:
        return f"{'i' if self.signed else 'u'}{self.width}"


_FLOAT_WIDTHS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "f8e4m3": 8, "f8e5m2": 8}


@dataclass(frozen=True, repr=False)
class FloatType(ScalarType):
    kind: str

    def __post_init__(self) -> None:
        if self.kind not in _FLOAT_WIDTHS:
            raise ValueError(f"unknown float type {self.kind!r}")

    @property
    def width(self) -> int:  # type: ignore[override]
        return _FLOAT_WIDTHS[self.kind]

    @property
    def spelling(self) -> str:
        return self.kind


@dataclass(frozen=True, repr=False)
class PointerType(Type):
    pointee: Type
    address_space: int = 1


@dataclass(frozen=True, repr=False)
class TileType(Type):
    shape: tuple[int, ...]
    element: Type
    layout: Any = None

    def __post_init__(self) -> None:
        if not self.shape or any((not isinstance(d, int)) or d <= 0 for d in self.shape):
            raise ValueError(f"tile shape must be a non-empty tuple of positive integers, got {self.shape!r}")
        if isinstance(self.element, (TileType, BlockPointerType)):
            raise ValueError("tile elements must be scalars or pointers")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def with_element(self, element: Type) -> "TileType":
        return TileType(self.shape, element, self.layout)

    def with_shape(self, shape: tuple[int, ...]) -> "TileType":
        return TileType(tuple(shape), self.element, None)

    def without_layout(self) -> "TileType":
        return TileType(self.shape, self.element) if self.layout is not None else self


@dataclass(frozen=True, repr=False)
class BlockPointerType(Type):
    tile: TileType


@dataclass(frozen=True, repr=False)
class FunctionType(Type):
    inputs: tuple[Type, ...]
    results: tuple[Type, ...]


class DialectType(Type):
    """Base for types that dialects and plugins register.

    Subclasses are frozen dataclasses with a ``type_name`` such as ``"tma.descriptor"``;
    they print as ``!tma.descriptor<params>``.  Override :meth:`format_parameters` and
    :meth:`parse_parameters` to control the text between ``<`` and ``>``; the defaults
    print the dataclass fields as a comma-separated list of attribute values.
    """

    __slots__ = ()
    type_name: ClassVar[str] = ""

    def format_parameters(self) -> str:
        import dataclasses

        from .attributes import format_attribute

        return ", ".join(format_attribute(getattr(self, f.name)) for f in dataclasses.fields(self))  # type: ignore[arg-type]

    @classmethod
    def parse_parameters(cls, parser: Any) -> "DialectType":
        """Parse what is between ``<`` and ``>`` (the parser stands after ``<``)."""
        import dataclasses

        values = []
        for index, _ in enumerate(dataclasses.fields(cls)):  # type: ignore[arg-type]
            if index:
                parser.expect(",")
            values.append(parser.parse_attribute_value())
        return cls(*values)


# The builtin scalar types, interned so that `is` comparisons are cheap.
i1 = IntType(1)
i8 = IntType(8)
i16 = IntType(16)
i32 = IntType(32)
i64 = IntType(64)
u8 = IntType(8, False)
u16 = IntType(16, False)
u32 = IntType(32, False)
u64 = IntType(64, False)
f16 = FloatType("f16")
bf16 = FloatType("bf16")
f32 = FloatType("f32")
f64 = FloatType("f64")
f8e4m3 = FloatType("f8e4m3")
f8e5m2 = FloatType("f8e5m2")

SCALAR_TYPES: dict[str, ScalarType] = {
    t.spelling: t for t in (i1, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, f8e4m3, f8e5m2)
}


def element_type(t: Type) -> Type:
    """The element type of a tile, or the type itself for a scalar."""
    return t.element if isinstance(t, TileType) else t


def shape_of(t: Type) -> tuple[int, ...]:
    """A tile's shape, or ``()`` for a scalar."""
    return t.shape if isinstance(t, TileType) else ()


def like(t: Type, element: Type) -> Type:
    """``t`` with its element type replaced: a scalar becomes ``element``."""
    return t.with_element(element) if isinstance(t, TileType) else element


def is_integer(t: Type) -> bool:
    return isinstance(element_type(t), IntType)


def is_float(t: Type) -> bool:
    return isinstance(element_type(t), FloatType)


def is_pointer(t: Type) -> bool:
    return isinstance(element_type(t), PointerType)


def is_bool(t: Type) -> bool:
    return element_type(t) == i1


# Here rather than in the printer: a launch makes its specialization key with str() of
# each argument's type, and importing the printer (operations, attributes, op
# definitions) for that cost a launch from a warm disk cache milliseconds.
def format_type(t: Type) -> str:
    """``t`` as the IR text spells it (``ptr<f32>``, ``tile<128xf32>``)."""
    if isinstance(t, (IntType, FloatType)):
        return t.spelling
    if isinstance(t, PointerType):
        inner = format_type(t.pointee)
        return f"ptr<{inner}>" if t.address_space == 1 else f"ptr<{inner}, {t.address_space}>"
    if isinstance(t, TileType):
        dims = "x".join(str(d) for d in t.shape)
        if t.layout is None:
            layout = ""
        else:
            from .attributes import format_attribute

            layout = ", " + format_attribute(t.layout)
        return f"tile<{dims}x{format_type(t.element)}{layout}>"
    if isinstance(t, BlockPointerType):
        return "block_ptr" + format_type(t.tile)[len("tile"):]
    if isinstance(t, FunctionType):
        return f"({', '.join(map(format_type, t.inputs))}) -> {format_result_types(t.results)}"
    if isinstance(t, DialectType):
        return f"!{t.type_name}<{t.format_parameters()}>"
    raise TypeError(f"cannot print type {t!r}")


def format_result_types(types: Iterable[Type]) -> str:
    types = list(types)
    if len(types) == 1 and not isinstance(types[0], FunctionType):
        return format_type(types[0])
    return "(" + ", ".join(map(format_type, types)) + ")"
