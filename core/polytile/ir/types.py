"""IR types.

Types are immutable and compared by value.  The builtin ones print as::

    i1 i8 i16 i32 i64 u8 u16 u32 u64      integers (i = signed or signless, u = unsigned)
    f16 bf16 f32 f64 f8e4m3 f8e5m2        floats
    ptr<f32>  ptr<f16, 3>                 pointers (default address space 1, global)
    ptr<f32, const>                       a pointer the kernel only reads through (tl.const)
    tile<128x64xf16>  tile<128xf32, #l>   tiles, with an optional layout attribute
    block_ptr<64x64xf16>                  block pointers (make_block_ptr)
    (i32, f32) -> (f32)                   function types

Plugins add their own types by subclassing :class:`DialectType` (printed ``!name<...>``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterable


class Type:
    """Base of every IR type.

    The builtin types are written out by hand rather than as dataclasses: a process that
    launches from the disk cache imports this module, and generating a dataclass's
    methods costs a few hundred microseconds a class at import.  Equality, hashing and
    pickling go by the values a type was made from (its ``_key``).
    """

    __slots__ = ()

    def __str__(self) -> str:
        return format_type(self)

    def __repr__(self) -> str:
        return f"Type({self})"


class _BuiltinType(Type):
    # _key: the field values as a tuple, kept for equality and hashing (they are on the
    # compiler's hot path: types key dicts everywhere).
    __slots__ = ("_key",)
    _key: tuple

    def __eq__(self, other: object) -> bool:
        return self is other or (type(other) is type(self) and self._key == other._key)  # type: ignore[attr-defined]

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self._key)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"IR types are immutable: cannot set '{name}' of {self}")

    __delattr__ = __setattr__  # type: ignore[assignment]

    def __reduce__(self) -> tuple:
        return type(self), self._key


_set = object.__setattr__


class ScalarType(_BuiltinType):
    __slots__ = ()
    width: int


class IntType(ScalarType):
    __slots__ = ("width", "signed")
    width: int
    signed: bool

    def __init__(self, width: int, signed: bool = True):
        if width not in (1, 8, 16, 32, 64) or (width == 1 and not signed):
            raise ValueError(f"unsupported integer type {'i' if signed else 'u'}{width} "
                             "(use i1, i8..i64 or u8..u64)")
        _set(self, "width", width)
        _set(self, "signed", signed)
        _set(self, "_key", (width, signed))

    @property
    def spelling(self) -> str:
        return f"{'i' if self.signed else 'u'}{self.width}"


_FLOAT_WIDTHS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "f8e4m3": 8, "f8e5m2": 8}


class FloatType(ScalarType):
    __slots__ = ("kind",)
    kind: str

    def __init__(self, kind: str):
        if kind not in _FLOAT_WIDTHS:
            raise ValueError(f"unknown float type {kind!r}")
        _set(self, "kind", kind)
        _set(self, "_key", (kind,))

    @property
    def width(self) -> int:  # type: ignore[override]
        return _FLOAT_WIDTHS[self.kind]

    @property
    def spelling(self) -> str:
        return self.kind


class PointerType(_BuiltinType):
    """A pointer to ``pointee`` in ``address_space``; ``const``: the kernel only reads
    through it (Triton's ``tl.const`` parameters): storing through it is an error."""

    __slots__ = ("pointee", "address_space", "const")
    pointee: Type
    address_space: int
    const: bool

    def __init__(self, pointee: Type, address_space: int = 1, const: bool = False):
        _set(self, "pointee", pointee)
        _set(self, "address_space", address_space)
        _set(self, "const", bool(const))
        _set(self, "_key", (pointee, address_space, bool(const)))


class TileType(_BuiltinType):
    __slots__ = ("shape", "element", "layout")
    shape: tuple[int, ...]
    element: Type
    layout: Any

    def __init__(self, shape: tuple[int, ...], element: Type, layout: Any = None):
        if not shape or any((not isinstance(d, int)) or d <= 0 for d in shape):
            raise ValueError(f"tile shape must be a non-empty tuple of positive integers, got {shape!r}")
        if isinstance(element, (TileType, BlockPointerType)):
            raise ValueError("tile elements must be scalars or pointers")
        _set(self, "shape", shape)
        _set(self, "element", element)
        _set(self, "layout", layout)
        _set(self, "_key", (shape, element, layout))

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


class BlockPointerType(_BuiltinType):
    __slots__ = ("tile",)
    tile: TileType

    def __init__(self, tile: TileType):
        _set(self, "tile", tile)
        _set(self, "_key", (tile,))


class FunctionType(_BuiltinType):
    __slots__ = ("inputs", "results")
    inputs: tuple[Type, ...]
    results: tuple[Type, ...]

    def __init__(self, inputs: tuple[Type, ...], results: tuple[Type, ...]):
        _set(self, "inputs", inputs)
        _set(self, "results", results)
        _set(self, "_key", (inputs, results))


class DialectType(Type):
    """Base for types that dialects and plugins register.

    Subclasses are frozen dataclasses with a ``type_name`` such as ``"tma.descriptor"``;
    they print as ``!tma.descriptor<params>``.  Override :meth:`format_parameters` and
    :meth:`parse_parameters` to control the text between ``<`` and ``>``; the defaults
    print the dataclass fields as a comma-separated list of attribute values.

    ``refers_to_memory = True`` says a value of the type addresses memory the way a
    pointer does (a tensor descriptor): the mutation analysis then follows it as it
    follows pointers, so a write through an op taking it marks the arguments it was
    made from.

    ``by_value = (size, alignment)`` lets kernels take a parameter of the type that is
    passed by value as ``size`` opaque bytes aligned to ``alignment`` and stays in the
    kernel's read-only parameter memory (a CUDA ``__grid_constant__``: a TMA tensor map,
    say).  The launch passes a ``bytes`` object of exactly ``size`` bytes; in the kernel
    the parameter is the address of those bytes.  A backend without such parameters
    refuses the kernel, naming the parameter.
    """

    __slots__ = ()
    type_name: ClassVar[str] = ""
    refers_to_memory: ClassVar[bool] = False
    by_value: ClassVar[tuple[int, int] | None] = None

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
        space = "" if t.address_space == 1 else f", {t.address_space}"
        return f"ptr<{inner}{space}{', const' if t.const else ''}>"
    if isinstance(t, TileType):
        dims = "x".join(str(d) for d in t.shape)
        if t.layout is None:
            layout = ""
        else:
            from .attributes import format_attribute

            layout = ", " + format_attribute(t.layout)  # an alias while the printer sets them
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
