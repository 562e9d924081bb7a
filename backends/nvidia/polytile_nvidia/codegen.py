"""NVIDIA's side of the GPU lowering: target data, intrinsics, and LLVM IR to PTX.

:func:`nvidia_gpu_target` gives the :class:`~polytile.gpu.lowering.GpuTarget` of an
architecture: NVPTX triple and data layout, 32-lane warps, ``ptx_kernel`` entry points,
``llvm.nvvm.read.ptx.sreg.*`` ids, and the math table: ``exp``, ``exp2`` and ``sqrt`` as
Triton does them (``ex2.approx.ftz.f32``, exp(x) = 2^(x * log2 e), denormal results flushed to
zero; ``sqrt.approx.f32``), the other transcendental
functions from libdevice (``__nv_sinf``...), linked in by :class:`EmitPTX` when a kernel
uses them.

:class:`EmitPTX` (``emit-ptx``, in the ``assemble`` stage) parses the LLVM IR the
``lower-to-llvm`` pass left, links libdevice if needed, and runs LLVM's NVPTX backend at
-O3; the PTX goes into the artifacts as ``"ptx"``.  Assembling it into a cubin is the
next pass of the same stage (see :mod:`.assemble`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from llvmlite import ir

from polytile.errors import PolytileError
from polytile.gpu.lowering import GpuTarget
from polytile.gpu.lowering.async_copy import register_async_copy_unit
from polytile.gpu.lowering.dot import register_matrix_unit
from polytile.gpu.lowering.elementwise import LOG2E
from polytile.gpu.lowering.mbarrier import register_barrier_unit
from polytile.gpu.lowering.types import bit_width
from polytile.llvm_codegen import EmitFromLLVM, link_library, optimized_module
from polytile.passes.pass_base import Pass, PassContext, PreservedAnalyses

from .architectures import ARCHITECTURES
from .async_copy import NVIDIA_ASYNC_COPY
from .mbarrier import NVIDIA_BARRIERS
from .mma import NVIDIA_MMA
from .registers import cubin_registers, register_budget, threads_per_block, with_register_cap

TRIPLE = "nvptx64-nvidia-cuda"
DATA_LAYOUT = "e-p3:32:32-p4:32:32-p5:32:32-p6:32:32-p7:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"
#: PTX ISA version emitted for every architecture: 8.0 covers sm_80 to sm_90a (CUDA 12.0+).
PTX_FEATURES = "+ptx80"
#: Inline PTX that needs a newer ISA, and that ISA: (text in the LLVM IR, features).  Only
#: the kernels that use it ask an assembler for more than CUDA 12.0's; a kernel that uses
#: several gets the newest they ask for.
NEWER_PTX = (
    # Tensor maps built on the device (PTX ISA 8.3 has them; ptxas reads the byte strides
    # of tensormap.replace right from ISA 8.6 on, so ask for the fp8 ISA below).
    ("tensormap.replace", "+ptx87"),
    # The tensor-map proxy's acquire alone (a kernel that reads maps another one wrote).
    ("fence.proxy.tensormap", "+ptx83"),
    (".e4m3.e4m3.f16", "+ptx87"),  # mma.sync, fp8 into f16 (sm_89+): PTX ISA 8.7, CUDA 12.8
    (".e5m2.e5m2.f16", "+ptx87"),
    (".e4m3.e4m3.f32", "+ptx84"),  # mma.sync, fp8 into f32 (sm_89+): PTX ISA 8.4, CUDA 12.4
    (".e5m2.e5m2.f32", "+ptx84"),
)
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


def read_processor_id(builder: ir.IRBuilder) -> Any:
    """``%smid``: the SM the program runs on."""
    return builder.call(_declare(builder.module, "llvm.nvvm.read.ptx.sreg.smid", _I32, []), [])


def barrier(builder: ir.IRBuilder) -> None:
    builder.asm(ir.FunctionType(ir.VoidType(), []), "bar.sync 0;", "~{memory}", [], side_effect=True)


def named_barrier(builder: ir.IRBuilder, index: Any, threads: int, arrive: bool = False) -> None:
    instruction = "bar.arrive" if arrive else "bar.sync"
    if isinstance(index, int):
        builder.asm(ir.FunctionType(ir.VoidType(), []), f"{instruction} {index}, {threads};", "~{memory}", [],
                    side_effect=True)
    else:
        builder.asm(ir.FunctionType(ir.VoidType(), [_I32]), f"{instruction} $0, {threads};", "r,~{memory}", [index],
                    side_effect=True)


def set_max_registers(builder: ir.IRBuilder, count: int, increase: bool) -> None:
    # sm_90a: every warp of the warp group executes it (.sync.aligned).
    direction = "inc" if increase else "dec"
    builder.asm(ir.FunctionType(ir.VoidType(), []), f"setmaxnreg.{direction}.sync.aligned.u32 {count};", "", [],
                side_effect=True)


def _shuffle(builder: ir.IRBuilder, mode: str, value: Any, lane: Any, clamp: int) -> Any:
    """``shfl.sync.<mode>`` of any value up to 64 bits wide (wider ones move in 32-bit halves)."""
    width = bit_width(value.type)
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


def shuffle_up(builder: ir.IRBuilder, value: Any, delta: int, span: int = 32) -> Any:
    # c = 0: the whole warp is one segment, lanes below delta keep their own value (PTX
    # shfl.up); every lane at least delta into its span is at least delta into the warp.
    return _shuffle(builder, "up", value, delta, 0)


def shuffle_idx(builder: ir.IRBuilder, value: Any, lane: Any) -> Any:
    return _shuffle(builder, "idx", value, lane, 0x1F)


def warp_uniform(builder: ir.IRBuilder, value: Any) -> Any:
    # The value of lane 0: ptxas then knows every lane holds the same, and keeps what is
    # computed from it (a warpgroup's wgmma descriptors, shared addresses) in uniform
    # registers instead of moving it there (R2UR) before each use.
    return shuffle_idx(builder, value, ir.Constant(_I32, 0))


def annotate_kernel(function: ir.Function, num_threads: int) -> None:
    # ptxas allocates registers for this block size (.maxntid); launching more fails.
    module = function.module
    module.add_named_metadata("nvvm.annotations", [function, ir.MetaDataString(module, "maxntidx"),
                                                   ir.Constant(_I32, num_threads)])


def grid_constant(function: ir.Function, index: int) -> None:
    # A byval parameter the kernel takes the address of is copied to local memory unless
    # it is a grid constant: then its address is the parameter's own (cvta.param).
    module = function.module
    module.add_named_metadata("nvvm.annotations", [function, ir.MetaDataString(module, "grid_constant"),
                                                   module.add_metadata([ir.Constant(_I32, index + 1)])])


def _in_f32(emit: Any) -> Any:
    """Compute a f16 (or f32) function in f32: the approximate instructions exist for f32."""
    def lower(ctx: Any, args: list, type_: ir.Type) -> Any:
        b = ctx.builder
        wide = [b.fpext(a, _F32) if a.type != _F32 else a for a in args]
        result = emit(ctx, wide)
        return b.fptrunc(result, type_) if type_ != _F32 else result
    return lower


def _ex2(ctx: Any, args: list) -> Any:
    # ftz, as Triton's: results below 2^-126 (and denormal inputs) flush to zero, and
    # the instruction is one MUFU.EX2; without it ptxas scales around every one of them
    # for denormals (three more instructions, 32 of them per attention iteration).
    return ctx.call("llvm.nvvm.ex2.approx.ftz.f", _F32, args)


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


def _sqrt_approx(ctx: Any, args: list) -> Any:
    return ctx.call("llvm.nvvm.sqrt.approx.f", _F32, args)


def _sqrt(ctx: Any, args: list, type_: ir.Type) -> Any:
    """``sqrt`` as Triton's: ``sqrt.approx.f32`` (``sqrt_rn`` is the correctly rounded
    one); f64 stays correctly rounded."""
    if isinstance(type_, ir.DoubleType):
        return ctx.call("llvm.sqrt.f64", type_, args)
    return _in_f32(_sqrt_approx)(ctx, args, type_)


def _div(ctx: Any, args: list, type_: ir.Type) -> Any:
    """``/`` as Triton's: ``div.full.f32`` (within 2 ulp, a reciprocal and a multiply,
    where div.rn.f32 is a Newton iteration with a slow path); ``div_rn`` is the correctly
    rounded one.  Other widths divide correctly rounded (f16/bf16 through f32)."""
    if type_ == _F32:
        return ctx.call("llvm.nvvm.div.full", _F32, args)
    return ctx.builder.fdiv(*args)


MATH = {
    "div": _div,
    # LLVM's frem on NVPTX is x - trunc(x / y) * y, off by the rounding of the quotient;
    # libdevice's fmod is exact.
    "fmod": _libdevice("fmod"),
    "exp": _approx_or_libdevice(_exp, "exp"),
    "exp2": _approx_or_libdevice(_ex2, "exp2"),
    "sqrt": _sqrt,
    "log": _libdevice("log"),
    "log2": _libdevice("log2"),
    "sin": _libdevice("sin"),
    "cos": _libdevice("cos"),
    "erf": _libdevice("erf"),
    "rsqrt": _libdevice("rsqrt"),
    "pow": _libdevice("pow"),
    # The C math library's functions (pl.extra.libdevice, Triton's tl.extra.cuda.libdevice).
    **{name: _libdevice(name) for name in ("acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "cosh", "sinh",
                                           "tan", "tanh", "erfc", "exp10", "expm1", "log10", "log1p", "lgamma",
                                           "tgamma", "atan2", "hypot", "nextafter", "fdim")},
}


# --------------------------------------------------------------------------------------
# Atomics, printf, assertions, qualified memory accesses, fp8 conversions: inline PTX

#: PTX register constraint by bit width (8-bit values travel in 16-bit registers).
_CONSTRAINT = {8: "h", 16: "h", 32: "r", 64: "l"}
_ATOM_OPS = {"add": "add.u", "fadd": "add.f", "max": "max.s", "min": "min.s", "umax": "max.u", "umin": "min.u",
             "and": "and.b", "or": "or.b", "xor": "xor.b", "xchg": "exch.b"}


def _width(type_: ir.Type) -> int:
    from polytile.gpu.lowering.types import bit_width

    return bit_width(type_)


def _bits_of(value: Any) -> int:
    return _width(value.type)


def _as_bits(builder: ir.IRBuilder, value: Any) -> Any:
    width = _bits_of(value)
    bits = value if isinstance(value.type, ir.IntType) else builder.bitcast(value, ir.IntType(width))
    return builder.zext(bits, ir.IntType(16)) if width == 8 else bits


def _from_bits(builder: ir.IRBuilder, bits: Any, type_: ir.Type) -> Any:
    width = _width(type_)
    if width == 8:
        bits = builder.trunc(bits, ir.IntType(8))
    return bits if bits.type == type_ else builder.bitcast(bits, type_)


def _predicated(mask: Any) -> tuple[str, str, list]:
    """(prefix of the guarded instruction, constraint, operand) for an optional i1 mask."""
    return ("", "", []) if mask is None else ("@$P ", ",b", [mask])


def _inline(builder: ir.IRBuilder, text: str, outputs: list[str], inputs: list[str], args: list,
            result: ir.Type) -> Any:
    """Inline PTX; ``$P`` in ``text`` names the predicate operand (the last input)."""
    constraints = ",".join(outputs + inputs)
    if "$P" in text:
        text = text.replace("$P", f"${constraints.count(',')}")
    constraints += ",~{memory}"
    return builder.asm(ir.FunctionType(result, [a.type for a in args]), text, constraints, args, side_effect=True)


def _atom_type(kind: str, value: Any) -> str | None:
    width = _bits_of(value)
    if kind == "fadd":
        if isinstance(value.type, ir.HalfType):
            return "add.noftz.f16"
        return {32: "add.f32", 64: "add.f64"}.get(width) if width != 16 else None
    if width not in (32, 64):
        return None
    return f"{_ATOM_OPS[kind]}{width}"


def _atomic_rmw_hook(arch: str) -> Any:
    def atomic_rmw(builder: ir.IRBuilder, kind: str, ptr: Any, value: Any, mask: Any, sem: str, scope: str,
                   returns: bool) -> Any:
        from polytile.gpu.lowering.target import NO_INSTRUCTION
        from polytile.gpu.lowering.types import BFloatType

        op = _atom_type(kind, value)
        if kind == "fadd" and isinstance(value.type, BFloatType) and ARCHITECTURES[arch].compute_capability >= (9, 0):
            op = "add.noftz.bf16"
        if op is None:
            return NO_INSTRUCTION
        guard, pred, extra = _predicated(mask)
        bits = _as_bits(builder, value)
        c = _CONSTRAINT[_bits_of(value)]
        # Always atom, its result unused or not (as Triton; nothing waits for an old value no
        # instruction reads), with the scope before the ordering as Triton writes it.
        zero = f"mov.b{max(_bits_of(value), 16)} $0, 0;\n\t" if mask is not None else ""
        old = _inline(builder, f"{zero}{guard}atom.global.{scope}.{sem}.{op} $0, [$1], $2;", ["=" + c],
                      ["l", c + pred], [ptr, bits, *extra], bits.type)
        return _from_bits(builder, old, value.type)
    return atomic_rmw


def atomic_cas(builder: ir.IRBuilder, ptr: Any, compare: Any, value: Any, mask: Any, sem: str, scope: str) -> Any:
    width = _bits_of(value)
    c = _CONSTRAINT[width]
    guard, pred, extra = _predicated(mask)
    zero = f"mov.b{width} $0, 0;\n\t" if mask is not None else ""
    # Ordering, then scope: Triton's spelling of compare-and-swap (its test_atomic_cas reads
    # "atom.global.<sem>"), where its other atomics put the scope first.
    return _inline(builder, f"{zero}{guard}atom.global.{sem}.{scope}.cas.b{width} $0, [$1], $2, $3;", ["=" + c],
                   ["l", c, c + pred], [ptr, compare, value, *extra], value.type)


def _string(module: ir.Module, text: str, prefix: str) -> ir.GlobalVariable:
    """A NUL-terminated constant string in global memory (one per distinct text)."""
    data = bytearray(text.encode()) + b"\0"
    name = f"{prefix}.{len(module.globals)}"
    for existing in module.globals.values():
        if getattr(existing, "_polytile_text", None) == bytes(data):
            return existing
    array = ir.ArrayType(ir.IntType(8), len(data))
    variable = ir.GlobalVariable(module, array, name, addrspace=1)
    variable.global_constant = True
    variable.linkage = "private"
    variable.initializer = ir.Constant(array, data)
    variable._polytile_text = bytes(data)
    return variable


def _generic(builder: ir.IRBuilder, variable: ir.GlobalVariable) -> Any:
    return builder.addrspacecast(variable, ir.PointerType())


def printf(builder: ir.IRBuilder, format_: str, arguments: list) -> None:
    """``vprintf(format, buffer)``: the arguments packed in a local struct, each at its
    natural alignment, as the CUDA runtime's printf expects."""
    module = builder.module
    vprintf = _declare(module, "vprintf", _I32, [ir.PointerType(), ir.PointerType()])
    fmt = _generic(builder, _string(module, format_, "polytile.printf"))
    if not arguments:
        builder.call(vprintf, [fmt, ir.Constant(ir.PointerType(), None)])
        return
    struct = ir.LiteralStructType([a.type for a in arguments])
    with builder.goto_entry_block():
        typed = builder.alloca(struct)
        # An opaque pointer: llvmlite checks stores through a typed one against the struct.
        buffer = ir.instructions.CastInstr(builder.block, "bitcast", typed, ir.PointerType())
        builder._insert(buffer)
    for i, argument in enumerate(arguments):
        builder.store(argument, builder.gep(buffer, [_I32(0), _I32(i)], source_etype=struct))
    builder.call(vprintf, [fmt, buffer])


def assert_fail(builder: ir.IRBuilder, message: str, file: str, line: int, function: str) -> None:
    """``__assertfail``: the CUDA runtime prints the message and stops the kernel (the
    launch then fails with CUDA_ERROR_ASSERT)."""
    module = builder.module
    i64 = ir.IntType(64)
    fail = _declare(module, "__assertfail", ir.VoidType(), [ir.PointerType(), ir.PointerType(), _I32,
                                                             ir.PointerType(), i64])
    strings = [_generic(builder, _string(module, text, "polytile.assert")) for text in (message, file, function)]
    builder.call(fail, [strings[0], strings[1], _I32(line), strings[2], ir.Constant(i64, 1)])


def _ptx_qualifiers(kind: str, qualifiers: Any) -> str:
    """``.volatile.global``, ``.global.cg`` or ``.global.L1::evict_last``: ptxas takes no
    cache operator or eviction priority on a volatile access, and not both together (the
    cache operator wins; evict_normal is the default and is left out)."""
    if qualifiers.volatile:
        return ".volatile.global"
    if qualifiers.cache:
        return ".global" + qualifiers.cache
    if qualifiers.evict and qualifiers.evict != "evict_normal":
        return ".global.L1::" + qualifiers.evict
    return ".global"


def memory_access(builder: ir.IRBuilder, kind: str, ptr: Any, vector: ir.VectorType, mask: Any, values: Any,
                  qualifiers: Any) -> Any:
    """One vector load or store in inline PTX with the op's qualifiers
    (``ld.global.cg.L1::evict_last.v4.b32``), predicated by ``mask`` (``@p ld...``) as
    Triton does, which keeps a kernel's masked accesses straight-line; a vector moves as
    32-bit words when it has whole words, else element by element.  For a masked load,
    ``values`` (or None: zeros) are the elements the masked-off vector keeps."""
    element_bits = _width(vector.element)
    total = element_bits * vector.count
    word = 32 if total % 32 == 0 else element_bits
    count = total // word
    c = _CONSTRAINT[word]
    word_type = ir.IntType(max(word, 16) if word == 8 else word)
    guard, pred, extra = _predicated(mask)
    spelled = _ptx_qualifiers(kind, qualifiers) + (f".v{count}" if count > 1 else "") + f".b{word}"
    if kind == "load":
        names = ", ".join(f"${i}" for i in range(count))
        names = f"{{{names}}}" if count > 1 else names
        others = _pack_words(builder, values, word, vector) if mask is not None and values is not None else []
        # The masked-off value first, then the predicated load over it (no select after).
        sources = [f"${count + 1 + i}" for i in range(len(others))] or ["0"] * count
        initial = "".join(f"mov.b{max(word, 16)} ${i}, {sources[i]};\n\t" for i in range(count)) \
            if mask is not None else ""
        result = ir.LiteralStructType([word_type] * count) if count > 1 else word_type
        inputs = ["l"] + [c] * len(others)
        inputs[-1] += pred
        loaded = _inline(builder, f"{initial}{guard}ld{spelled} {names}, [${count}];", ["=" + c] * count,
                         inputs, [ptr, *others, *extra], result)
        words = [builder.extract_value(loaded, i) for i in range(count)] if count > 1 else [loaded]
        return _unpack(builder, words, word, vector)
    words = _pack_words(builder, values, word, vector)
    names = ", ".join(f"${i + 1}" for i in range(count))
    names = f"{{{names}}}" if count > 1 else names
    _inline(builder, f"{guard}st{spelled} [$0], {names};", [], ["l"] + [c] * (count - 1) + [c + pred],
            [ptr, *words, *extra], ir.VoidType())
    return None


def _unpack(builder: ir.IRBuilder, words: list, word: int, vector: ir.VectorType) -> list:
    if word == _width(vector.element) or word == 8:
        return [_from_bits(builder, w, vector.element) for w in words]
    packed = ir.Constant(ir.VectorType(ir.IntType(word), len(words)), None)
    for i, w in enumerate(words):
        packed = builder.insert_element(packed, w, _I32(i))
    elements = builder.bitcast(packed, vector)
    return [builder.extract_element(elements, _I32(i)) for i in range(vector.count)]


def _pack_words(builder: ir.IRBuilder, values: list, word: int, vector: ir.VectorType) -> list:
    if word == _width(vector.element) or word == 8:
        return [_as_bits(builder, v) for v in values]
    packed = ir.Constant(vector, None)
    for i, v in enumerate(values):
        packed = builder.insert_element(packed, v, _I32(i))
    count = vector.count * _width(vector.element) // word
    words = builder.bitcast(packed, ir.VectorType(ir.IntType(word), count))
    return [builder.extract_element(words, _I32(i)) for i in range(count)]


def _float8_convert_hook(arch: str) -> Any:
    """``cvt`` between f32/f16 and the 8-bit floats on sm_90 and later; None elsewhere
    (the core converts with integer code).  Ada (sm_89) has the instructions too, but
    only from PTX ISA 8.1, and every architecture is emitted as PTX 8.0."""
    if ARCHITECTURES[arch].compute_capability < (9, 0):
        return None

    def convert(builder: ir.IRBuilder, value: Any, source: str, result: str) -> Any:
        name = {"f8e4m3": "e4m3x2", "f8e5m2": "e5m2x2"}
        if source == "f32" and result in name:
            # The pair's first operand lands in the upper byte: convert (0, value).
            pair = _inline(builder, f"cvt.rn.satfinite.{name[result]}.f32 $0, $1, $2;", ["=h"], ["f", "f"],
                           [ir.Constant(_F32, 0.0), value], ir.IntType(16))
            return builder.trunc(pair, ir.IntType(8))
        if source in name and result == "f16":
            halves = _inline(builder, f"cvt.rn.f16x2.{name[source]} $0, $1;", ["=r"], ["h"],
                             [builder.zext(value, ir.IntType(16))], _I32)
            return builder.bitcast(builder.trunc(halves, ir.IntType(16)), ir.HalfType())
        return None
    return convert


# The units the lowering finds by the target's backend_name: tensor cores (mma.sync,
# wgmma) for tile.dot, cp.async for the pipelined loads, mbarriers for their rings.
# Registered here, with the target they serve; owned by this backend, they leave with it.
register_matrix_unit("NVIDIA", NVIDIA_MMA)
register_async_copy_unit("NVIDIA", NVIDIA_ASYNC_COPY)
register_barrier_unit("NVIDIA", NVIDIA_BARRIERS)


@functools.lru_cache(maxsize=None)
def nvidia_gpu_target(arch: str, enable_wgmma: bool = True) -> GpuTarget:
    """The lowering's target data for ``arch`` ("sm_90a"); ``enable_wgmma=False``: the
    matrix unit keeps mma.sync on sm_90a (the backend option of that name)."""
    return GpuTarget(
        backend_name="NVIDIA", arch=arch, triple=TRIPLE, data_layout=DATA_LAYOUT,
        warp_size=ARCHITECTURES[arch].warp_size, kernel_calling_convention="ptx_kernel", read_id=read_id,
        read_processor_id=read_processor_id, barrier=barrier, shuffle_xor=shuffle_xor, shuffle_up=shuffle_up,
        shuffle_idx=shuffle_idx,
        warp_uniform=warp_uniform, math=MATH, annotate_kernel=annotate_kernel, by_value_parameter=grid_constant,
        math_library_prefix=LIBDEVICE_PREFIX,
        max_shared_bytes=ARCHITECTURES[arch].shared_memory_per_block_optin, float8_convert=_float8_convert_hook(arch),
        atomic_rmw=_atomic_rmw_hook(arch), atomic_cas=atomic_cas, printf=printf, assert_fail=assert_fail,
        memory_access=memory_access, matrix_options={} if enable_wgmma else {"wgmma": False},
        named_barrier=named_barrier, registers_per_program=ARCHITECTURES[arch].registers_per_sm,
        # setmaxnreg is in the arch-specific feature set, as wgmma is.
        set_max_registers=set_max_registers if ARCHITECTURES[arch].has_wgmma else None,
    )


# --------------------------------------------------------------------------------------
# LLVM IR -> PTX


class LibdeviceMissingError(PolytileError):
    """A kernel calls a libdevice function and libdevice cannot be found."""


def ptx_features(llvm_ir: str) -> str:
    """The PTX ISA the module needs: :data:`PTX_FEATURES`, or the newest any of its inline
    PTX asks for (:data:`NEWER_PTX`)."""
    needed = [features for text, features in NEWER_PTX if text in llvm_ir]
    return max(needed, key=lambda features: int(features[len("+ptx"):]), default=PTX_FEATURES)


def _link_libdevice(module: Any, kernel: str, needed: list[str]) -> None:
    from .libdevice import find_libdevice
    from .toolkit import ToolkitNotFoundError

    try:
        path = find_libdevice()
    except ToolkitNotFoundError as exc:
        raise LibdeviceMissingError(f"kernel '{kernel}' calls {', '.join(needed)} from libdevice, the CUDA math "
                                    f"library, which was not found:\n{exc}") from None
    link_library(module, path.read_bytes(), internal=(LIBDEVICE_PREFIX,))


# libdevice asks NVVMReflect whether denormals flush to zero: they do not.  A metadata id
# far above what llvmlite numbers from 0 keeps the two apart.
_REFLECT_FLAGS = '!llvm.module.flags = !{!90000}\n!90000 = !{i32 4, !"nvvm-reflect-ftz", i32 0}\n'


@functools.lru_cache(maxsize=None)
def _short_shared_pointers() -> None:
    """NVPTX with 32-bit pointers into shared, constant and local memory (Triton sets the
    same), as DATA_LAYOUT says: without it shared addresses are 64-bit registers, two per
    address; a persistent kernel's epilogue kept 64 of them live across its tile loop and
    spilled.  A process-wide LLVM option, set once before the first NVPTX target machine
    is made (the machine reads it when it is made)."""
    from polytile.llvm_codegen import llvm

    llvm().set_option("polytile", "-nvptx-short-ptr")


def emit_ptx(llvm_ir: str, arch: str, kernel: str = "kernel") -> str:
    """PTX for ``arch`` from LLVM IR text (libdevice linked in when it is called); float
    arithmetic the IR marks ``contract`` may become ``fma.rn`` (``emit-ptx`` marks it
    where ``enable_fp_fusion`` is on: ``polytile.llvm_codegen.allow_contraction``)."""
    _short_shared_pointers()
    needed = sorted({name for name in _declared(llvm_ir) if name.startswith(LIBDEVICE_PREFIX)})
    module, machine = optimized_module(
        llvm_ir + ("\n" + _REFLECT_FLAGS if needed else ""), TRIPLE, arch, ptx_features(llvm_ir),
        link=(lambda llvm, module: _link_libdevice(module, kernel, needed)) if needed else None)
    return machine.emit_assembly(module)


def _declared(llvm_ir: str) -> list[str]:
    names = []
    for line in llvm_ir.splitlines():
        if line.startswith("declare "):
            at = line.find("@")
            names.append(line[at + 1:line.find("(", at)].strip('"'))
    return names


@dataclass
class EmitPTX(EmitFromLLVM):
    """LLVM IR (artifact 'llvm_ir') to PTX (artifact 'ptx') with LLVM's NVPTX backend."""

    name: ClassVar[str] = "emit-ptx"
    summary: ClassVar[str] = "LLVM IR to PTX through the NVPTX target machine"

    def emit(self, llvm_ir: str, context: PassContext, kernel: str) -> None:
        context.artifacts[PTX] = emit_ptx(llvm_ir, context.target.arch, kernel)


#: The artifact holding the cubin that ptx-to-cubin makes.
CUBIN = "cubin"


@dataclass
class PtxToCubin(Pass):
    """PTX (artifact 'ptx') to a cubin (artifact 'cubin') with nvJitLink or ptxas, as the
    setting ``nvidia_assembler`` chooses (see :mod:`polytile_nvidia.assemble`); assembled
    again with ``.maxnreg`` when registers up to the occupancy cliff are free (see
    :mod:`polytile_nvidia.registers`)."""

    name: ClassVar[str] = "ptx-to-cubin"
    summary: ClassVar[str] = "PTX to a cubin through nvJitLink or ptxas"

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        from polytile.resources import RESOURCES

        from .assemble import assemble_ptx, ptxas_report
        from .resources import assembler_report, kernel_resources

        ptx = context.artifacts.get(PTX)
        if ptx is None:
            raise PolytileError("ptx-to-cubin needs the PTX that emit-ptx makes; put it after emit-ptx")
        kernel = context.artifacts.get("kernel_name", "kernel")
        # The lowering may have fixed the registers (warp groups that move them with
        # setmaxnreg start from a known count; it derives it from maxnreg when given).
        user_cap = context.artifacts.get("register_cap", getattr(context.options, "maxnreg", None))
        if user_cap is not None:
            # ptxas ignores -maxrregcount for a kernel with .maxntid: the cap goes in the PTX.
            ptx = context.artifacts[PTX] = with_register_cap(ptx, user_cap)
        assembled = assemble_ptx(ptx, context.target.arch, kernel_name=kernel, options=context.options)
        budget = None if user_cap is not None else self._register_budget(ptx, assembled.cubin, context.options)
        if budget is not None:
            ptx = context.artifacts[PTX] = with_register_cap(ptx, budget)
            assembled = assemble_ptx(ptx, context.target.arch, kernel_name=kernel, options=context.options)
        context.artifacts[CUBIN] = assembled.cubin
        log, source = assembled.log, None
        if "spills" not in assembler_report(log, kernel):
            fallback = ptxas_report(ptx, context.target.arch, kernel_name=kernel, options=context.options)
            if fallback:
                log, source = fallback, "spills and stack from ptxas's report (the assembler's log had none)"
        resources = kernel_resources(arch=context.target.arch, kernel=kernel, cubin=assembled.cubin, log=log,
                                     threads=threads_per_block(ptx),
                                     shared_bytes=int(context.artifacts.get("shared_bytes", 0)))
        if source is not None:
            resources["notes"].append(source)
        resources["assembler"] = assembled.assembler
        context.artifacts[RESOURCES] = resources
        return PreservedAnalyses.all()

    @staticmethod
    def _register_budget(ptx: str, cubin: bytes, options: Any) -> int | None:
        """Registers up to the occupancy cliff, unless the user capped them (see
        :mod:`.registers`)."""
        threads = threads_per_block(ptx)
        registers = cubin_registers(cubin)
        if getattr(options, "maxnreg", None) is not None or threads is None or registers is None:
            return None
        return register_budget(registers, threads)


__all__ = ["CUBIN", "EmitPTX", "LibdeviceMissingError", "MATH", "PtxToCubin", "emit_ptx", "nvidia_gpu_target"]
