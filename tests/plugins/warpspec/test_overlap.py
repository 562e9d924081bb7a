"""overlap-dots: FlashAttention-3's intra-warpgroup overlap (``pl.WarpSpecialize(overlap=True)``).

IR text in, IR text out; the rotated loop computing bit for bit what the loop did (the
interpreter runs both, attention among them, with loops of zero, one and more
iterations); the loops it refuses, each with its reason; and the compiled kernel: split,
with the two dots issued together and retired one by one."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.backend import BackendOptions
from polytile.compiler import compile_module
from polytile.dialects import scf
from polytile.interpreter.executor import run_kernel
from polytile.ir import parse_module, print_ir
from polytile.ir.verifier import verify
from polytile.ir_testing import apply_passes, dedent
from polytile.passes.pass_base import PassContext
from polytile.target import Target

pytest.importorskip("polytile_nvidia")
pytest.importorskip("polytile_warpspec")

import polytile_nvidia.mma  # noqa: E402,F401  (the NVIDIA matrix unit: wgmma on sm_90a)
from polytile_warpspec.overlap import OverlapDots, overlap_loop  # noqa: E402

from .kernels import attention_descriptors, matmul_device_descriptors  # noqa: E402

LOOP = """
func.func @k(%a_ptrs: tile<64x16xptr<f16>>, %k_ptrs: tile<16x64xptr<f16>>, %v_ptrs: tile<64x64xptr<f16>>, %n: i32) -> tile<64x64xf32> attributes {kernel = true} {
  %zero = arith.constant {value = 0.0} : tile<64x64xf32>
  %c0 = arith.constant {value = 0} : i32
  %c64 = arith.constant {value = 64} : i32
  %a = tile.load %a_ptrs : tile<64x16xf16>
  %sum = scf.for %c0, %n, %c64, %zero {pt.warp_specialize = true, pt.warp_specialize.overlap = true} : tile<64x64xf32> {
  ^bb0(%i: i32, %acc: tile<64x64xf32>):
    %kofs = tile.splat %i : tile<16x64xi32>
    %kp = tile.addptr %k_ptrs, %kofs : tile<16x64xptr<f16>>
    %k = tile.load %kp : tile<16x64xf16>
    %s = tile.dot %a, %k, %zero : tile<64x64xf32>
    %p = math.exp2 %s : tile<64x64xf32>
    %p16 = arith.truncf %p : tile<64x64xf16>
    %vofs = tile.splat %i : tile<64x64xi32>
    %vp = tile.addptr %v_ptrs, %vofs : tile<64x64xptr<f16>>
    %v = tile.load %vp : tile<64x64xf16>
    %scaled = arith.mulf %acc, %p : tile<64x64xf32>
    %acc_1 = tile.dot %p16, %v, %scaled : tile<64x64xf32>
    scf.yield %acc_1
  }
  func.return %sum
}
"""


def _context(arch: str = "sm_90a") -> PassContext:
    return PassContext(target=Target("nvidia", arch), options=BackendOptions(num_warps=4, num_stages=3))


def test_the_second_dot_runs_one_iteration_behind():
    out = apply_passes(LOOP, OverlapDots(), context=_context())
    assert out[out.index("  %0 = arith.cmpi"):] == dedent("""
      %0 = arith.cmpi %c0, %n {predicate = "slt"} : i1
      %1, %2 = scf.if %0 : tile<64x64xf32>, tile<64x64xf16> {
        %kofs = tile.splat %c0 : tile<16x64xi32>
        %kp = tile.addptr %k_ptrs, %kofs : tile<16x64xptr<f16>>
        %k = tile.load %kp : tile<16x64xf16>
        %s = tile.dot %a, %k, %zero : tile<64x64xf32>
        %p = math.exp2 %s : tile<64x64xf32>
        %p16 = arith.truncf %p : tile<64x64xf16>
        %scaled = arith.mulf %zero, %p : tile<64x64xf32>
        scf.yield %scaled, %p16
      } {
        %3 = arith.constant {value = 0.0} : tile<64x64xf16>
        scf.yield %zero, %3
      }
      %4 = arith.addi %c0, %c64 : i32
      %5, %6 = scf.for %4, %n, %c64, %1, %2 {pt.warp_specialize = true, pt.warp_specialize.overlap = true} : tile<64x64xf32>, tile<64x64xf16> {
      ^bb0(%i: i32, %7: tile<64x64xf32>, %8: tile<64x64xf16>):
        %kofs_1 = tile.splat %i : tile<16x64xi32>
        %kp_1 = tile.addptr %k_ptrs, %kofs_1 : tile<16x64xptr<f16>>
        %k_1 = tile.load %kp_1 : tile<16x64xf16>
        %s_1 = tile.dot %a, %k_1, %zero : tile<64x64xf32>
        %9 = arith.subi %i, %c64 : i32
        %vofs = tile.splat %9 : tile<64x64xi32>
        %vp = tile.addptr %v_ptrs, %vofs : tile<64x64xptr<f16>>
        %v = tile.load %vp : tile<64x64xf16>
        %acc_1 = tile.dot %8, %v, %7 : tile<64x64xf32>
        %p_1 = math.exp2 %s_1 : tile<64x64xf32>
        %p16_1 = arith.truncf %p_1 : tile<64x64xf16>
        %scaled_1 = arith.mulf %acc_1, %p_1 : tile<64x64xf32>
        scf.yield %scaled_1, %p16_1
      }
      %10 = scf.if %0 : tile<64x64xf32> {
        %11 = arith.subi %n, %c0 : i32
        %12 = arith.constant {value = 1} : i32
        %13 = arith.subi %11, %12 : i32
        %14 = arith.divsi %13, %c64 : i32
        %15 = arith.muli %14, %c64 : i32
        %16 = arith.addi %c0, %15 : i32
        %vofs_1 = tile.splat %16 : tile<64x64xi32>
        %vp_1 = tile.addptr %v_ptrs, %vofs_1 : tile<64x64xptr<f16>>
        %v_1 = tile.load %vp_1 : tile<64x64xf16>
        %acc_1_1 = tile.dot %6, %v_1, %5 : tile<64x64xf32>
        scf.yield %acc_1_1
      } {
        scf.yield %zero
      }
      func.return %10
    }
    """)


def test_the_setting_decides_where_the_loop_does_not_and_the_loop_wins():
    from polytile import config

    plain = LOOP.replace(", pt.warp_specialize.overlap = true", "")
    assert apply_passes(plain, OverlapDots(), context=_context()) == \
        apply_passes(LOOP, OverlapDots(), context=_context()).replace(", pt.warp_specialize.overlap = true", "")
    with config.override(warpspec_overlap=False):
        assert apply_passes(plain, OverlapDots(), context=_context()) == apply_passes(plain)
        assert apply_passes(LOOP, OverlapDots(), context=_context()) != apply_passes(LOOP)
    declined = LOOP.replace("pt.warp_specialize.overlap = true", "pt.warp_specialize.overlap = false")
    assert apply_passes(declined, OverlapDots(), context=_context()) == apply_passes(declined)
    # sm_80 splits no loops: the rotation would only cost registers there.
    assert apply_passes(LOOP, OverlapDots(), context=_context("sm_80")) == apply_passes(LOOP)


def _only_loop(module):
    function = next(op for op in module.walk() if op.name == "func.func")
    return function, next(op for op in module.walk() if isinstance(op, scf.ForOp))


@pytest.mark.parametrize("edit, why", [
    (lambda text: text.replace("%c64, %zero {pt.warp", "%n, %zero {pt.warp"), "its step is not a positive constant"),
    (lambda text: text.replace("    scf.yield %acc_1\n", "    tile.store %vp, %p16\n"
                                                         "    scf.yield %acc_1\n"),
     "the body has effects (tile.store) the rotation would reorder"),
    (lambda text: text.replace("%acc_1 = tile.dot %p16, %v, %scaled", "%acc_1 = arith.addf %scaled, %s"),
     "the body has 1 dot; the overlap needs two, at its top level"),
    (lambda text: text.replace("%p = math.exp2 %s", "%p = math.exp2 %zero"),
     "the first dot's result is not read in the body"),
    (lambda text: text.replace("    scf.yield %acc_1\n", "    %twice = arith.addf %acc_1, %acc_1 : tile<64x64xf32>\n"
                                                         "    scf.yield %twice\n"),
     "the second dot's result is used besides being carried to the next iteration"),
    (lambda text: text.replace("%p = math.exp2 %s", "%p = arith.addf %s, %acc"),
     "the rescaled accumulator is read besides by the second dot"),
    (lambda text: text.replace("    %p = math.exp2 %s", "    %peek = arith.addf %s, %acc : tile<64x64xf32>\n"
                                                        "    %p = math.exp2 %s"),
     "the carried accumulator is read besides by the second dot's rescale"),
    (lambda text: text.replace("%vofs = tile.splat %i", "%vofs = tile.splat %n"),
     None),  # B from invariants only: rotated all the same
    # No rescale: async-dots would wait for the rotated dot in its own iteration.
    (lambda text: text.replace("    %scaled = arith.mulf %acc, %p : tile<64x64xf32>\n", "").replace(
        "%acc_1 = tile.dot %p16, %v, %scaled", "%acc_1 = tile.dot %p16, %v, %acc"),
     "the second dot accumulates into the carried value with nothing between to overlap it with"),
    # The first dot feeds the second's B (h = x @ k; acc += p @ h): nothing to run beside.
    (lambda text: text.replace("%acc_1 = tile.dot %p16, %v, %scaled", "%acc_1 = tile.dot %p16, %p16, %scaled"),
     "the first dot's result feeds the second dot's B or accumulator"),
])
def test_what_is_refused_and_why(edit, why):
    module = parse_module(dedent(edit(LOOP)))
    verify(module)
    before = print_ir(module)
    assert overlap_loop(*_only_loop(module)) == why
    verify(module)
    if why is not None:
        assert print_ir(module) == before  # refused: untouched


# -- the same results --------------------------------------------------------------------


def _tile_module(kernel, *args, **constexprs):
    """The kernel's module after the target-neutral stage (what overlap-dots meets), as text."""
    return print_ir(compile_module(kernel.lower(*args, **constexprs), "interp").module)


def _run_both(text: str, name: str, grid, args: list, outputs: list[int]) -> tuple[list, list]:
    rotated = parse_module(text)
    assert overlap_loop(*_only_loop(rotated)) is None
    verify(rotated)
    results = []
    for module in (parse_module(text), rotated):
        copies = [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]
        run_kernel(module, name, grid, copies)
        results.append([copies[i] for i in outputs])
    return results[0], results[1]


def _example(name: str):
    examples = Path(__file__).parents[3] / "examples"
    sys.path.insert(0, str(examples))
    try:
        import importlib.util

        spec = importlib.util.spec_from_file_location(f"overlap_{name}", examples / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(examples))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seq_len", [16, 40, 100])
def test_rotated_attention_computes_bit_for_bit_what_the_loop_did(causal, seq_len):
    # examples/flash_attention.py's kernel: 32-row query blocks, 16-key blocks; seq_len 16
    # runs one iteration (the rotated loop none), 40 and 100 partial blocks.
    attention = _example("flash_attention").attention_kernel
    head_dim, heads = 16, 2
    rng = np.random.default_rng(seq_len)
    q, k, v = (rng.standard_normal((heads * seq_len, head_dim)).astype(np.float16) for _ in range(3))
    out = np.zeros_like(q)
    args = [q, k, v, out, 0.25, seq_len]
    text = _tile_module(attention, *args, HEAD_DIM=head_dim, BLOCK_M=32, BLOCK_N=16, CAUSAL=causal)
    (plain,), (rotated,) = _run_both(text, "attention_kernel", (math.ceil(seq_len / 32), heads), args, [3])
    np.testing.assert_array_equal(rotated, plain)
    assert np.abs(plain).max() > 0


@pt.jit
def two_dots(a_ptr, b_ptr, c_ptr, out_ptr, n, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    square = offs[:, None] * BLOCK + offs[None, :]
    a = pl.load(a_ptr + square)
    acc = pl.full((BLOCK, BLOCK), 1.0, pl.float32)
    total = pl.zeros((BLOCK,), pl.float32)
    for i in pl.range(0, n, 1, warp_specialize=pl.WarpSpecialize(overlap=True)):
        x = pl.dot(a, pl.load(b_ptr + i * BLOCK * BLOCK + square))
        total = total + pl.max(x, axis=1)
        acc = pl.dot(x.to(pl.float16), pl.load(c_ptr + i * BLOCK * BLOCK + square), acc * 0.5)
    pl.store(out_ptr + square, acc + total[:, None])


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_loops_of_zero_one_and_more_iterations(n):
    block = 16
    rng = np.random.default_rng(n)
    a = rng.integers(-2, 3, (block, block)).astype(np.float16)
    b, c = (rng.integers(-2, 3, (max(n, 1) * block, block)).astype(np.float16) for _ in range(2))
    out = np.zeros((block, block), np.float32)
    args = [a, b, c, out, n]
    text = _tile_module(two_dots, *args, BLOCK=block)
    (plain,), (rotated,) = _run_both(text, "two_dots", 1, args, [3])
    np.testing.assert_array_equal(rotated, plain)


# -- the compiled kernel -----------------------------------------------------------------


def _attention(causal: bool, overlap=True, block_n=128, stages=2):
    q = np.zeros((512, 128), np.float16)
    module = attention_descriptors.lower(q, q, q, q, 0.1, 512, 256, HEAD_DIM=128, BLOCK_M=128, BLOCK_N=block_n,
                                         CAUSAL=causal, WS=pl.WarpSpecialize(overlap=overlap))
    return compile_module(module, "nvidia:sm_90a", num_warps=8, num_stages=stages)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_the_split_attention_issues_both_dots_then_retires_them_in_turn(causal):
    from tests.gpu.ptx_assembly import assembles

    result = _attention(causal)
    (entry,) = result.metadata["warp_specialize"]
    assert entry["specialised"] is True and entry["overlap"] is True, entry
    ptx = result.artifacts["ptx"]
    consumers = ptx[ptx.index("setmaxnreg.inc"):]
    # The consumers' loop: q @ k_j, then p_{j-1} @ v_{j-1}, both in flight; the scores
    # retired behind the second (wait 1), the second before the rescale (wait 0).
    groups = re.findall(r"wgmma\.(commit_group|wait_group)\.sync\.aligned ?(\d*);", consumers)
    assert [("commit_group", ""), ("commit_group", ""), ("wait_group", "1"), ("wait_group", "0")] == \
        [groups[i] for i in range(2, 6)], groups
    assert result.metadata["resources"]["spills"] == {"store_bytes": 0, "load_bytes": 0}
    assembles(ptx, "sm_90a", "attention_descriptors")


def test_the_metadata_says_why_a_loop_is_not_overlapped():
    f16 = np.zeros((256, 256), np.float16)
    module = matmul_device_descriptors.lower(f16, f16, f16, 256, 256, 256, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                                             WS=pl.WarpSpecialize(overlap=True))
    result = compile_module(module, "nvidia:sm_90a", num_warps=4, num_stages=3)
    (entry,) = result.metadata["warp_specialize"]
    assert entry["specialised"] is True
    assert entry["overlap"] == "not overlapped: the body has 1 dot; the overlap needs two, at its top level"
    # Asked not to (the option wins over the setting): no key at all.
    from polytile import config

    with config.override(warpspec_overlap=True):
        (entry,) = _attention(False, overlap=False).metadata["warp_specialize"]
    assert "overlap" not in entry and entry["specialised"] is True


@pytest.mark.parametrize("head_dim, block_n, warps, stages, why", [
    # Three stages of 128x128 blocks fill shared memory (229,536 bytes): no room for the
    # first k and the last v outside the rings.
    (128, 128, 8, 3, "the tiles it loads outside the loop's rings take 32768 more bytes of shared memory: about "
                     "262144 with the rings, more than the 232448 a block has"),
    # One consumer warp group with 128x128 scores: 64 + 128 + 64 registers before the rest.
    (64, 128, 4, 2, "the accumulator, the scores and the carried A would take about 296 registers per consumer "
                    "thread, more than its 240"),
])
def test_by_the_setting_a_loop_without_room_is_left_as_it_was(head_dim, block_n, warps, stages, why):
    q = np.zeros((512, head_dim), np.float16)
    module = attention_descriptors.lower(q, q, q, q, 0.1, 512, 256, HEAD_DIM=head_dim, BLOCK_M=128,
                                         BLOCK_N=block_n, CAUSAL=True, WS=True)
    result = compile_module(module, "nvidia:sm_90a", num_warps=warps, num_stages=stages)
    (entry,) = result.metadata["warp_specialize"]
    assert entry["specialised"] is True and entry["overlap"].startswith("not overlapped: " + why), entry


def test_asked_for_on_a_persistent_loop_it_says_the_inner_loop_is_not_rotated():
    import polytile.language as pl

    from .kernels import attention_persistent

    q = np.zeros((1024, 128), np.float16)
    module = attention_persistent.lower(q, q, q, q, 0.1, 1024, HEAD_DIM=128, BLOCK_M=128, BLOCK_N=128, CAUSAL=False,
                                        NUM_PROGRAMS=132, WS=pl.WarpSpecialize(overlap=True))
    (entry,) = compile_module(module, "nvidia:sm_90a", num_warps=8, num_stages=2).metadata["warp_specialize"]
    assert entry["specialised"] is True
    assert entry["overlap"] == ("not overlapped: its dots are in a loop inside it (a persistent kernel's loop over "
                                "tiles): the overlap rotates the hinted loop's own dots; the inner loop of a "
                                "persistent kernel is not rotated yet")


def test_a_value_that_feeds_both_the_rescale_and_b_stays_in_the_body():
    # %vf is part of B's slice and read by the rescale: it must stay where the rotated
    # loop's rescale (and the epilogue's) can read it.
    text = LOOP.replace("    %v = tile.load %vp : tile<64x64xf16>\n",
                        "    %v = tile.load %vp : tile<64x64xf16>\n"
                        "    %vf = arith.sitofp %vofs : tile<64x64xf32>\n"
                        "    %vh = arith.truncf %vf : tile<64x64xf16>\n"
                        "    %vv = arith.addf %v, %vh : tile<64x64xf16>\n").replace(
        "%scaled = arith.mulf %acc, %p", "%scaled = arith.mulf %acc, %vf").replace(
        "%acc_1 = tile.dot %p16, %v, %scaled", "%acc_1 = tile.dot %p16, %vv, %scaled")
    module = parse_module(dedent(text))
    verify(module)
    assert overlap_loop(*_only_loop(module)) is None
    verify(module)  # every use of %vf (and its copies) is dominated by its definition
