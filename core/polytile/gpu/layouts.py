"""Layouts: how the elements of a tile are spread over the threads of a program (the
*distributed* layouts) or laid out in shared memory (the *shared* ones).

They are IR attributes that a tile type carries after the backend's distribute stage::

    tile<128x64xf16, #gpu.blocked<size_per_thread = [1, 8], threads_per_warp = [4, 8],
                                  warps_per_cta = [4, 1], order = [1, 0]>>

Vendors are data here, not code: an NVIDIA ``mma`` and an AMD ``amd_mfma`` layout differ in
the table of where each register and lane of the matrix instruction sits, and the warp
size (32 or 64) is a parameter.  Every distributed layout answers, for a tile shape, which
element each (warp, lane, register) holds (:meth:`DistributedLayout.linear`, see
:mod:`.linear_layout`), how many elements a thread holds, and whether it covers the
shape (:meth:`DistributedLayout.check`).

Importing this module registers the attributes with the IR registry, so tile types that
carry them print and parse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

from ..errors import LayoutError
from ..ir.attributes import DialectAttribute
from ..ir.registry import IR_REGISTRY
from .linear_layout import LayoutBuilder, LinearLayout, is_power_of_two

WARP_SIZES = (32, 64)


def _ints(name: str, values: Any, rank: int | None = None) -> None:
    if not isinstance(values, tuple) or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise LayoutError(f"{name} must be a list of integers, got {values!r}")
    if rank is not None and len(values) != rank:
        raise LayoutError(f"{name} has {len(values)} entries; the layout has rank {rank}")


def _powers_of_two(name: str, values: Sequence[int]) -> None:
    bad = [v for v in values if not is_power_of_two(v)]
    if bad:
        raise LayoutError(f"{name} must be powers of two, got {list(values)}")


def _order(values: Any, rank: int) -> None:
    _ints("order", values, rank)
    if sorted(values) != list(range(rank)):
        raise LayoutError(f"order {list(values)} is not a permutation of 0..{rank - 1}")


def _product(values: Sequence[int]) -> int:
    result = 1
    for v in values:
        result *= v
    return result


class DistributedLayout(DialectAttribute):
    """Base of layouts that give every element of a tile to one or more threads."""

    @property
    def rank(self) -> int:
        raise NotImplementedError

    @property
    def warp_size(self) -> int:
        raise NotImplementedError

    @property
    def num_warps(self) -> int:
        raise NotImplementedError

    def build(self, shape: tuple[int, ...]) -> LinearLayout:
        """The linear layout for ``shape`` (checked by :meth:`linear`)."""
        raise NotImplementedError

    def check(self, shape: Sequence[int]) -> None:
        """Raise :class:`LayoutError` unless the layout can hold a tile of ``shape``
        with every element held by the same number of threads and registers."""
        self.linear(shape)

    def linear(self, shape: Sequence[int]) -> LinearLayout:
        """Which element each (warp, lane, register) holds in a tile of ``shape``."""
        shape = tuple(shape)
        if len(shape) != self.rank:
            raise LayoutError(f"{self} has rank {self.rank} but the tile has shape {list(shape)}")
        if not all(is_power_of_two(n) for n in shape):
            raise LayoutError(f"tile shape {list(shape)} is not made of powers of two; {self} cannot cover it")
        layout = self.build(shape)
        if not layout.covers_shape():
            raise LayoutError(f"{self} leaves elements of a tile of shape {list(shape)} to no thread")
        return layout

    def elements_per_thread(self, shape: Sequence[int]) -> int:
        """Registers each thread uses for a tile of ``shape`` (copies included)."""
        return self.linear(shape).num_registers

    def thread_indices(self, shape: Sequence[int], warp: int, lane: int) -> list[tuple[int, ...]]:
        """The coordinates held by one thread, register by register."""
        return self.linear(shape).thread_indices(warp, lane)


# --------------------------------------------------------------------------------------
# Blocked and slice


@dataclass(frozen=True)
class BlockedLayout(DistributedLayout):
    """Each thread holds ``size_per_thread`` consecutive elements, lanes and then warps
    tile the rest, ``order[0]`` (the fastest dimension) first; the footprint repeats to
    cover larger tiles.  Loads and stores use it: a thread's elements along the fastest
    dimension become one vector access."""

    attribute_name: ClassVar[str] = "gpu.blocked"
    size_per_thread: tuple
    threads_per_warp: tuple
    warps_per_cta: tuple
    order: tuple

    def __post_init__(self) -> None:
        rank = len(self.order) if isinstance(self.order, tuple) else 0
        if rank == 0:
            raise LayoutError("a blocked layout needs an order with at least one dimension")
        _order(self.order, rank)
        for name in ("size_per_thread", "threads_per_warp", "warps_per_cta"):
            _ints(name, getattr(self, name), rank)
            _powers_of_two(name, getattr(self, name))
        if _product(self.threads_per_warp) not in WARP_SIZES:
            raise LayoutError(f"threads_per_warp {list(self.threads_per_warp)} makes warps of "
                              f"{_product(self.threads_per_warp)} threads; warps have 32 or 64")

    @property
    def rank(self) -> int:
        return len(self.order)

    @property
    def warp_size(self) -> int:
        return _product(self.threads_per_warp)

    @property
    def num_warps(self) -> int:
        return _product(self.warps_per_cta)

    @property
    def footprint(self) -> tuple[int, ...]:
        """The elements one repetition covers, per dimension (Triton's shapePerCTATile)."""
        return tuple(s * t * w for s, t, w in zip(self.size_per_thread, self.threads_per_warp, self.warps_per_cta))

    def build(self, shape: tuple[int, ...]) -> LinearLayout:
        builder = LayoutBuilder(self.rank)
        builder.add_nd("register", self.size_per_thread, self.order)
        builder.add_nd("lane", self.threads_per_warp, self.order)
        builder.add_nd("warp", self.warps_per_cta, self.order)
        return builder.fit(shape, self.order)


@dataclass(frozen=True)
class SliceLayout(DistributedLayout):
    """The parent layout with dimension ``dim`` removed: the layout of a reduction's
    result, or of the operand of ``expand_dims`` along ``dim``.  Threads that differ
    only along ``dim`` in the parent hold the same elements."""

    attribute_name: ClassVar[str] = "gpu.slice"
    dim: int
    parent: Any

    def __post_init__(self) -> None:
        if not isinstance(self.parent, DistributedLayout):
            raise LayoutError(f"a slice's parent must be a distributed layout, got {self.parent!r}")
        if not isinstance(self.dim, int) or not 0 <= self.dim < self.parent.rank:
            raise LayoutError(f"dim {self.dim} is out of range for a parent of rank {self.parent.rank}")
        if self.parent.rank < 2:
            raise LayoutError("slicing a rank-1 layout would leave no dimension")

    @property
    def rank(self) -> int:
        return self.parent.rank - 1

    @property
    def warp_size(self) -> int:
        return self.parent.warp_size

    @property
    def num_warps(self) -> int:
        return self.parent.num_warps

    def build(self, shape: tuple[int, ...]) -> LinearLayout:
        parent = self.parent.build(shape[:self.dim] + (1,) + shape[self.dim:])

        def drop(basis: tuple[int, ...]) -> tuple[int, ...]:
            return basis[:self.dim] + basis[self.dim + 1:]

        # Registers that only walked along the removed dimension now hold the same
        # element: Triton drops them, so a thread keeps one copy.
        registers = tuple(b for b in map(drop, parent.register) if any(b))
        return LinearLayout(shape, registers, tuple(map(drop, parent.lane)), tuple(map(drop, parent.warp)))


# --------------------------------------------------------------------------------------
# Matrix-instruction layouts: where each lane's accumulator registers sit


def _check_warps(layout: Any, multiple_of: int = 1) -> None:
    _ints("warps_per_cta", layout.warps_per_cta, 2)
    _powers_of_two("warps_per_cta", layout.warps_per_cta)
    if _product(layout.warps_per_cta) % multiple_of:
        raise LayoutError(f"warps_per_cta {list(layout.warps_per_cta)} must hold a multiple of {multiple_of} warps")


def _add_warps(builder: LayoutBuilder, layout: Any, order: Sequence[int], broadcast_dim: int | None = None) -> None:
    """Warps tile the instruction's output along ``order``; for a dot operand, the warps
    along the dimension the operand does not have (``broadcast_dim``) share its data."""
    for d in order:
        if d == broadcast_dim:
            builder.broadcast("warp", layout.warps_per_cta[d])
        else:
            builder.add("warp", d, layout.warps_per_cta[d])


@dataclass(frozen=True)
class MmaLayout(DistributedLayout):
    """The accumulator of NVIDIA tensor-core instructions: ``version = 2`` is ``mma.sync``
    (``instr_shape = [16, 8]``, one warp per tile), ``version = 3`` is ``wgmma``
    (``instr_shape = [16, N, K]``, four warps per 64-row tile).  In each 16x8 piece a lane
    holds two neighbours of one row, and the same two eight rows below."""

    attribute_name: ClassVar[str] = "gpu.mma"
    version: int
    warps_per_cta: tuple
    instr_shape: tuple

    def __post_init__(self) -> None:
        _ints("instr_shape", self.instr_shape)
        if self.version == 2:
            _check_warps(self)
            if self.instr_shape != (16, 8):
                raise LayoutError(f"mma version 2 (mma.sync) has instr_shape [16, 8], got {list(self.instr_shape)}")
        elif self.version == 3:
            _check_warps(self, 4)
            if len(self.instr_shape) != 3 or self.instr_shape[0] != 16 or self.instr_shape[1] % 8 \
                    or not 8 <= self.instr_shape[1] <= 256 or self.instr_shape[2] not in (8, 16, 32):
                raise LayoutError(f"mma version 3 (wgmma) has instr_shape [16, N, K] with N a multiple of 8 up to "
                                  f"256 and K 8, 16 or 32, got {list(self.instr_shape)}")
        else:
            raise LayoutError(f"mma version must be 2 (mma.sync) or 3 (wgmma), got {self.version}")

    rank = property(lambda self: 2)
    warp_size = property(lambda self: 32)
    num_warps = property(lambda self: _product(self.warps_per_cta))

    @property
    def warp_order(self) -> tuple[int, ...]:
        # wgmma needs each group of four consecutive warps down the M dimension.
        return (1, 0) if self.version == 2 else (0, 1)

    def build(self, shape: tuple[int, ...]) -> LinearLayout:
        builder = _nvidia_tile(rows=16, cols=self.instr_shape[1], k_width=2, inner=1)
        _add_warps(builder, self, self.warp_order)
        return builder.fit(shape, (1, 0))


def _nvidia_tile(rows: int, cols: int, k_width: int, inner: int) -> LayoutBuilder:
    """One warp's piece of an NVIDIA matrix fragment (Triton's ``nvidiaMmaTile``):
    ``k_width`` registers and 4 lanes along the inner dimension, 8 lanes along the outer,
    then registers for the rest of the outer and inner extent."""
    outer = 1 - inner
    extent = {inner: cols if inner == 1 else rows, outer: rows if inner == 1 else cols}
    builder = LayoutBuilder(2)
    builder.add("register", inner, k_width).add("lane", inner, 4).add("lane", outer, 8)
    builder.add("register", outer, extent[outer] // 8)
    builder.add("register", inner, extent[inner] // (k_width * 4))
    return builder


#: AMD MFMA accumulator pieces: instr_shape -> builder steps along (M, N) for a
#: non-transposed layout.  32x32: a lane holds 4 consecutive rows, lanes 32..63 the
#: next 4, registers continue every 8 rows; 16x16: lanes 16..63 step down 4 rows each.
_MFMA_TILES: dict[tuple[int, int], list[tuple[str, int, int]]] = {
    (32, 32): [("register", 0, 4), ("lane", 1, 32), ("lane", 0, 2), ("register", 0, 4)],
    (16, 16): [("register", 0, 4), ("lane", 1, 16), ("lane", 0, 4)],
}
#: v_mfma_f64_16x16x4f64 keeps one 64-bit row per lane group instead of four 32-bit
#: ones: lanes 16..63 step down one row each, registers every 4 rows.
_MFMA_F64_TILE: list[tuple[str, int, int]] = [("lane", 1, 16), ("lane", 0, 4), ("register", 0, 4)]

#: The same for the A operand ([M, K]) with k_width consecutive K elements per lane.
_MFMA_OPERAND_LANES: dict[tuple[int, int], tuple[int, int]] = {(32, 32): (32, 2), (16, 16): (16, 4)}


@dataclass(frozen=True)
class MfmaLayout(DistributedLayout):
    """The accumulator of AMD CDNA matrix-core instructions (``mfma``), 64-lane waves.
    ``transposed`` swaps rows and columns so that a lane's registers run along N (wider
    stores of the result).  ``accumulator_bits = 64`` is the f64 instruction's layout
    (16x16 only), which places rows differently; it is printed only when set."""

    attribute_name: ClassVar[str] = "gpu.amd_mfma"
    version: int
    warps_per_cta: tuple
    instr_shape: tuple
    transposed: bool = False
    accumulator_bits: int = 32

    def __post_init__(self) -> None:
        if self.version not in (1, 2, 3, 4):
            raise LayoutError(f"amd_mfma version is the CDNA generation 1 to 4, got {self.version}")
        _check_warps(self)
        _ints("instr_shape", self.instr_shape)
        if tuple(self.instr_shape) not in _MFMA_TILES:
            raise LayoutError(f"amd_mfma instr_shape must be one of {[list(s) for s in _MFMA_TILES]}, "
                              f"got {list(self.instr_shape)}")
        if self.accumulator_bits not in (32, 64):
            raise LayoutError(f"amd_mfma accumulator_bits must be 32 or 64 (f64), got {self.accumulator_bits!r}")
        if self.accumulator_bits == 64 and tuple(self.instr_shape) != (16, 16):
            raise LayoutError(f"the f64 mfma (accumulator_bits = 64) has instr_shape [16, 16], "
                              f"got {list(self.instr_shape)}")

    def format_parameters(self) -> str:
        text = super().format_parameters()
        return text.replace(", accumulator_bits = 32", "") if self.accumulator_bits == 32 else text

    rank = property(lambda self: 2)
    warp_size = property(lambda self: 64)
    num_warps = property(lambda self: _product(self.warps_per_cta))

    def build(self, shape: tuple[int, ...]) -> LinearLayout:
        builder = LayoutBuilder(2)
        tile = _MFMA_F64_TILE if self.accumulator_bits == 64 else _MFMA_TILES[tuple(self.instr_shape)]
        for kind, dim, count in tile:
            builder.add(kind, 1 - dim if self.transposed else dim, count)
        _add_warps(builder, self, (1, 0))
        return builder.fit(shape, (1, 0))


@dataclass(frozen=True)
class WmmaLayout(DistributedLayout):
    """The accumulator of AMD RDNA ``wmma`` (16x16 tiles, 32-lane waves).  Version 1
    (RDNA3): a lane holds every other row, lanes 16..31 the rows in between; version 2
    (RDNA4): a lane holds 8 consecutive rows, lanes 16..31 the 8 below."""

    attribute_name: ClassVar[str] = "gpu.amd_wmma"
    version: int
    warps_per_cta: tuple

    def __post_init__(self) -> None:
        if self.version not in (1, 2):
            raise LayoutError(f"amd_wmma version must be 1 (RDNA3) or 2 (RDNA4), got {self.version}")
        _check_warps(self)

    rank = property(lambda self: 2)
    warp_size = property(lambda self: 32)
    num_warps = property(lambda self: _product(self.warps_per_cta))

    def build(self, shape: tuple[int, ...]) -> LinearLayout:
        builder = LayoutBuilder(2)
        if self.version == 1:
            builder.add("lane", 1, 16).add("lane", 0, 2).add("register", 0, 8)
        else:
            builder.add("register", 0, 8).add("lane", 1, 16).add("lane", 0, 2)
        _add_warps(builder, self, (1, 0))
        return builder.fit(shape, (1, 0))


# --------------------------------------------------------------------------------------
# Dot operands


@dataclass(frozen=True)
class DotOperandLayout(DistributedLayout):
    """Operand ``op_idx`` (0: A, [M, K]; 1: B, [K, N]) of a dot whose result has layout
    ``parent``; each lane holds ``k_width`` consecutive elements along K.  Warps that
    differ only along the dimension the operand lacks hold the same data."""

    attribute_name: ClassVar[str] = "gpu.dot_operand"
    op_idx: int
    parent: Any
    k_width: int = 1

    def __post_init__(self) -> None:
        if self.op_idx not in (0, 1):
            raise LayoutError(f"op_idx is 0 (the A operand) or 1 (B), got {self.op_idx}")
        if not isinstance(self.parent, (BlockedLayout, MmaLayout, MfmaLayout, WmmaLayout)):
            raise LayoutError(f"a dot operand's parent is a blocked, mma, amd_mfma or amd_wmma layout, "
                              f"got {self.parent!r}")
        if not isinstance(self.k_width, int) or not is_power_of_two(self.k_width):
            raise LayoutError(f"k_width must be a power of two, got {self.k_width!r}")
        parent = self.parent
        if isinstance(parent, MmaLayout) and parent.version == 3 and self.op_idx == 1:
            raise LayoutError("wgmma (mma version 3) reads B from shared memory: a dot operand with op_idx = 1 "
                              "cannot have an mma version 3 parent")
        if isinstance(parent, WmmaLayout) and self.k_width != (16 if parent.version == 1 else 8):
            raise LayoutError(f"amd_wmma version {parent.version} operands have k_width "
                              f"{16 if parent.version == 1 else 8}, got {self.k_width}")

    @property
    def rank(self) -> int:
        return self.parent.rank

    @property
    def warp_size(self) -> int:
        return self.parent.warp_size

    @property
    def num_warps(self) -> int:
        return self.parent.num_warps

    @property
    def k_dim(self) -> int:
        return self.rank - 1 if self.op_idx == 0 else self.rank - 2

    def build(self, shape: tuple[int, ...]) -> LinearLayout:
        parent, k = self.parent, self.k_dim
        other = 1 - k  # M for A, N for B
        # Registers repeat along K first: one thread's K elements feed consecutive
        # instructions.
        rep_order = (k, other)
        if isinstance(parent, BlockedLayout):
            # FMA dot: every thread holds the whole K extent of its rows (or columns).
            sizes = list(parent.size_per_thread)
            sizes[k] = shape[k]
            builder = LayoutBuilder(self.rank).add_nd("register", sizes, parent.order)
            for kind, counts in (("lane", parent.threads_per_warp), ("warp", parent.warps_per_cta)):
                for d in parent.order:
                    if d == k:
                        builder.broadcast(kind, counts[d])
                    else:
                        builder.add(kind, d, counts[d])
            return builder.fit(shape, parent.order)
        if isinstance(parent, MmaLayout):
            if self.op_idx == 0:
                builder = _nvidia_tile(rows=16, cols=8 * self.k_width, k_width=self.k_width, inner=1)
            else:
                builder = _nvidia_tile(rows=8 * self.k_width, cols=8, k_width=self.k_width, inner=0)
            _add_warps(builder, parent, parent.warp_order, broadcast_dim=k)
            return builder.fit(shape, rep_order)
        builder = LayoutBuilder(2).add("register", k, self.k_width)
        if isinstance(parent, MfmaLayout):
            lanes_mn, lanes_k = _MFMA_OPERAND_LANES[tuple(parent.instr_shape)]
            builder.add("lane", other, lanes_mn).add("lane", k, lanes_k)
        elif parent.version == 1:
            # RDNA3: lanes 16..31 repeat lanes 0..15, each holding all 16 K elements.
            builder.add("lane", other, 16).broadcast("lane", 2)
        else:
            builder.add("lane", other, 16).add("lane", k, 2)
        _add_warps(builder, parent, (1, 0), broadcast_dim=k)
        return builder.fit(shape, rep_order)


# --------------------------------------------------------------------------------------
# Shared memory


class SharedLayout(DialectAttribute):
    """Base of layouts of a tile in shared memory: where each element is stored."""

    def offset(self, coords: Sequence[int], shape: Sequence[int]) -> int:
        """The element offset of ``coords`` in a tile of ``shape``."""
        raise NotImplementedError


@dataclass(frozen=True)
class SwizzledSharedLayout(SharedLayout):
    """Row-major along ``order`` (``order[0]`` contiguous), with groups of ``vector``
    elements of a row XOR-permuted by the row's phase, ``(row // per_phase) % max_phase``,
    so that threads reading a column hit different banks (Triton's swizzled shared
    encoding).  ``vector = 1, per_phase = 1, max_phase = 1`` is no swizzling.

    ``block`` (elements, 0: the whole row) splits the contiguous dimension into column
    blocks stored one after another, each holding its ``block`` elements of every row
    (of one index of the outer dimensions): rows wider than 128 bytes then sit as the
    NVMMA layouts wgmma reads in place, a swizzle row of 128 bytes at a time."""

    attribute_name: ClassVar[str] = "gpu.shared"
    vector: int
    per_phase: int
    max_phase: int
    order: tuple
    block: int = 0

    def __post_init__(self) -> None:
        for name in ("vector", "per_phase", "max_phase"):
            value = getattr(self, name)
            if not isinstance(value, int) or not is_power_of_two(value):
                raise LayoutError(f"{name} must be a power of two, got {value!r}")
        if not isinstance(self.order, tuple) or not self.order:
            raise LayoutError(f"order must be a non-empty list, got {self.order!r}")
        _order(self.order, len(self.order))
        if not isinstance(self.block, int) or (self.block and not is_power_of_two(self.block)):
            raise LayoutError(f"block must be 0 (whole rows) or a power of two, got {self.block!r}")
        if self.block and self.block < self.vector * self.max_phase:
            raise LayoutError(f"a column block ({self.block} elements) holds the whole swizzle pattern: "
                              f"{self.max_phase} vectors of {self.vector} elements")

    def format_parameters(self) -> str:
        text = super().format_parameters()
        return text.rsplit(", block = ", 1)[0] if not self.block else text

    def block_of(self, shape: Sequence[int]) -> int:
        """Elements of a column block in a tile of ``shape``: the whole row when there is
        no block or the row is not wider than one."""
        inner = shape[self.order[0]]
        return min(self.block, inner) if self.block else inner

    def offset(self, coords: Sequence[int], shape: Sequence[int]) -> int:
        if len(coords) != len(self.order) or len(shape) != len(self.order):
            raise LayoutError(f"{self} has rank {len(self.order)}; got coordinates {list(coords)} "
                              f"in a tile of shape {list(shape)}")
        block = self.block_of(shape)
        column = coords[self.order[0]]
        row = coords[self.order[1]] if len(self.order) > 1 else 0
        phase = (row // self.per_phase) % self.max_phase
        within = column % block
        swizzled = ((within // self.vector) ^ phase) * self.vector + within % self.vector
        # Of the outer dimensions, order[1] varies fastest; each outer index holds its
        # column blocks one after another, each all of that index's rows.
        rows = shape[self.order[1]] if len(self.order) > 1 else 1
        outer, stride = 0, 1
        for d in self.order[2:]:
            outer += coords[d] * stride
            stride *= shape[d]
        blocks = shape[self.order[0]] // block
        return ((outer * blocks + column // block) * rows + row) * block + swizzled


#: NVMMA swizzle modes: bytes per swizzled row -> (per_phase, max_phase), with 16-byte
#: vectors (the TMA / wgmma swizzle patterns).
_NVMMA_SWIZZLES = {0: (1, 1), 32: (4, 2), 64: (2, 4), 128: (1, 8)}


@dataclass(frozen=True)
class NvmmaSharedLayout(SharedLayout):
    """Shared memory as TMA writes it and wgmma reads it: 16-byte vectors XOR-swizzled in
    rows of ``swizzle_bytes`` (0: none, 32, 64 or 128).  ``transposed`` makes dimension 0
    the contiguous one."""

    attribute_name: ClassVar[str] = "gpu.nvmma_shared"
    swizzle_bytes: int
    element_bits: int
    transposed: bool = False

    def __post_init__(self) -> None:
        if self.swizzle_bytes not in _NVMMA_SWIZZLES:
            raise LayoutError(f"swizzle_bytes must be 0, 32, 64 or 128, got {self.swizzle_bytes!r}")
        if self.element_bits not in (8, 16, 32, 64):
            raise LayoutError(f"element_bits must be 8, 16, 32 or 64, got {self.element_bits!r}")

    def as_swizzled(self) -> SwizzledSharedLayout:
        """The same placement as a :class:`SwizzledSharedLayout`."""
        per_phase, max_phase = _NVMMA_SWIZZLES[self.swizzle_bytes]
        vector = 128 // self.element_bits if self.swizzle_bytes else 1
        return SwizzledSharedLayout(vector, per_phase, max_phase, (0, 1) if self.transposed else (1, 0))

    def check(self, shape: Sequence[int]) -> None:
        """A swizzled row must fit in the tile's contiguous dimension."""
        inner = shape[0 if self.transposed else 1]
        if len(shape) != 2 or inner * self.element_bits // 8 < self.swizzle_bytes:
            raise LayoutError(f"{self} needs a 2-D tile whose contiguous dimension holds at least "
                              f"{self.swizzle_bytes} bytes, got shape {list(shape)}")

    def offset(self, coords: Sequence[int], shape: Sequence[int]) -> int:
        self.check(shape)
        return self.as_swizzled().offset(coords, shape)


# --------------------------------------------------------------------------------------
# Choosing a blocked layout


def default_blocked_layout(shape: Sequence[int], num_warps: int, warp_size: int = 32,
                           order: Sequence[int] | None = None, vector: int = 1) -> BlockedLayout:
    """A blocked layout for a tile of ``shape``: ``vector`` elements per thread along
    ``order[0]`` (default: the last dimension is fastest), lanes and then warps filling
    the dimensions fastest first, the slowest dimension taking what is left.

    This is Triton's ``BlockedEncodingAttr::get(shape, sizePerThread, order, numWarps,
    threadsPerWarp)`` (lib/Dialect/TritonGPU/IR/Dialect.cpp), which both
    ``getDefaultBlockedEncoding`` and the Coalesce pass use."""
    rank = len(shape)
    order = tuple(order) if order is not None else tuple(reversed(range(rank)))
    _order(order, rank)
    if warp_size not in WARP_SIZES:
        raise LayoutError(f"warp_size must be 32 or 64, got {warp_size}")
    if not is_power_of_two(num_warps) or not is_power_of_two(vector):
        raise LayoutError(f"num_warps ({num_warps}) and vector ({vector}) must be powers of two")
    size_per_thread = [1] * rank
    size_per_thread[order[0]] = vector
    threads_per_warp, warps_per_cta = [1] * rank, [1] * rank
    lanes_left, warps_left, threads_left = warp_size, num_warps, warp_size * num_warps
    for d in order[:-1]:
        # The threads this dimension can use: no more than it has elements to give out.
        threads = min(max(threads_left, 1), max(shape[d] // size_per_thread[d], 1))
        threads_per_warp[d] = min(threads, lanes_left)
        warps_per_cta[d] = min(max(threads // threads_per_warp[d], 1), warps_left)
        lanes_left //= threads_per_warp[d]
        warps_left //= warps_per_cta[d]
        threads_left //= threads
    # The slowest dimension takes the lanes and warps left, replicating if the tile is
    # too small to use them all.
    threads_per_warp[order[-1]] = lanes_left
    warps_per_cta[order[-1]] = warps_left
    return BlockedLayout(tuple(size_per_thread), tuple(threads_per_warp), tuple(warps_per_cta), order)


LAYOUT_ATTRIBUTES = (BlockedLayout, SliceLayout, MmaLayout, MfmaLayout, WmmaLayout, DotOperandLayout,
                     SwizzledSharedLayout, NvmmaSharedLayout)

for _cls in LAYOUT_ATTRIBUTES:
    if _cls.attribute_name not in IR_REGISTRY.attributes:
        IR_REGISTRY.attributes.add(_cls.attribute_name, _cls)
