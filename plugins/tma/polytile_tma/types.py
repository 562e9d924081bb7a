"""The descriptor type: ``!tma.desc<tile<64x64xf16>, zero>``.

A tensor descriptor names an N-D array in global memory (base address, shape, strides)
and the block shape every access through it moves, with the padding that out-of-bounds
elements of a load take.  The block shape and element type are compile-time parts of
the type (as in Triton, where they are part of the kernel's signature); the shape and
strides are run-time values (``tma.dim``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from polytile.ir import DialectType
from polytile.ir import types as t

#: What out-of-bounds elements of a load through a descriptor are: Triton's two options.
PADDINGS = ("zero", "nan")
#: Tensor memory accelerator descriptors (and so Triton's) address ranks 1 to 5.
MAX_RANK = 5


@dataclass(frozen=True)
class TensorDescType(DialectType):
    """A descriptor of blocks ``block`` (a tile type without layout) of an array in
    global memory; ``padding`` is what loads read outside the array."""

    type_name = "tma.desc"
    #: A descriptor addresses the array it describes: writes through it count as writes
    #: to the pointer it was made from (``kernel.mutated_args``).
    refers_to_memory = True
    block: t.TileType
    padding: str = "zero"

    @property
    def rank(self) -> int:
        return len(self.block.shape)

    @property
    def element(self) -> t.Type:
        return self.block.element

    def format_parameters(self) -> str:
        return f"{t.format_type(self.block)}, {self.padding}"

    @classmethod
    def parse_parameters(cls, parser: Any) -> "TensorDescType":
        start = parser.pos
        block = parser.parse_type()
        if not isinstance(block, t.TileType):
            parser.error(f"'!tma.desc' takes a block tile type first (tile<64x64xf16>), not {block}", start)
        parser.expect(",", "after the block of '!tma.desc'")
        padding = parser.parse_identifier("a padding (zero or nan)")
        if padding not in PADDINGS:
            parser.error(f"unknown padding '{padding}' in '!tma.desc'; use zero or nan")
        return cls(block, padding)


#: Bytes of a CUDA tensor map (``CUtensorMap``) and the alignment it is passed at.
TENSOR_MAP_BYTES, TENSOR_MAP_ALIGNMENT = 128, 64


@dataclass(frozen=True)
class TensorMapType(DialectType):
    """A TMA tensor map (``!tma.map``): the 128 bytes ``cuTensorMapEncodeTiled`` writes
    on the host, which a Hopper kernel passes to its bulk tensor copies.  Passed by value
    as a grid constant: in the kernel, the parameter is the address of those bytes."""

    type_name = "tma.map"
    by_value = (TENSOR_MAP_BYTES, TENSOR_MAP_ALIGNMENT)

    def format_parameters(self) -> str:
        return ""

    @classmethod
    def parse_parameters(cls, parser: Any) -> "TensorMapType":
        return cls()
