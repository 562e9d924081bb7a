"""The model of one generated kernel: its shape family, its arrays and its statements,
and how it is written out as a Python module with a ``@pt.jit`` kernel.

A kernel is a list of :class:`Statement` objects.  Each defines at most one value (a
:class:`Value`: name, dtype, shape, and bounds the tolerances follow from), may read
values defined before it, and may add input or output arrays.  Removing statements (the
shrinker does) removes those that read what they defined, so every subset the shrinker
tries is again a valid kernel.

Shapes: the ``1d`` family has one axis (``offs``, masked by ``offs < n``, one program per
``BLOCK`` elements): values are scalars ``S`` or vectors ``V``.  The ``2d`` family tiles
an ``M x N`` array by row blocks (``rows``, ``cols``, masked on both axes): values are
``S``, row vectors ``R`` (``[BM]``), column vectors ``C`` (``[BN]``) and tiles ``T``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from . import lowp
from .dtypes import DType


@dataclass(frozen=True)
class Value:
    name: str
    dtype: DType
    shape: str  # "S", "V" (1d); "S", "R", "C", "T" (2d)
    magnitude: float  # bound on |value| (floats; integers: inf unless known small)
    error: float  # bound on |interp - gpu| (0: both must agree bit for bit)


@dataclass(frozen=True)
class Array:
    """A kernel argument that is an array: an input the harness fills, or an output it
    compares (a tolerance per element, the magnitude of the values for ULP-style slack)."""

    name: str
    dtype: str  # a DType tag, or a lowp tag ("bf16", "e4m3", "e5m2")
    role: str  # "in" or "out"
    shape: str  # "V" (n), "S" (programs), "R" (M), "C" (programs x N), "T" (M x N),
    #             "A" (M x K dot operand), "B" (K x N), "atomic" (4 slots)
    error: float = 0.0  # outputs: allowed |interp - gpu|
    fill: str = "random"  # inputs: "random"; outputs: "zeros"
    order_independent: bool = False  # written by atomics from many programs


@dataclass
class Statement:
    lines: list[str]  # kernel-body lines (4-space indent added when written)
    defines: Value | None = None
    uses: tuple[str, ...] = ()
    arrays: tuple[Array, ...] = ()
    helpers: tuple[str, ...] = ()  # source of module-level functions it calls
    needs_lowp: bool = False
    label: str = ""  # what kind of statement (for the summary and the shrinker's report)


@dataclass
class Kernel:
    seed: int
    index: int
    family: str  # "1d" or "2d"
    sizes: dict[str, int]  # n (1d); M, N, K (2d); trips
    blocks: dict[str, int]  # BLOCK (1d); BM, BN, BK (2d)
    statements: list[Statement] = field(default_factory=list)
    num_warps: int = 4

    @property
    def name(self) -> str:
        return f"fuzz_{self.seed}_{self.index}"

    @property
    def arrays(self) -> list[Array]:
        seen: dict[str, Array] = {}
        for statement in self.statements:
            for array in statement.arrays:
                seen.setdefault(array.name, array)
        return list(seen.values())

    @property
    def programs(self) -> int:
        if self.family == "1d":
            return max(1, math.ceil(self.sizes["n"] / self.blocks["BLOCK"]))
        return max(1, math.ceil(self.sizes["M"] / self.blocks["BM"]))

    @property
    def labels(self) -> list[str]:
        return sorted({s.label for s in self.statements if s.label})

    def scalar_parameters(self) -> list[str]:
        return ["n", "trips"] if self.family == "1d" else ["M", "N", "K", "trips"]

    def constexpr_parameters(self) -> list[str]:
        return ["EMULATE", *self.blocks]

    def parameters(self) -> list[str]:
        return [f"{a.name}_ptr" for a in self.arrays] + self.scalar_parameters() + \
            [f"{c}: pl.constexpr" for c in self.constexpr_parameters()]

    def without(self, drop: set[int]) -> "Kernel":
        """This kernel without the statements at ``drop`` and every statement that reads
        a value they defined (transitively)."""
        removed_names: set[str] = set()
        kept: list[Statement] = []
        for index, statement in enumerate(self.statements):
            if index in drop or any(u in removed_names for u in statement.uses):
                if statement.defines is not None:
                    removed_names.add(statement.defines.name)
                continue
            kept.append(statement)
        return replace(self, statements=kept)

    def with_sizes(self, **sizes: int) -> "Kernel":
        return replace(self, sizes={**self.sizes, **sizes})

    # ----------------------------------------------------------------------------------
    # Source

    def source(self) -> str:
        """The Python module holding this kernel (and its helpers), importable on its own."""
        helpers: list[str] = []
        for statement in self.statements:
            for helper in statement.helpers:
                if helper not in helpers:
                    helpers.append(helper)
        if any(s.needs_lowp for s in self.statements):
            helpers.insert(0, lowp.HELPERS.strip("\n"))
        body = [line for statement in self.statements for line in statement.lines]
        preamble = _PREAMBLE_1D if self.family == "1d" else _PREAMBLE_2D
        lines = [
            f'"""Generated by polytile.fuzz (seed {self.seed}, kernel {self.index})."""',
            "import polytile as pt",
            "import polytile.language as pl",
            "",
            *(f"\n{h}\n" for h in helpers),
            "",
            "@pt.jit",
            f"def {self.name}({', '.join(self.parameters())}):",
            *("    " + line for line in preamble),
            *("    " + line for line in body),
            "",
        ]
        return "\n".join(lines)


_PREAMBLE_1D = [
    "pid = pl.program_id(0)",
    "offs = pid * BLOCK + pl.arange(0, BLOCK)",
    "mask = offs < n",
]

_PREAMBLE_2D = [
    "pid = pl.program_id(0)",
    "rows = pid * BM + pl.arange(0, BM)",
    "cols = pl.arange(0, BN)",
    "rmask = rows < M",
    "cmask = cols < N",
    "mask = rmask[:, None] & cmask[None, :]",
]


def array_shape(kernel: Kernel, array: Array) -> tuple[int, ...]:
    """The NumPy shape of ``array`` for ``kernel``'s sizes."""
    s = kernel.sizes
    return {
        "V": lambda: (s.get("n", 0),),
        "S": lambda: (kernel.programs,),
        "R": lambda: (s.get("M", 0),),
        "C": lambda: (kernel.programs, s.get("N", 0)),
        "T": lambda: (s.get("M", 0), s.get("N", 0)),
        "A": lambda: (s.get("M", 0), s.get("K", 0)),
        "B": lambda: (s.get("K", 0), s.get("N", 0)),
        "N": lambda: (s.get("N", 0),),
        "atomic": lambda: (4,),
    }[array.shape]()
