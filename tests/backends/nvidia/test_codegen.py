"""Elementwise kernels through the NVIDIA pipeline to PTX: distribute, lower-to-llvm,
emit-ptx.  PTX is checked for the instructions that matter (vector accesses, ex2.approx),
and given to ptxas for sm_80 and sm_90a when ptxas is on this machine."""

from __future__ import annotations


import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.compiler import compile_module
from polytile.errors import CompilationError
from polytile_nvidia.codegen import nvidia_gpu_target
from gpu.ptx_assembly import assembles


def compile_ptx(kernel, *args, arch="sm_90a", num_warps=4, **meta):
    module = kernel.lower(*args, **meta)
    result = compile_module(module, f"nvidia:{arch}", num_warps=num_warps)
    return result.context.artifacts


@pt.jit
def add(x, y, out, n, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    pl.store(out + offs, pl.load(x + offs, mask=mask) + pl.load(y + offs, mask=mask), mask=mask)


@pt.jit
def copy_unmasked(x, out, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    pl.store(out + offs, pl.load(x + offs))


def f32(n=8192, offset=0):
    return np.zeros(n + offset, np.float32)[offset:]


def test_the_ptx_isa_is_the_newest_any_inline_ptx_asks_for():
    from polytile_nvidia.codegen import PTX_FEATURES, ptx_features

    assert ptx_features("add.f32") == PTX_FEATURES
    assert ptx_features("fence.proxy.tensormap::generic.acquire.gpu") == "+ptx83"
    # Whatever order the table lists them in.
    assert ptx_features("fence.proxy.tensormap ... mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32") == "+ptx84"
    assert ptx_features("tensormap.replace ... .e4m3.e4m3.f32 ... fence.proxy.tensormap") == "+ptx87"


def test_target_data():
    target = nvidia_gpu_target("sm_90a")
    assert (target.warp_size, target.kernel_calling_convention, target.global_address_space) == (32, "ptx_kernel", 1)
    assert target.triple == "nvptx64-nvidia-cuda"


def test_aligned_f32_vector_add_uses_16_byte_accesses():
    artifacts = compile_ptx(add, f32(), f32(), f32(), 8192, BLOCK=1024)
    ptx = artifacts["ptx"]
    assert "define ptx_kernel void @\"add\"" in artifacts["llvm_ir"]
    assert ptx.count("ld.global.v4.b32") == 4 and ptx.count("st.global.v4.b32") == 2
    assert ".maxntid 128" in ptx
    for arch in ("sm_80", "sm_90a"):
        assembles(compile_ptx(add, f32(), f32(), f32(), 8192, BLOCK=1024, arch=arch)["ptx"], arch)


def test_unknown_alignment_gives_scalar_accesses():
    ptx = compile_ptx(copy_unmasked, f32(offset=1), f32(), BLOCK=1024)["ptx"]
    assert "ld.global.v" not in ptx
    assert "ld.global.b32" in ptx or "ld.global.f32" in ptx
    assert "st.global.v4.b32" in ptx  # the output is aligned


def test_a_mask_not_constant_over_a_vector_is_not_vectorized():
    # n = 1001 is not a multiple of 4: the mask can change inside a group of four.
    ptx = compile_ptx(add, f32(), f32(), f32(), 1001, BLOCK=1024)["ptx"]
    assert "ld.global.v" not in ptx and "st.global.v" not in ptx


def test_f16_vectors_hold_eight_halves():
    h = np.zeros(8192, np.float16)
    ptx = compile_ptx(add, h, h, h, 8192, BLOCK=2048)["ptx"]
    assert ptx.count("ld.global.v4.b32") == 4 and ("add.f16" in ptx or "add.rn.f16" in ptx)
    assembles(ptx, "sm_90a")


@pt.jit
def masked_row(x, out, n, BLOCK: pl.constexpr):
    cols = pl.arange(0, BLOCK)
    mask = cols < n
    row = pl.load(x + cols, mask=mask, other=-float("inf")).to(pl.float32)
    pl.store(out + cols, row * 2.0, mask=mask)


def test_masked_accesses_are_predicated_vectors_without_branches():
    # Straight-line predicated accesses, as Triton's, not a branch around each vector;
    # the masked-off value is moved in before the predicated load, with no select after.
    h = np.zeros(4096, np.float16)
    ptx = compile_ptx(masked_row, h, h, 4096, BLOCK=4096, num_warps=8)["ptx"]
    loads = [line.split() for line in ptx.splitlines() if "ld.global" in line]
    stores = [line.split() for line in ptx.splitlines() if "st.global" in line]
    assert len(loads) == 2 and all(line[0].startswith("@%p") and line[1] == "ld.global.v4.b32" for line in loads)
    assert len(stores) == 2 and all(line[0].startswith("@%p") and line[1] == "st.global.v4.b32" for line in stores)
    assert "bra" not in ptx and "selp" not in ptx
    assert "-67044352" in ptx  # 0xFC00FC00: the pair of f16 -inf the masked-off words keep
    assembles(ptx, "sm_90a")


@pt.jit
def square_roots(x, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    v = pl.load(x + offs)
    pl.store(out + offs, pl.sqrt(v) + pl.sqrt_rn(v))


@pytest.mark.parametrize("dtype, approximate, rounded", [(np.float32, "sqrt.approx.f32", "sqrt.rn.f32"),
                                                         (np.float64, None, "sqrt.rn.f64")])
def test_sqrt_is_approximate_and_sqrt_rn_correctly_rounded(dtype, approximate, rounded):
    v = np.zeros(256, dtype)
    ptx = compile_ptx(square_roots, v, v, BLOCK=256)["ptx"]
    assert rounded in ptx and (approximate is None or approximate in ptx)
    assert "approx" not in ptx or approximate is not None
    assembles(ptx, "sm_90a")


@pt.jit
def divisions(x, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    v = pl.load(x + offs)
    pl.store(out + offs, v / (v + 1.0) + pl.div_rn(v, v + 2.0) + pl.fdiv(v, v + 3.0, ieee_rounding=True))


@pytest.mark.parametrize("dtype, full, rounded", [(np.float32, 1, 2), (np.float64, 0, 3)])
def test_division_is_div_full_for_f32_slash_and_div_rn_otherwise(dtype, full, rounded):
    # As Triton: '/' on f32 is div.full.f32 (within 2 ulp); pl.div_rn and
    # fdiv(ieee_rounding=True) are div.rn; f64 '/' stays correctly rounded.
    v = np.zeros(128, dtype)
    ptx = compile_ptx(divisions, v, v, BLOCK=128)["ptx"]
    width = np.dtype(dtype).itemsize * 8
    assert ptx.count("div.full.f32") == full  # 128 elements over 4 warps: one a thread
    assert ptx.count(f"div.rn.f{width}") == rounded
    assembles(ptx, "sm_90a")


@pytest.mark.parametrize("dtype, function", [(np.float32, "__nv_fmodf"), (np.float64, "__nv_fmod")])
def test_float_remainder_from_ir_is_libdevice_fmod(dtype, function):
    from polytile.ir import parse_module

    type_ = {np.float32: "f32", np.float64: "f64"}[dtype]
    module = parse_module(f"""
func.func @k(%x: ptr<{type_}>) attributes {{kernel = true}} {{
  %offs = tile.arange {{end = 32, start = 0}} : tile<32xi32>
  %0 = tile.splat %x : tile<32xptr<{type_}>>
  %1 = tile.addptr %0, %offs : tile<32xptr<{type_}>>
  %2 = tile.load %1 : tile<32x{type_}>
  %3 = arith.remf %2, %2 : tile<32x{type_}>
  tile.store %1, %3
  func.return
}}
""")
    result = compile_module(module, "nvidia:sm_90a", num_warps=1)
    assert function in result.context.artifacts["llvm_ir"]
    assert "frem" not in result.context.artifacts["llvm_ir"]


@pt.jit
def scale_and_shift(x, w, b, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(out + offs, pl.load(x + offs) * pl.load(w + offs) + pl.load(b + offs))


@pytest.mark.parametrize("fusion", [True, False])
def test_enable_fp_fusion_decides_whether_a_multiply_add_is_one_fma(fusion):
    v = f32(1024)
    module = scale_and_shift.lower(v, v, v, v, BLOCK=1024)
    ptx = compile_module(module, "nvidia:sm_90a", num_warps=4, enable_fp_fusion=fusion).context.artifacts["ptx"]
    if fusion:
        assert ptx.count("fma.rn.f32") == 8 and "mul.rn.f32" not in ptx and "add.rn.f32" not in ptx
    else:  # explicit rounding: ptxas may not fuse them either
        assert "fma" not in ptx and ptx.count("mul.rn.f32") == 8 and ptx.count("add.rn.f32") == 8
    assembles(ptx, "sm_90a")


@pytest.mark.parametrize("block", [128, 256, 1024, 4096])
@pytest.mark.parametrize("num_warps", [1, 2, 4, 8])
def test_vector_add_sizes_assemble(block, num_warps):
    ptx = compile_ptx(add, f32(), f32(), f32(), 8192, BLOCK=block, num_warps=num_warps)["ptx"]
    assert f".maxntid {32 * num_warps}" in ptx
    assembles(ptx, "sm_90a")


@pt.jit
def math_kernel(x, out, n, scale, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    v = pl.load(x + offs, mask=mask, other=1.0)
    y = pl.exp(v) * scale + pl.where(v > 0.0, pl.sqrt(v), -v)
    pl.store(out + offs, y.to(pl.float16).to(pl.float32), mask=mask)


def test_scalar_arguments_math_select_and_casts():
    artifacts = compile_ptx(math_kernel, f32(), f32(), 8192, 2.5, BLOCK=512, arch="sm_80")
    ptx = artifacts["ptx"]
    assert "ex2.approx.ftz.f32" in ptx  # Triton's exp2: denormal results flush to zero
    assert "sqrt.approx.f32" in ptx  # Triton's sqrt; sqrt_rn is the correctly rounded one
    assert "selp" in ptx or "@%p" in ptx
    assert "cvt.rn.f16.f32" in ptx
    assembles(ptx, "sm_80")


@pt.jit
def sine(x, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(out + offs, pl.sin(pl.load(x + offs)))


def test_libdevice_functions_are_linked_in():
    artifacts = compile_ptx(sine, f32(), f32(), BLOCK=256)
    assert "__nv_sinf" in artifacts["llvm_ir"]
    assert "__nv_sinf" not in artifacts["ptx"]  # linked and inlined, not called
    assembles(artifacts["ptx"], "sm_90a")


@pt.jit
def add_row(x, bias, out, M: pl.constexpr, N: pl.constexpr):
    rows = pl.arange(0, M)[:, None]
    cols = pl.arange(0, N)[None, :]
    b = pl.load(bias + cols)
    pl.store(out + rows * N + cols, pl.load(x + rows * N + cols) + b)


def test_2d_tile_plus_a_broadcast_row():
    ptx = compile_ptx(add_row, f32(), f32(), f32(), M=32, N=64)["ptx"]
    assert "ld.global.v4.b32" in ptx
    assembles(ptx, "sm_90a")


@pt.jit
def accumulate(x, out, n, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    acc = pl.zeros((BLOCK,), pl.float32)
    for i in range(n):
        acc += pl.load(x + i * BLOCK + offs)
    pl.store(out + offs, acc)


def test_loop_carried_tiles():
    artifacts = compile_ptx(accumulate, f32(), f32(), 8, BLOCK=512)
    # One phi per register: 512 elements over 128 threads.
    assert artifacts["llvm_ir"].count("phi  float") == 4
    assembles(artifacts["ptx"], "sm_90a")


@pt.jit
def grid_ids(out):
    p = pl.program_id(0) + pl.program_id(1) * 7 + pl.program_id(2) * 13
    q = pl.num_programs(0) + pl.num_programs(1) + pl.num_programs(2)
    pl.store(out + p, q)


def test_program_ids_and_counts_on_three_axes():
    ptx = compile_ptx(grid_ids, np.zeros(64, np.int32), arch="sm_80")["ptx"]
    for register in ("%ctaid.x", "%ctaid.y", "%ctaid.z", "%nctaid.x", "%nctaid.y", "%nctaid.z"):
        assert register in ptx
    assembles(ptx, "sm_80")


@pt.jit
def row_sum(x, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(out, pl.sum(pl.load(x + offs), axis=0))


def test_ops_not_lowered_yet_name_the_op_kernel_and_line(monkeypatch):
    from polytile.dialects import tile
    from polytile.gpu.lowering import LOWERINGS

    # An op without a lowering (as a plugin op would be): the reduction's, removed here.
    monkeypatch.delitem(LOWERINGS, tile.ReduceOp)
    with pytest.raises(CompilationError) as info:
        compile_ptx(row_sum, f32(), f32(), BLOCK=256)
    message = str(info.value)
    assert "'tile.reduce' is not supported by the NVIDIA backend yet" in message
    assert "kernel 'row_sum'" in message
    assert "test_codegen.py" in message and "pl.sum(pl.load(x + offs), axis=0)" in message
