"""Layout conversions (and tile.trans / tile.reshape) through shared memory.

Three checks: a Python model runs the lowering's own index math (store in the source
layout, load in the result layout) for every thread and proves each element ends in the
right register; ptxas accepts the PTX for sm_80 and sm_90a; and the language test kernels
that need only conversions and elementwise ops compile for nvidia:sm_90a."""

from __future__ import annotations


import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.gpu.allocation import AllocateShared
from polytile.gpu.layouts import BlockedLayout, MmaLayout, SliceLayout
from polytile.gpu.lowering.convert import ShuffleThroughShared, _permuted, _reshaped
from polytile.gpu.lowering.shared import PyAddOps, access_plan
from polytile.gpu.membar import InsertBarriers
from polytile.ir import parse_module
from polytile.passes.manager import PassManager
from polytile.passes.pipeline import Pipeline

from .memory_ir import context
from .ptx_assembly import assembles


ROW = BlockedLayout((1, 4), (4, 8), (4, 1), (1, 0))
COL = BlockedLayout((4, 1), (8, 4), (1, 4), (0, 1))
WIDE = BlockedLayout((1, 8), (8, 4), (2, 2), (1, 0))
ONE = BlockedLayout((1, 1), (1, 32), (4, 1), (1, 0))
MMA = MmaLayout(2, (2, 2), (16, 8))
FLAT = BlockedLayout((4,), (32,), (4,), (0,))
SCALAR = BlockedLayout((1,), (32,), (4,), (0,))

#: (shape, source layout, result layout)
PAIRS = [
    ((64, 64), ROW, COL),
    ((64, 64), COL, ROW),
    ((64, 64), ROW, WIDE),
    ((32, 64), WIDE, ONE),
    ((64, 64), MMA, ROW),
    ((64, 32), ROW, MMA),
    ((16, 16), ROW, COL),          # smaller than the layouts: threads hold copies
    ((64,), SliceLayout(0, ROW), SliceLayout(1, ROW)),
    ((64,), SliceLayout(1, COL), FLAT),
    ((1024,), FLAT, SCALAR),
    ((128,), SCALAR, SliceLayout(0, WIDE)),
]


def simulate(source, result, shuffle: ShuffleThroughShared, source_to_result=lambda c: c):
    """Every thread stores, every thread loads; returns nothing, asserts everything."""
    ops = PyAddOps()
    memory: dict[int, tuple] = {}
    placement = shuffle.placement
    for warp in range(source.num_warps):
        for lane in range(source.num_lanes):
            for start, offset in access_plan(ops, source, placement, shuffle.store_width, lane, warp,
                                             shuffle.to_placement):
                assert offset % shuffle.store_width == 0  # vectors stay aligned
                for i in range(shuffle.store_width):
                    element = source_to_result(source.apply(start + i, lane, warp))
                    assert 0 <= offset + i < placement.elements
                    assert memory.setdefault(offset + i, element) == element, "two elements on one address"
    for warp in range(result.num_warps):
        for lane in range(result.num_lanes):
            for start, offset in access_plan(ops, result, placement, shuffle.load_width, lane, warp):
                assert offset % shuffle.load_width == 0
                for i in range(shuffle.load_width):
                    assert memory[offset + i] == result.apply(start + i, lane, warp)


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
@pytest.mark.parametrize("shape, source, result", PAIRS, ids=[f"{i}" for i in range(len(PAIRS))])
def test_every_element_reaches_its_register(shape, source, result, bits):
    src, dst = source.linear(shape), result.linear(shape)
    shuffle = ShuffleThroughShared(src, dst, bits, 128)
    simulate(src, dst, shuffle)
    assert shuffle.store_width * bits <= 128 and shuffle.load_width * bits <= 128


def test_vectors_and_padding_follow_the_layouts():
    shuffle = ShuffleThroughShared(ROW.linear((64, 64)), WIDE.linear((64, 64)), 32, 128)
    # Both hold runs along dim 1: 4-float stores, 4-float loads (16 bytes), rows padded by 4.
    assert (shuffle.placement.inner, shuffle.store_width, shuffle.load_width, shuffle.placement.pad) == (1, 4, 4, 4)
    assert shuffle.scratch_bytes(32) == 64 * 68 * 4
    across = ShuffleThroughShared(ROW.linear((64, 64)), COL.linear((64, 64)), 16, 128)
    assert (across.store_width, across.load_width) in {(4, 1), (1, 4)}
    flat = ShuffleThroughShared(FLAT.linear((1024,)), SCALAR.linear((1024,)), 32, 128)
    assert flat.placement.pad == 0 and flat.scratch_bytes(32) == 4096


@pytest.mark.parametrize("shape, order, source, result", [
    ((64, 32), (1, 0), ROW, ROW),
    ((32, 64), (1, 0), ROW, COL),
    ((4, 8), (1, 0), BlockedLayout((1, 1), (4, 8), (4, 1), (1, 0)), BlockedLayout((1, 1), (8, 4), (4, 1), (1, 0))),
])
def test_transposes(shape, order, source, result):
    out_shape = tuple(shape[i] for i in order)
    src, dst = source.linear(shape), result.linear(out_shape)
    shuffle = ShuffleThroughShared(src, dst, 32, 128, source_dim_of=lambda d: order[d], to_placement=_permuted(order))
    simulate(src, dst, shuffle, lambda c: tuple(c[order[i]] for i in range(len(order))))


@pytest.mark.parametrize("source_shape, result_shape", [((4, 8), (32,)), ((32,), (4, 8)), ((8, 16), (16, 8))])
def test_reshapes(source_shape, result_shape):
    from polytile.gpu.layouts import default_blocked_layout

    src = default_blocked_layout(source_shape, 4).linear(source_shape)
    dst = default_blocked_layout(result_shape, 4).linear(result_shape)
    shuffle = ShuffleThroughShared(src, dst, 32, 128, to_placement=_reshaped(source_shape, result_shape), reshape=True)
    flat = lambda c, s: int(np.ravel_multi_index(c, s))  # noqa: E731
    simulate(src, dst, shuffle, lambda c: tuple(int(x) for x in np.unravel_index(flat(c, source_shape), result_shape)))


# --------------------------------------------------------------------------------------
# PTX


def lower_to_ptx(text: str, arch: str) -> str:
    from polytile.gpu.lowering import lower_module
    from polytile_nvidia.codegen import emit_ptx, nvidia_gpu_target

    module = parse_module(text)
    pipeline = Pipeline()
    pipeline.add_stage("memory", [AllocateShared(), InsertBarriers()])
    PassManager(pipeline).run(module, context(4, arch))
    return emit_ptx(str(lower_module(module, nvidia_gpu_target(arch), num_warps=4)), arch, "k")


def conversion_kernel(shape, source, result, element: str, converted: str | None = None) -> str:
    """Splat a value in ``source``, convert it (as ``converted``, default ``element``) to
    ``result``, store it."""
    dims = "x".join(map(str, shape))
    converted = converted or element
    widen = f"%3 = arith.extui %1 : tile<{dims}x{element}, {result}>" if converted != element else ""
    return f"""
func.func @k(%p: ptr<{element}>, %v: {converted}) attributes {{gpu.num_warps = 4, kernel = true}} {{
  %0 = tile.splat %v : tile<{dims}x{converted}, {source}>
  %1 = gpu.convert_layout %0 : tile<{dims}x{converted}, {result}>
  %2 = tile.splat %p : tile<{dims}xptr<{element}>, {result}>
  {widen}
  tile.store %2, {"%3" if widen else "%1"}
  func.return
}}
"""


@pytest.mark.parametrize("element", ["f32", "f16", "i8", "i64", "f64"])
@pytest.mark.parametrize("index", [0, 2, 4, 5, 7, 9])
def test_conversions_assemble(index, element):
    shape, source, result = PAIRS[index]
    text = conversion_kernel(shape, source, result, element)
    for arch in ("sm_80", "sm_90a"):
        ptx = lower_to_ptx(text, arch)
        assert "bar.sync" in ptx and "st.shared" in ptx and "ld.shared" in ptx
        assembles(ptx, arch)


def test_i1_is_stored_as_bytes():
    shape, source, result = PAIRS[0]
    ptx = lower_to_ptx(conversion_kernel(shape, source, result, "i8", converted="i1"), "sm_90a")
    assert "st.shared.b8" in ptx or "st.shared.v4.b8" in ptx or "st.shared.u8" in ptx
    assembles(ptx, "sm_90a")


# --------------------------------------------------------------------------------------
# Language test kernels that need only conversions and elementwise ops


@pytest.fixture
def with_barriers(monkeypatch):
    """The NVIDIA pipeline with insert-barriers after allocate-shared (until the backend
    lists it in its memory stage)."""
    from polytile.passes import default_pipeline

    original = default_pipeline.build_pipeline

    def build(*args, **kwargs):
        pipeline = original(*args, **kwargs)
        if "insert-barriers" not in str(pipeline) and "allocate-shared" in str(pipeline):
            pipeline.insert_after("allocate-shared", InsertBarriers())
        return pipeline

    monkeypatch.setattr(default_pipeline, "build_pipeline", build)


def _language_kernels():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from language.test_builtins import shape_kernel
    from language.test_memory import copy_kernel

    i32 = np.zeros(32, np.int32)
    cases = [(shape_kernel, (i32, i32), {"FN": fn}) for fn in ("trans", "permute", "reshape", "expand_dims", "full")]
    for dtype in (np.float32, np.float16, np.int8, np.int64, np.bool_):
        x = np.zeros((6, 20), dtype)
        other = True if dtype is np.bool_ else -1
        cases.append((copy_kernel, (x, np.zeros(32 * 8 + 120, dtype), 6, 20),
                      {"OTHER": other, "CACHE": "", "EVICT": "", "BM": 8, "BN": 32}))
    return cases


@pt.jit
def outer_sum(x_ptr, out_ptr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    x = pl.load(x_ptr + offs)
    pl.store(out_ptr + offs[:, None] * BLOCK + offs[None, :], x[:, None] + x[None, :])


@pytest.mark.parametrize("case", range(10))
def test_language_kernels_compile_for_nvidia(case, with_barriers):
    from polytile.compiler import compile_module

    kernel, args, meta = _language_kernels()[case]
    result = compile_module(kernel.lower(*args, **meta), "nvidia:sm_90a", num_warps=4)
    assembles(result.context.artifacts["ptx"], "sm_90a")


def test_outer_sum_converts_through_shared_memory(with_barriers):
    from polytile.compiler import compile_module

    x = np.zeros(64, np.float32)
    result = compile_module(outer_sum.lower(x, np.zeros(64 * 64, np.float32), BLOCK=64),
                            "nvidia:sm_90a", num_warps=4)
    artifacts = result.context.artifacts
    assert artifacts["shared_bytes"] == 256 and "bar.sync" in artifacts["ptx"]
    assembles(artifacts["ptx"], "sm_90a")
