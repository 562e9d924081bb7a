"""Math on AMD: the ROCm device libraries (ocml bitcode) when found, else LLVM intrinsics.

The AMDGPU backend lowers some math intrinsics itself (``llvm.exp2``, ``llvm.log2``,
``llvm.sqrt`` on f16/f32; ``llvm.sin``/``llvm.cos`` on f16/f32 through ``v_sin_f32``,
accurate only near zero).  Everything else (erf, pow, f64 transcendental functions) must
come from ocml; LLVM stops the process on a math call it cannot select, so a function
with neither is a :class:`~.errors.DeviceLibsMissingError` at lowering time, listing
where the libraries were looked for.

Which source a function uses is decided when the kernel is lowered, from whether ocml is
found; the library's directory enters the compile cache key (``AmdBackend.versions``).

ocml reads its options from ``__oclc_*`` constants, normally linked in from the
``oclc_*.bc`` control libraries.  Those files differ between ROCm releases (older ones
have no ``oclc_isa_version_942.bc``), so the constants are defined here, with the values
the control libraries for these options hold: IEEE denormals, no fast math, correctly
rounded f32 sqrt, the architecture's wavefront size and ISA version, code object ABI 5.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Callable

from llvmlite import ir

from polytile.gpu.lowering.elementwise import LOG2E, intrinsic
from polytile.gpu.lowering.types import BFloatType

from .architectures import ARCHITECTURES
from .errors import DeviceLibsMissingError
from .toolchain import OCML, find_device_libs, not_found_error

OCML_PREFIX = "__ocml_"
# --------------------------------------------------------------------------------------
# The math table of the AMD GpuTarget

_F32 = ir.FloatType()
Emitter = Callable[[Any, list, ir.Type], Any]


def _type_name(type_: ir.Type) -> str:
    return {ir.HalfType: "f16", BFloatType: "bf16", ir.FloatType: "f32", ir.DoubleType: "f64"}[type(type_)]


def _ocml_call(ctx: Any, name: str, args: list, type_: ir.Type) -> Any:
    if isinstance(type_, BFloatType):
        # ocml has no bf16 functions: computed in f32 and rounded back, as on NVIDIA.
        b = ctx.builder
        wide = [b.fpext(a, _F32) for a in args]
        return b.fptrunc(ctx.call(f"{OCML_PREFIX}{name}_f32", _F32, wide), type_)
    return ctx.call(f"{OCML_PREFIX}{name}_{_type_name(type_)}", type_, args)


def _missing(ctx: Any, name: str, type_: ir.Type) -> DeviceLibsMissingError:
    return DeviceLibsMissingError(f"in kernel '{ctx.kernel}': {name} on {_type_name(type_)} needs the ROCm device "
                                  f"libraries on AMD (LLVM has no {name} of its own there), and they were not "
                                  f"found.\n{not_found_error()}")


def _ocml_or(fallback: Emitter | None, types: tuple[type, ...] = (ir.HalfType, ir.FloatType)) -> Callable[[str], Emitter]:
    """ocml when found; else ``fallback`` for the element types in ``types``; else an error."""
    def make(name: str) -> Emitter:
        def emit(ctx: Any, args: list, type_: ir.Type) -> Any:
            if find_device_libs() is not None:
                return _ocml_call(ctx, name, args, type_)
            if fallback is not None and isinstance(type_, types):
                return fallback(ctx, args, type_)
            raise _missing(ctx, name, type_)
        return emit
    return make


def _intrinsic_or_ocml(llvm_name: str) -> Callable[[str], Emitter]:
    """The LLVM intrinsic on f16/f32 (AMDGPU selects it to one instruction); ocml on f64."""
    def make(name: str) -> Emitter:
        def emit(ctx: Any, args: list, type_: ir.Type) -> Any:
            if not isinstance(type_, ir.DoubleType):
                return intrinsic(ctx, llvm_name, args)
            if find_device_libs() is not None:
                return _ocml_call(ctx, name, args, type_)
            raise _missing(ctx, name, type_)
        return emit
    return make


def _exp(ctx: Any, args: list, type_: ir.Type) -> Any:
    if isinstance(type_, ir.DoubleType):
        return _intrinsic_or_ocml("exp2")("exp")(ctx, args, type_)
    return intrinsic(ctx, "exp2", [ctx.builder.fmul(args[0], ir.Constant(type_, LOG2E))])


def _rsqrt(ctx: Any, args: list, type_: ir.Type) -> Any:
    return ctx.builder.fdiv(ir.Constant(type_, 1.0), intrinsic(ctx, "sqrt", args))


def _llvm(name: str) -> Emitter:
    return lambda ctx, args, type_: intrinsic(ctx, name, args)


#: Functions of the C math library that ocml provides and LLVM has no AMDGPU lowering of
#: (polytile.dialects.math's libdevice ops); the same names as NVIDIA's libdevice table.
LIBM_FUNCTIONS = ("acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "cosh", "sinh", "tan", "tanh", "erfc",
                  "exp10", "expm1", "log10", "log1p", "lgamma", "tgamma", "atan2", "hypot", "nextafter", "fdim")

MATH: dict[str, Emitter] = {
    "exp": _exp,
    "exp2": _intrinsic_or_ocml("exp2")("exp2"),
    "log": _intrinsic_or_ocml("log")("log"),
    "log2": _intrinsic_or_ocml("log2")("log2"),
    "sin": _ocml_or(_llvm("sin"))("sin"),
    "cos": _ocml_or(_llvm("cos"))("cos"),
    "rsqrt": _ocml_or(_rsqrt, (ir.HalfType, ir.FloatType, ir.DoubleType))("rsqrt"),
    "erf": _ocml_or(None)("erf"),
    "pow": _ocml_or(None)("pow"),
    # ocml's fmod is exact; LLVM's frem expansion (x - trunc(x / y) * y) can be off by the
    # quotient's rounding, so it serves only where the device libraries are missing.
    "fmod": _ocml_or(lambda ctx, args, type_: ctx.builder.frem(*args),
                     (ir.HalfType, ir.FloatType, ir.DoubleType))("fmod"),
    # The C math library's functions (pl.extra.libdevice): ocml only.
    **{name: _ocml_or(None)(name) for name in LIBM_FUNCTIONS},
}


# --------------------------------------------------------------------------------------
# device_print: ockl's printf over the hostcall buffer the HIP runtime gives a kernel

OCKL = "ockl.bc"
OCKL_PREFIX = "__ockl_"

_I32, _I64 = ir.IntType(32), ir.IntType(64)
#: __ockl_printf_append_args takes this many 64-bit values per call.
_PRINTF_ARGUMENTS_PER_CALL = 7


def _declare(module: ir.Module, name: str, return_type: ir.Type, argument_types: list) -> ir.Function:
    found = module.globals.get(name)
    return found if found is not None else ir.Function(module, ir.FunctionType(return_type, argument_types), name)


def _format_string(builder: ir.IRBuilder, text: bytes) -> Any:
    module = builder.module
    array = ir.ArrayType(ir.IntType(8), len(text))
    variable = ir.GlobalVariable(module, array, f"polytile.printf.{len(module.globals)}", addrspace=1)
    variable.global_constant = True
    variable.linkage = "private"
    variable.initializer = ir.Constant(array, bytearray(text))
    return builder.addrspacecast(variable, ir.PointerType())


def _as_i64(builder: ir.IRBuilder, value: Any) -> Any:
    # The arguments come promoted as for C varargs (i32, i64, double, pointers); ockl
    # takes each as 64 bits and the host side reads them back by the format.
    if isinstance(value.type, ir.DoubleType):
        return builder.bitcast(value, _I64)
    if isinstance(value.type, ir.PointerType):
        return builder.ptrtoint(value, _I64)
    return value if value.type == _I64 else builder.zext(value, _I64)


def printf(builder: ir.IRBuilder, format_: str, arguments: list) -> None:
    """Print from one thread: the format string, then the arguments seven at a time."""
    if find_device_libs() is None:
        raise DeviceLibsMissingError(f"device_print on AMD needs ockl's printf from the ROCm device libraries.\n"
                                     f"{not_found_error()}")
    module = builder.module
    begin = _declare(module, "__ockl_printf_begin", _I64, [_I64])
    append_string = _declare(module, "__ockl_printf_append_string_n", _I64, [_I64, ir.PointerType(), _I64, _I32])
    append_args = _declare(module, "__ockl_printf_append_args", _I64,
                           [_I64, _I32] + [_I64] * _PRINTF_ARGUMENTS_PER_CALL + [_I32])
    text = format_.encode() + b"\0"
    message = builder.call(begin, [ir.Constant(_I64, 0)])
    message = builder.call(append_string, [message, _format_string(builder, text), ir.Constant(_I64, len(text)),
                                           ir.Constant(_I32, int(not arguments))])
    for start in range(0, len(arguments), _PRINTF_ARGUMENTS_PER_CALL):
        group = [_as_i64(builder, a) for a in arguments[start:start + _PRINTF_ARGUMENTS_PER_CALL]]
        padding = [ir.Constant(_I64, 0)] * (_PRINTF_ARGUMENTS_PER_CALL - len(group))
        last = start + _PRINTF_ARGUMENTS_PER_CALL >= len(arguments)
        message = builder.call(append_args, [message, ir.Constant(_I32, len(group)), *group, *padding,
                                             ir.Constant(_I32, int(last))])


def assert_fail(builder: ir.IRBuilder, message: str, file: str, line: int, function: str) -> None:
    """As HIP's ``__assert_fail``: print where the assertion failed, then trap (the HIP
    runtime reports the wave's trap and the launch fails)."""
    where = f"{file}:{line}: {function}: Device-side assertion `{message}' failed.\n"
    printf(builder, where.replace("%", "%%"), [])
    builder.call(_declare(builder.module, "llvm.trap", ir.VoidType(), []), [])


# --------------------------------------------------------------------------------------
# Linking ocml (math) and ockl (printf) into a kernel's module


def _controls(arch: str) -> dict[str, tuple[str, int]]:
    """The ``__oclc_*`` constants ocml reads, as (LLVM type, value)."""
    gfx = arch[3:]
    # oclc_isa_version_<gfx>.bc holds major * 1000 + minor * 100 + stepping ("90a": 9, 0, 10).
    major, minor, stepping = int(gfx[:-2]), int(gfx[-2], 16), int(gfx[-1], 16)
    return {
        "__oclc_finite_only_opt": ("i8", 0),
        "__oclc_unsafe_math_opt": ("i8", 0),
        "__oclc_daz_opt": ("i8", 0),
        "__oclc_correctly_rounded_sqrt32": ("i8", 1),
        "__oclc_wavefrontsize64": ("i8", int(ARCHITECTURES[arch].wavefront_size == 64)),
        "__oclc_ISA_version": ("i32", major * 1000 + minor * 100 + stepping),
        "__oclc_ABI_version": ("i32", 500),
    }


def _control_module(llvm: Any, arch: str, names: list[str], triple: str, data_layout: str) -> Any:
    lines = [f'target triple = "{triple}"', f'target datalayout = "{data_layout}"']
    for name in names:
        type_, value = _controls(arch)[name]
        lines.append(f"@{name} = linkonce_odr protected local_unnamed_addr addrspace(4) constant {type_} {value}, "
                     f"align {1 if type_ == 'i8' else 4}")
    return llvm.parse_assembly("\n".join(lines) + "\n")


#: ockl's empty inline-asm statements ("; ockl ballot hoisting hack $0"): they only keep
#: old LLVMs from moving a value, and llvmlite's object emitter, which has no AMDGPU asm
#: parser, aborts the process on any inline asm.  Each becomes a ``freeze`` of its operand.
_EMPTY_ASM = re.compile(r'(?:tail )?call i32 asm sideeffect "; [^"]*", "=v,0"\((i32 [^)]+)\)[^\n]*')


@functools.lru_cache(maxsize=4)
def _ocml_bitcode(path: Path) -> bytes:
    if path.name != OCKL:
        return path.read_bytes()
    import llvmlite.binding as llvm

    text = str(llvm.parse_bitcode(path.read_bytes()))
    return llvm.parse_assembly(_EMPTY_ASM.sub(r"freeze \1", text)).as_bitcode()


def link_into(llvm: Any, module: Any, arch: str, kernel: str) -> None:
    """Link ocml and ockl into ``module`` (a parsed llvmlite module) when it calls
    ``__ocml_*`` or ``__ockl_*`` functions."""
    declared = [f.name for f in module.functions if f.is_declaration]
    libraries = [library for library, prefix in ((OCML, OCML_PREFIX), (OCKL, OCKL_PREFIX))
                 if any(name.startswith(prefix) for name in declared)]
    if not libraries:
        return
    directory = find_device_libs()
    if directory is None:  # found when the kernel was lowered, gone now
        needed = [name for name in declared if name.startswith((OCML_PREFIX, OCKL_PREFIX))]
        raise DeviceLibsMissingError(f"in kernel '{kernel}': {', '.join(needed)} come from the ROCm device libraries, "
                                     f"which are no longer found.\n{not_found_error()}")
    for name in libraries:
        library = llvm.parse_bitcode(_ocml_bitcode(directory / name))
        library.triple = module.triple
        library.data_layout = module.data_layout
        module.link_in(library)
    undefined = [g.name for g in module.global_variables if g.is_declaration and g.name.startswith("__oclc_")]
    unknown = [name for name in undefined if name not in _controls(arch)]
    if unknown:
        raise DeviceLibsMissingError(f"in kernel '{kernel}': the ocml in {directory} reads option(s) "
                                     f"{', '.join(unknown)} that polytile does not know; point 'amd_device_libs' at "
                                     "the device libraries of a ROCm release from 5.2 to 6.x")
    if undefined:
        module.link_in(_control_module(llvm, arch, undefined, module.triple, module.data_layout))
    # Internal: unused library functions go away at -O3, used ones get inlined.
    for function in module.functions:
        if not function.is_declaration and function.name.startswith(("__ocml_", "__ockl_")):
            function.linkage = llvm.Linkage.internal


__all__ = ["MATH", "OCKL_PREFIX", "OCML_PREFIX", "assert_fail", "link_into", "printf"]
