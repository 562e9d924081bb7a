"""tile.dot on NVIDIA tensor cores, without a GPU.

Three checks:

- the layouts against the PTX ISA's fragment tables (``mma.sync`` "Matrix Fragments"),
  written out here independently of polytile's layouts;
- a simulation of the lowering: the registers each thread holds (from the layouts), the
  instruction tiles the lowering plans (``plan_tiles``), and each ``mma.sync`` executed as
  the hardware does, collecting a warp's fragments through the PTX tables.  The result
  every thread ends with is compared to ``A @ B + C``;
- the shared-memory conversion into dot operand layouts, its index math run on Python
  integers (the same functions the lowering emits LLVM from);

then whole kernels through the NVIDIA pipeline to PTX that ptxas accepts for sm_80 and
sm_90a (where ptxas is installed).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.backend import BackendOptions
from polytile.gpu.allocation import AllocateShared
from polytile.gpu.distribute import AssignLayouts, RemoveRedundantConverts
from polytile.gpu.layouts import BlockedLayout, DotOperandLayout, MmaLayout, default_blocked_layout
from polytile.gpu.lowering import LowerToLLVM, dot_operands  # noqa: F401  (registers the conversions)
from polytile.gpu.lowering.dot import fma_layouts, plan_tiles
from polytile.gpu.lowering.dot_operands import operand_shared_layout, shared_offset
from polytile.gpu.lowering.indexing import PyOps, contiguous_registers, coordinates
from polytile.ir import types as t
from polytile.passes.pass_base import PassContext
from polytile.target import Target

mma = pytest.importorskip("polytile_nvidia.mma")
from polytile_nvidia.codegen import emit_ptx  # noqa: E402
from .ptx_assembly import assembles  # noqa: E402


# --------------------------------------------------------------------------------------
# The PTX ISA fragment tables: (lane, register) -> (row, col); g = lane // 4, q = lane % 4


def ptx_a(kind: str, lane: int, r: int) -> tuple[int, int]:
    g, q = lane // 4, lane % 4
    if kind == "f16":    # m16n8k16 .f16/.bf16: a0..a7
        return g + 8 * ((r >> 1) & 1), q * 2 + (r & 1) + 8 * (r >> 2)
    if kind == "tf32":   # m16n8k8 .tf32: a0..a3
        return g + 8 * (r & 1), q + 4 * (r >> 1)
    if kind == "s8":     # m16n8k32 .s8: a0..a15
        return g + 8 * ((r >> 2) & 1), q * 4 + (r & 3) + 16 * (r >> 3)
    if kind == "f64":    # m8n8k4 .f64: a0
        return g, q
    raise AssertionError(kind)


def ptx_b(kind: str, lane: int, r: int) -> tuple[int, int]:
    g, q = lane // 4, lane % 4
    if kind == "f16":    # b0..b3
        return q * 2 + (r & 1) + 8 * (r >> 1), g
    if kind == "tf32":   # b0, b1
        return q + 4 * r, g
    if kind == "s8":     # b0..b7
        return q * 4 + (r & 3) + 16 * (r >> 2), g
    if kind == "f64":    # b0
        return q, g
    raise AssertionError(kind)


def ptx_c(kind: str, lane: int, r: int) -> tuple[int, int]:
    g, q = lane // 4, lane % 4
    if kind == "f64":    # m8n8k4: c0, c1
        return g, q * 2 + r
    return g + 8 * (r >> 1), q * 2 + (r & 1)   # every m16n8: c0..c3


#: kind -> (M, N, K of one PTX instruction, A / B / C registers per lane)
PTX_SHAPES = {"f16": (16, 8, 16, 8, 4, 4), "tf32": (16, 8, 8, 4, 2, 4), "s8": (16, 8, 32, 16, 8, 4),
              "f64": (8, 8, 4, 1, 1, 2)}

#: (operand, accumulator, precision) -> PTX kind of its instruction
DTYPES = {
    "f16": (t.f16, t.f32, "tf32", "f16"), "f16acc": (t.f16, t.f16, "tf32", "f16"), "bf16": (t.bf16, t.f32, "tf32", "f16"),
    "tf32": (t.f32, t.f32, "tf32", "tf32"), "tf32x3": (t.f32, t.f32, "tf32x3", "tf32"), "i8": (t.i8, t.i32, "tf32", "s8"),
    "f64": (t.f64, t.f64, "ieee", "f64"),
    # fp8's fragments are int8's (sm_89 and later).
    "e4m3": (t.f8e4m3, t.f32, "tf32", "s8"), "e5m2": (t.f8e5m2, t.f32, "tf32", "s8"),
    "e4m3acc16": (t.f8e4m3, t.f16, "tf32", "s8"),
}
#: The oldest architecture each operand type has an instruction on.
ARCH = {"e4m3": "sm_89", "e5m2": "sm_89", "e4m3acc16": "sm_89"}


def instruction(name: str, shape=(64, 64, 64), num_warps=4):
    a, acc, precision, _ = DTYPES[name]
    found = mma.NVIDIA_MMA.select(a, acc, precision, shape, ARCH.get(name, "sm_80"), num_warps)
    assert found is not None
    return found


def execute_ptx(kind: str, a_lanes: list, b_lanes: list, c_lanes: list) -> list:
    """One PTX mma of a warp: per lane, its A, B, C registers in; its D registers out."""
    m, n, k, *_ = PTX_SHAPES[kind]
    a, b, c = np.zeros((m, k), np.int64), np.zeros((k, n), np.int64), np.zeros((m, n), np.int64)
    for lane in range(32):
        for r, v in enumerate(a_lanes[lane]):
            a[ptx_a(kind, lane, r)] = v
        for r, v in enumerate(b_lanes[lane]):
            b[ptx_b(kind, lane, r)] = v
        for r, v in enumerate(c_lanes[lane]):
            c[ptx_c(kind, lane, r)] = v
    d = a @ b + c
    return [[d[ptx_c(kind, lane, r)] for r in range(len(c_lanes[lane]))] for lane in range(32)]


def execute_instruction(name: str, a_lanes: list, b_lanes: list, c_lanes: list) -> list:
    """polytile's instruction tile (what ``emit`` issues) on a warp's fragments."""
    kind = DTYPES[name][3]
    if kind != "f64":
        return execute_ptx(kind, a_lanes, b_lanes, c_lanes)
    c_lanes = [list(c) for c in c_lanes]
    for a_reg, b_reg, (c0, c1) in mma.F64_STEPS:
        out = execute_ptx("f64", [[a[a_reg]] for a in a_lanes], [[b[b_reg]] for b in b_lanes],
                          [[c[c0], c[c1]] for c in c_lanes])
        for lane in range(32):
            c_lanes[lane][c0], c_lanes[lane][c1] = out[lane]
    return c_lanes


# --------------------------------------------------------------------------------------
# Layouts against the PTX tables


@pytest.mark.parametrize("name", ["f16", "tf32", "i8", "f64"])
def test_first_registers_of_each_layout_are_one_instruction_fragment(name):
    ins = instruction(name, (16, 16, 64), num_warps=1)
    layout = ins.result_layout((16, 16), 1)
    a_size, b_size, c_size = ins.fragments
    a = ins.operand_layout(0, layout).linear((16, 64))
    b = ins.operand_layout(1, layout).linear((64, 16))
    c = layout.linear((16, 16))
    kind = DTYPES[name][3]
    if kind == "f64":  # the 16x8x8 tile is m8n8k4 pieces: check the pieces' placement
        for lane in range(32):
            for a_reg, b_reg, (c0, c1) in mma.F64_STEPS:
                rows, k = a.apply(a_reg, lane, 0)
                assert (rows % 8, k % 4) == ptx_a("f64", lane, 0)
                assert tuple(x % 4 if i == 0 else x for i, x in enumerate(b.apply(b_reg, lane, 0))) == \
                    ptx_b("f64", lane, 0)
                assert c.apply(c0, lane, 0)[0] // 8 == rows // 8 == c.apply(c1, lane, 0)[0] // 8
        return
    for lane in range(32):
        assert [a.apply(r, lane, 0) for r in range(a_size)] == [ptx_a(kind, lane, r) for r in range(a_size)]
        assert [b.apply(r, lane, 0) for r in range(b_size)] == [ptx_b(kind, lane, r) for r in range(b_size)]
        assert [c.apply(r, lane, 0) for r in range(c_size)] == [ptx_c(kind, lane, r) for r in range(c_size)]


@pytest.mark.parametrize("shape, num_warps, expected", [
    ((16, 16), 4, (2, 2)), ((128, 128), 4, (2, 2)), ((128, 128), 8, (2, 4)), ((64, 256), 4, (1, 4)),
    ((256, 32), 8, (8, 1)), ((16, 16), 1, (1, 1)), ((32, 64), 2, (1, 2)),
])
def test_warps_go_where_the_tiles_are(shape, num_warps, expected):
    assert mma.warps_per_tile(shape, num_warps) == expected


def test_which_dots_use_which_instruction():
    unit = mma.NVIDIA_MMA
    assert unit.select(t.f16, t.f32, "ieee", (16, 16, 16), "sm_80", 4).name == "mma.sync.m16n8k16.f32.f16"
    assert unit.select(t.f32, t.f32, "tf32x3", (16, 16, 16), "sm_80", 4).name == "mma.sync.m16n8k8.f32.tf32 x3"
    assert unit.select(t.f32, t.f32, "ieee", (16, 16, 16), "sm_80", 4) is None        # FMA
    assert unit.select(t.i8, t.i32, "tf32", (16, 16, 16), "sm_80", 4) is None         # K < 32: FMA
    assert unit.select(t.i8, t.i32, "tf32", (16, 16, 32), "sm_80", 4).k == 32
    # fp8: mma.sync m16n8k32 from sm_89 (Ada) on, where wgmma does not take the dot.
    assert unit.select(t.f8e4m3, t.f32, "tf32", (16, 16, 32), "sm_90a", 4).name == "mma.sync.m16n8k32.f32.e4m3"
    assert unit.select(t.f8e5m2, t.f32, "tf32", (16, 16, 32), "sm_89", 4).name == "mma.sync.m16n8k32.f32.e5m2"
    assert unit.select(t.f8e4m3, t.f32, "tf32", (16, 16, 32), "sm_86", 4) is None   # no fp8 tensor cores
    assert unit.select(t.f8e4m3, t.f32, "tf32", (16, 16, 16), "sm_89", 4) is None   # K < 32
    assert unit.select(t.f8e4m3, t.f16, "tf32", (16, 16, 32), "sm_89", 4).name == "mma.sync.m16n8k32.f16.e4m3"


# --------------------------------------------------------------------------------------
# Simulating the lowering


def simulate_dot(name: str, shape: tuple[int, int, int], num_warps: int, seed: int = 0) -> None:
    m, n, k = shape
    ins = instruction(name, shape, num_warps)
    layout = ins.result_layout((m, n), num_warps)
    c_lin = layout.linear((m, n))
    a_lin = ins.operand_layout(0, layout).linear((m, k))
    b_lin = ins.operand_layout(1, layout).linear((k, n))
    rng = np.random.default_rng(seed)
    A, B, C = (rng.integers(-3, 4, s) for s in ((m, k), (k, n), (m, n)))
    plan = plan_tiles(c_lin, a_lin, b_lin, ins)
    first_by_offset: dict = {}
    first = [first_by_offset.setdefault(c_lin.apply(r, 0, 0), r) for r in range(c_lin.num_registers)]
    for warp in range(num_warps):
        regs = {lane: ([A[a_lin.apply(r, lane, warp)] for r in range(a_lin.num_registers)],
                       [B[b_lin.apply(r, lane, warp)] for r in range(b_lin.num_registers)],
                       [C[c_lin.apply(r, lane, warp)] for r in range(c_lin.num_registers)]) for lane in range(32)}
        out = {lane: list(regs[lane][2]) for lane in range(32)}
        for c_regs, k_steps in plan.steps:
            acc = [[out[lane][r] for r in c_regs] for lane in range(32)]
            for a_regs, b_regs in k_steps:
                acc = execute_instruction(name, [[regs[lane][0][r] for r in a_regs] for lane in range(32)],
                                          [[regs[lane][1][r] for r in b_regs] for lane in range(32)], acc)
            for lane in range(32):
                for r, v in zip(c_regs, acc[lane]):
                    out[lane][r] = v
        expected = A @ B + C
        for lane in range(32):
            for r in range(c_lin.num_registers):
                coords = c_lin.apply(r, lane, warp)
                # Copies of an element take the first copy's value (as the lowering does).
                assert out[lane][first[r]] == expected[coords], (name, shape, num_warps, warp, lane, r)


@pytest.mark.parametrize("shape", [(16, 16, 16), (32, 32, 32), (64, 64, 32), (16, 64, 32), (64, 16, 64),
                                   (128, 128, 64)])
@pytest.mark.parametrize("num_warps", [1, 2, 4, 8])
def test_simulated_f16_dot_matches_numpy(shape, num_warps):
    simulate_dot("f16", shape, num_warps)


@pytest.mark.parametrize("name", ["tf32", "i8", "f64", "bf16", "f16acc", "e4m3", "e5m2", "e4m3acc16"])
@pytest.mark.parametrize("shape, num_warps", [((32, 32, 32), 4), ((16, 32, 64), 8), ((64, 16, 32), 2)])
def test_simulated_dots_of_every_type_match_numpy(name, shape, num_warps):
    simulate_dot(name, shape, num_warps)


# --------------------------------------------------------------------------------------
# Into dot operand layouts through shared memory: the index math on integers


def simulate_conversion(source, result, shape, bits: int) -> None:
    src, dst = source.linear(shape), result.linear(shape)
    shared = operand_shared_layout(source, shape, bits)
    size = shape[0] * shape[1]
    memory = [None] * size
    ops = PyOps()
    order = shared.order[0]
    for warp in range(src.num_warps):
        for lane in range(src.num_lanes):
            coords = coordinates(ops, src, lane, warp)
            width = min(contiguous_registers(src, order), shared.vector, 128 // bits)
            for start in range(0, src.num_registers, width):
                offset = shared_offset(ops, shared, coords[start], shape)
                for i in range(width):  # one vector: consecutive addresses
                    assert 0 <= offset + i < size
                    memory[offset + i] = src.apply(start + i, lane, warp)
    assert None not in memory
    for warp in range(dst.num_warps):
        for lane in range(dst.num_lanes):
            coords = coordinates(ops, dst, lane, warp)
            width = max(min(contiguous_registers(dst, order), shared.vector, 128 // bits), 1)
            for start in range(0, dst.num_registers, width):
                offset = shared_offset(ops, shared, coords[start], shape)
                for i in range(width):
                    assert memory[offset + i] == dst.apply(start + i, lane, warp)


@pytest.mark.parametrize("name, bits", [("f16", 16), ("tf32", 32), ("i8", 8), ("f64", 64)])
@pytest.mark.parametrize("shape, num_warps", [((16, 16), 1), ((64, 32), 4), ((32, 128), 8), ((128, 64), 4)])
@pytest.mark.parametrize("order", [(1, 0), (0, 1)])
def test_blocked_to_dot_operand_through_shared_memory(name, bits, shape, num_warps, order):
    ins = instruction(name)
    parent = ins.result_layout(shape, num_warps)
    source = default_blocked_layout(shape, num_warps, order=order, vector=max(128 // bits // 2, 1))
    for op_idx in (0, 1):
        simulate_conversion(source, ins.operand_layout(op_idx, parent), shape, bits)


def test_mma_result_to_the_next_dots_operand_through_shared_memory():
    parent = MmaLayout(2, (4, 1), (16, 8))
    simulate_conversion(parent, DotOperandLayout(0, MmaLayout(2, (2, 2), (16, 8)), 2), (64, 64), 16)


def test_fma_operands_hold_whole_rows_and_columns():
    result = BlockedLayout((1, 4), (4, 8), (4, 1), (1, 0))
    a, b = fma_layouts(result)
    simulate_conversion(default_blocked_layout((32, 64), 4, vector=4), a, (32, 64), 32)
    assert {c[1] for c in a.linear((32, 64)).thread_indices(0, 0)} == set(range(64))
    simulate_conversion(default_blocked_layout((64, 32), 4, vector=4), b, (64, 32), 32)


@pytest.mark.parametrize("inner, bits", [(16, 16), (32, 16), (64, 16), (128, 16), (64, 32), (16, 8), (32, 64)])
def test_eight_rows_at_one_column_hit_eight_bank_groups(inner, bits):
    source = BlockedLayout((1, 1), (1, 32), (1, 1), (1, 0))
    shared = operand_shared_layout(source, (64, inner), bits)
    vector_bytes = shared.vector * bits // 8
    if vector_bytes < 16:
        return  # the whole row is narrower than one 16-byte group: rows share none
    for column in range(0, inner, shared.vector):
        groups = {shared_offset(PyOps(), shared, [row, column], (64, inner)) * bits // 8 // 16 % 8 for row in range(8)}
        assert len(groups) == min(8, 64 * inner * bits // 8 // 16)


# --------------------------------------------------------------------------------------
# Whole kernels to PTX


@pt.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr,
               PRECISION: pl.constexpr):
    rm, rn, rk = pl.arange(0, BM), pl.arange(0, BN), pl.arange(0, BK)
    a = pl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0)
    b = pl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0)
    c = pl.dot(a, b, input_precision=PRECISION)
    pl.store(c_ptr + rm[:, None] * N + rn[None, :], c, mask=(rm[:, None] < M) & (rn[None, :] < N))


def compile_ptx(kernel, *args, arch="sm_90a", num_warps=4, **meta):
    """The NVIDIA distribute, memory and llvm stages, then PTX."""
    module = kernel.lower(*args, **meta)
    context = PassContext(target=Target("nvidia", arch), options=BackendOptions(num_warps=num_warps))
    for pass_ in (AssignLayouts(), RemoveRedundantConverts(), AllocateShared(), LowerToLLVM()):
        pass_.run(module, context)
        context.analyses.clear()
    return emit_ptx(context.artifacts["llvm_ir"], arch, context.artifacts["kernel_name"])


NUMPY = {"f16": np.float16, "tf32": np.float32, "tf32x3": np.float32, "ieee": np.float32, "i8": np.int8,
         "f64": np.float64}
PRECISION = {"tf32x3": "tf32x3", "ieee": "ieee"}
RESULT = {np.int8: np.int32}
PTX_OPCODE = {"f16": "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "tf32": "m16n8k8.row.col.f32.tf32",
              "tf32x3": "m16n8k8.row.col.f32.tf32", "i8": "m16n8k32.row.col.s32.s8.s8.s32",
              "f64": "m8n8k4.row.col.f64.f64.f64.f64", "ieee": "fma.rn.f32"}


def _kernel_ptx(name, shape, num_warps, arch):
    m, n, k = shape
    dtype = NUMPY[name]
    a, b = np.zeros((m, k), dtype), np.zeros((k, n), dtype)
    c = np.zeros((m, n), RESULT.get(dtype, dtype))
    return compile_ptx(dot_kernel, a, b, c, m, n, k, BM=m, BN=n, BK=k, PRECISION=PRECISION.get(name, "tf32"),
                       arch=arch, num_warps=num_warps)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", ["f16", "tf32", "tf32x3", "ieee", "i8", "f64"])
def test_dots_of_every_type_assemble(name, arch):
    ptx = _kernel_ptx(name, (32, 32, 32), 4, arch)
    assert PTX_OPCODE[name] in ptx
    if name in ("tf32", "tf32x3"):
        # 2 x 2 warps: each 16x16 in two n8 tiles and four k8 steps, three times for tf32x3.
        assert ptx.count("mma.sync") == (24 if name == "tf32x3" else 8) and "cvt.rna.tf32.f32" in ptx
    assembles(ptx, arch)


@pytest.mark.parametrize("shape, num_warps", [
    ((16, 16, 16), 1), ((16, 16, 16), 4), ((32, 32, 32), 2), ((64, 64, 32), 4), ((128, 128, 64), 8),
    ((64, 128, 32), 4), ((128, 32, 16), 8),
])
def test_f16_dot_shapes_assemble(shape, num_warps):
    ptx = _kernel_ptx("f16", shape, num_warps, "sm_80")
    m, n, k = shape
    warps_m, warps_n = mma.warps_per_tile((m, n), num_warps)
    per_warp = max(m // (16 * warps_m), 1) * max(n // (8 * warps_n), 1) * (k // 16)
    assert ptx.count("mma.sync.aligned.m16n8k16") == per_warp
    assembles(ptx, "sm_80")


def test_the_matmul_example_assembles():
    from tests.examples.loading import load_example

    example = load_example("matmul", "matmul_example")  # with examples/ on sys.path, for its _device
    a, c = np.zeros((100, 130), np.float16), np.zeros((100, 72), np.float16)
    b = np.zeros((130, 72), np.float16)
    for arch in ("sm_80", "sm_90a"):
        ptx = compile_ptx(example.matmul_kernel, a, b, c, 100, 72, 130, 130, 1, 72, 1, 72, 1,
                          BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, arch=arch)
        assert ptx.count("mma.sync.aligned.m16n8k16") == 4  # 2 x 2 warps, each 16x16 by two k16 steps
        assembles(ptx, arch)


FP8_DOT = """
func.func @fp8_dot(%a: ptr<f8e4m3>, %c: ptr<f32>) attributes {kernel = true, pt.divisibility = [16, 16]} {
  %r = tile.arange {end = 256, start = 0} : tile<256xi32>
  %o = tile.reshape %r : tile<16x16xi32>
  %p = tile.splat %a : tile<16x16xptr<f8e4m3>>
  %q = tile.addptr %p, %o : tile<16x16xptr<f8e4m3>>
  %x = tile.load %q : tile<16x16xf8e4m3>
  %z = arith.constant {value = 0.0} : tile<16x16xf32>
  %d = tile.dot %x, %x, %z : tile<16x16xf32>
  %s = tile.splat %c : tile<16x16xptr<f32>>
  %t = tile.addptr %s, %o : tile<16x16xptr<f32>>
  tile.store %t, %d
  func.return
}
"""


@pytest.mark.parametrize("arch, why", [
    ("sm_90a", "its tensor-core instruction (mma.sync.m16n8k32.f32.e4m3) needs M >= 16, N >= 8 and K >= 32; "
               "this dot is 16x16x16 (M x N x K)"),
    ("sm_80", "its tensor-core instruction (mma.sync.m16n8k32.f32.e4m3) needs sm_89 or later: sm_80 has none; "
              "compile for sm_89, sm_90 or sm_90a, or convert the operands to f16 first"),
])
def test_a_dot_without_an_instruction_or_multiply_adds_says_what_it_needs(arch, why):
    from polytile.errors import CompilationError
    from polytile.ir import parse_module

    module = parse_module(FP8_DOT)
    context = PassContext(target=Target("nvidia", arch), options=BackendOptions(num_warps=4))
    for pass_ in (AssignLayouts(), RemoveRedundantConverts(), AllocateShared()):
        pass_.run(module, context)
        context.analyses.clear()
    with pytest.raises(CompilationError) as info:
        LowerToLLVM().run(module, context)
    assert str(info.value).endswith(f"'tile.dot' of f8e4m3 tiles has no multiply-add lowering, and {why}")


def test_all_fragment_positions_are_covered():
    # Each PTX table puts every (row, col) of its fragment in exactly one (lane, register).
    for kind, (m, n, k, a_regs, b_regs, c_regs) in PTX_SHAPES.items():
        assert sorted(ptx_a(kind, lane, r) for lane, r in itertools.product(range(32), range(a_regs))) == \
            sorted(itertools.product(range(m), range(k)))
        assert sorted(ptx_b(kind, lane, r) for lane, r in itertools.product(range(32), range(b_regs))) == \
            sorted(itertools.product(range(k), range(n)))
        assert sorted(ptx_c(kind, lane, r) for lane, r in itertools.product(range(32), range(c_regs))) == \
            sorted(itertools.product(range(m), range(n)))


# --------------------------------------------------------------------------------------
# ldmatrix


def simulate_ldmatrix(source, result, shape, bits: int) -> bool:
    """Fill shared memory as the conversion stores it, run ``ldmatrix`` (as the PTX ISA
    defines it) at the addresses the plan gives, and compare every thread's registers to
    the result layout.  Returns whether ldmatrix applied."""
    dst = result.linear(shape)
    shared = operand_shared_layout(source, shape, bits)
    plan = mma.ldmatrix_plan(dst, shared, bits)
    if plan is None:
        return False
    ops = PyOps()
    memory = {}
    for row in range(shape[0]):
        for col in range(shape[1]):
            memory[shared_offset(ops, shared, [row, col], shape)] = (row, col)
    for warp in range(dst.num_warps):
        addresses = {lane: coordinates(ops, plan.address, lane, warp) for lane in range(32)}
        for call in range(plan.address.num_registers):
            got = {lane: [] for lane in range(32)}
            for matrix in range(4):
                for lane in range(32):
                    g, q = lane // 4, lane % 4
                    if plan.trans:  # element (stored row 2q + i, column g) of the matrix
                        for i in range(2):
                            row = addresses[8 * matrix + 2 * q + i][call]
                            got[lane].append(memory[shared_offset(ops, shared, row, shape) + g])
                    else:  # stored row g, 16-bit elements 2q and 2q + 1
                        start = shared_offset(ops, shared, addresses[8 * matrix + g][call], shape)
                        # A word is 32 bits: 2 b16 elements, 4 bytes or one 32-bit element.
                        count = 32 // bits
                        got[lane].extend(memory[start + q * count + e] for e in range(count))
            for lane in range(32):
                first = call * 4 * plan.per_word
                expected = [dst.apply(first + r, lane, warp) for r in range(4 * plan.per_word)]
                assert got[lane] == expected, (call, warp, lane)
    return True


@pytest.mark.parametrize("name, bits", [("f16", 16), ("tf32", 32), ("i8", 8)])
@pytest.mark.parametrize("shape, num_warps", [((16, 32), 1), ((64, 32), 4), ((32, 128), 8), ((128, 64), 4)])
@pytest.mark.parametrize("order", [(1, 0), (0, 1)])
def test_ldmatrix_reads_every_register_of_the_operand(name, bits, shape, num_warps, order):
    ins = instruction(name)
    parent = ins.result_layout(shape, num_warps)
    source = default_blocked_layout(shape, num_warps, order=order, vector=max(128 // bits // 2, 1))
    applied = [simulate_ldmatrix(source, ins.operand_layout(op_idx, parent), shape, bits) for op_idx in (0, 1)]
    k_contiguous = [order[0] == 1, order[0] == 0]  # A is [M, K], B is [K, N]
    # 16-bit operands always use it (transposed where K is not contiguous); 8- and 32-bit
    # ones where K is contiguous.
    assert applied == [True, True] if bits == 16 else applied == k_contiguous


def test_f16_kernels_read_operands_with_ldmatrix():
    # M = 32: below a warpgroup's 64 rows, so mma.sync (wgmma reads shared memory itself).
    ptx = _kernel_ptx("f16", (32, 64, 32), 4, "sm_90a")
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx          # A: K contiguous
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx    # B: N contiguous
    assembles(ptx, "sm_90a")
