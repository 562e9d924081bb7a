"""Kernels through the AMD pipeline to HSACO code objects for every architecture: the
notes of each code object (kernel symbol, kernarg layout, wavefront size, LDS size) are
checked against what the compiler decided.  No AMD GPU is needed; ld.lld is (./dev and
.ci install one)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from llvmlite import ir

import polytile.gpu.lowering.reduce  # noqa: F401  (registers tile.reduce; module.py will import it)
import polytile as pt
import polytile.language as pl
from polytile import config
from polytile.errors import PassFailure
from polytile_amd import codegen, devicelibs, toolchain
from polytile_amd.assemble import link_hsaco
from polytile_amd.codegen import amd_gpu_target, emit_amdgcn
from polytile_amd.codeobject import read_code_object
from polytile_amd.errors import DeviceLibsMissingError, OutOfResourcesError

from .kernels import ARCHS, WAVEFRONT, add, compile_amd, erf, f32, grid_size, math_kernel, rowsum, scalars, sine


def notes(artifacts):
    """The code object's entry for the compiled kernel, read back from the HSACO bytes."""
    code_object = read_code_object(artifacts["hsaco"])
    return code_object, code_object.kernel(artifacts["kernel_name"])


def cause(excinfo):
    """The error a pass raised (the pass manager may wrap it)."""
    error = excinfo.value
    return error.__cause__ if isinstance(error, PassFailure) and error.__cause__ else error


@pytest.mark.parametrize("arch", ARCHS)
def test_target_data(arch):
    target = amd_gpu_target(arch)
    assert (target.warp_size, target.kernel_calling_convention) == (WAVEFRONT[arch], "amdgpu_kernel")
    assert (target.triple, target.global_address_space, target.shared_address_space) == ("amdgcn-amd-amdhsa", 1, 3)
    assert "p3:32:32" in target.data_layout  # LDS pointers are 32 bits


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_vector_add_code_object(arch, num_warps):
    artifacts = compile_amd(add, f32(), f32(), f32(), 8192, BLOCK=1024, arch=arch, num_warps=num_warps)
    code_object, kernel = notes(artifacts)
    assert code_object.arch == arch and code_object.version[:1] == (1,)
    assert (kernel.name, kernel.symbol) == ("add", "add.kd")
    assert kernel.wavefront_size == WAVEFRONT[arch]
    assert kernel.max_flat_workgroup_size == num_warps * WAVEFRONT[arch]
    assert kernel.group_segment_fixed_size == artifacts["shared_bytes"] == 0
    assert [(a.name, a.offset, a.size, a.value_kind) for a in kernel.explicit_arguments] == [
        ("x", 0, 8, "global_buffer"), ("y", 8, 8, "global_buffer"), ("out", 16, 8, "global_buffer"),
        ("n", 24, 4, "by_value")]
    assert kernel.kernarg_segment_size == 28
    assert artifacts["amd_code_object"] == kernel.as_dict()
    assert f'"amdgpu-flat-work-group-size"="1,{num_warps * WAVEFRONT[arch]}"' in artifacts["llvm_ir"]
    assert ".amdhsa_code_object_version 5" in artifacts["amdgcn"]
    if 1024 // (num_warps * WAVEFRONT[arch]) >= 4:  # 16-byte accesses: four f32 in one instruction
        assert ("global_load_b128" if arch == "gfx1100" else "global_load_dwordx4") in artifacts["amdgcn"]


@pytest.mark.parametrize("arch", ARCHS)
def test_math_select_and_casts_link(arch):
    artifacts = compile_amd(math_kernel, f32(), f32(), 8192, 2.5, BLOCK=512, arch=arch)
    _, kernel = notes(artifacts)
    assert [a.name for a in kernel.explicit_arguments] == ["x", "out", "n", "scale"]
    assert "llvm.exp2.f32" in artifacts["llvm_ir"] and "llvm.sqrt.f32" in artifacts["llvm_ir"]
    assert "v_exp_f32" in artifacts["amdgcn"]


def test_kernarg_layout_pads_each_argument_to_its_alignment():
    artifacts = compile_amd(scalars, f32(), np.int8(1), np.int64(2), np.float16(1), 2.0, BLOCK=64)
    _, kernel = notes(artifacts)
    assert [(a.name, a.offset, a.size) for a in kernel.explicit_arguments] == [
        ("out", 0, 8), ("a", 8, 1), ("b", 16, 8), ("c", 24, 2), ("d", 28, 4)]
    assert kernel.kernarg_segment_size == 32


@pytest.mark.parametrize("arch", ["gfx942", "gfx1100"])
def test_num_programs_reads_the_dispatch_packet(arch):
    artifacts = compile_amd(grid_size, f32(), arch=arch)
    assert "llvm.amdgcn.dispatch.ptr" in artifacts["llvm_ir"]
    _, kernel = notes(artifacts)
    assert kernel.kernarg_segment_size == 8  # no hidden arguments needed


@pytest.mark.parametrize("arch", ARCHS)
def test_reduction_crosses_lanes_with_dpp_swizzle_bpermute_and_lds(arch):
    artifacts = compile_amd(rowsum, f32(), f32(), 1000, BLOCK=1024, arch=arch)
    _, kernel = notes(artifacts)
    # A butterfly over the whole wavefront: log2(64) steps on wave64, log2(32) on wave32;
    # only the step across wave64's halves (lane ^ 32) needs ds_bpermute (see lanes.py).
    text = artifacts["llvm_ir"]
    moves = {name: text.count(f"call i32 @\"llvm.amdgcn.{name}")
             for name in ("update.dpp", "ds.swizzle", "ds.bpermute")}
    assert sum(moves.values()) == {64: 6, 32: 5}[WAVEFRONT[arch]]
    assert moves["ds.bpermute"] == {64: 1, 32: 0}[WAVEFRONT[arch]]
    assert artifacts["shared_bytes"] > 0
    assert kernel.group_segment_fixed_size == artifacts["shared_bytes"]
    assert "s_barrier" in artifacts["amdgcn"]
    assert ("ds_bpermute_b32" in artifacts["amdgcn"]) == (WAVEFRONT[arch] == 64)


# -- LDS sizing and limits ---------------------------------------------------------------

LDS_KERNEL = """
target triple = "amdgcn-amd-amdhsa"
@"polytile_shared" = external addrspace(3) global [0 x i8], align 16
define amdgpu_kernel void @"k"(ptr addrspace(1) %out) {
entry:
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %p = getelementptr inbounds [0 x i8], ptr addrspace(3) @"polytile_shared", i32 0, i32 %tid
  store i8 1, ptr addrspace(3) %p
  call void @llvm.amdgcn.s.barrier()
  %v = load i8, ptr addrspace(3) %p
  store i8 %v, ptr addrspace(1) %out
  ret void
}
declare i32 @llvm.amdgcn.workitem.id.x()
declare void @llvm.amdgcn.s.barrier()
"""


@pytest.mark.parametrize("arch, size", [("gfx942", 4096), ("gfx1100", 65536), ("gfx950", 100 * 1024)])
def test_lds_size_is_static_in_the_code_object(arch, size):
    emitted = emit_amdgcn(LDS_KERNEL, arch, "k", shared_bytes=size)
    assert f"[{size} x i8] undef" in emitted.llvm_ir
    kernel = read_code_object(link_hsaco(emitted.object, "k", arch)).kernel("k")
    assert kernel.group_segment_fixed_size == size


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942", "gfx1100"])
def test_more_lds_than_the_architecture_has_is_an_error(arch):
    with pytest.raises(OutOfResourcesError) as info:
        emit_amdgcn(LDS_KERNEL, arch, "k", shared_bytes=65536 + 16)
    assert (info.value.kernel, info.value.required, info.value.limit) == ("k", 65552, 65536)
    assert "kernel 'k' needs 65552 bytes of LDS" in str(info.value) and arch in str(info.value)


# -- cross-lane hooks, barrier ----------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
def test_shuffles_of_every_width_select(arch):
    target = amd_gpu_target(arch)
    module = ir.Module()
    module.triple, module.data_layout = target.triple, target.data_layout
    types = [ir.IntType(8), ir.HalfType(), ir.IntType(32), ir.FloatType(), ir.IntType(64), ir.DoubleType()]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType(addrspace=1)] * len(types)), "k")
    fn.calling_convention = "amdgpu_kernel"
    b = ir.IRBuilder(fn.append_basic_block())
    for ptr, type_ in zip(fn.args, types):
        value = b.load(ptr, typ=type_)
        value = target.shuffle_xor(b, value, WAVEFRONT[arch] // 2)
        value = target.shuffle_up(b, value, 3, WAVEFRONT[arch])
        value = target.shuffle_idx(b, value, target.read_id(b, "thread_id", 0))
        target.barrier(b)
        b.store(value, ptr)
    b.ret_void()
    text = str(module)
    assert 'fence syncscope("workgroup") release' in text and 'fence syncscope("workgroup") acquire' in text
    assert ("llvm.amdgcn.mbcnt.hi" in text) == (WAVEFRONT[arch] == 64)
    emitted = emit_amdgcn(text, arch, "k")
    assert "ds_bpermute_b32" in emitted.assembly and "s_barrier" in emitted.assembly
    link_hsaco(emitted.object, "k", arch)


def test_waves_per_eu_option_reaches_the_kernel():
    target = amd_gpu_target("gfx942", 2)
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), []), "k")
    target.annotate_kernel(fn, 256)
    assert '"amdgpu-waves-per-eu"="2,2"' in str(fn) and '"amdgpu-flat-work-group-size"="1,256"' in str(fn)


@pt.jit
def scale_and_shift(x, w, b, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(out + offs, pl.load(x + offs) * pl.load(w + offs) + pl.load(b + offs))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("fusion", [True, False])
def test_enable_fp_fusion_decides_whether_a_multiply_add_is_one_fma(arch, fusion):
    # The core option, honoured as on NVIDIA: with it, LLVM may contract a * b + c into
    # one fused multiply-add (v_fma/v_fmac, rounded once); without it, never.
    v = f32(1024)
    artifacts = compile_amd(scale_and_shift, v, v, v, v, arch=arch, options={"enable_fp_fusion": fusion}, BLOCK=1024)
    assembly = artifacts["amdgcn"]
    fused = re.findall(r"\bv_(?:dual_|pk_)?fmac?_f32", assembly)
    multiplies = re.findall(r"\bv_(?:dual_|pk_)?mul_f32", assembly)
    if fusion:
        assert fused and not multiplies
    else:  # RDNA3 pairs them (v_dual_mul_f32, v_dual_add_f32)
        assert not fused and multiplies and re.search(r"\bv_(?:dual_|pk_)?add_f32", assembly)
        assert "contract" not in artifacts["llvm_ir_optimized"]


# -- math: ocml when found, intrinsics otherwise -------------------------------------------


@pytest.fixture
def no_device_libs(monkeypatch, tmp_path):
    """A machine without ROCm device libraries anywhere polytile looks."""
    monkeypatch.setattr(toolchain, "SYSTEM_DIRECTORIES", ())
    monkeypatch.setattr(toolchain, "ROCM_ROOTS", ())
    toolchain._search.cache_clear()
    with config.override(amd_device_libs=None, rocm_path=tmp_path / "rocm"):
        yield
    toolchain._search.cache_clear()


def test_without_device_libs_sin_uses_the_llvm_intrinsic(no_device_libs):
    artifacts = compile_amd(sine, f32(), f32(), BLOCK=256, arch="gfx942")
    assert "llvm.sin.f32" in artifacts["llvm_ir"] and "__ocml" not in artifacts["llvm_ir"]
    assert "v_sin_f32" in artifacts["amdgcn"]


def test_without_device_libs_erf_says_where_it_looked(no_device_libs, tmp_path):
    with pytest.raises(Exception) as info:
        compile_amd(erf, f32(), f32(), BLOCK=256, arch="gfx942")
    error = cause(info)
    assert isinstance(error, DeviceLibsMissingError)
    message = str(error)
    assert "in kernel 'erf': erf on f32 needs the ROCm device libraries" in message
    assert str(tmp_path / "rocm" / "amdgcn" / "bitcode" / "ocml.bc") in message and "amd_device_libs" in message


def _fake_ocml(directory):
    """An ocml.bc whose erf returns the ISA version it was linked for (a control constant)."""
    module = ir.Module()
    module.triple = codegen.TRIPLE
    version = ir.GlobalVariable(module, ir.IntType(32), "__oclc_ISA_version", addrspace=4)
    version.global_constant = True
    fn = ir.Function(module, ir.FunctionType(ir.FloatType(), [ir.FloatType()]), "__ocml_erf_f32")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(b.sitofp(b.load(version, typ=ir.IntType(32)), ir.FloatType()))
    import llvmlite.binding as llvm

    directory.mkdir()
    (directory / "ocml.bc").write_bytes(llvm.parse_assembly(str(module)).as_bitcode())


@pytest.mark.parametrize("arch, isa", [("gfx90a", 9010), ("gfx942", 9402), ("gfx1100", 11000)])
def test_ocml_is_linked_with_the_control_constants(arch, isa, tmp_path):
    _fake_ocml(tmp_path / "libs")
    toolchain._search.cache_clear()
    try:
        with config.override(amd_device_libs=tmp_path / "libs"):
            artifacts = compile_amd(erf, f32(), f32(), BLOCK=256, arch=arch)
    finally:
        toolchain._search.cache_clear()
    assert "__ocml_erf_f32" in artifacts["llvm_ir"]
    optimized = artifacts["llvm_ir_optimized"]
    assert "__ocml_erf_f32" not in optimized  # inlined, then dropped
    assert f"{float(isa):e}".split("e")[0].rstrip("0") in optimized or hex(isa) in optimized or str(isa) in optimized


def test_a_wrong_device_libs_setting_is_an_error(tmp_path):
    toolchain._search.cache_clear()
    with config.override(amd_device_libs=tmp_path / "nowhere"), pytest.raises(Exception) as info:
        compile_amd(erf, f32(), f32(), BLOCK=256)
    toolchain._search.cache_clear()
    assert "setting 'amd_device_libs'" in str(cause(info)) and "does not exist" in str(cause(info))


REAL_DEVICE_LIBS = toolchain.find_device_libs()


@pytest.mark.skipif(REAL_DEVICE_LIBS is None, reason="no ROCm device libraries here (apt-get install rocm-device-libs)")
@pytest.mark.parametrize("arch", ARCHS)
def test_real_ocml_links_sin_and_erf(arch):
    for kernel in (sine, erf):
        artifacts = compile_amd(kernel, f32(), f32(), BLOCK=256, arch=arch)
        assert "__ocml_" in artifacts["llvm_ir"]
        assert "declare" not in "".join(line for line in artifacts["llvm_ir_optimized"].splitlines()
                                        if "__ocml" in line or "__oclc" in line)
        notes(artifacts)


def test_an_lds_declaration_in_an_unexpected_form_is_an_error_not_dynamic_lds():
    from polytile.errors import PolytileError
    from polytile.gpu.lowering.context import SHARED_MEMORY_SYMBOL
    from polytile_amd.codegen import size_lds

    expected = f'@"{SHARED_MEMORY_SYMBOL}" = external addrspace(3) global [0 x i8], align 16\n'
    assert "[256 x i8]" in size_lds(expected, 256)
    odd = f'@"{SHARED_MEMORY_SYMBOL}" = external hidden addrspace(3) global [0 x i8], align 16\n'
    with pytest.raises(PolytileError, match="cannot size the LDS array to 256 bytes"):
        size_lds(odd, 256)
    assert size_lds("define void @k() {\n  ret void\n}\n", 256).startswith("define")  # no LDS used


# -- code generation runs once; the assembly is made when something reads it -------------


@pytest.fixture
def codegen_runs(monkeypatch):
    """How many times LLVM's code generation ran, by what it made (llvmlite's
    ``emit_object`` and ``emit_assembly`` each run it)."""
    machine = codegen.binding().TargetMachine
    runs = {"emit_object": 0, "emit_assembly": 0}
    for name in list(runs):
        def counted(self, module, _original=getattr(machine, name), _name=name):
            runs[_name] += 1
            return _original(self, module)

        monkeypatch.setattr(machine, name, counted)
    return runs


def _vgpr_and_sgpr_counts(assembly):
    """The register counts the assembly's metadata (``amdhsa.kernels``) declares."""
    import re

    return tuple(int(re.search(rf"^\s*\.{what}_count:\s+(\d+)$", assembly, re.MULTILINE).group(1))
                 for what in ("vgpr", "sgpr"))


@pytest.mark.parametrize("arch", ARCHS)
def test_a_compile_runs_code_generation_once_and_the_assembly_only_when_read(arch, codegen_runs):
    from polytile.compiler import compile_module

    result = compile_module(add.lower(f32(), f32(), f32(), 8192, BLOCK=1024), f"amd:{arch}", num_warps=4)
    assert codegen_runs == {"emit_object": 1, "emit_assembly": 0}
    assert "amdgcn" not in result.binaries and "amdgcn" not in result.metadata  # nothing for the cache to keep
    assembly = result.artifacts["amdgcn"]
    assert codegen_runs == {"emit_object": 1, "emit_assembly": 1}
    assert ".amdhsa_code_object_version 5" in assembly and "add:" in assembly
    # The assembly is the code of the linked object: the registers it declares are the code object's.
    _, kernel = notes(result.artifacts)
    assert _vgpr_and_sgpr_counts(assembly) == (kernel.vgpr_count, kernel.sgpr_count)
    assert result.artifacts["amdgcn"] is assembly and result.context.artifacts["amdgcn"] is assembly
    assert codegen_runs == {"emit_object": 1, "emit_assembly": 1}


def test_a_jit_compile_into_the_cache_runs_code_generation_once(codegen_runs, tmp_path):
    from polytile.ir import types as t

    with config.override(cache_dir=str(tmp_path)):
        compiled = add.compile({"x": t.PointerType(t.f32), "y": t.PointerType(t.f32), "out": t.PointerType(t.f32),
                                "n": t.i32}, {"BLOCK": 1024}, target="amd:gfx942")
    assert codegen_runs == {"emit_object": 1, "emit_assembly": 0}
    assert not compiled.from_disk and sorted(compiled.binaries) == ["amdgpu_object", "hsaco"]
    assert not list(tmp_path.glob("kernels/*/*/amdgcn*"))


@pytest.mark.parametrize("after, printed", [("emit-amdgcn", True), ("link-hsaco", False)])
def test_an_ir_dump_makes_the_assembly_where_it_shows_it(after, printed, codegen_runs, capsys):
    from polytile.compiler import compile_module

    with config.override(print_ir_after=[after]):
        compile_module(add.lower(f32(), f32(), f32(), 8192, BLOCK=1024), "amd:gfx942", num_warps=4)
    err = capsys.readouterr().err
    assert ("// -----// amdgcn after emit-amdgcn (assemble) //----- //" in err) == printed
    assert (".amdhsa_code_object_version 5" in err) == printed
    assert codegen_runs == {"emit_object": 1, "emit_assembly": int(printed)}
