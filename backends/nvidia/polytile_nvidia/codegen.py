"""NVIDIA's side of the GPU lowering: target data, intrinsics, and LLVM IR to PTX.

:func:`nvidia_gpu_target` gives the :class:`~polytile.gpu.lowering.GpuTarget` of an
architecture: NVPTX triple and data layout, 32-lane warps, ``ptx_kernel`` entry points,
``llvm.nvvm.read.ptx.sreg.*`` ids, and the math table: ``exp`` and ``exp2`` as Triton
does them (``ex2.approx.f32``; exp(x) = 2^(x * log2 e)), the other transcendental
functions from libdevice (``__nv_sinf``...), linked in by :class:`EmitPTX` when a kernel
uses them.

:class:`EmitPTX` (``emit-ptx``, in the ``assemble`` stage) parses the LLVM IR the
``lower-to-llvm`` pass left, links libdevice if needed, and runs LLVM's NVPTX backend at
-O3; the PTX goes into the artifacts as ``"ptx"``.  Assembling it into a cubin is the
next pass of the same stage (see :mod:`.assemble`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar

from llvmlite import ir

from polytile.errors import PolytileError
from polytile.gpu.lowering import LLVM_IR, GpuTarget
from polytile.gpu.lowering.elementwise import LOG2E
from polytile.passes.pass_base import Pass, PassContext, PreservedAnalyses

from .architectures import ARCHITECTURES

TRIPLE = "nvptx64-nvidia-cuda"
DATA_LAYOUT = "e-p3:32:32-p4:32:32-p5:32:32-p6:32:32-p7:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"
#: PTX ISA version emitted for every architecture: 8.0 covers sm_80 to sm_90a (CUDA 12.0+).
PTX_FEATURES = "+ptx80"
WARP_SIZE = 32
PTX = "ptx"
LIBDEVICE_PREFIX = "__nv_"

_SPECIAL_REGISTERS = {"thread_id": "tid", "block_id": "ctaid", "num_blocks": "nctaid"}
_I32 = ir.IntType(32)
_F32 = ir.FloatType()


def _declare(module: ir.Module, name: str, return_type: ir.Type, argument_types: list) -> ir.Function:
    found = module.globals.get(name)
    return found if found is not None else ir.Function(module, ir.FunctionType(return_type, argument_types), name)


def read_id(builder: ir.IRBuilder, kind: str, axis: int) -> Any:
    name = f"llvm.nvvm.read.ptx.sreg.{_SPECIAL_REGISTERS[kind]}.{'xyz'[axis]}"
    return builder.call(_declare(builder.module, name, _I32, []), [])


def barrier(builder: ir.IRBuilder) -> None:
    builder.asm(ir.FunctionType(ir.VoidType(), []), "bar.sync 0;", "~{memory}", [], side_effect=True)


def _shuffle(builder: ir.IRBuilder, mode: str, value: Any, lane: Any, clamp: int) -> Any:
    """``shfl.sync.<mode>`` of any value up to 64 bits wide (wider ones move in 32-bit halves)."""
    width = value.type.width if isinstance(value.type, ir.IntType) else \
        {ir.HalfType: 16, ir.FloatType: 32, ir.DoubleType: 64}.get(type(value.type), 32)
    if not isinstance(lane, ir.Value):
        lane = ir.Constant(_I32, lane)
    fn = _declare(builder.module, f"llvm.nvvm.shfl.sync.{mode}.i32", _I32, [_I32, _I32, _I32, _I32])
    bits = builder.bitcast(value, ir.IntType(width)) if not isinstance(value.type, ir.IntType) else value
    if width == 64:
        halves = [builder.trunc(builder.lshr(bits, ir.Constant(bits.type, shift)), _I32) for shift in (0, 32)]
        moved = [builder.call(fn, [ir.Constant(_I32, -1), h, lane, ir.Constant(_I32, clamp)]) for h in halves]
        wide = [builder.zext(m, ir.IntType(64)) for m in moved]
        out = builder.or_(wide[0], builder.shl(wide[1], ir.Constant(ir.IntType(64), 32)))
    else:
        as_i32 = builder.zext(bits, _I32) if width < 32 else bits
        out = builder.call(fn, [ir.Constant(_I32, -1), as_i32, lane, ir.Constant(_I32, clamp)])
        out = builder.trunc(out, ir.IntType(width)) if width < 32 else out
    return builder.bitcast(out, value.type) if not isinstance(value.type, ir.IntType) else out


def shuffle_xor(builder: ir.IRBuilder, value: Any, lane_mask: int) -> Any:
    return _shuffle(builder, "bfly", value, lane_mask, 0x1F)


def shuffle_up(builder: ir.IRBuilder, value: Any, delta: int) -> Any:
    # c = 0: lanes below delta keep their own value (PTX shfl.up semantics).
    return _shuffle(builder, "up", value, delta, 0)


def shuffle_idx(builder: ir.IRBuilder, value: Any, lane: Any) -> Any:
    return _shuffle(builder, "idx", value, lane, 0x1F)


def annotate_kernel(function: ir.Function, num_threads: int) -> None:
    # ptxas allocates registers for this block size (.maxntid); launching more fails.
    module = function.module
    module.add_named_metadata("nvvm.annotations", [function, ir.MetaDataString(module, "maxntidx"),
                                                   ir.Constant(_I32, num_threads)])


def _in_f32(emit: Any) -> Any:
    """Compute a f16 (or f32) function in f32: the approximate instructions exist for f32."""
    def lower(ctx: Any, args: list, type_: ir.Type) -> Any:
        b = ctx.builder
        wide = [b.fpext(a, _F32) if a.type != _F32 else a for a in args]
        result = emit(ctx, wide)
        return b.fptrunc(result, type_) if type_ != _F32 else result
    return lower


def _ex2(ctx: Any, args: list) -> Any:
    return ctx.call("llvm.nvvm.ex2.approx.f", _F32, args)


def _exp(ctx: Any, args: list) -> Any:
    return _ex2(ctx, [ctx.builder.fmul(args[0], ir.Constant(_F32, LOG2E))])


def _libdevice(name: str) -> Any:
    """``__nv_<name>f`` on f32 (f16 computes in f32), ``__nv_<name>`` on f64."""
    def lower(ctx: Any, args: list, type_: ir.Type) -> Any:
        b = ctx.builder
        if isinstance(type_, ir.DoubleType):
            return ctx.call(f"{LIBDEVICE_PREFIX}{name}", type_, args)
        wide = [b.fpext(a, _F32) if a.type != _F32 else a for a in args]
        result = ctx.call(f"{LIBDEVICE_PREFIX}{name}f", _F32, wide)
        return b.fptrunc(result, type_) if type_ != _F32 else result
    return lower


def _approx_or_libdevice(approx: Any, name: str) -> Any:
    fast, slow = _in_f32(approx), _libdevice(name)
    return lambda ctx, args, type_: slow(ctx, args, type_) if isinstance(type_, ir.DoubleType) else \
        fast(ctx, args, type_)


MATH = {
    "exp": _approx_or_libdevice(_exp, "exp"),
    "exp2": _approx_or_libdevice(_ex2, "exp2"),
    "log": _libdevice("log"),
    "log2": _libdevice("log2"),
    "sin": _libdevice("sin"),
    "cos": _libdevice("cos"),
    "erf": _libdevice("erf"),
    "rsqrt": _libdevice("rsqrt"),
    "pow": _libdevice("pow"),
}


@functools.lru_cache(maxsize=None)
def nvidia_gpu_target(arch: str) -> GpuTarget:
    """The lowering's target data for ``arch`` ("sm_90a")."""
    return GpuTarget(
        backend_name="NVIDIA", arch=arch, triple=TRIPLE, data_layout=DATA_LAYOUT,
        warp_size=ARCHITECTURES[arch].warp_size, kernel_calling_convention="ptx_kernel", read_id=read_id,
        barrier=barrier, shuffle_xor=shuffle_xor, shuffle_up=shuffle_up, shuffle_idx=shuffle_idx, math=MATH, annotate_kernel=annotate_kernel,
        math_library_prefix=LIBDEVICE_PREFIX,
    )


# --------------------------------------------------------------------------------------
# LLVM IR -> PTX


class LibdeviceMissingError(PolytileError):
    """A kernel calls a libdevice function and libdevice cannot be found."""


def _llvm() -> Any:
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


@functools.lru_cache(maxsize=None)
def _target_machine(arch: str) -> Any:
    llvm = _llvm()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=arch, features=PTX_FEATURES, opt=3)


def _link_libdevice(llvm: Any, module: Any, kernel: str, needed: list[str]) -> None:
    from .libdevice import find_libdevice
    from .toolkit import ToolkitNotFoundError

    try:
        path = find_libdevice()
    except ToolkitNotFoundError as exc:
        raise LibdeviceMissingError(f"kernel '{kernel}' calls {', '.join(needed)} from libdevice, the CUDA math "
                                    f"library, which was not found:\n{exc}") from None
    library = llvm.parse_bitcode(path.read_bytes())
    library.triple = module.triple
    library.data_layout = module.data_layout
    module.link_in(library)
    for function in module.functions:
        if not function.is_declaration and function.name.startswith(LIBDEVICE_PREFIX):
            function.linkage = llvm.Linkage.internal


# libdevice asks NVVMReflect whether denormals flush to zero: they do not.  A metadata id
# far above what llvmlite numbers from 0 keeps the two apart.
_REFLECT_FLAGS = '!llvm.module.flags = !{!90000}\n!90000 = !{i32 4, !"nvvm-reflect-ftz", i32 0}\n'


def emit_ptx(llvm_ir: str, arch: str, kernel: str = "kernel") -> str:
    """PTX for ``arch`` from LLVM IR text (libdevice linked in when it is called)."""
    llvm = _llvm()
    needed = sorted({name for name in _declared(llvm_ir) if name.startswith(LIBDEVICE_PREFIX)})
    module = llvm.parse_assembly(llvm_ir + ("\n" + _REFLECT_FLAGS if needed else ""))
    if needed:
        _link_libdevice(llvm, module, kernel, needed)
    module.verify()
    machine = _target_machine(arch)
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(module, builder)
    return machine.emit_assembly(module)


def _declared(llvm_ir: str) -> list[str]:
    names = []
    for line in llvm_ir.splitlines():
        if line.startswith("declare "):
            at = line.find("@")
            names.append(line[at + 1:line.find("(", at)].strip('"'))
    return names


@dataclass
class EmitPTX(Pass):
    """LLVM IR (artifact 'llvm_ir') to PTX (artifact 'ptx') with LLVM's NVPTX backend."""

    name: ClassVar[str] = "emit-ptx"
    summary: ClassVar[str] = "LLVM IR to PTX through the NVPTX target machine"

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        llvm_ir = context.artifacts.get(LLVM_IR)
        if llvm_ir is None:
            raise PolytileError("emit-ptx needs the LLVM IR that lower-to-llvm makes; put it after lower-to-llvm")
        arch = context.target.arch
        context.artifacts[PTX] = emit_ptx(llvm_ir, arch, context.artifacts.get("kernel_name", "kernel"))
        return PreservedAnalyses.all()


#: The artifact holding the cubin that ptx-to-cubin makes.
CUBIN = "cubin"


@dataclass
class PtxToCubin(Pass):
    """PTX (artifact 'ptx') to a cubin (artifact 'cubin') with nvJitLink or ptxas, as the
    setting ``nvidia_assembler`` chooses (see :mod:`polytile_nvidia.assemble`)."""

    name: ClassVar[str] = "ptx-to-cubin"
    summary: ClassVar[str] = "PTX to a cubin through nvJitLink or ptxas"

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        from .assemble import ptx_to_cubin

        ptx = context.artifacts.get(PTX)
        if ptx is None:
            raise PolytileError("ptx-to-cubin needs the PTX that emit-ptx makes; put it after emit-ptx")
        context.artifacts[CUBIN] = ptx_to_cubin(ptx, context.target.arch,
                                                kernel_name=context.artifacts.get("kernel_name", "kernel"),
                                                options=context.options)
        return PreservedAnalyses.all()


__all__ = ["CUBIN", "EmitPTX", "LibdeviceMissingError", "MATH", "PtxToCubin", "emit_ptx", "nvidia_gpu_target"]
