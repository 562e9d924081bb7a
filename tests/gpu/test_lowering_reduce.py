"""``tile.reduce`` on GPUs.

The main oracle runs the lowering's own algorithm (``emit_reduce``) on every thread of a
program at once in Python (``SimulatedThreads``), with each element a token: a partial
result is the tuple of the elements combined into it, so a result shows which elements
were combined, how often and in which order, and shared memory accesses without a
barrier in between fail.  Then the lowering through the NVIDIA pipeline: the GPU IR, the
shared memory the memory stage reserves, PTX that ptxas accepts, and errors.
"""

from __future__ import annotations


import numpy as np
import pytest

import polytile as pt
import polytile.gpu.lowering.reduce  # noqa: F401  (registers the lowering until module.py imports it)
import polytile.language as pl
from polytile.backend import BackendOptions
from polytile.compiler import compile_module
from polytile.errors import CompilationError
from polytile.gpu.allocation import AllocateShared
from polytile.gpu.distribute import AssignLayouts, RemoveRedundantConverts
from polytile.gpu.layouts import BlockedLayout, MfmaLayout, MmaLayout, SliceLayout, default_blocked_layout
from polytile.gpu.linear_layout import LinearLayout
from polytile.gpu.lowering.reduce import NotReducible, SimulatedThreads, emit_reduce, plan_reduce
from polytile.passes.pass_base import PassContext
from polytile.target import Target
from polytile.ir_testing import apply_passes

from .ptx_assembly import assembles


# --------------------------------------------------------------------------------------
# Simulation


def objects(values) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def distribute(linear: LinearLayout, element) -> list[np.ndarray]:
    """Per register, the object array over threads (warp-major) of ``element(coords)``."""
    warp_size = linear.num_lanes
    return [objects([element(linear.apply(r, t % warp_size, t // warp_size))
                     for t in range(linear.num_warps * warp_size)]) for r in range(linear.num_registers)]


def concatenate(lhs, rhs):
    return [lhs[0] + rhs[0]]


def simulate(layout, shape, axis, combine, operands):
    """Run the plan for ``layout`` on ``operands`` (functions of coordinates); returns
    the plan, the result's linear layout (None: scalar), the outputs and the simulator."""
    linear = layout.linear(shape)
    result = SliceLayout(axis, layout).linear(shape[:axis] + shape[axis + 1:]) if len(shape) > 1 else None
    plan = plan_reduce(linear, axis, result)
    ops = SimulatedThreads(linear.num_warps, linear.num_lanes, combine)
    out = emit_reduce(plan, ops, [distribute(linear, f) for f in operands])
    return plan, result, out, ops


def blocked(shape, num_warps, order=None, vector=1, warp_size=32):
    return default_blocked_layout(shape, num_warps, warp_size, order, vector)


CASES = [
    # (shape, layout, axis)
    ((256,), blocked((256,), 4, vector=2), 0),
    ((1024,), blocked((1024,), 4, vector=4), 0),
    ((4096,), blocked((4096,), 8, vector=4), 0),      # repeated 4 times along the axis
    ((32,), blocked((32,), 1), 0),
    ((16,), blocked((16,), 4), 0),                     # smaller than the footprint: copies
    ((64,), blocked((64,), 8, vector=4), 0),           # lanes and warps hold copies
    ((256,), blocked((256,), 2, warp_size=64), 0),     # 64-lane waves
    ((64, 64), blocked((64, 64), 4, vector=4), 0),
    ((64, 64), blocked((64, 64), 4, vector=4), 1),
    ((32, 128), blocked((32, 128), 8, (0, 1), 2), 0),
    ((32, 128), blocked((32, 128), 8, (0, 1), 2), 1),
    ((16, 16), BlockedLayout((2, 2), (4, 8), (2, 2), (1, 0)), 0),
    ((16, 16), BlockedLayout((2, 2), (4, 8), (2, 2), (1, 0)), 1),
    ((2, 8), blocked((2, 8), 4), 0),                   # far smaller than the footprint
    ((2, 8), blocked((2, 8), 4), 1),
    ((128, 4), BlockedLayout((1, 4), (32, 1), (1, 4), (1, 0)), 1),  # warps hold copies
    ((8, 16, 32), blocked((8, 16, 32), 4, vector=4), 0),
    ((8, 16, 32), blocked((8, 16, 32), 4, vector=4), 1),
    ((8, 16, 32), blocked((8, 16, 32), 4, vector=4), 2),
    ((4, 8, 2), BlockedLayout((1, 2, 2), (2, 4, 4), (2, 1, 2), (0, 2, 1)), 1),
    ((64, 64), MmaLayout(2, (2, 2), (16, 8)), 0),
    ((64, 64), MmaLayout(2, (2, 2), (16, 8)), 1),
    ((128, 64), MmaLayout(3, (4, 1), (16, 64, 16)), 1),
    ((64, 64), MfmaLayout(3, (2, 2), (32, 32)), 0),
    ((32, 32), MfmaLayout(3, (1, 4), (16, 16), transposed=True), 1),
]
CASE_IDS = [f"{'x'.join(map(str, s))}-{type(l).__name__}-axis{a}-{i}" for i, (s, l, a) in enumerate(CASES)]


def _expected_line(shape, axis, coords):
    return [coords[:axis] + (i,) + coords[axis:] for i in range(shape[axis])]


def _in_order(plan) -> bool:
    """Whether the layout's axis bits run registers, lanes, warps: then the reduction is
    the sequential fold, in order."""
    linear, axis = plan.operand, plan.axis
    steps = [(b[axis], kind) for kind, bases in (("r", linear.register), ("l", linear.lane), ("w", linear.warp))
             for b in bases if b[axis]]
    kinds = [kind for _, kind in sorted(steps)]
    return kinds == sorted(kinds, key="rlw".index)


@pytest.mark.parametrize("shape, layout, axis", CASES, ids=CASE_IDS)
def test_every_element_is_combined_once_into_each_result(shape, layout, axis):
    plan, result, out, ops = simulate(layout, shape, axis, concatenate, [lambda c: (c,)])
    warp_size = layout.warp_size
    threads = layout.num_warps * warp_size
    ordered = _in_order(plan)
    registers = result.num_registers if result is not None else 1
    assert len(out[0]) == registers
    for t in range(threads):
        for r in range(registers):
            coords = result.apply(r, t % warp_size, t // warp_size) if result is not None else ()
            got = list(out[0][r][t])
            want = _expected_line(shape, axis, coords)
            assert sorted(got) == want, (t, r)
            if ordered:
                assert got == want, (t, r)
    assert ops.barriers == (1 if plan.warp_bits else 0)


def test_the_sequential_order_is_kept_where_the_layout_allows():
    # Registers, lanes, warps along the axis: the fold is the sequential one.
    plan = simulate(blocked((512,), 4, vector=4), (512,), 0, concatenate, [lambda c: (c,)])[0]
    assert _in_order(plan)
    # Repeated registers along the axis: combined before the lanes, as in Triton.
    plan = simulate(blocked((4096,), 8, vector=4), (4096,), 0, concatenate, [lambda c: (c,)])[0]
    assert not _in_order(plan)


def argmax_combine(lhs, rhs):
    (v1, i1), (v2, i2) = lhs, rhs
    better = (v1 > v2) | ((v1 == v2) & (i1 < i2))
    return [np.where(better, v1, v2).astype(object), np.where(better, i1, i2).astype(object)]


@pytest.mark.parametrize("shape, layout, axis", CASES, ids=CASE_IDS)
def test_argmax_of_two_operands_takes_the_first_of_ties(shape, layout, axis):
    rng = np.random.default_rng(sum(shape) + axis)
    data = rng.integers(0, 4, size=shape)  # many ties
    plan, result, out, _ = simulate(layout, shape, axis, argmax_combine,
                                    [lambda c: int(data[c]), lambda c: int(c[axis])])
    values, indices = np.max(data, axis=axis), np.argmax(data, axis=axis)
    warp_size = layout.warp_size
    for t in range(layout.num_warps * warp_size):
        for r in range(len(out[0])):
            coords = result.apply(r, t % warp_size, t // warp_size) if result is not None else ()
            assert (out[0][r][t], out[1][r][t]) == (values[coords], indices[coords])


@pytest.mark.parametrize("shape, layout, axis", CASES[:12], ids=CASE_IDS[:12])
def test_float_sums_match_numpy(shape, layout, axis):
    data = np.random.default_rng(0).standard_normal(shape)
    plan, result, out, _ = simulate(layout, shape, axis, lambda a, b: [a[0] + b[0]], [lambda c: float(data[c])])
    expected = data.sum(axis=axis)
    warp_size = layout.warp_size
    for t in range(0, layout.num_warps * warp_size, 7):
        for r in range(len(out[0])):
            coords = result.apply(r, t % warp_size, t // warp_size) if result is not None else ()
            assert out[0][r][t] == pytest.approx(expected[coords])


def test_the_simulator_catches_missing_barriers_and_conflicting_writes():
    ops = SimulatedThreads(2, 32, concatenate)
    value = objects([(t,) for t in range(64)])
    with pytest.raises(AssertionError, match="now written with another value"):
        ops.store(0, ops.warp, value)  # the lanes of a warp write different values to one slot
    ops = SimulatedThreads(2, 32, concatenate)
    ops.store(0, ops.lane + 32 * ops.warp, value)
    with pytest.raises(AssertionError, match="read in the epoch it was written"):
        ops.load(0, ops.lane)
    ops.barrier()
    assert list(ops.load(0, ops.lane ^ 1)[:2]) == [(1,), (0,)]


def test_plan_of_a_blocked_row_reduction():
    layout = BlockedLayout((1, 4), (4, 8), (2, 2), (1, 0))
    linear = layout.linear((64, 64))
    plan = plan_reduce(linear, 1, SliceLayout(1, layout).linear((64,)))
    # 4 registers along a row, then lanes 0..2 (steps 4, 8, 16), then warp bit 0; the
    # 64 rows repeat the 8-row footprint in 8 registers.
    assert plan.lane_bits == (0, 1, 2) and plan.warp_bits == (0,)
    assert plan.groups == tuple(tuple(range(4 * g, 4 * g + 4)) for g in range(8))
    assert plan.result_groups == tuple(range(8))
    assert plan.scratch_slots == 64 * 2


def test_reducing_a_dimension_held_by_copies_combines_nothing_twice():
    # The 4 warps all hold the same 4 columns: a row's elements are in one thread, and
    # neither lanes nor warps take part.
    layout = BlockedLayout((1, 4), (32, 1), (1, 4), (1, 0))
    plan = plan_reduce(layout.linear((128, 4)), 1, SliceLayout(1, layout).linear((128,)))
    assert plan.lane_bits == () and plan.warp_bits == () and plan.scratch_slots == 0
    assert plan.groups == ((0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11), (12, 13, 14, 15))


def test_a_basis_across_the_axis_and_another_dimension_is_refused():
    linear = LinearLayout((4, 4), register=((1, 1), (2, 0)), lane=((0, 1), (0, 2), (0, 0), (0, 0), (0, 0)),
                          warp=())
    with pytest.raises(NotReducible, match="moves along the axis and across it"):
        plan_reduce(linear, 0, None)


def test_a_result_layout_that_is_not_the_slice_is_refused():
    operand = blocked((64, 64), 4, vector=4)
    other = SliceLayout(1, blocked((64, 64), 4, (0, 1), 4))
    with pytest.raises(NotReducible, match="slice"):
        plan_reduce(operand.linear((64, 64)), 1, other.linear((64,)))


# --------------------------------------------------------------------------------------
# Through the NVIDIA pipeline


def compile_artifacts(kernel, *args, arch="sm_90a", num_warps=4, **meta):
    module = kernel.lower(*args, **meta)
    return compile_module(module, f"nvidia:{arch}", num_warps=num_warps)


@pt.jit
def sum_1d(x, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(out + pl.program_id(0), pl.sum(pl.load(x + offs), axis=0))


@pt.jit
def reduce_rows(x, out, M: pl.constexpr, N: pl.constexpr, AXIS: pl.constexpr, KIND: pl.constexpr):
    rows = pl.arange(0, M)[:, None]
    cols = pl.arange(0, N)[None, :]
    v = pl.load(x + rows * N + cols)
    if KIND == "sum":
        r = pl.sum(v, axis=AXIS)
    elif KIND == "max":
        r = pl.max(v, axis=AXIS)
    elif KIND == "min":
        r = pl.min(v, axis=AXIS)
    elif KIND == "argmax":
        r = pl.argmax(v, axis=AXIS)
    elif KIND == "argmin":
        r = pl.argmin(v, axis=AXIS)
    else:
        r = pl.xor_sum(v, axis=AXIS)
    if AXIS == 0:
        pl.store(out + pl.arange(0, N), r)
    else:
        pl.store(out + pl.arange(0, M), r)


def f32(n):
    return np.zeros(n, np.float32)


def i32(n):
    return np.zeros(n, np.int32)


ROWS = """
func.func @rows(%x: ptr<f32>, %out: ptr<f32>) attributes {kernel = true, pt.divisibility = [16, 16]} {
  %0 = tile.arange {end = 64, start = 0} : tile<64xi32>
  %1 = tile.expand_dims %0 {axis = 1} : tile<64x1xi32>
  %2 = tile.broadcast %1 : tile<64x64xi32>
  %3 = tile.splat %x : tile<64x64xptr<f32>>
  %4 = tile.addptr %3, %2 : tile<64x64xptr<f32>>
  %5 = tile.load %4 : tile<64x64xf32>
  %6 = tile.reduce %5 {axis = AXIS} : tile<64xf32> {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    tile.reduce_return %s
  }
  %7 = tile.splat %out : tile<64xptr<f32>>
  %8 = tile.addptr %7, %0 : tile<64xptr<f32>>
  tile.store %8, %6
  func.return
}
"""


def to_gpu_ir(text: str, num_warps: int = 4) -> str:
    context = PassContext(target=Target("nvidia", "sm_90a"), options=BackendOptions(num_warps=num_warps))
    return apply_passes(text, AssignLayouts(), RemoveRedundantConverts(), AllocateShared(), context=context)


def test_the_result_has_the_slice_of_the_operand_layout_and_scratch_when_warps_share_a_row():
    B = "#gpu.blocked<size_per_thread = [4, 1], threads_per_warp = [16, 2], warps_per_cta = [1, 4], order = [0, 1]>"
    # Along axis 0 one warp spans the column: no shared memory.
    out = to_gpu_ir(ROWS.replace("AXIS", "0"))
    assert f"%5 = tile.load %4 : tile<64x64xf32, {B}>" in out
    assert (f"%6 = tile.reduce %5 {{axis = 0}} : tile<64xf32, #gpu.slice<dim = 0, parent = {B}>> {{"
            in out)
    # (the store then converts the result to the layout of its pointers, which is not
    # the reduction's business)
    # Along axis 1 the 4 warps split each row: a partial per row and warp.
    out = to_gpu_ir(ROWS.replace("AXIS", "1"))
    assert (f"%6 = tile.reduce %5 {{axis = 1, gpu.scratch_offset = 0}} : tile<64xf32, #gpu.slice<dim = 1, "
            f"parent = {B}>> {{" in out)
    assert "gpu.shared_bytes = 1024" in out  # 64 rows x 4 warps x 4 bytes


def test_shared_memory_holds_each_warps_partials():
    # 64x64, axis 0: 4 warps down the rows, 64 columns -> 4 * 64 floats.
    module = reduce_rows.lower(f32(64 * 64), f32(64), M=64, N=64, AXIS=0, KIND="sum")
    result = compile_module(module, "nvidia:sm_90a", num_warps=4)
    assert result.context.artifacts["shared_bytes"] == 4 * 64 * 4
    # argmax: the values and the int32 indices.
    module = reduce_rows.lower(f32(64 * 64), i32(64), M=64, N=64, AXIS=0, KIND="argmax")
    result = compile_module(module, "nvidia:sm_90a", num_warps=4)
    assert result.context.artifacts["shared_bytes"] == 2 * 4 * 64 * 4


@pytest.mark.parametrize("block, num_warps", [(32, 1), (256, 4), (1024, 4), (4096, 8), (64, 8)])
def test_1d_sums_assemble(block, num_warps, tmp_path):
    artifacts = compile_artifacts(sum_1d, f32(block), f32(4), BLOCK=block, num_warps=num_warps).context.artifacts
    ptx = artifacts["ptx"]
    assert "shfl.sync.bfly.b32" in ptx
    assert ("bar.sync" in ptx) == (num_warps > 1)
    for arch in ("sm_80", "sm_90a"):
        assembles(ptx if arch == "sm_90a" else compile_artifacts(
            sum_1d, f32(block), f32(4), BLOCK=block, num_warps=num_warps, arch=arch).context.artifacts["ptx"],
            arch, tmp_path)


KINDS = ["sum", "max", "min", "argmax", "argmin", "xor"]
SHAPE_CASES = [(kind, (64, 64)) for kind in KINDS] + [(kind, shape) for kind in ("sum", "argmax")
                                                     for shape in ((16, 128), (4, 8))]


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("kind, shape", SHAPE_CASES)
def test_2d_reductions_assemble(kind, axis, shape):
    m, n = shape
    x = i32(m * n) if kind == "xor" else f32(m * n)
    out = i32(max(m, n)) if kind in ("argmax", "argmin", "xor") else f32(max(m, n))
    arch = "sm_80" if axis == 0 else "sm_90a"
    ptx = compile_artifacts(reduce_rows, x, out, M=m, N=n, AXIS=axis, KIND=kind, arch=arch).context.artifacts["ptx"]
    assembles(ptx, arch)
    if kind == "max":
        assert "max.NaN.f32" in ptx  # pl.max propagates NaN, as the interpreter


@pt.jit
def _mul_combine(a, b):
    return a * b + 0


@pt.jit
def custom_and_3d(x, out, keep, A: pl.constexpr, B: pl.constexpr, C: pl.constexpr):
    i = pl.arange(0, A)[:, None, None]
    j = pl.arange(0, B)[None, :, None]
    k = pl.arange(0, C)[None, None, :]
    v = pl.load(x + i * B * C + j * C + k)
    r = pl.reduce(v, 1, _mul_combine)  # [A, C]
    pl.store(out + pl.arange(0, A)[:, None] * C + pl.arange(0, C)[None, :], r)
    s = pl.sum(v, axis=2, keep_dims=True)  # [A, B, 1]
    pl.store(keep + i * B + j + k * 0, s)


def test_a_user_combine_function_and_3d_tiles_assemble():
    x = f32(8 * 16 * 32)
    artifacts = compile_artifacts(custom_and_3d, x, f32(8 * 32), f32(8 * 16), A=8, B=16, C=32).context.artifacts
    assert "fma.rn.f32" in artifacts["ptx"]  # the combine's a * b + 0, contracted (enable_fp_fusion)
    assembles(artifacts["ptx"], "sm_90a")


@pt.jit
def with_branch(a, b):
    if a > b:
        r = a
    else:
        r = b
    return r


@pt.jit
def branchy_max(x, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(out, pl.reduce(pl.load(x + offs), 0, with_branch))


def test_control_flow_in_the_combine_function_becomes_branches():
    artifacts = compile_artifacts(branchy_max, f32(512), f32(1), BLOCK=512).context.artifacts
    assert "br i1" in artifacts["llvm_ir"]
    assembles(artifacts["ptx"], "sm_90a")


@pt.jit
def i1_and_f64(x, flags, out, out64, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    v = pl.load(x + offs)
    big = v > 0.5
    pl.store(flags, pl.reduce(big, 0, _or))
    pl.store(out64, pl.max(v.to(pl.float64), axis=0))


@pt.jit
def _or(a, b):
    return a | b


def test_booleans_and_doubles_cross_warps():
    artifacts = compile_artifacts(i1_and_f64, f32(1024), np.zeros(1, np.bool_), f32(1), np.zeros(1, np.float64),
                                  BLOCK=1024, num_warps=8).context.artifacts
    ptx = artifacts["ptx"]
    assert "st.shared.b8" in ptx or "st.shared.u8" in ptx
    assert "shfl.sync.bfly.b32" in ptx
    assembles(ptx, "sm_90a")


TILE_IN_COMBINE = """
func.func @k(%x: f32, %out: ptr<f32>) attributes {kernel = true} {
  %0 = tile.splat %x : tile<128xf32, #gpu.blocked<size_per_thread = [1], threads_per_warp = [32], warps_per_cta = [4], order = [0]>>
  %1 = tile.reduce %0 {axis = 0} : f32 {
  ^bb0(%a: f32, %b: f32):
    %t = tile.splat %a : tile<4xf32, #gpu.blocked<size_per_thread = [1], threads_per_warp = [32], warps_per_cta = [4], order = [0]>>
    %s = arith.addf %a, %b : f32
    tile.reduce_return %s
  }
  tile.store %out, %1
  func.return
}
"""

NOT_A_SLICE = """
func.func @k(%x: f32, %out: ptr<f32>) attributes {kernel = true} {
  %0 = tile.splat %x : tile<64x64xf32, #gpu.blocked<size_per_thread = [1, 4], threads_per_warp = [4, 8], warps_per_cta = [4, 1], order = [1, 0]>>
  %1 = tile.reduce %0 {axis = 1} : tile<64xf32, #gpu.blocked<size_per_thread = [1], threads_per_warp = [32], warps_per_cta = [4], order = [0]>> {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    tile.reduce_return %s
  }
  func.return
}
"""


@pytest.mark.parametrize("text, message", [
    (TILE_IN_COMBINE, "the combine function of 'tile.reduce' works on scalars, but 'tile.splat' makes a tile<4xf32"),
    (NOT_A_SLICE, "'tile.reduce' along axis 1 of tile<64x64xf32, #gpu.blocked<size_per_thread = [1, 4], "
                  "threads_per_warp = [4, 8], warps_per_cta = [4, 1], order = [1, 0]>> (the result's layout is not "
                  "the slice of the operand's layout along the axis) is not supported by the NVIDIA backend yet"),
])
def test_what_cannot_be_lowered_is_named(text, message):
    from polytile.gpu.lowering import lower_module
    from polytile.ir import parse_module
    from polytile_nvidia.codegen import nvidia_gpu_target

    with pytest.raises(CompilationError) as info:
        lower_module(parse_module(text), nvidia_gpu_target("sm_90a"))
    assert "in kernel 'k'" in str(info.value) and message in str(info.value)
