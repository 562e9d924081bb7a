"""tile.join, tile.split and tile.cat on GPUs (polytile.gpu.lowering.shapes).

Three checks: a Python model runs the lowering's own plan (the register moves, or the
scratch offsets of every store and load through the same index math the LLVM emission
uses) for every thread of the program and compares each result register with NumPy's
join / split / concatenate; ptxas accepts the PTX for sm_80 and sm_90a; and the language
test kernels that use these ops compile for nvidia (and assemble)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.gpu.allocation import AllocateShared
from polytile.gpu.layouts import BlockedLayout, MmaLayout, SliceLayout
from polytile.gpu.linear_layout import LinearLayout
from polytile.gpu.lowering.indexing import duplicate_register_mask
# Importing shapes registers its lowerings (module.py imports it at integration).
from polytile.gpu.lowering.shapes import ShapePlan, plan_shape_op, value_layout
from polytile.gpu.lowering.shared import PyAddOps, access_plan
from polytile.gpu.membar import InsertBarriers
from polytile.ir import parse_module
from polytile.passes.manager import PassManager
from polytile.passes.pipeline import Pipeline

from .memory_ir import context
from .ptx_assembly import assembles


def blocked(spt, tpw, wpc, order):
    return BlockedLayout(tuple(spt), tuple(tpw), tuple(wpc), tuple(order))


ONE = blocked([1], [32], [4], [0])                       # one element per thread
FOUR = blocked([4], [32], [4], [0])                      # 16-byte f32 vectors
ONE_2W = blocked([1], [32], [2], [0])
PAIRS = blocked([1, 2], [32, 1], [4, 1], [1, 0])         # a thread holds both halves
LANES_2 = blocked([1, 1], [16, 2], [4, 1], [1, 0])       # the halves in neighbouring lanes
ROW = blocked([1, 4], [4, 8], [4, 1], [1, 0])
COL = blocked([4, 1], [8, 4], [1, 4], [0, 1])
MMA = MmaLayout(2, (2, 2), (16, 8))
CUBE = blocked([1, 1, 1], [2, 8, 2], [4, 1, 1], [2, 1, 0])
CUBE_WIDE = blocked([1, 4, 2], [4, 8, 1], [4, 1, 1], [2, 1, 0])
CUBE_COL = blocked([2, 1, 2], [8, 4, 1], [1, 4, 1], [0, 1, 2])
ONE_8W = blocked([1], [32], [8], [0])
LANES_2_8W = blocked([1, 1], [16, 2], [8, 1], [1, 0])
ONE_1W = blocked([2], [32], [1], [0])
PAIRS_1W = blocked([2, 2], [32, 1], [1, 1], [1, 0])
LANES_2_1W = blocked([1, 1], [16, 2], [1, 1], [1, 0])


def _tile(shape, element, layout) -> str:
    return f"tile<{'x'.join(map(str, shape))}x{element}, {layout}>" if shape else element


def shape_op(name: str, operands: list, results: list, element: str = "f32"):
    """A parsed ``tile.<name>`` whose operands and results are (shape, layout) pairs (a
    result shape () is a scalar)."""
    args = ", ".join(f"%a{i}: {_tile(s, element, l)}" for i, (s, l) in enumerate(operands))
    names = ", ".join(f"%r{i}" for i in range(len(results)))
    types = ", ".join(_tile(s, element, l) for s, l in results)
    uses = ", ".join(f"%a{i}" for i in range(len(operands)))
    module = parse_module(f"func.func @k({args}) {{\n  {names} = tile.{name} {uses} : {types}\n  func.return\n}}\n")
    return next(op for op in module.walk() if op.name == f"tile.{name}")


# --------------------------------------------------------------------------------------
# The Python model of every thread


def _reference(name: str, sources: list[np.ndarray]) -> list[np.ndarray]:
    if name == "join":
        return [np.stack(sources, axis=-1)]
    if name == "split":
        return [sources[0][..., 0], sources[0][..., 1]]
    return [np.concatenate(sources)]


def simulate(op, plan: ShapePlan) -> None:
    """Run ``plan`` for every thread; assert each result register holds the element
    NumPy's join / split / concatenate puts at its coordinates."""
    name = op.name.split(".")[1]
    sources = [v.type.layout.linear(v.type.shape) for v in op.operands]
    results = [value_layout(v, sources[0]) for v in op.results]
    # Distinct values: operand k's element at flat index i is k * 100000 + i.
    data = [k * 100000 + np.arange(int(np.prod(v.type.shape))).reshape(v.type.shape)
            for k, v in enumerate(op.operands)]
    expected = _reference(name, data)
    ops = PyAddOps()
    memory: dict[int, int] = {}
    if plan.registers is None:
        placement = plan.placement
        for k, (layout, store) in enumerate(zip(sources, plan.stores)):
            assert store.base % store.width == 0  # vectors stay aligned
            for warp in range(layout.num_warps):
                for lane in range(layout.num_lanes):
                    for start, offset in access_plan(ops, store.layout, placement, store.width, lane, warp):
                        assert offset % store.width == 0
                        for i in range(store.width):
                            address = store.base + offset + i
                            assert 0 <= address < plan.scratch_elements
                            value = int(data[k][layout.apply(start + i, lane, warp)])
                            assert memory.setdefault(address, value) == value, "two elements on one address"
    for j, result in enumerate(results):
        for warp in range(result.num_warps):
            for lane in range(result.num_lanes):
                if plan.registers is not None:
                    held = [int(data[k][sources[k].apply(s, lane, warp)]) for k, s in plan.registers[j]]
                else:
                    held = _loaded(plan.loads[j], plan, memory, ops, lane, warp)
                for r, value in enumerate(held):
                    coords = result.apply(r, lane, warp)
                    assert value == expected[j][coords], (j, warp, lane, r, coords)


def _loaded(load, plan: ShapePlan, memory: dict, ops, lane: int, warp: int) -> list[int]:
    """What ``load_registers`` gives one thread (copies filled from their first register)."""
    registers: list = [None] * load.layout.num_registers
    assert load.base % load.width == 0
    for start, offset in access_plan(ops, load.layout, plan.placement, load.width, lane, warp):
        assert offset % load.width == 0
        for i in range(load.width):
            registers[start + i] = memory[load.base + offset + i]
    duplicates = duplicate_register_mask(load.layout)
    return [registers[r] if registers[r] is not None else registers[r & ~duplicates]
            for r in range(len(registers))]


# (operand shape, lhs layout, rhs layout, result layout, in registers?)
JOINS = [
    ((16,), ONE, ONE, LANES_2, False),                                  # language test_join_split
    ((128,), SliceLayout(1, PAIRS), SliceLayout(1, PAIRS), PAIRS, True),
    ((128,), FOUR, ONE, PAIRS, False),                                  # operands in different layouts
    ((4, 8), SliceLayout(2, CUBE), ROW, CUBE, False),                   # smaller than the footprints
    ((32, 64), MMA, MMA, CUBE_WIDE, False),
    ((32, 64), SliceLayout(2, CUBE_WIDE), SliceLayout(2, CUBE_WIDE), CUBE_WIDE, True),
    ((64, 32), COL, ROW, CUBE_COL, False),
    ((1,), ONE, ONE, LANES_2, False),                                   # two scalars
    ((256,), ONE_8W, ONE_8W, LANES_2_8W, False),                        # 8 warps
    ((64,), SliceLayout(1, PAIRS_1W), SliceLayout(1, PAIRS_1W), PAIRS_1W, True),  # 1 warp
    ((64,), ONE_1W, ONE_1W, PAIRS_1W, True),                            # the same layouts, as blocked
    ((64,), ONE_1W, ONE_1W, LANES_2_1W, False),
]

# (source shape, source layout, result layout (None: scalars), in registers?)
SPLITS = [
    ((16, 2), LANES_2, SliceLayout(1, LANES_2), False),                 # language test_join_split
    ((128, 2), PAIRS, SliceLayout(1, PAIRS), True),
    ((128, 2), PAIRS, FOUR, False),
    ((2,), ONE, None, False),                                           # halves are scalars
    ((2,), SliceLayout(0, SliceLayout(1, CUBE)), None, False),
    ((32, 64, 2), CUBE_WIDE, MMA, False),
    ((32, 64, 2), CUBE_WIDE, SliceLayout(2, CUBE_WIDE), True),
    ((8, 4, 2), CUBE_COL, COL, False),
    ((64, 2), PAIRS_1W, ONE_1W, True),
    ((64, 2), LANES_2_1W, ONE_1W, False),
    ((256, 2), LANES_2_8W, ONE_8W, False),
]

# (operand size, lhs layout, rhs layout, result layout, in registers?)
CATS = [
    ((8,), ONE, ONE, ONE, False),                                       # language test_cat
    ((64,), ONE_2W, ONE_2W, ONE_2W, True),                              # the result repeats in a register
    ((256,), FOUR, FOUR, FOUR, False),
    ((256,), FOUR, ONE, ONE, False),
    ((64,), SliceLayout(0, ROW), SliceLayout(1, COL), ONE, False),
    ((1024,), ONE_8W, FOUR, ONE_1W, False),
]


@pytest.mark.parametrize("element", ["i8", "f16", "f32", "f64"])
@pytest.mark.parametrize("case", JOINS, ids=[str(i) for i in range(len(JOINS))])
def test_join_every_register(case, element):
    shape, lhs, rhs, result, in_registers = case
    op = shape_op("join", [(shape, lhs), (shape, rhs)], [(shape + (2,), result)], element)
    plan = plan_shape_op(op)
    assert (plan.registers is not None) == in_registers
    simulate(op, plan)


@pytest.mark.parametrize("element", ["i8", "f32", "f64"])
@pytest.mark.parametrize("case", SPLITS, ids=[str(i) for i in range(len(SPLITS))])
def test_split_every_register(case, element):
    shape, source, result, in_registers = case
    half = (shape[:-1], result) if result is not None else ((), None)
    op = shape_op("split", [(shape, source)], [half, half], element)
    plan = plan_shape_op(op)
    assert (plan.registers is not None) == in_registers
    simulate(op, plan)


@pytest.mark.parametrize("element", ["i8", "f16", "f32", "f64"])
@pytest.mark.parametrize("case", CATS, ids=[str(i) for i in range(len(CATS))])
def test_cat_every_register(case, element):
    (n,), lhs, rhs, result, in_registers = case
    op = shape_op("cat", [((n,), lhs), ((n,), rhs)], [((2 * n,), result)], element)
    plan = plan_shape_op(op)
    assert (plan.registers is not None) == in_registers
    simulate(op, plan)


def test_scratch_holds_the_operands_one_after_another():
    op = shape_op("join", [((128,), FOUR), ((128,), FOUR)], [((128, 2), PAIRS)])
    plan = plan_shape_op(op)
    assert plan.registers is None and plan.scratch_elements == 256
    assert [(s.base, s.width) for s in plan.stores] == [(0, 4), (128, 4)]   # 16-byte stores
    assert [(s.base, s.width) for s in plan.loads] == [(0, 1)]             # the pair is 128 apart
    split = plan_shape_op(shape_op("split", [((128, 2), PAIRS)], [((128,), FOUR), ((128,), FOUR)]))
    assert [(s.base, s.width) for s in split.loads] == [(0, 1), (1, 1)]     # odd elements: no vectors
    cat = plan_shape_op(shape_op("cat", [((256,), FOUR), ((256,), FOUR)], [((512,), FOUR)]))
    assert [(s.base, s.width) for s in cat.stores + cat.loads] == [(0, 4), (256, 4), (0, 4)]
    half = plan_shape_op(shape_op("cat", [((256,), FOUR), ((256,), FOUR)], [((512,), FOUR)], "f16"))
    assert half.stores[0].width == 4 and half.scratch_elements * 2 == 1024


@pt.jit
def split_pairs(x_ptr, out_ptr, N: pl.constexpr):
    offs = pl.arange(0, N)
    pairs = pl.load(x_ptr + offs[:, None] * 2 + pl.arange(0, 2)[None, :])
    re, im = pl.split(pairs)
    pl.store(out_ptr + offs, re * re + im * im)


@pytest.mark.parametrize("n, num_warps", [(128, 4), (1024, 4), (64, 1), (256, 8)])
def test_loaded_pairs_split_in_registers(n, num_warps):
    from polytile.compiler import compile_module

    module = split_pairs.lower(np.zeros(2 * n, np.float32), np.zeros(n, np.float32), N=n)
    result = compile_module(module, "nvidia:sm_90a", num_warps=num_warps)
    split = next(op for op in module.walk() if op.name == "tile.split")
    # The load gives each thread whole pairs; the halves take the slice of its layout.
    assert split.source.type.layout.size_per_thread == (1, 2)
    for half in split.results:
        assert half.type.layout == SliceLayout(1, split.source.type.layout)
    assert plan_shape_op(split).registers is not None
    ptx = result.context.artifacts["ptx"]
    assert "bar.sync" not in ptx and "st.shared" not in ptx
    assembles(ptx, "sm_90a")


def test_assign_layouts_gives_split_halves_the_slice_of_the_source():
    from polytile.gpu.distribute import AssignLayouts
    from polytile.ir_testing import apply_passes

    out = apply_passes("""
func.func @k(%p: ptr<f32>, %q: ptr<f32>) attributes {kernel = true} {
  %0 = tile.splat %p : tile<64x2xptr<f32>>
  %1 = tile.load %0 : tile<64x2xf32>
  %2, %3 = tile.split %1 : tile<64xf32>, tile<64xf32>
  %4 = arith.addf %2, %3 : tile<64xf32>
  %5 = tile.splat %q : tile<64xptr<f32>>
  tile.store %5, %4
  func.return
}
""", AssignLayouts(), context=context(4))
    source = "#gpu.blocked<size_per_thread = [1, 1], threads_per_warp = [16, 2], warps_per_cta = [4, 1], order = [1, 0]>"
    half = f"tile<64xf32, #gpu.slice<dim = 1, parent = {source}>>"
    assert f"%2, %3 = tile.split %1 : {half}, {half}" in out
    assert f"%4 = arith.addf %2, %3 : {half}" in out  # the halves' users follow, no conversion
    assert "gpu.convert_layout" not in out


def test_scalar_halves_are_held_by_every_thread():
    op = shape_op("split", [((2,), ONE)], [((), None), ((), None)])
    assert value_layout(op.results[0], ONE.linear((2,))) == LinearLayout((), (), ((),) * 5, ((),) * 2)


# --------------------------------------------------------------------------------------
# PTX


def lower_to_ptx(text: str, arch: str, num_warps: int) -> str:
    from polytile.gpu.lowering import lower_module
    from polytile_nvidia.codegen import emit_ptx, nvidia_gpu_target

    module = parse_module(text)
    pipeline = Pipeline()
    pipeline.add_stage("memory", [AllocateShared(), InsertBarriers()])
    PassManager(pipeline).run(module, context(num_warps, arch))
    return emit_ptx(str(lower_module(module, nvidia_gpu_target(arch), num_warps=num_warps)), arch, "k")


def kernel_text(name: str, operands: list, results: list, element: str, num_warps: int) -> str:
    """Splat ``%v`` into each operand, run the op, store every result (pointer tiles are
    loaded through first, i1 is widened to i8)."""
    stored = {"i1": "i8"}.get(element, element)
    pointee = "f32" if element.startswith("ptr") else stored
    lines = [f"%a{i} = tile.splat %v : {_tile(s, element, l)}" for i, (s, l) in enumerate(operands)]
    names = ", ".join(f"%r{i}" for i in range(len(results)))
    types = ", ".join(_tile(s, element, l) for s, l in results)
    lines.append(f"{names} = tile.{name} {', '.join(f'%a{i}' for i in range(len(operands)))} : {types}")
    for i, (s, l) in enumerate(results):
        value = f"%r{i}"
        if element.startswith("ptr"):
            lines.append(f"%l{i} = tile.load {value} : {_tile(s, pointee, l)}")
            value = f"%l{i}"
        elif element == "i1":
            lines.append(f"%w{i} = arith.extui {value} : {_tile(s, 'i8', l)}")
            value = f"%w{i}"
        pointer = "%p"
        if s:
            lines.append(f"%p{i} = tile.splat %p : {_tile(s, f'ptr<{pointee}>', l)}")
            pointer = f"%p{i}"
        lines.append(f"tile.store {pointer}, {value}")
    body = "\n  ".join(lines)
    return (f"func.func @k(%p: ptr<{pointee}>, %v: {element}) attributes {{gpu.num_warps = {num_warps}, "
            f"kernel = true}} {{\n  {body}\n  func.return\n}}\n")


def _warps(layout) -> int:
    return layout.num_warps if layout is not None else 4


PTX_CASES = ([("join", [(s, a), (s, b)], [(s + (2,), r)], reg) for s, a, b, r, reg in JOINS]
             + [("split", [(s, src)], [(s[:-1], r) if r is not None else ((), None)] * 2, reg)
                for s, src, r, reg in SPLITS]
             + [("cat", [(s, a), (s, b)], [((2 * s[0],), r)], reg) for s, a, b, r, reg in CATS])


def _assembles_both(case, element) -> None:
    name, operands, results, in_registers = case
    num_warps = _warps(operands[0][1])
    text = kernel_text(name, operands, results, element, num_warps)
    for arch in ("sm_80", "sm_90a"):
        ptx = lower_to_ptx(text, arch, num_warps)
        moves = ("st.shared" in ptx, "ld.shared" in ptx, "bar.sync" in ptx)
        assert moves == ((False,) * 3 if in_registers else (True,) * 3)
        assembles(ptx, arch)


@pytest.mark.parametrize("case", PTX_CASES, ids=[f"{c[0]}{i}" for i, c in enumerate(PTX_CASES)])
def test_ptx_assembles(case):
    _assembles_both(case, "f32")


# A shared-memory and a register case of each op, a scalar split: every element type.
TYPED_CASES = [0, 1, len(JOINS), len(JOINS) + 1, len(JOINS) + 3, len(JOINS) + len(SPLITS), len(JOINS) + len(SPLITS) + 1]


@pytest.mark.parametrize("element", ["f16", "i8", "i64", "f64", "i1", "ptr<f32>"])
@pytest.mark.parametrize("index", TYPED_CASES, ids=[f"{PTX_CASES[i][0]}{i}" for i in TYPED_CASES])
def test_ptx_assembles_for_every_element_type(index, element):
    _assembles_both(PTX_CASES[index], element)


# --------------------------------------------------------------------------------------
# The language test kernels


def _language():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from language import test_creation, test_shapes

    return test_shapes, test_creation


def _language_cases():
    shapes, creation = _language()
    cases = []
    for dtype in (np.int8, np.int32, np.float16, np.float32, np.float64):
        a = np.zeros(16, dtype)
        cases.append((shapes.join_split_kernel, (a, a, np.zeros((16, 2), dtype), a), {"N": 16}))
    cases.append((shapes.join_2d_kernel, (np.zeros((4, 8), np.int32), np.zeros((4, 8, 2), np.float32),
                                          np.zeros(3, np.float32)), {}))
    f8 = np.zeros(8, np.float32)
    cases.append((shapes.cat_kernel, (f8, f8, np.zeros(16, np.float32), np.zeros(1, np.float32)), {"N": 8}))
    cases.append((shapes.views_kernel, (np.zeros((4, 8), np.float32), np.zeros(128, np.float32)), {"M": 4, "N": 8}))
    cases.append((creation.grid_kernel, (np.zeros((6, 4), np.int32),), {}))
    return cases


LANGUAGE_IDS = ["join_split_i8", "join_split_i32", "join_split_f16", "join_split_f32", "join_split_f64",
                "join_2d", "cat", "views", "grid_join"]


@pytest.mark.parametrize("num_warps", [1, 4, 8])
@pytest.mark.parametrize("case", range(len(LANGUAGE_IDS)), ids=LANGUAGE_IDS)
def test_language_kernels_compile_for_nvidia(case, num_warps):
    from polytile.compiler import compile_module

    kernel, args, meta = _language_cases()[case]
    result = compile_module(kernel.lower(*args, **meta), "nvidia:sm_90a", num_warps=num_warps)
    assembles(result.context.artifacts["ptx"], "sm_90a")
