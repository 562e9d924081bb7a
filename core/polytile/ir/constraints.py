"""Type constraints used by op definitions: each checks a type and describes itself."""

from __future__ import annotations

from typing import Callable

from . import types as t


class TypeConstraint:
    """A named predicate over types; ``description`` is used in verifier messages."""

    __slots__ = ("description", "_check")

    def __init__(self, description: str, check: Callable[[t.Type], bool]):
        self.description = description
        self._check = check

    def __call__(self, type_: t.Type) -> bool:
        return self._check(type_)

    def __or__(self, other: "TypeConstraint") -> "TypeConstraint":
        return TypeConstraint(f"{self.description} or {other.description}", lambda x: self(x) or other(x))

    def __repr__(self) -> str:
        return f"TypeConstraint({self.description!r})"


AnyType = TypeConstraint("any type", lambda x: True)
IntScalar = TypeConstraint("an integer scalar", lambda x: isinstance(x, t.IntType))
FloatScalar = TypeConstraint("a float scalar", lambda x: isinstance(x, t.FloatType))
Scalar = TypeConstraint("a scalar", lambda x: isinstance(x, (t.IntType, t.FloatType, t.PointerType)))
IntLike = TypeConstraint("an integer or a tile of integers", t.is_integer)
FloatLike = TypeConstraint("a float or a tile of floats", t.is_float)
BoolLike = TypeConstraint("i1 or a tile of i1", t.is_bool)
PointerLike = TypeConstraint("a pointer or a tile of pointers", t.is_pointer)
Numeric = IntLike | FloatLike
NumericOrPointer = TypeConstraint(
    "a number, a pointer, or a tile of them", lambda x: t.is_integer(x) or t.is_float(x) or t.is_pointer(x)
)
Tile = TypeConstraint("a tile", lambda x: isinstance(x, t.TileType))
IntTile = TypeConstraint("a tile of integers", lambda x: isinstance(x, t.TileType) and t.is_integer(x))
BlockPointer = TypeConstraint("a block pointer", lambda x: isinstance(x, t.BlockPointerType))
Index = TypeConstraint("an i32 or i64 scalar", lambda x: x in (t.i32, t.i64))
