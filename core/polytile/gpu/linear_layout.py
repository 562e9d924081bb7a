"""Which thread holds which element of a tile: the "emit indices" math of every
distributed layout, in one representation.

A :class:`LinearLayout` maps a hardware position -- a register index inside a thread, a
lane inside a warp, a warp inside the program -- to the coordinates of the tile element
stored there.  Every bit of the register, lane and warp index has a *basis*: a coordinate
vector; the element at a position is the XOR of the bases of its set bits.  This is
Triton's linear-layout idea (tile sizes are powers of two, so XOR of disjoint bits is
addition); a zero basis means that bit does not move: the element is replicated across it.

Layouts are built dimension by dimension with :class:`LayoutBuilder`: "4 registers along
dim 1, then 32 lanes along dim 1, then 4 warps along dim 0" is a blocked layout.  The
builder then fits the layout to a tile shape, as Triton does: a tile larger than the
layout's footprint repeats it in more registers (the ``rep_order`` says which dimension
repeats first); a smaller one wraps coordinates modulo the shape, so the threads past
the tile's edge hold copies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

KINDS = ("register", "lane", "warp")

Coords = tuple[int, ...]


def is_power_of_two(n: int) -> bool:
    return isinstance(n, int) and n > 0 and n & (n - 1) == 0


def log2(n: int) -> int:
    return n.bit_length() - 1


@dataclass(frozen=True)
class LinearLayout:
    """The bases of each register, lane and warp bit, for one tile shape."""

    shape: tuple[int, ...]
    register: tuple[Coords, ...]
    lane: tuple[Coords, ...]
    warp: tuple[Coords, ...]

    @property
    def num_registers(self) -> int:
        """Elements each thread holds (copies included)."""
        return 1 << len(self.register)

    @property
    def num_lanes(self) -> int:
        return 1 << len(self.lane)

    @property
    def num_warps(self) -> int:
        return 1 << len(self.warp)

    def apply(self, register: int, lane: int, warp: int) -> Coords:
        """The coordinates of the element in ``register`` of ``lane`` of ``warp``."""
        coords = [0] * len(self.shape)
        for index, bases in ((register, self.register), (lane, self.lane), (warp, self.warp)):
            bit = 0
            while index:
                if index & 1:
                    for d, c in enumerate(bases[bit]):
                        coords[d] ^= c
                index >>= 1
                bit += 1
        return tuple(coords)

    def thread_indices(self, warp: int, lane: int) -> list[Coords]:
        """The coordinates of every register of one thread, register 0 first."""
        return [self.apply(r, lane, warp) for r in range(self.num_registers)]

    def positions(self) -> Iterator[tuple[int, int, int, Coords]]:
        """Every ``(warp, lane, register, coordinates)``."""
        for warp in range(self.num_warps):
            for lane in range(self.num_lanes):
                for register in range(self.num_registers):
                    yield warp, lane, register, self.apply(register, lane, warp)

    def _rank_of_bases(self) -> int:
        # Gaussian elimination over GF(2) on the bases as bit vectors.
        offsets, total = [], 0
        for size in reversed(self.shape):
            offsets.insert(0, total)
            total += log2(size)
        rows = []
        for basis in self.register + self.lane + self.warp:
            rows.append(sum(c << offsets[d] for d, c in enumerate(basis)))
        rank = 0
        for bit in reversed(range(total)):
            pivot = next((i for i in range(rank, len(rows)) if rows[i] >> bit & 1), None)
            if pivot is None:
                continue
            rows[rank], rows[pivot] = rows[pivot], rows[rank]
            for i in range(len(rows)):
                if i != rank and rows[i] >> bit & 1:
                    rows[i] ^= rows[rank]
            rank += 1
        return rank

    def covers_shape(self) -> bool:
        """Whether every element of the tile is held by some thread."""
        numel = 1
        for size in self.shape:
            numel *= size
        return self._rank_of_bases() == log2(numel)

    @property
    def copies(self) -> int:
        """How many (warp, lane, register) positions hold each element, when the layout
        covers the shape: every element has the same number."""
        return 1 << (len(self.register) + len(self.lane) + len(self.warp) - self._rank_of_bases())


class LayoutBuilder:
    """Builds a :class:`LinearLayout` dimension by dimension (see the module docstring).

    Each :meth:`add` continues along its dimension where the previous one stopped: after
    4 registers along dim 1, 32 lanes along dim 1 step by 4 elements."""

    def __init__(self, rank: int):
        self.rank = rank
        self.sizes = [1] * rank
        self.bases: dict[str, list[Coords]] = {kind: [] for kind in KINDS}

    def add(self, kind: str, dim: int, count: int) -> "LayoutBuilder":
        """``count`` (a power of two) positions of ``kind`` along ``dim``."""
        for _ in range(log2(count)):
            basis = [0] * self.rank
            basis[dim] = self.sizes[dim]
            self.bases[kind].append(tuple(basis))
            self.sizes[dim] *= 2
        return self

    def broadcast(self, kind: str, count: int) -> "LayoutBuilder":
        """``count`` positions of ``kind`` that all hold the same elements."""
        self.bases[kind].extend([(0,) * self.rank] * log2(count))
        return self

    def add_nd(self, kind: str, counts: Sequence[int], order: Sequence[int]) -> "LayoutBuilder":
        """``counts[d]`` positions along each dimension, ``order[0]`` varying fastest."""
        for d in order:
            self.add(kind, d, counts[d])
        return self

    def fit(self, shape: Sequence[int], rep_order: Sequence[int]) -> LinearLayout:
        """The layout for a tile of ``shape``: repeated in registers along dimensions the
        footprint does not fill (``rep_order[0]`` first), wrapped along dimensions it
        overfills."""
        for d in rep_order:
            while self.sizes[d] < shape[d]:
                self.add("register", d, 2)

        def wrap(basis: Coords) -> Coords:
            return tuple(c & (n - 1) for c, n in zip(basis, shape))

        return LinearLayout(tuple(shape), *(tuple(wrap(b) for b in self.bases[kind]) for kind in KINDS))
