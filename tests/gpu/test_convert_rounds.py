"""Layout conversions, transposes and reshapes in rounds (``gpu.scratch_rounds``): the
scratch holds one slab of the tile at a time.

Three checks, as for conversions in one go (test_convert_layout.py): the lowering's own
index math on Python integers, round by round, for every thread; ptxas accepts the PTX
(run-time rounds included); and whole kernels over a shared-memory limit, run on the
thread-block simulator (llvm_cta.py), give the interpreter's results."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.gpu.layouts import BlockedLayout, default_blocked_layout
from polytile.gpu.lowering.convert import ShuffleInRounds, ShuffleThroughShared, _permuted, _reshaped
from polytile.gpu.lowering.shared import PyAddOps

from .test_convert_layout import COL, FLAT, PAIRS, ROW, SCALAR, assembles, conversion_kernel, lower_to_ptx


def simulate_in_rounds(source, result, shuffle: ShuffleInRounds, source_to_result=lambda c: c) -> int:
    """Every thread stores its round-``k`` elements into the slab, every thread loads its
    round-``k`` registers, for each ``k``; asserts every element reaches its register
    exactly once.  Returns the number of rounds whose round was decided at run time."""
    ops = PyAddOps()
    placement = shuffle.placement
    stores = {(w, l): shuffle.plan(ops, source, shuffle.store_width, l, w, shuffle.to_placement)
              for w in range(source.num_warps) for l in range(source.num_lanes)}
    loads = {(w, l): shuffle.plan(ops, result, shuffle.load_width, l, w)
             for w in range(result.num_warps) for l in range(result.num_lanes)}
    loaded = set()
    for k in range(shuffle.rounds):
        memory: dict[int, tuple] = {}
        for (warp, lane), plan in stores.items():
            for round_, start, offset in plan:
                if round_ != k:
                    continue
                assert offset % shuffle.store_width == 0
                for i in range(shuffle.store_width):
                    element = source_to_result(source.apply(start + i, lane, warp))
                    assert 0 <= offset + i < placement.elements, "outside the slab"
                    assert memory.setdefault(offset + i, element) == element, "two elements on one address"
        for (warp, lane), plan in loads.items():
            for round_, start, offset in plan:
                if round_ != k:
                    continue
                for i in range(shuffle.load_width):
                    assert memory[offset + i] == result.apply(start + i, lane, warp)
                    assert (warp, lane, start + i) not in loaded, "a register loaded in two rounds"
                    loaded.add((warp, lane, start + i))
    everyone = {(w, l, s + i) for (w, l), plan in loads.items() for _, s, _ in plan for i in range(shuffle.load_width)}
    assert loaded == everyone
    return sum(not shuffle.static(layout, to) for layout, to in ((source, shuffle.to_placement), (result, None)))


@pytest.mark.parametrize("bits", [8, 32])
@pytest.mark.parametrize("shape, source, result", PAIRS, ids=[f"{i}" for i in range(len(PAIRS))])
def test_every_element_reaches_its_register_in_every_number_of_rounds(shape, source, result, bits):
    src, dst = source.linear(shape), result.linear(shape)
    whole = ShuffleThroughShared(src, dst, bits, 128)
    for rounds in sorted({2, whole.max_rounds()}):
        shuffle = whole.in_rounds(rounds, src, dst)
        assert shuffle.scratch_bytes(bits) <= -(-whole.scratch_bytes(bits) // rounds) + whole.placement.row * bits
        simulate_in_rounds(src, dst, shuffle)


def test_rounds_are_decided_at_compile_time_where_the_layouts_allow_and_at_run_time_elsewhere():
    flat, scalar = FLAT.linear((1024,)), SCALAR.linear((1024,))
    whole = ShuffleThroughShared(flat, scalar, 32, 128)
    # Index bit 512 is a register bit on both sides: known at compile time.
    assert simulate_in_rounds(flat, scalar, whole.in_rounds(2, flat, scalar)) == 0
    # Bit 256 is a warp bit of FLAT: its stores check their round at run time.
    four = whole.in_rounds(4, flat, scalar)
    assert simulate_in_rounds(flat, scalar, four) == 1 and four.scratch_bytes(32) == 1024
    # A 2-D pair splits along the dimension that keeps the rounds known when one does.
    row, columns = ROW.linear((32, 32)), BlockedLayout((4, 1), (4, 8), (1, 4), (1, 0)).linear((32, 32))
    whole = ShuffleThroughShared(row, columns, 32, 128)
    assert [d for d, _ in whole.split_dimensions()] == [1, 0]
    shuffle = whole.in_rounds(2, row, columns)
    assert shuffle.split == 0 and simulate_in_rounds(row, columns, shuffle) == 0


def test_more_rounds_than_the_tile_has_slabs_is_refused():
    whole = ShuffleThroughShared(ROW.linear((16, 16)), COL.linear((16, 16)), 32, 128)
    with pytest.raises(ValueError, match="cannot be moved in"):
        whole.in_rounds(whole.max_rounds() * 2, ROW.linear((16, 16)), COL.linear((16, 16)))


@pytest.mark.parametrize("shape, order, source, result", [((64, 32), (1, 0), ROW, ROW), ((32, 64), (1, 0), ROW, COL)])
def test_transposes_in_rounds(shape, order, source, result):
    out_shape = tuple(shape[i] for i in order)
    src, dst = source.linear(shape), result.linear(out_shape)
    whole = ShuffleThroughShared(src, dst, 32, 128, source_dim_of=lambda d: order[d], to_placement=_permuted(order))
    for rounds in (2, 8):
        simulate_in_rounds(src, dst, whole.in_rounds(rounds, src, dst),
                           lambda c: tuple(c[order[i]] for i in range(len(order))))


@pytest.mark.parametrize("source_shape, result_shape", [((8, 16), (16, 8)), ((32,), (4, 8)), ((16, 16), (256,))])
def test_reshapes_in_rounds(source_shape, result_shape):
    src = default_blocked_layout(source_shape, 4).linear(source_shape)
    dst = default_blocked_layout(result_shape, 4).linear(result_shape)
    whole = ShuffleThroughShared(src, dst, 32, 128, to_placement=_reshaped(source_shape, result_shape), reshape=True)
    flat = lambda c, s: int(np.ravel_multi_index(c, s))  # noqa: E731
    simulate_in_rounds(src, dst, whole.in_rounds(2, src, dst),
                       lambda c: tuple(int(x) for x in np.unravel_index(flat(c, source_shape), result_shape)))


# --------------------------------------------------------------------------------------
# PTX and whole kernels


@pytest.mark.parametrize("index", [0, 4, 9])
def test_conversions_in_rounds_assemble(index):
    shape, source, result = PAIRS[index]
    text = conversion_kernel(shape, source, result, "f32").replace(
        "%1 = gpu.convert_layout %0 :", "%1 = gpu.convert_layout %0 {gpu.scratch_rounds = 4} :")
    ptx = lower_to_ptx(text, "sm_90a")
    assert ptx.count("bar.sync") >= 2 * 4 - 1
    assembles(ptx, "sm_90a")


@pt.jit
def transpose(x, out, M: pl.constexpr, N: pl.constexpr):
    r = pl.arange(0, M)[:, None]
    c = pl.arange(0, N)[None, :]
    v = pl.load(x + r * N + c)
    pl.store(out + pl.arange(0, N)[:, None] * M + pl.arange(0, M)[None, :], pl.trans(v))


@pt.jit
def outer_sum(x_ptr, out_ptr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    x = pl.load(x_ptr + offs)
    pl.store(out_ptr + offs[:, None] * BLOCK + offs[None, :], x[:, None] + x[None, :])


@pytest.fixture
def small_shared_memory(monkeypatch):
    """sm_90a with ``limit`` bytes of shared memory per block."""
    from polytile_nvidia import codegen

    original = codegen.nvidia_gpu_target

    def limit(nbytes: int) -> None:
        monkeypatch.setattr(codegen, "nvidia_gpu_target",
                            lambda *a, **k: dataclasses.replace(original(*a, **k), max_shared_bytes=nbytes))
    return limit


NUM_WARPS = 2


@pytest.mark.parametrize("kernel, args, meta, limit", [
    (transpose, lambda: [np.arange(32 * 16, dtype=np.float32), np.zeros(32 * 16, np.float32)], {"M": 32, "N": 16},
     1024),
    (outer_sum, lambda: [np.arange(32, dtype=np.float32), np.zeros(32 * 32, np.float32)], {"BLOCK": 32}, 64),
], ids=["transpose", "outer_sum"])
def test_kernels_over_the_limit_run_in_rounds_and_match_the_interpreter(kernel, args, meta, limit,
                                                                        small_shared_memory):
    from polytile.compiler import compile_module

    from .llvm_cta import run_kernel

    pytest.importorskip("polytile_nvidia")
    expected = args()
    kernel[(1,)](*expected, target="interp", **meta)
    small_shared_memory(limit)
    got = args()
    result = compile_module(kernel.lower(*got, **meta), "nvidia:sm_90a", num_warps=NUM_WARPS)
    artifacts = result.context.artifacts
    assert 0 < artifacts["shared_bytes"] <= limit
    assert "gpu.scratch_rounds" in str(result.module)
    run_kernel(artifacts, got, NUM_WARPS)
    np.testing.assert_array_equal(got[1], expected[1])


def test_a_transpose_over_the_sm_90a_limit_fits_in_rounds_and_assembles():
    from polytile.compiler import compile_module
    from polytile_nvidia.architectures import ARCHITECTURES

    pytest.importorskip("polytile_nvidia")
    # 128 x 256 f64 is 256 KB in one go; sm_90a gives a block at most 227 KB.
    x = np.zeros(128 * 256, np.float64)
    result = compile_module(transpose.lower(x, x, M=128, N=256), "nvidia:sm_90a", num_warps=4)
    artifacts = result.context.artifacts
    limit = ARCHITECTURES["sm_90a"].shared_memory_per_block_optin
    assert 128 * 256 * 8 // 2 <= artifacts["shared_bytes"] <= limit < 128 * 256 * 8
    trans = next(op for op in result.module.walk() if op.name == "tile.trans")
    assert trans.attributes["gpu.scratch_rounds"] == 2
    assembles(artifacts["ptx"], "sm_90a")
