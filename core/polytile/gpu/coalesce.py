"""The coalescing heuristic: the blocked layout a load or store should use, from the axis
info of its pointer tile.

It follows Triton's Coalesce pass (lib/Dialect/TritonGPU/Transforms/CoalesceUtils.cpp,
``buildCoalescedEncoding``, and ``getNumElementsPerThread`` in Transforms/Utility.cpp):

1. the order is the pointer's dimensions from the most contiguous to the least
   (``getOrderFromContiguity``);
2. each thread takes as many elements along the fastest dimension as are contiguous,
   aligned and fit in one 128-bit access (``getNumElementsPerThread``), the widest of the
   accesses in the same group, if several are given;
3. but no more than the tile has elements per thread (``numElems / numThreads``);
4. a store is further held to its own vector width: wider per-thread chunks would leave
   gaps in each warp's write;
5. lanes and warps fill the dimensions fastest first (:func:`~.layouts.default_blocked_layout`).

Vector add of f32, BLOCK = 1024, num_warps = 4, 16-byte aligned pointers: 4 elements per
thread (16 bytes), 32 lanes and 4 warps along the one dimension.
"""

from __future__ import annotations

from typing import Sequence

from ..analysis.axis_info import AxisInfo
from .layouts import BlockedLayout, default_blocked_layout


# --------------------------------------------------------------------------------------
# What the facts buy: vector widths (Triton's getPtrAlignment / getMaskAlignment)


def contiguity_order(info: AxisInfo) -> tuple[int, ...]:
    """Dimensions from the most contiguous to the least; ties favour the last dimension
    (Triton's ``getOrderFromContiguity``)."""
    dims = list(reversed(range(info.rank)))
    return tuple(sorted(dims, key=lambda d: -info.contiguity[d]))


def pointer_vector_width(info: AxisInfo, element_bits: int, shape: Sequence[int], max_bits: int = 128) -> int:
    """How many elements one thread may access in one vector through a pointer tile with
    these facts: contiguous along its fastest dimension and aligned to that many elements,
    at most ``max_bits`` wide."""
    fastest = contiguity_order(info)[0]
    element_bytes = max(element_bits // 8, 1)
    aligned = max(info.divisibility[fastest] // element_bytes, 1)
    contiguous = min(info.contiguity[fastest], shape[fastest])
    return max(min(aligned, contiguous, max(max_bits // element_bits, 1)), 1)


def mask_vector_width(info: AxisInfo, order: Sequence[int]) -> int:
    """How many consecutive elements along ``order[0]`` share one mask bit."""
    return info.constancy[order[0]]


def coalesced_layout(shape: Sequence[int], pointer: AxisInfo, element_bits: int, num_warps: int,
                     warp_size: int = 32, is_store: bool = False, max_bits: int = 128,
                     same_order: Sequence[tuple[AxisInfo, int]] = ()) -> BlockedLayout:
    """The blocked layout for a memory access through a pointer tile of ``shape`` whose
    axis info is ``pointer``, to elements of ``element_bits``.

    ``same_order`` lists other accesses of the same shape and order that feed this one
    (pointer info, element bits): the thread chunk may be as wide as the widest of them,
    as Triton's Coalesce does for accesses in one slice."""
    order = contiguity_order(pointer)
    own = pointer_vector_width(pointer, element_bits, shape, max_bits)
    per_thread = own
    for info, bits in same_order:
        if contiguity_order(info) == order:
            per_thread = max(per_thread, pointer_vector_width(info, bits, shape, max_bits))
    numel = 1
    for n in shape:
        numel *= n
    per_thread = min(per_thread, max(numel // (num_warps * warp_size), 1))
    if is_store:
        per_thread = min(per_thread, own)
    return default_blocked_layout(shape, num_warps, warp_size, order, per_thread)
