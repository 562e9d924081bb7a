"""pl.inline_asm_elementwise (Triton's tl.inline_asm_elementwise) without a GPU: the
interpreter's error, PTX for NVIDIA targets (assembled by ptxas), with packing and several
results, and the AMD backend's refusal (it cannot assemble inline assembly yet).  tests/backends/nvidia/test_gpu_inline_asm.py
runs the NVIDIA kernels on a GPU."""

import re

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.compiler import compile_module
from polytile.errors import CompilationError, InterpreterUnsupportedError

from gpu.ptx_assembly import assembles


@pt.jit
def funnel_shift_kernel(x_ptr, y_ptr, out_ptr, SHIFT, N: pl.constexpr):
    offs = pl.arange(0, N)
    x, y = pl.load(x_ptr + offs), pl.load(y_ptr + offs)
    z = pl.inline_asm_elementwise("shf.l.wrap.b32 $0, $1, $2, $3;", "=r,r,r,r", [x, y, SHIFT], dtype=pl.int32,
                                  is_pure=True, pack=1)
    pl.store(out_ptr + offs, z)


@pt.jit
def packed_bytes_kernel(x_ptr, out_ptr, N: pl.constexpr):
    offs = pl.arange(0, N)
    x = pl.load(x_ptr + offs)
    # Four bytes in one register: each masked to 5 bits, then shifted left by 3.
    y = pl.inline_asm_elementwise("and.b32 $0, $1, 0x1F1F1F1F;\n\tshl.b32 $0, $0, 3;", "=r,r", [x],
                                  dtype=pl.int8, is_pure=True, pack=4)
    pl.store(out_ptr + offs, y)


@pt.jit
def two_results_kernel(x_ptr, lo_ptr, hi_ptr, N: pl.constexpr):
    offs = pl.arange(0, N)
    x = pl.load(x_ptr + offs)
    lo, hi = pl.inline_asm_elementwise("mov.b64 {$0, $1}, $2;", "=r,=r,l", [x], dtype=(pl.int32, pl.int32),
                                       is_pure=True, pack=1)
    pl.store(lo_ptr + offs, lo)
    pl.store(hi_ptr + offs, hi)


@pt.jit
def pointer_operands_kernel(x_ptr, y_ptr, N: pl.constexpr):
    # Triton's test_inline_asm_with_pointers: the assembly loads and stores through the
    # addresses it is given (64-bit "l" operands); its int8 result is unused.
    pl.inline_asm_elementwise("ld.global.b8 $0, [$1];\n\tshl.b32 $0, $0, 3;\n\tst.global.b8 [$2], $0;", "=r,l,l",
                              [x_ptr + pl.arange(0, N), y_ptr + pl.arange(0, N)], dtype=pl.int8, is_pure=False,
                              pack=1)


@pt.jit
def amd_shift_kernel(x_ptr, out_ptr, N: pl.constexpr):
    offs = pl.arange(0, N)
    x = pl.load(x_ptr + offs)
    y = pl.inline_asm_elementwise("v_lshlrev_b32 $0, 3, $1", "=v,v", [x], dtype=pl.int32, is_pure=True, pack=1)
    pl.store(out_ptr + offs, y)


def _ptx(kernel, *args, arch, **meta):
    return compile_module(kernel.lower(*args, **meta), f"nvidia:{arch}", num_warps=4).context.artifacts["ptx"]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_nvidia_ptx_holds_the_assembly_and_assembles(arch):
    i32 = np.zeros(256, np.int32)
    ptx = _ptx(funnel_shift_kernel, i32, i32, i32, 3, N=256, arch=arch)
    assert ptx.count("shf.l.wrap.b32") == 2  # 256 elements, 128 threads: two instances each
    assembles(ptx, arch, "funnel_shift_kernel")
    u8 = np.zeros(512, np.uint8)
    ptx = _ptx(packed_bytes_kernel, u8, u8, N=512, arch=arch)
    assert ptx.count("0x1F1F1F1F") == 1  # four bytes per thread in one register: one instance
    assembles(ptx, arch, "packed_bytes_kernel")
    ptx = _ptx(two_results_kernel, np.zeros(128, np.int64), i32, i32, N=128, arch=arch)
    assert ptx.count("mov.b64 {") == 1
    assembles(ptx, arch, "two_results_kernel")
    ptx = _ptx(pointer_operands_kernel, u8, u8, N=512, arch=arch)
    # 512 elements, 128 threads: four instances each, every one kept (not pure), its
    # addresses in 64-bit registers.
    assert len(re.findall(r"ld\.global\.b8 %r\d+, \[%rd\d+\];", ptx)) == 4
    assembles(ptx, arch, "pointer_operands_kernel")


@pytest.mark.parametrize("arch", ["gfx942", "gfx1100"])
def test_amd_refuses_inline_assembly_with_the_reason(arch):
    # LLVM would stop the whole process here (llvmlite's LLVM has no AMDGPU assembly
    # parser): the backend says so before code generation instead.
    i32 = np.zeros(256, np.int32)
    with pytest.raises(CompilationError) as info:
        compile_module(amd_shift_kernel.lower(i32, i32, N=256), f"amd:{arch}", num_warps=4).artifacts["hsaco"]
    assert f"pl.inline_asm_elementwise on {arch}: the AMD backend cannot compile inline assembly yet: the LLVM " \
           "inside llvmlite has no AMDGPU assembly parser" in str(info.value)


def test_the_interpreter_says_it_runs_no_assembly():
    x = np.zeros(128, np.int32)
    with pytest.raises(InterpreterUnsupportedError, match="pl.inline_asm_elementwise runs the target's own "
                                                          "assembly .* which the interpreter cannot run"):
        funnel_shift_kernel[(1,)](x, x, x, 3, N=128, target="interp")


@pt.jit
def bad_asm_kernel(x_ptr, WHICH: pl.constexpr):
    x = pl.load(x_ptr + pl.arange(0, 128))
    if WHICH == "pack":
        pl.inline_asm_elementwise("", "=r,r", [x], dtype=pl.int32, is_pure=True, pack=3)
    elif WHICH == "dtype":
        pl.inline_asm_elementwise("", "=r,r", [x], dtype="int32", is_pure=True, pack=1)
    elif WHICH == "constraints":
        pl.inline_asm_elementwise("", "=r,r,r", [x], dtype=pl.int32, is_pure=True, pack=1)


@pytest.mark.parametrize("which, message", [
    ("pack", "pack must be a power of two of at least 1, got 3"),
    ("dtype", "dtype must be a dtype or a tuple of dtypes, got 'int32'"),
    ("constraints", "the constraints '=r,r,r' describe 3 operands, but with pack = 1 the assembly has 1 output and "
                    "1 input registers"),
])
def test_mistakes_are_named(which, message):
    with pytest.raises(CompilationError) as info:
        bad_asm_kernel.lower(np.zeros(128, np.int32), WHICH=which)
    assert message in str(info.value)
