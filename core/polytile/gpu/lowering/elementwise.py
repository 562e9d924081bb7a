"""Elementwise ops: one table from op class to a per-element emitter.

``ELEMENTWISE[OpClass] = emit`` where ``emit(ctx, op, args)`` makes one element's result
from one element of each operand (``args``, LLVM values).  The lowering applies it
register by register; a scalar operand of a tile op (a select's scalar condition) is
used for every register.

Math functions go through names (:data:`MATH_FUNCTIONS`): the target's ``math`` table
comes first (NVIDIA: ``ex2.approx`` for exp, libdevice for sin), then the LLVM
intrinsics every GPU target lowers (:data:`LLVM_MATH`).
"""

from __future__ import annotations

import math
from typing import Any, Callable

from llvmlite import ir

from ...dialects import arith
from ...dialects import math as math_d
from ...ir import types as t
from ...plugins.tables import OwnedTable
from .context import LoweringContext, linear_layout_of, register_lowering
from .types import (E4M3_F16_SCALE, FP8_FORMATS, BFloatType, LLVMBitOps, UnsupportedType, bit_width, fp8_format,
                    fp8_from_f32, fp8_to_f16_bits, llvm_type)

ElementEmitter = Callable[[LoweringContext, Any, list], Any]

#: Op class -> per-element emitter (see the module docstring); entries owned by who
#: registered them (:class:`~polytile.plugins.tables.OwnedTable`).
ELEMENTWISE: OwnedTable[ElementEmitter] = OwnedTable("elementwise GPU lowering")


def suffix(type_: ir.Type) -> str:
    """The overload suffix of an LLVM intrinsic: i32, f32, f16, f64."""
    if isinstance(type_, ir.IntType):
        return f"i{type_.width}"
    return {ir.HalfType: "f16", BFloatType: "bf16", ir.FloatType: "f32", ir.DoubleType: "f64"}[type(type_)]


def intrinsic(ctx: LoweringContext, name: str, args: list, extra: list = ()) -> Any:
    """Call the overloaded intrinsic ``llvm.<name>.<type of args[0]>``."""
    type_ = args[0].type
    return ctx.call(f"llvm.{name}.{suffix(type_)}", type_, list(args) + list(extra))


def _builder_method(method: str) -> ElementEmitter:
    return lambda ctx, op, args: getattr(ctx.builder, method)(*args)


def _intrinsic(name: str) -> ElementEmitter:
    return lambda ctx, op, args: intrinsic(ctx, name, args)


def _mulhi(signed: bool) -> ElementEmitter:
    def emit(ctx: LoweringContext, op: Any, args: list) -> Any:
        b = ctx.builder
        narrow = args[0].type
        wide = ir.IntType(narrow.width * 2)
        extend = b.sext if signed else b.zext
        product = b.mul(extend(args[0], wide), extend(args[1], wide))
        return b.trunc(b.lshr(product, ir.Constant(wide, narrow.width)), narrow)
    return emit


_BINARY = {
    "addi": "add", "subi": "sub", "muli": "mul", "divsi": "sdiv", "divui": "udiv", "remsi": "srem",
    "remui": "urem", "andi": "and_", "ori": "or_", "xori": "xor", "shli": "shl", "shrsi": "ashr",
    "shrui": "lshr", "addf": "fadd", "subf": "fsub", "mulf": "fmul",
}
_BINARY_INTRINSICS = {
    "maxsi": "smax", "minsi": "smin", "maxui": "umax", "minui": "umin", "maximumf": "maximum",
    "minimumf": "minimum", "maxnumf": "maxnum", "minnumf": "minnum",
}
for _short, _method in _BINARY.items():
    ELEMENTWISE[arith.BINARY_OPS[_short]] = _builder_method(_method)
for _short, _name in _BINARY_INTRINSICS.items():
    ELEMENTWISE[arith.BINARY_OPS[_short]] = _intrinsic(_name)
ELEMENTWISE[arith.MulHiSIOp] = _mulhi(True)
ELEMENTWISE[arith.MulHiUIOp] = _mulhi(False)
ELEMENTWISE[arith.NegFOp] = lambda ctx, op, args: ctx.builder.fneg(args[0])
ELEMENTWISE[arith.SelectOp] = lambda ctx, op, args: ctx.builder.select(*args)

_SIGNED_PREDICATES = {"eq": "==", "ne": "!=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">="}
_UNSIGNED_PREDICATES = {"ult": "<", "ule": "<=", "ugt": ">", "uge": ">="}
_FLOAT_PREDICATES = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "rd": "ord", "no": "uno"}


def _cmpi(ctx: LoweringContext, op: Any, args: list) -> Any:
    predicate = op.predicate
    if predicate in _SIGNED_PREDICATES:
        return ctx.builder.icmp_signed(_SIGNED_PREDICATES[predicate], *args)
    return ctx.builder.icmp_unsigned(_UNSIGNED_PREDICATES[predicate], *args)


def _cmpf(ctx: LoweringContext, op: Any, args: list) -> Any:
    predicate = op.predicate
    if predicate in ("ord", "uno"):
        return ctx.builder.fcmp_ordered("ord", *args) if predicate == "ord" else \
            ctx.builder.fcmp_unordered("uno", *args)
    compare = ctx.builder.fcmp_ordered if predicate[0] == "o" else ctx.builder.fcmp_unordered
    return compare(_FLOAT_PREDICATES[predicate[1:]], *args)


ELEMENTWISE[arith.CmpIOp] = _cmpi
ELEMENTWISE[arith.CmpFOp] = _cmpf

_CASTS = {
    "extsi": "sext", "extui": "zext", "trunci": "trunc", "sitofp": "sitofp", "uitofp": "uitofp",
    "fptosi": "fptosi", "fptoui": "fptoui", "extf": "fpext", "truncf": "fptrunc", "bitcast": "bitcast",
    "ptrtoint": "ptrtoint", "inttoptr": "inttoptr",
}
_F16, _F32 = ir.HalfType(), ir.FloatType()


def _cast(method: str) -> ElementEmitter:
    def emit(ctx: LoweringContext, op: Any, args: list) -> Any:
        source, result = op.operands[0].type, op.results[0].type
        if method != "bitcast" and (fp8_format(source) or fp8_format(result)):
            return _fp8_cast(ctx, method, args[0], source, result)
        return getattr(ctx.builder, method)(args[0], llvm_type(result))
    return emit


for _short, _method in _CASTS.items():
    ELEMENTWISE[arith.CASTS[_short]] = _cast(_method)


# --------------------------------------------------------------------------------------
# 8-bit floats: registers hold their bits (i8); every cast goes through f16 or f32


def _float_to(ctx: LoweringContext, value: Any, wanted: ir.Type) -> Any:
    """``value`` (a float) converted to the float type ``wanted``; f16 <-> bf16 through f32."""
    b = ctx.builder
    have, want = bit_width(value.type), bit_width(wanted)
    if value.type == wanted:
        return value
    if have == want:
        return b.fptrunc(b.fpext(value, _F32), wanted)
    return b.fpext(value, wanted) if want > have else b.fptrunc(value, wanted)


def fp8_to_float(ctx: LoweringContext, bits: Any, kind: str, wanted: ir.Type) -> Any:
    """The 8-bit float ``bits`` (i8, format ``kind``) as a value of the float type
    ``wanted``: the target's conversion instruction when it has one, else integer code."""
    hook = ctx.target.float8_convert
    half = hook(ctx.builder, bits, kind, "f16") if hook is not None else None
    if half is None:
        fmt = FP8_FORMATS[kind]
        half = ctx.builder.bitcast(fp8_to_f16_bits(LLVMBitOps(ctx.builder), fmt, bits), _F16)
        if fmt.exponent_bits == 4:
            half = ctx.builder.fmul(half, ir.Constant(_F16, E4M3_F16_SCALE))
    return _float_to(ctx, half, wanted)


def float_to_fp8(ctx: LoweringContext, value: Any, kind: str) -> Any:
    """The float ``value`` rounded (to nearest even, saturating) to the 8-bit float ``kind``.
    An f64 is rounded to f32 first."""
    wide = _float_to(ctx, value, _F32)
    hook = ctx.target.float8_convert
    converted = hook(ctx.builder, wide, "f32", kind) if hook is not None else None
    if converted is not None:
        return converted
    bits = ctx.builder.bitcast(wide, ir.IntType(32))
    return fp8_from_f32(LLVMBitOps(ctx.builder), FP8_FORMATS[kind], bits)


def _fp8_cast(ctx: LoweringContext, method: str, value: Any, source: Any, result: Any) -> Any:
    b = ctx.builder
    src, dst = t.element_type(source), t.element_type(result)
    if fp8_format(source):
        if isinstance(dst, t.FloatType) and fp8_format(result):
            return float_to_fp8(ctx, fp8_to_float(ctx, value, src.kind, _F32), dst.kind)
        if isinstance(dst, t.FloatType):
            return fp8_to_float(ctx, value, src.kind, llvm_type(dst))
        wide = fp8_to_float(ctx, value, src.kind, _F32)
        return getattr(b, method)(wide, llvm_type(dst))  # fptosi / fptoui
    if isinstance(src, t.FloatType):
        return float_to_fp8(ctx, value, dst.kind)
    return float_to_fp8(ctx, getattr(b, method)(value, _F32), dst.kind)  # sitofp / uitofp


#: Ops that take or give 8-bit floats as their bits (they move bits or convert); any other
#: op on them computes in f32 (:func:`_through_f32`).
FP8_OPS: set[type] = {*arith.CASTS.values(), arith.SelectOp}


# --------------------------------------------------------------------------------------
# Math functions

#: Op class -> the name targets know the function by.
MATH_FUNCTIONS: dict[type, str] = {cls: name for name, cls in math_d.UNARY_OPS.items()}
MATH_FUNCTIONS.update({cls: name for name, cls in math_d.BINARY_OPS.items()})
MATH_FUNCTIONS[math_d.FmaOp] = "fma"
MATH_FUNCTIONS[arith.PowFOp] = "pow"
# Division and remainder go by name too: a target may divide approximately (``div``, the
# ``/`` operator; NVIDIA's div.full.f32) and must make ``fmod`` exact where LLVM's frem
# expansion is not (x - trunc(x / y) * y rounds twice).
MATH_FUNCTIONS[arith.DivFOp] = "div"
MATH_FUNCTIONS[arith.RemFOp] = "fmod"
MATH_FUNCTIONS[math_d.DivRnOp] = "div_rn"

LOG2E = 1.0 / math.log(2.0)


def _exp_through_exp2(ctx: LoweringContext, args: list, type_: ir.Type) -> Any:
    scaled = ctx.builder.fmul(args[0], ir.Constant(type_, LOG2E))
    return math_emitter(ctx, "exp2")(ctx, [scaled], type_)


#: Math functions every GPU target lowers through LLVM intrinsics.
LLVM_MATH: dict[str, Callable[[LoweringContext, list, ir.Type], Any]] = {
    "sqrt": lambda ctx, args, ty: intrinsic(ctx, "sqrt", args),
    "sqrt_rn": lambda ctx, args, ty: intrinsic(ctx, "sqrt", args),
    "floor": lambda ctx, args, ty: intrinsic(ctx, "floor", args),
    "ceil": lambda ctx, args, ty: intrinsic(ctx, "ceil", args),
    "absf": lambda ctx, args, ty: intrinsic(ctx, "fabs", args),
    "absi": lambda ctx, args, ty: intrinsic(ctx, "abs", args, [ir.Constant(ir.IntType(1), 0)]),
    "fma": lambda ctx, args, ty: intrinsic(ctx, "fma", args),
    "exp2": lambda ctx, args, ty: intrinsic(ctx, "exp2", args),
    "exp": _exp_through_exp2,
    "div": lambda ctx, args, ty: ctx.builder.fdiv(*args),
    "div_rn": lambda ctx, args, ty: ctx.builder.fdiv(*args),
    "fmod": lambda ctx, args, ty: ctx.builder.frem(*args),
    "trunc": lambda ctx, args, ty: intrinsic(ctx, "trunc", args),
    "rint": lambda ctx, args, ty: intrinsic(ctx, "rint", args),
    "round": lambda ctx, args, ty: intrinsic(ctx, "round", args),
    "copysign": lambda ctx, args, ty: intrinsic(ctx, "copysign", args),
    # Bit counts: zero is defined (ctlz(0) is the width), as libdevice's clz.
    "ctlz": lambda ctx, args, ty: intrinsic(ctx, "ctlz", args, [ir.Constant(ir.IntType(1), 0)]),
    "ctpop": lambda ctx, args, ty: intrinsic(ctx, "ctpop", args),
    "bitreverse": lambda ctx, args, ty: intrinsic(ctx, "bitreverse", args),
}


def math_emitter(ctx: LoweringContext, name: str) -> Callable[[LoweringContext, list, ir.Type], Any] | None:
    return ctx.target.math.get(name) or LLVM_MATH.get(name)


def _math(ctx: LoweringContext, op: Any, args: list) -> Any:
    name = MATH_FUNCTIONS[type(op)]
    emit = math_emitter(ctx, name)
    if emit is None:
        raise ctx.unsupported(op, f"'{op.name}' on {t.element_type(op.results[0].type)}")
    return emit(ctx, args, args[0].type)


for _cls in MATH_FUNCTIONS:
    ELEMENTWISE[_cls] = _math


# --------------------------------------------------------------------------------------
# The lowering


def fastest_register_dim(layout: Any) -> int:
    """The dimension a thread's first registers run along (the last one by default)."""
    for basis in layout.register:
        for d, c in enumerate(basis):
            if c:
                return d
    return len(layout.shape) - 1


def equal_register_bits(ctx: LoweringContext, value: Any) -> int:
    """The register index bits of the tile ``value`` that axis info proves do not change
    its value: flipping one moves the element within a block of constancy (``cols < n``
    with ``n`` a multiple of 16 holds one value over 16 aligned columns).  A bit
    qualifies when its basis stays below the constancy (a power of two) in every
    dimension: coordinates are XORs of bases, so the flip never leaves the aligned block,
    whatever the lane and warp.  It covers a thread's consecutive registers and its
    repetitions alike (rows r and r + 8 of a mask with row constancy 16)."""
    layout = linear_layout_of(value)
    limits = [c & -c for c in ctx.axis_info[value].constancy]  # the largest power of two dividing each
    bits = 0
    for index, basis in enumerate(layout.register):
        if all(b < limit for b, limit in zip(basis, limits)):
            bits |= 1 << index
    return bits


def _through_f32(emit: ElementEmitter) -> ElementEmitter:
    """``emit`` on 8-bit float operands (their bits): each converted to f32, the op computed
    there, an 8-bit float result rounded once (nearest even, saturating), as the
    interpreter computes it (polytile.dialects.emulated_floats)."""
    def wide(ctx: LoweringContext, op: Any, args: list) -> Any:
        kinds = [t.element_type(v.type).kind if fp8_format(v.type) else None for v in op.operands]
        result = emit(ctx, op, [fp8_to_float(ctx, a, kind, _F32) if kind else a for a, kind in zip(args, kinds)])
        result_type = op.results[0].type
        return float_to_fp8(ctx, result, t.element_type(result_type).kind) if fp8_format(result_type) else result
    return wide


def lower_elementwise(op: Any, operands: list, ctx: LoweringContext) -> list:
    emit = ELEMENTWISE[type(op)]
    try:
        result_type = op.results[0].type
        llvm_type(result_type)
        for value in op.operands:
            llvm_type(value.type)
    except UnsupportedType as exc:
        raise ctx.unsupported(op, f"'{op.name}' on {exc}") from None
    if type(op) not in FP8_OPS and any(fp8_format(value.type) for value in (*op.operands, *op.results)):
        emit = _through_f32(emit)
    if not isinstance(result_type, t.TileType):
        return [emit(ctx, op, operands)]
    count = len(next(o for o in operands if isinstance(o, list)))
    # Registers axis info proves equal are computed once (ptxas does not know they are).
    keep = ~equal_register_bits(ctx, op.results[0]) if count > 1 else -1
    registers = []
    for r in range(count):
        first = r & keep  # the register holding the same value, computed already
        if first != r:
            registers.append(registers[first])
            continue
        registers.append(emit(ctx, op, [o[r] if isinstance(o, list) else o for o in operands]))
    return [registers]


for _cls in ELEMENTWISE:
    register_lowering(_cls)(lower_elementwise)


def register_elementwise(op_class: type, emit: ElementEmitter) -> None:
    """Lower ``op_class`` element by element with ``emit`` (for plugins' ops; both
    entries leave with the plugin)."""
    ELEMENTWISE.add(op_class, emit)
    register_lowering(op_class)(lower_elementwise)
