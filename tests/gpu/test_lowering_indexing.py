"""The index math of the lowering, run on Python integers: for every thread, the
coordinates it computes are those the layout assigns, and all threads together hold every
element of the tile (exactly once, or ``copies`` times when the layout replicates)."""

from __future__ import annotations

from collections import Counter

import pytest

from polytile.gpu.layouts import BlockedLayout, SliceLayout, default_blocked_layout
from polytile.gpu.lowering.indexing import (
    PyOps,
    contiguous_registers,
    coordinates,
    duplicate_register_mask,
    duplicate_thread_masks,
    register_map,
)

CASES = [
    # (shape, layout)
    ((1024,), default_blocked_layout((1024,), 4, 32, (0,), 4)),
    ((128,), default_blocked_layout((128,), 8, 32, (0,), 1)),  # more threads than elements
    ((4096,), default_blocked_layout((4096,), 1, 32, (0,), 4)),
    ((64, 64), default_blocked_layout((64, 64), 4, 32, (1, 0), 4)),
    ((32, 128), default_blocked_layout((32, 128), 8, 32, (0, 1), 2)),
    ((16, 16), BlockedLayout((2, 2), (4, 8), (2, 2), (1, 0))),
    ((64,), SliceLayout(1, default_blocked_layout((64, 64), 4, 32, (1, 0), 4))),
    ((64,), SliceLayout(0, default_blocked_layout((64, 64), 4, 32, (1, 0), 4))),
    ((256,), default_blocked_layout((256,), 2, 64, (0,), 2)),  # a 64-lane wave
]


def simulate(layout, shape):
    """{(warp, lane): [coords per register]} from the emitted arithmetic."""
    linear = layout.linear(shape)
    return linear, {(w, l): [tuple(c) for c in coordinates(PyOps(), linear, l, w)]
                    for w in range(layout.num_warps) for l in range(layout.warp_size)}


@pytest.mark.parametrize("shape, layout", CASES, ids=[f"{s}-{type(l).__name__}" for s, l in CASES])
def test_emitted_indices_match_the_layout_and_cover_the_tile(shape, layout):
    linear, threads = simulate(layout, shape)
    held = Counter()
    for (warp, lane), coords in threads.items():
        assert coords == linear.thread_indices(warp, lane)
        held.update(coords)
    numel = 1
    for n in shape:
        numel *= n
    assert len(held) == numel
    assert all(all(0 <= c < n for c, n in zip(coords, shape)) for coords in held)
    assert set(held.values()) == {linear.copies}


@pytest.mark.parametrize("shape, layout", CASES, ids=[f"{s}-{type(l).__name__}" for s, l in CASES])
def test_skipping_copies_writes_each_element_exactly_once(shape, layout):
    linear, threads = simulate(layout, shape)
    lanes, warps = duplicate_thread_masks(linear)
    registers = duplicate_register_mask(linear)
    written = Counter()
    for (warp, lane), coords in threads.items():
        if lane & lanes or warp & warps:
            continue
        written.update(c for r, c in enumerate(coords) if not r & registers)
    assert set(written.values()) == {1}


def test_vector_width_is_the_run_of_consecutive_registers():
    assert contiguous_registers(default_blocked_layout((1024,), 4, 32, (0,), 4).linear((1024,)), 0) == 4
    assert contiguous_registers(default_blocked_layout((64, 64), 4, 32, (1, 0), 4).linear((64, 64)), 1) == 4
    assert contiguous_registers(default_blocked_layout((64, 64), 4, 32, (1, 0), 4).linear((64, 64)), 0) == 1
    assert contiguous_registers(default_blocked_layout((128,), 8, 32, (0,), 1).linear((128,)), 0) == 1


def test_broadcast_and_expand_dims_stay_inside_each_thread():
    parent = default_blocked_layout((64, 64), 4, 32, (1, 0), 4)
    full = parent.linear((64, 64))
    row = parent.linear((1, 64))
    mapping = register_map(row, full, lambda c: (0, c[1]))
    assert mapping is not None
    for (warp, lane) in [(0, 0), (3, 31), (2, 17)]:
        source, result = row.thread_indices(warp, lane), full.thread_indices(warp, lane)
        assert [source[r] for r in mapping] == [(0, c[1]) for c in result]
    sliced = SliceLayout(0, parent).linear((64,))
    assert register_map(sliced, row, lambda c: c[1:]) is not None


def test_a_conversion_across_threads_has_no_register_map():
    rows = SliceLayout(1, default_blocked_layout((64, 64), 4, 32, (1, 0), 4)).linear((64,))
    cols = SliceLayout(0, default_blocked_layout((64, 64), 4, 32, (1, 0), 4)).linear((64,))
    assert register_map(rows, cols, lambda c: c) is None
