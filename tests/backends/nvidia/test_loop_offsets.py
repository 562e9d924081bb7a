"""keep-loop-offsets (backends/nvidia/polytile_nvidia/loop_offsets.py): PTX text in,
PTX text out, and the pass in the NVIDIA pipeline on the matmul that needed it."""

from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest

from polytile.compiler import compile_module
from polytile.errors import PolytileError
from polytile.passes.pass_base import PassContext

pytest.importorskip("polytile_nvidia")

from polytile_nvidia.loop_offsets import KeepLoopOffsets, keep_loop_offsets  # noqa: E402


def ptx(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


# A kernel whose loop adds a loop-invariant offset to a moving base (what LLVM's loop
# strength reduction leaves of a pipelined tile of pointers).
LOOP = ptx("""
    .visible .entry k(
    \t.param .u64 k_param_0
    )
    {
    \tmul.wide.s32 \t%rd1, %r5, 2;
    \tmul.wide.u32 \t%rd2, %r6, 8;
    \tmul.wide.s32 \t%rd3, %r7, 4;
    \tmul.wide.s32 \t%rd4, %r8, 6;
    $L__BB0_1:
    \tadd.s64 \t%rd10, %rd9, %rd1;
    \tadd.s64 \t%rd11, %rd9, %rd2;
    \tadd.s64 \t%rd12, %rd9, %rd4;
    \tmul.wide.s32 \t%rd13, %r9, 2;
    \tadd.s64 \t%rd14, %rd13, %rd9;
    \t@%p1 bra \t$L__BB0_1;
    \tadd.s64 \t%rd15, %rd3, %rd9;
    \tret;
    }
""")


def test_offsets_read_in_a_loop_become_cvt_and_shl():
    out, count = keep_loop_offsets(LOOP)
    # %rd1 and %rd2 (powers of two, defined before the loop, read in it) are rewritten,
    # signed and unsigned as their multiply was; %rd3 is read only after the loop, %rd4's
    # factor is no element size, %rd13 is made in the loop: all left alone.
    assert count == 2
    assert out == LOOP.replace("\tmul.wide.s32 \t%rd1, %r5, 2;", "\tcvt.s64.s32 \t%rd1, %r5;\n\tshl.b64 \t%rd1, %rd1, 1;") \
        .replace("\tmul.wide.u32 \t%rd2, %r6, 8;", "\tcvt.u64.u32 \t%rd2, %r6;\n\tshl.b64 \t%rd2, %rd2, 3;")


def test_ptx_without_loops_is_returned_as_it_is():
    straight = re.sub(r"\$L__BB0_1:\n|\t@%p1 bra \t\$L__BB0_1;\n", "", LOOP)
    assert keep_loop_offsets(straight) == (straight, 0)


def test_a_register_written_twice_is_left_alone():
    twice = LOOP.replace("\tret;", "\tmov.b64 \t%rd1, 0;\n\tret;")
    out, count = keep_loop_offsets(twice)
    assert count == 1 and "mul.wide.s32 \t%rd1, %r5, 2;" in out


def test_a_forward_branch_is_no_loop():
    forward = ptx("""
        .visible .entry k()
        {
        \tmul.wide.s32 \t%rd1, %r5, 2;
        \t@%p1 bra \t$L__BB0_2;
        \tadd.s64 \t%rd10, %rd9, %rd1;
        $L__BB0_2:
        \tret;
        }
    """)
    assert keep_loop_offsets(forward) == (forward, 0)


def test_an_offset_of_an_outer_loop_read_in_the_inner_one_is_rewritten():
    # A persistent kernel: the tile loop computes a tile's offsets, its K loop reads them.
    nested = ptx("""
        .visible .entry k()
        {
        $L__BB0_1:
        \tmul.wide.s32 \t%rd1, %r5, 2;
        $L__BB0_2:
        \tadd.s64 \t%rd10, %rd9, %rd1;
        \t@%p1 bra \t$L__BB0_2;
        \t@%p2 bra \t$L__BB0_1;
        \tret;
        }
    """)
    out, count = keep_loop_offsets(nested)
    assert count == 1 and "cvt.s64.s32 \t%rd1, %r5;\n\tshl.b64 \t%rd1, %rd1, 1;" in out


def test_registers_are_per_function():
    # The device function reads its own %rd1 in a loop; the kernel's %rd1 is read only in
    # straight-line code and stays a mul.wide.
    two = ptx("""
        .func f()
        {
        \tmul.wide.s32 \t%rd1, %r1, 4;
        $L__BB0_1:
        \tadd.s64 \t%rd2, %rd2, %rd1;
        \t@%p1 bra \t$L__BB0_1;
        \tret;
        }
        .visible .entry k()
        {
        \tmul.wide.s32 \t%rd1, %r1, 4;
        \tadd.s64 \t%rd2, %rd2, %rd1;
        \tret;
        }
    """)
    out, count = keep_loop_offsets(two)
    assert count == 1
    kernel = out[out.index(".visible .entry"):]
    assert "mul.wide.s32 \t%rd1, %r1, 4;" in kernel and "shl.b64 \t%rd1, %rd1, 2;" in out


def test_the_pass_rewrites_the_ptx_artifact_and_needs_it():
    context = PassContext(artifacts={"ptx": LOOP})
    KeepLoopOffsets().run(None, context)
    assert keep_loop_offsets(LOOP)[0] == context.artifacts["ptx"]
    with pytest.raises(PolytileError, match="after emit-ptx"):
        KeepLoopOffsets().run(None, PassContext(artifacts={}))


def test_the_pipelined_matmul_keeps_its_copy_offsets_whole():
    # The 4-warp matmul whose copies waited on ptxas's IMAD.WIDE recomputations: in its
    # PTX no address offset read in the K loop is a mul.wide any more, and it assembles.
    from pathlib import Path

    from polytile.aot import load_kernel

    matmul_kernel = load_kernel(f"{Path(__file__).parents[3] / 'examples' / 'matmul.py'}:matmul_kernel")
    a = np.zeros((256, 256), np.float16)
    module = matmul_kernel.lower(a, a, a, 256, 256, 256, 256, 1, 256, 1, 256, 1,
                                 BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8)
    result = compile_module(module, "nvidia:sm_90a", num_warps=4, num_stages=4)
    assert "keep-loop-offsets" in str(result.pipeline)
    text = result.context.artifacts["ptx"]
    # The K loop starts at the label before its first wait for a ring slot.
    label = re.findall(r"^\$L__BB\d+_\d+:", text[:text.index("cp.async.wait_group")], re.MULTILINE)[-1]
    loop = text[text.index(label):]
    offsets = set(re.findall(r"add\.s64 \t%rd\d+, (%rd\d+), %rd\d+;", loop))
    wide = set(re.findall(r"mul\.wide\.s32 \t(%rd\d+),", text))
    assert offsets and not offsets & wide
    assert len(re.findall(r"cp\.async\.cg\.shared\.global", loop)) >= 16
    assert result.context.artifacts["cubin"][:4] == b"\x7fELF"


@pytest.mark.parametrize("factor", ["0", "1", "2147483648", "4294967296"])
def test_factors_that_are_no_element_size_are_left_alone(factor):
    # 2**31 is -2**31 as a 32-bit signed immediate; 0 and 1 are no offsets to keep.
    text = LOOP.replace("mul.wide.s32 \t%rd1, %r5, 2;", f"mul.wide.s32 \t%rd1, %r5, {factor};")
    out, count = keep_loop_offsets(text)
    assert f"mul.wide.s32 \t%rd1, %r5, {factor};" in out and count == 1  # %rd2 (u32, 8) only
