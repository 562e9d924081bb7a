"""The producer's own tiles when it has fewer warps than the consumers.

Per-thread copies (cp.async of pointer tiles) are laid out for the kernel's ``num_warps``.
The producer warp group runs its copies as a program of its own four warps, so where the
kernel has more (8 consumer warps: two warp groups), the producer's tiles are the same
layouts with fewer warps: each thread copies more of the tile (a blocked layout's
footprint repeats), the tile and its swizzled ring slot are the same.  Warps are taken
away along the slowest dimensions first, so that a warp's accesses stay as coalesced as
the consumers' were.
"""

from __future__ import annotations

from math import prod
from typing import Any

from polytile.gpu.layouts import BlockedLayout, SliceLayout
from polytile.ir import types as t


def with_warps(layout: Any, warps: int) -> Any:
    """``layout`` (a blocked layout, or a slice of one) for ``warps`` warps, or None where
    that cannot be said (another kind of layout, or fewer warps than asked)."""
    if isinstance(layout, SliceLayout):
        parent = with_warps(layout.parent, warps)
        return None if parent is None else SliceLayout(layout.dim, parent)
    if not isinstance(layout, BlockedLayout):
        return None
    per_dim = list(layout.warps_per_cta)
    for dim in reversed(layout.order):  # the slowest dimension first
        while prod(per_dim) > warps and per_dim[dim] > 1:
            per_dim[dim] //= 2
    if prod(per_dim) != warps:
        return None
    return BlockedLayout(layout.size_per_thread, layout.threads_per_warp, tuple(per_dim), layout.order)


def _values(ops: list) -> list:
    """Every value the ops (and the ops and blocks of their regions) make or read."""
    values = []
    for op in ops:
        for inner in op.walk():
            values += [*inner.operands, *inner.results]
            for region in inner.regions:
                for block in region.blocks:
                    values += list(block.arguments)
    return values


def unmovable_layout(ops: list, warps: int) -> str | None:
    """Why the tiles of ``ops`` cannot be laid out for ``warps`` warps, or None."""
    for value in _values(ops):
        if isinstance(value.type, t.TileType) and with_warps(value.type.layout, warps) is None:
            return (f"a tile the copies' addresses need has the layout {value.type.layout}, which the producer's "
                    f"{warps} warps cannot take over")
    return None


def lay_out_for(block: Any, warps: int) -> None:
    """Give every tile made or carried in ``block`` (the producer region) the layout for
    ``warps`` warps.  It reads no tile from outside: it makes its own copies of the ones
    it starts from (``build_producer``)."""
    made = []
    for op in block:
        for inner in op.walk():
            made += list(inner.results)
            made += [arg for region in inner.regions for nested in region.blocks for arg in nested.arguments]
    for value in made:
        if isinstance(value.type, t.TileType):
            value.type = t.TileType(value.type.shape, value.type.element, with_warps(value.type.layout, warps))


__all__ = ["lay_out_for", "unmovable_layout", "with_warps"]
