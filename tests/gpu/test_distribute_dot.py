"""assign-layouts on tile.dot: accumulator layouts, operand conversions, cut stores, IR
text in and out.  Layouts print in full; the expected lines name them {MMA}, {A}, {B}
(the dot operand layouts) and {L} (the coalesced blocked layout of the loads)."""

from __future__ import annotations

import dataclasses

import pytest

from polytile.backend import BackendOptions
from polytile.gpu.distribute import AssignLayouts, RemoveRedundantConverts
from polytile.gpu.layouts import BlockedLayout, DotOperandLayout, MmaLayout
from polytile.passes.pass_base import PassContext
from polytile.target import Target
from polytile.ir_testing import apply_passes

pytest.importorskip("polytile_nvidia.mma")  # registers the NVIDIA matrix unit
from polytile_nvidia.codegen import nvidia_gpu_target  # noqa: E402


def context(num_warps: int = 4, target=None) -> PassContext:
    # sm_80: the mma.sync layouts (sm_90a gives these dots wgmma: tests/gpu/test_wgmma_layouts.py).
    return PassContext(target=target or Target("nvidia", "sm_80"), options=BackendOptions(num_warps=num_warps))


def kernel(m: int, n: int, k: int, element: str = "f16", acc: str = "f32", precision: str = "tf32",
           loop: bool = False) -> str:
    """c = a @ b for row-major a [m, k], b [k, n], c [m, n]; in a K loop when ``loop``."""
    dot = (f"%d = tile.dot %a, %b, %acc {{input_precision = \"{precision}\"}} : tile<{m}x{n}x{acc}>")
    body = f"""
  %ra = tile.arange {{end = {m}, start = 0}} : tile<{m}xi32>
  %rk = tile.arange {{end = {k}, start = 0}} : tile<{k}xi32>
  %rn = tile.arange {{end = {n}, start = 0}} : tile<{n}xi32>
  %am = tile.expand_dims %ra {{axis = 1}} : tile<{m}x1xi32>
  %ck = arith.constant {{value = {k}}} : tile<{m}x1xi32>
  %am2 = arith.muli %am, %ck : tile<{m}x1xi32>
  %ak = tile.expand_dims %rk {{axis = 0}} : tile<1x{k}xi32>
  %ab1 = tile.broadcast %am2 : tile<{m}x{k}xi32>
  %ab2 = tile.broadcast %ak : tile<{m}x{k}xi32>
  %aoff = arith.addi %ab1, %ab2 : tile<{m}x{k}xi32>
  %pa = tile.splat %pa0 : tile<{m}x{k}xptr<{element}>>
  %pa1 = tile.addptr %pa, %aoff : tile<{m}x{k}xptr<{element}>>
  %bk = tile.expand_dims %rk {{axis = 1}} : tile<{k}x1xi32>
  %cn = arith.constant {{value = {n}}} : tile<{k}x1xi32>
  %bk2 = arith.muli %bk, %cn : tile<{k}x1xi32>
  %bn = tile.expand_dims %rn {{axis = 0}} : tile<1x{n}xi32>
  %bb1 = tile.broadcast %bk2 : tile<{k}x{n}xi32>
  %bb2 = tile.broadcast %bn : tile<{k}x{n}xi32>
  %boff = arith.addi %bb1, %bb2 : tile<{k}x{n}xi32>
  %pb = tile.splat %pb0 : tile<{k}x{n}xptr<{element}>>
  %pb1 = tile.addptr %pb, %boff : tile<{k}x{n}xptr<{element}>>
  %cm = tile.expand_dims %ra {{axis = 1}} : tile<{m}x1xi32>
  %cn2 = arith.constant {{value = {n}}} : tile<{m}x1xi32>
  %cm2 = arith.muli %cm, %cn2 : tile<{m}x1xi32>
  %cc = tile.expand_dims %rn {{axis = 0}} : tile<1x{n}xi32>
  %cb1 = tile.broadcast %cm2 : tile<{m}x{n}xi32>
  %cb2 = tile.broadcast %cc : tile<{m}x{n}xi32>
  %coff = arith.addi %cb1, %cb2 : tile<{m}x{n}xi32>
  %pc = tile.splat %pc0 : tile<{m}x{n}xptr<{acc}>>
  %pc1 = tile.addptr %pc, %coff : tile<{m}x{n}xptr<{acc}>>
  %zero = arith.constant {{value = 0}} : tile<{m}x{n}x{acc}>"""
    if loop:
        body += f"""
  %lo = arith.constant {{value = 0}} : i32
  %one = arith.constant {{value = 1}} : i32
  %res = scf.for %lo, %steps, %one, %zero : tile<{m}x{n}x{acc}> {{
  ^bb0(%i: i32, %acc: tile<{m}x{n}x{acc}>):
    %a = tile.load %pa1 : tile<{m}x{k}x{element}>
    %b = tile.load %pb1 : tile<{k}x{n}x{element}>
    {dot}
    scf.yield %d
  }}
  tile.store %pc1, %res"""
    else:
        body += f"""
  %acc = tile.load %pc1 : tile<{m}x{n}x{acc}>
  %a = tile.load %pa1 : tile<{m}x{k}x{element}>
  %b = tile.load %pb1 : tile<{k}x{n}x{element}>
  {dot}
  tile.store %pc1, %d"""
    return f"""
func.func @dot(%pa0: ptr<{element}>, %pb0: ptr<{element}>, %pc0: ptr<{acc}>, %steps: i32) attributes {{kernel = true, pt.divisibility = [16, 16, 16, 1]}} {{{body}
  func.return
}}
"""


def line(out: str, start: str) -> str:
    found = [text.strip() for text in out.splitlines() if text.strip().startswith(start)]
    assert len(found) == 1, (start, out)
    return found[0]


def test_the_accumulator_gets_the_mma_layout_and_the_operands_are_converted():
    out = apply_passes(kernel(64, 64, 32), AssignLayouts(), RemoveRedundantConverts(), context=context())
    MMA = MmaLayout(2, (2, 2), (16, 8))
    A, B = DotOperandLayout(0, MMA, 2), DotOperandLayout(1, MMA, 2)
    L = BlockedLayout((1, 8), (8, 4), (4, 1), (1, 0))     # 16-byte f16 loads, rows of 32
    LB = BlockedLayout((1, 8), (4, 8), (4, 1), (1, 0))    # rows of 64
    LC = BlockedLayout((1, 4), (2, 16), (4, 1), (1, 0))   # 16-byte f32 accesses
    assert line(out, "%a = tile.load") == f"%a = tile.load %pa1 : tile<64x32xf16, {L}>"
    assert line(out, "%b = tile.load") == f"%b = tile.load %pb1 : tile<32x64xf16, {LB}>"
    assert f"gpu.convert_layout %a : tile<64x32xf16, {A}>" in out
    assert f"gpu.convert_layout %b : tile<32x64xf16, {B}>" in out
    assert f"%d = tile.dot %1, %2, %0 : tile<64x64xf32, {MMA}>" in out
    # The accumulator is loaded and the result stored in the coalesced layout; only the
    # data changes layout.
    assert line(out, "%acc = tile.load") == f"%acc = tile.load %pc1 : tile<64x64xf32, {LC}>"
    assert f"%0 = gpu.convert_layout %acc : tile<64x64xf32, {MMA}>" in out
    assert f"%3 = gpu.convert_layout %d : tile<64x64xf32, {LC}>" in out
    assert "tile.store %pc1, %3" in out


def test_a_loop_carries_the_accumulator_in_the_mma_layout():
    out = apply_passes(kernel(128, 128, 64, loop=True), AssignLayouts(), RemoveRedundantConverts(),
                       context=context(8))
    MMA = MmaLayout(2, (2, 4), (16, 8))
    assert f"%zero = arith.constant {{value = 0}} : tile<128x128xf32, {MMA}>" in out
    assert f"^bb0(%i: i32, %acc: tile<128x128xf32, {MMA}>):" in out
    assert f"%d = tile.dot %0, %1, %acc : tile<128x128xf32, {MMA}>" in out
    # Converted once, after the loop.
    assert out.count("gpu.convert_layout") == 3
    assert "%2 = gpu.convert_layout %res : tile<128x128xf32, #gpu.blocked<" in out


@pytest.mark.parametrize("element, acc, precision, k_width", [
    ("f32", "f32", "tf32", 1), ("f32", "f32", "tf32x3", 1), ("i8", "i32", "tf32", 4), ("f64", "f64", "ieee", 1),
    ("f16", "f16", "ieee", 2),
])
def test_operand_k_width_follows_the_instruction(element, acc, precision, k_width):
    out = apply_passes(kernel(32, 32, 32, element, acc, precision), AssignLayouts(), context=context())
    MMA = MmaLayout(2, (2, 2), (16, 8))
    assert f"tile<32x32x{element}, {DotOperandLayout(0, MMA, k_width)}>" in out
    assert f"tile<32x32x{element}, {DotOperandLayout(1, MMA, k_width)}>" in out


@pytest.mark.parametrize("element, acc, precision, k", [("f32", "f32", "ieee", 32), ("i8", "i32", "tf32", 16)])
def test_dots_without_an_instruction_multiply_and_add_in_the_blocked_layout(element, acc, precision, k):
    out = apply_passes(kernel(32, 32, k, element, acc, precision), AssignLayouts(), RemoveRedundantConverts(),
                       context=context())
    assert "#gpu.mma" not in out
    result = line(out, "%d = tile.dot")
    blocked = result[result.index("#gpu.blocked"):-1]
    assert f"#gpu.dot_operand<op_idx = 0, parent = {blocked}, k_width = 1>" in out
    assert f"#gpu.dot_operand<op_idx = 1, parent = {blocked}, k_width = 1>" in out
    # The accumulator and result share the store's layout: nothing to convert there.
    assert out.count("gpu.convert_layout") == 2


def test_a_target_without_a_matrix_unit_multiplies_and_adds():
    target = dataclasses.replace(nvidia_gpu_target("sm_90a"), backend_name="a backend without matrix cores")
    out = apply_passes(kernel(32, 32, 32), AssignLayouts(), context=context(target=target))
    assert "#gpu.mma" not in out and "#gpu.dot_operand<op_idx = 0, parent = #gpu.blocked" in out


CHAINED = """
func.func @chain(%pq: ptr<f16>, %pk: ptr<f16>, %pv: ptr<f16>, %out: ptr<f32>) attributes {kernel = true} {
  %sq = tile.splat %pq : tile<64x32xptr<f16>>
  %q = tile.load %sq : tile<64x32xf16>
  %sk = tile.splat %pk : tile<32x64xptr<f16>>
  %k = tile.load %sk : tile<32x64xf16>
  %sv = tile.splat %pv : tile<64x32xptr<f16>>
  %v = tile.load %sv : tile<64x32xf16>
  %z = arith.constant {value = 0} : tile<64x64xf32>
  %s = tile.dot %q, %k, %z : tile<64x64xf32>
  %p = arith.truncf %s : tile<64x64xf16>
  %z2 = arith.constant {value = 0} : tile<64x32xf32>
  %o = tile.dot %p, %v, %z2 : tile<64x32xf32>
  %ptr = tile.splat %out : tile<64x32xptr<f32>>
  tile.store %ptr, %o
  func.return
}
"""


def test_a_dot_result_feeding_the_next_dot_converts_straight_into_its_operand_layout():
    out = apply_passes(CHAINED, AssignLayouts(), RemoveRedundantConverts(), context=context())
    # Both take 2 x 2 warps (Triton would put every warp along M for chained dots, so that
    # the conversion stays in registers: not done yet).
    first = second = MmaLayout(2, (2, 2), (16, 8))
    assert f"%p = arith.truncf %s : tile<64x64xf16, {first}>" in out
    assert f"gpu.convert_layout %p : tile<64x64xf16, {DotOperandLayout(0, second, 2)}>" in out
    assert f"%o = tile.dot %2, %3, %z2 : tile<64x32xf32, {second}>" in out


# A mask that both guards the load of B and selects in the dot's result (attention's
# ``cols[None, :] < n``), with pointer offsets shared by the loads and the store.
SHARED_MASK = """
func.func @k(%pa: ptr<f16>, %pb: ptr<f16>, %out: ptr<f32>, %n: i32) attributes {kernel = true, pt.divisibility = [16, 16, 16, 1]} {
  %r = tile.arange {end = 64, start = 0} : tile<64xi32>
  %rows = tile.expand_dims %r {axis = 1} : tile<64x1xi32>
  %cols = tile.expand_dims %r {axis = 0} : tile<1x64xi32>
  %c64 = arith.constant {value = 64} : tile<64x1xi32>
  %ro = arith.muli %rows, %c64 : tile<64x1xi32>
  %rb = tile.broadcast %ro : tile<64x64xi32>
  %cb = tile.broadcast %cols : tile<64x64xi32>
  %off = arith.addi %rb, %cb : tile<64x64xi32>
  %sn = tile.splat %n : tile<64x64xi32>
  %keep = arith.cmpi %cb, %sn {predicate = "slt"} : tile<64x64xi1>
  %sa = tile.splat %pa : tile<64x64xptr<f16>>
  %a_ptrs = tile.addptr %sa, %off : tile<64x64xptr<f16>>
  %a = tile.load %a_ptrs : tile<64x64xf16>
  %sb = tile.splat %pb : tile<64x64xptr<f16>>
  %b_ptrs = tile.addptr %sb, %off : tile<64x64xptr<f16>>
  %zero16 = arith.constant {value = 0.0} : tile<64x64xf16>
  %b = tile.load %b_ptrs mask(%keep) other(%zero16) : tile<64x64xf16>
  %z = arith.constant {value = 0.0} : tile<64x64xf32>
  %d = tile.dot %a, %b, %z : tile<64x64xf32>
  %low = arith.constant {value = -1.0} : tile<64x64xf32>
  %s = arith.select %keep, %d, %low : tile<64x64xf32>
  %so = tile.splat %out : tile<64x64xptr<f32>>
  %o_ptrs = tile.addptr %so, %off : tile<64x64xptr<f32>>
  tile.store %o_ptrs, %s
  func.return
}
"""


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_mask_shared_with_the_dot_result_leaves_the_loads_coalesced(arch):
    # The loads and the store keep coalesced blocked layouts: only the loaded and stored
    # data change layout; the mask and the pointer offsets are recomputed where the
    # accesses need them, never moved between threads.
    out = apply_passes(SHARED_MASK, AssignLayouts(), RemoveRedundantConverts(),
                       context=context(target=Target("nvidia", arch)))
    accesses = [line.strip() for line in out.splitlines() if "tile.load" in line or "tile.store" in line]
    assert len(accesses) == 3
    for name in ("%a = tile.load", "%b = tile.load"):
        (load,) = [line for line in accesses if line.startswith(name)]
        assert "#gpu.blocked<size_per_thread = [1, 8]" in load, load  # 16-byte f16 accesses
    converts = [line.strip() for line in out.splitlines() if "gpu.convert_layout" in line]
    assert not [c for c in converts if "xi1," in c or "xptr<" in c or "xi32," in c], converts


def test_a_column_broadcast_to_two_shapes_leaves_each_load_its_own_coalesced_layout():
    # offs_n[None, :] feeds the pointers of a 32x128 tile of B (K contiguous: column
    # major) and of the 64x128 result: one layout for both would load B 2 bytes at a
    # time along N.  B gets its own, 16 bytes along K.
    import numpy as np

    from tests.backends.nvidia.test_wgmma_gpu import loop_kernel

    a, b, c = np.zeros((64, 128), np.float16), np.zeros((128, 128), np.float16), np.zeros((64, 128), np.float32)
    module = loop_kernel.lower(a, b, c, 64, 128, 128, 128, 1, 1, 128, BM=64, BN=128, BK=32, ACC16=False)
    from polytile.ir import print_ir

    out = apply_passes(print_ir(module), AssignLayouts(), RemoveRedundantConverts(),
                       context=context(target=Target("nvidia", "sm_90a")))
    (load,) = [line.strip() for line in out.splitlines() if line.strip().startswith("%b = tile.load")]
    assert "size_per_thread = [8, 1]" in load and "order = [0, 1]" in load, load


def test_tiles_of_k_and_v_of_one_shape_each_get_their_own_coalesced_layout():
    # Attention with d = 64 and 64 keys per block: a 64x64 tile of K (d contiguous down
    # the columns) and one of V (d along the rows) share pointer arithmetic; each load
    # still reads 16 bytes at a time along its own contiguous dimension.
    import numpy as np

    from polytile.ir import print_ir
    from tests.backends.nvidia.test_wgmma_gpu import invariant_q_kernel

    q, k, v = (np.zeros((64, 64), np.float16) for _ in range(3))
    o = np.zeros((64, 64), np.float32)
    module = invariant_q_kernel.lower(q, k, v, o, 200, BM=64, BN=64, D=64)
    out = apply_passes(print_ir(module), AssignLayouts(), RemoveRedundantConverts(),
                       context=context(target=Target("nvidia", "sm_90a")))
    loads = {line.split()[0]: line for line in (text.strip() for text in out.splitlines()) if " = tile.load " in line}
    assert "size_per_thread = [8, 1]" in loads["%k"] and "order = [0, 1]" in loads["%k"], loads["%k"]
    assert "size_per_thread = [1, 8]" in loads["%v"] and "order = [1, 0]" in loads["%v"], loads["%v"]
