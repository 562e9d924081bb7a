"""AMD's side of the GPU lowering: the :class:`~polytile.gpu.lowering.GpuTarget` of an
architecture, and the ``emit-amdgcn`` pass (LLVM IR to an object, and AMDGCN assembly
when something reads it).

The target: triple ``amdgcn-amd-amdhsa``, ``amdgpu_kernel`` entry points, wavefronts of
64 lanes on gfx9 and 32 on gfx11, ids from ``llvm.amdgcn.workitem.id.*`` and
``llvm.amdgcn.workgroup.id.*``, the grid size from the HSA dispatch packet, barriers as
``s_barrier`` between workgroup-scope fences, and cross-lane moves through
``ds_bpermute`` (any lane of the wavefront, wave64 included), DPP or ``ds_swizzle`` for
butterfly steps that stay in a quad, row or half-wave (see :mod:`.lanes`).  Math goes to the ROCm
device libraries (``__ocml_*``) when they are found, else to LLVM intrinsics the AMDGPU
backend lowers itself (see :mod:`.devicelibs`).

Shared memory is LDS (address space 3).  The lowering leaves one zero-sized external
array for it; ``emit-amdgcn`` gives it the size the memory stage computed, so the code
object declares it (``.group_segment_fixed_size``) and launches pass no dynamic LDS.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from llvmlite import ir

from polytile.errors import PolytileError
from polytile.gpu.lowering import SHARED_BYTES, GpuTarget
from polytile.gpu.lowering.context import SHARED_MEMORY_SYMBOL
from polytile.gpu.lowering.dot import register_matrix_unit
from polytile.gpu.lowering.types import bit_width
from polytile.llvm_codegen import EmitFromLLVM, optimized_module, target_machine
from polytile.llvm_codegen import llvm as binding
from polytile.passes.artifacts import DeferredArtifact
from polytile.passes.instrumentation import register_artifact_extension
from polytile.passes.pass_base import PassContext

from . import devicelibs, lanes
from .architectures import ARCHITECTURES
from .errors import OutOfResourcesError
from .matrix import AMD_MATRIX

TRIPLE = "amdgcn-amd-amdhsa"
#: Artifact keys this backend adds (next to the core's 'llvm_ir').
AMDGCN = "amdgcn"
AMDGPU_OBJECT = "amdgpu_object"
LLVM_IR_OPTIMIZED = "llvm_ir_optimized"
register_artifact_extension(AMDGPU_OBJECT, "o")
register_artifact_extension(LLVM_IR_OPTIMIZED, "opt.ll")

_I16 = ir.IntType(16)
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_XYZ = "xyz"


def _declare(module: ir.Module, name: str, return_type: ir.Type, argument_types: list) -> ir.Function:
    found = module.globals.get(name)
    return found if found is not None else ir.Function(module, ir.FunctionType(return_type, argument_types), name)


def _call(builder: ir.IRBuilder, name: str, return_type: ir.Type, args: list) -> Any:
    return builder.call(_declare(builder.module, name, return_type, [a.type for a in args]), args)


# --------------------------------------------------------------------------------------
# Ids, barrier, cross-lane moves


#: hsa_kernel_dispatch_packet_t: workgroup_size_x/y/z are u16 from byte 4, grid_size_x/y/z
#: (work-items, not workgroups) u32 from byte 12.
_DISPATCH_WORKGROUP_SIZE = 4
_DISPATCH_GRID_SIZE = 12


def _dispatch_field(builder: ir.IRBuilder, offset: int, type_: ir.IntType) -> Any:
    packet = _call(builder, "llvm.amdgcn.dispatch.ptr", ir.PointerType(addrspace=4), [])
    address = builder.gep(packet, [ir.Constant(_I64, offset)], inbounds=True, source_etype=ir.IntType(8))
    return builder.load(address, typ=type_, align=type_.width // 8)


def read_id(builder: ir.IRBuilder, kind: str, axis: int) -> Any:
    if kind == "thread_id":
        return _call(builder, f"llvm.amdgcn.workitem.id.{_XYZ[axis]}", _I32, [])
    if kind == "block_id":
        return _call(builder, f"llvm.amdgcn.workgroup.id.{_XYZ[axis]}", _I32, [])
    # The packet counts work-items; HIP launches whole workgroups, so the quotient is exact.
    items = _dispatch_field(builder, _DISPATCH_GRID_SIZE + 4 * axis, _I32)
    group = builder.zext(_dispatch_field(builder, _DISPATCH_WORKGROUP_SIZE + 2 * axis, _I16), _I32)
    return builder.udiv(items, group)


def processor_id_reader(fields: tuple) -> Any:
    """``read_processor_id`` for an architecture whose compute unit id is in ``fields``
    (see ``AmdArchitecture.processor_id_fields``)."""
    def read_processor_id(builder: ir.IRBuilder) -> Any:
        packed, shift = None, 0
        for register, offset, bits in fields:
            # s_getreg_b32's immediate: register, offset << 6, (bits - 1) << 11.
            code = ir.Constant(_I32, register | offset << 6 | (bits - 1) << 11)
            field = _call(builder, "llvm.amdgcn.s.getreg", _I32, [code])
            if shift:
                field = builder.shl(field, ir.Constant(_I32, shift))
            packed = field if packed is None else builder.or_(packed, field)
            shift += bits
        return packed
    return read_processor_id


def barrier(builder: ir.IRBuilder) -> None:
    # s_barrier alone orders execution, not memory: the fences make LDS writes before it
    # visible to reads after it, as __syncthreads() does in HIP.
    builder.fence("release", "workgroup")
    _call(builder, "llvm.amdgcn.s.barrier", ir.VoidType(), [])
    builder.fence("acquire", "workgroup")


def lane_id(builder: ir.IRBuilder, warp_size: int) -> Any:
    """This lane's index in its wavefront (``mbcnt``: the active lanes below it, all of them)."""
    low = _call(builder, "llvm.amdgcn.mbcnt.lo", _I32, [ir.Constant(_I32, -1), ir.Constant(_I32, 0)])
    if warp_size == 32:
        return low
    return _call(builder, "llvm.amdgcn.mbcnt.hi", _I32, [ir.Constant(_I32, -1), low])


def bpermute(builder: ir.IRBuilder, value: Any, source_lane: Any) -> Any:
    """The ``value`` of lane ``source_lane`` (an i32), for values of up to 64 bits
    (``ds_bpermute_b32`` moves 32 bits; wider values move in halves)."""
    address = builder.shl(source_lane, ir.Constant(_I32, 2))  # ds_bpermute takes a byte address
    width = bit_width(value.type)
    is_int = isinstance(value.type, ir.IntType)
    bits = value if is_int else builder.bitcast(value, ir.IntType(width))

    def move(word: Any) -> Any:
        return _call(builder, "llvm.amdgcn.ds.bpermute", _I32, [address, word])

    if width == 64:
        halves = [move(builder.trunc(builder.lshr(bits, ir.Constant(_I64, shift)), _I32)) for shift in (0, 32)]
        wide = [builder.zext(h, _I64) for h in halves]
        out = builder.or_(wide[0], builder.shl(wide[1], ir.Constant(_I64, 32)))
    elif width < 32:
        out = builder.trunc(move(builder.zext(bits, _I32)), ir.IntType(width))
    else:
        out = move(bits)
    return out if is_int else builder.bitcast(out, value.type)


def warp_uniform(builder: ir.IRBuilder, value: Any) -> Any:
    # readfirstlane: the value lives in a scalar register (SGPR), as Triton's AMD backend
    # does with the wave index, so what is computed from it stays scalar too.
    return _call(builder, "llvm.amdgcn.readfirstlane.i32", _I32, [value])


def _shuffles(warp_size: int) -> tuple[Any, Any, Any]:
    def shuffle_xor(builder: ir.IRBuilder, value: Any, lane_mask: int) -> Any:
        lane = lane_id(builder, warp_size)
        return bpermute(builder, value, builder.xor(lane, ir.Constant(_I32, lane_mask)))

    def shuffle_up(builder: ir.IRBuilder, value: Any, delta: int, span: int = 0) -> Any:
        lane = lane_id(builder, warp_size)
        below = builder.icmp_unsigned("<", lane, ir.Constant(_I32, delta))
        source = builder.select(below, lane, builder.sub(lane, ir.Constant(_I32, delta)))
        return bpermute(builder, value, source)

    def shuffle_idx(builder: ir.IRBuilder, value: Any, lane: Any) -> Any:
        if not isinstance(lane, ir.Value):
            lane = ir.Constant(_I32, lane)
        return bpermute(builder, value, lane)

    return shuffle_xor, shuffle_up, shuffle_idx


class _KernelAttributes(ir.values.FunctionAttributes):
    """Function attributes that also take LLVM's ``"key"="value"`` string attributes,
    which llvmlite's list of known names leaves out."""

    def add(self, name: str) -> None:
        if name.startswith('"'):
            set.add(self, name)
        else:
            super().add(name)


def _annotate(waves_per_eu: int) -> Any:
    def annotate_kernel(function: ir.Function, num_threads: int) -> None:
        attributes = _KernelAttributes(function.attributes)
        # Registers are allocated for exactly this workgroup size; launching more fails.
        attributes.add(f'"amdgpu-flat-work-group-size"="1,{num_threads}"')
        if waves_per_eu:
            attributes.add(f'"amdgpu-waves-per-eu"="{waves_per_eu},{waves_per_eu}"')
        function.attributes = attributes
    return annotate_kernel


# --------------------------------------------------------------------------------------
# The target


# The matrix cores the lowering finds by the target's backend_name for tile.dot:
# registered here, with the target they serve; owned by this backend, they leave with it.
register_matrix_unit("AMD", AMD_MATRIX)


@functools.lru_cache(maxsize=None)
def data_layout(arch: str) -> str:
    return str(target_machine(TRIPLE, arch).target_data)


#: Turning inline assembly into machine code needs the target's assembly parser, which the
#: LLVM built into llvmlite lacks for AMDGPU (its code generation would stop the process:
#: "Inline asm not supported by this streamer"); an external llvm-mc would need the
#: LLVM of llvmlite's generation to read its output.
INLINE_ASM_REFUSAL = ("the AMD backend cannot compile inline assembly yet: the LLVM inside llvmlite has no AMDGPU "
                      "assembly parser, which turning it into machine code needs")


@functools.lru_cache(maxsize=None)
def amd_gpu_target(arch: str, waves_per_eu: int = 0, matrix_instr_nonkdim: int = 0) -> GpuTarget:
    """The lowering's target data for ``arch`` ("gfx942"), with the options ``waves_per_eu``
    and ``matrix_instr_nonkdim`` (0: the compiler chooses)."""
    warp_size = ARCHITECTURES[arch].wavefront_size
    shuffle_xor, shuffle_up, shuffle_idx = _shuffles(warp_size)
    return GpuTarget(
        backend_name="AMD", arch=arch, triple=TRIPLE, data_layout=data_layout(arch), warp_size=warp_size,
        kernel_calling_convention="amdgpu_kernel", read_id=read_id, barrier=barrier,
        read_processor_id=processor_id_reader(ARCHITECTURES[arch].processor_id_fields),
        steady_clock_period_ns=10,  # the real-time counter runs at 100 MHz
        shuffle_xor=lanes.shuffle_xor_hook(arch, shuffle_xor),
        shuffle_up=lanes.shuffle_up_hook(arch, shuffle_up), shuffle_idx=shuffle_idx, warp_uniform=warp_uniform,
        math=devicelibs.MATH, printf=devicelibs.printf,
        assert_fail=devicelibs.assert_fail, annotate_kernel=_annotate(waves_per_eu),
        global_address_space=1, shared_address_space=3, math_library_prefix=devicelibs.OCML_PREFIX,
        matrix_options={"nonkdim": matrix_instr_nonkdim} if matrix_instr_nonkdim else {},
        inline_asm_refusal=INLINE_ASM_REFUSAL,
        # No max_shared_bytes: the LDS plugin (polytile-lds) checks the limit after
        # allocate-shared and tries its remedies first; emit-amdgcn refuses what is left over.
    )


# --------------------------------------------------------------------------------------
# LLVM IR -> AMDGCN


_SHARED_DECLARATION = re.compile(
    r'^@"?' + re.escape(SHARED_MEMORY_SYMBOL) + r'"? = external addrspace\(3\) global \[0 x i8\](, align \d+)?$',
    re.MULTILINE)


def size_lds(llvm_ir: str, shared_bytes: int) -> str:
    """Give the module's shared memory array ``shared_bytes`` bytes of static LDS.

    AMDGPU reports static LDS in the code object (``.group_segment_fixed_size``), which
    the driver and the LDS checks read; a zero-sized external array would be dynamic LDS
    that every launch has to ask for.
    """
    if not shared_bytes:
        return llvm_ir
    replacement = (f'@"{SHARED_MEMORY_SYMBOL}" = internal addrspace(3) global [{shared_bytes} x i8] undef, '
                   "align 16")
    sized, count = _SHARED_DECLARATION.subn(replacement, llvm_ir)
    if not count and f"@{SHARED_MEMORY_SYMBOL}" in llvm_ir.replace('"', ""):
        # Left unsized, the array would be dynamic LDS the launcher never asks for: every
        # access out of bounds.  A declaration printed in an unexpected form must not pass.
        line = next(l for l in llvm_ir.splitlines() if SHARED_MEMORY_SYMBOL in l)
        raise PolytileError(f"internal error: cannot size the LDS array to {shared_bytes} bytes; its declaration "
                            f"has an unexpected form: {line.strip()}")
    return sized if count else llvm_ir


# Code object version 5 loads on ROCm 5.x and 6.x; LLVM 22 defaults to 6, which needs a
# ROCm 6.2 or newer runtime.  A metadata id far above llvmlite's keeps the two apart.
_CODE_OBJECT_VERSION = ('\n!llvm.module.flags = !{!90000}\n'
                        '!90000 = !{i32 1, !"amdhsa_code_object_version", i32 500}\n')


class Emitted:
    """What :func:`emit_amdgcn` made: the optimized LLVM IR and the relocatable object,
    from one run of LLVM's code generation.  ``assembly``, the AMDGCN text, is a second
    run (llvmlite's ``emit_assembly`` and ``emit_object`` each run code generation), made
    only when it is first read."""

    def __init__(self, llvm_ir: str, object: bytes, arch: str):
        self.llvm_ir = llvm_ir
        self.object = object
        self.arch = arch
        self._assembly: str | None = None

    @property
    def assembly(self) -> str:
        if self._assembly is None:
            self._assembly = amdgcn_assembly(self.llvm_ir, self.arch)
        return self._assembly


def emit_amdgcn(llvm_ir: str, arch: str, kernel: str = "kernel", shared_bytes: int = 0) -> Emitted:
    """Optimized LLVM IR and a relocatable object for ``arch`` (and, when read, the AMDGCN
    assembly of that object)."""
    limit = ARCHITECTURES[arch].lds_bytes
    if shared_bytes > limit:
        # LLVM would stop the whole process on this ("local memory limit exceeded").
        raise OutOfResourcesError(kernel=kernel, resource="LDS (shared memory)", need=shared_bytes, limit=limit,
                                  target=arch, per="workgroup",
                                  hint="use smaller blocks or fewer warps")
    module, machine = optimized_module(size_lds(llvm_ir, shared_bytes) + _CODE_OBJECT_VERSION, TRIPLE, arch,
                                       link=lambda llvm, module: devicelibs.link_into(llvm, module, arch, kernel))
    optimized = str(module)
    # The object comes from a parse of the optimized text, as the assembly does when it is
    # asked for: the same input to the same code generation, so the assembly is the code
    # in the object (a module parsed from its printed text may order its uses otherwise,
    # which code generation can see).  Code generation changes the module it runs on.
    return Emitted(optimized, machine.emit_object(binding().parse_assembly(optimized)), arch)


def amdgcn_assembly(optimized_ir: str, arch: str) -> str:
    """The AMDGCN assembly of ``optimized_ir`` (the LLVM IR :func:`emit_amdgcn` optimized
    for ``arch``, artifact 'llvm_ir_optimized'): LLVM's code generation run again on it."""
    return target_machine(TRIPLE, arch, "").emit_assembly(binding().parse_assembly(optimized_ir))


@dataclass
class EmitAMDGCN(EmitFromLLVM):
    """LLVM IR (artifact 'llvm_ir') to a relocatable object (artifact 'amdgpu_object')
    with LLVM's AMDGPU backend, and its AMDGCN assembly (artifact 'amdgcn'), made only
    when read (an IR dump, an ahead-of-time compile, ``CompileResult.artifacts``: see
    :mod:`polytile.passes.artifacts`), since it costs a second run of code generation."""

    name: ClassVar[str] = "emit-amdgcn"
    summary: ClassVar[str] = "LLVM IR to an object (and, when read, AMDGCN assembly) through the AMDGPU target machine"

    def emit(self, llvm_ir: str, context: PassContext, kernel: str) -> None:
        emitted = emit_amdgcn(llvm_ir, context.target.arch, kernel, int(context.artifacts.get(SHARED_BYTES, 0)))
        context.artifacts[LLVM_IR_OPTIMIZED] = emitted.llvm_ir
        context.artifacts[AMDGCN] = DeferredArtifact(lambda: emitted.assembly)
        context.artifacts[AMDGPU_OBJECT] = emitted.object


__all__ = ["AMDGCN", "AMDGPU_OBJECT", "EmitAMDGCN", "Emitted", "amd_gpu_target", "amdgcn_assembly", "bpermute",
           "emit_amdgcn", "size_lds"]
