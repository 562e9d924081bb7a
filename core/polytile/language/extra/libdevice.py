"""Triton's ``tl.extra.libdevice`` (``tl.extra.cuda.libdevice``): the C math library's
functions, elementwise, by libdevice's names, on every target.

Each is an op of the ``math`` dialect (or of ``arith``) that every target lowers: NVIDIA
to libdevice (``__nv_tanhf``...) or an LLVM intrinsic, AMD to ocml (``__ocml_tanh_f32``...)
or an LLVM intrinsic, the interpreter to NumPy.  Where Triton's take only fp32 and fp64,
these take every float type (fp16 and bf16 compute in fp32 on NVIDIA) and convert
integer arguments to fp32, as ``pl.exp`` does.  The predicates (``isnan``, ``isinf``,
``signbit``, ``finitef``/``isfinited``) and the bit counts (``clz``, ``popc``) give int32,
as libdevice's do.

The ``fast_`` variants are the same functions: ``pl.exp``, ``pl.log``, ``pl.sin``... are
already the fast approximate forms on NVIDIA (``ex2.approx``...).
"""

from __future__ import annotations

from typing import Any

from ...dialects import arith
from ...dialects import math as math_d
from ...ir import types as t
from .. import semantic as sem
from .. import standard
from ..core import builtin, semantic_error, tensor


def _unary(name: str, op_name: str | None = None, doc: str = ""):
    op_name = op_name or name

    def fn(arg0: Any) -> tensor:
        return sem.unary_float(op_name, arg0)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc or math_d.UNARY_OPS[op_name].__doc__
    return builtin(fn)


def _floats(name: str, *args: Any) -> list[tensor]:
    """``args`` as tensors of one float type and shape (integers convert to fp32)."""
    values = sem.unify(list(args))
    element = t.element_type(values[0].type)
    if t.is_integer(element):
        values = [sem.cast_type(v, t.f32) for v in values]
    elif not t.is_float(element):
        raise semantic_error(f"libdevice.{name} needs numbers, got {sem._describe(values[0])}")
    return values


def _binary(name: str, op: type, doc: str = ""):
    def fn(arg0: Any, arg1: Any) -> tensor:
        x, y = _floats(name, arg0, arg1)
        return tensor(sem.emit(op, x.handle, y.handle).result)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc or op.__doc__
    return builtin(fn)


def _bits(name: str, op_name: str, doc: str):
    def fn(arg0: Any) -> tensor:
        x = sem.to_tensor(arg0)
        if not t.is_integer(x.type) or t.element_type(x.type) == t.i1:
            raise semantic_error(f"libdevice.{name} needs an integer, got {sem._describe(x)}")
        counted = tensor(sem.emit(math_d.UNARY_OPS[op_name], x.handle).result)
        return sem.cast_type(counted, t.i32) if op_name != "bitreverse" else counted

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return builtin(fn)


def _float_arg(name: str, arg0: Any) -> tensor:
    x = sem.to_tensor(arg0)
    if not t.is_float(x.type):
        raise semantic_error(f"libdevice.{name} needs a float, got {sem._describe(x)}")
    return x


def _as_int32(flag: Any) -> tensor:
    return sem.cast_type(flag, t.i32)


# -- one float ---------------------------------------------------------------------------
acos = _unary("acos")
acosh = _unary("acosh")
asin = _unary("asin")
asinh = _unary("asinh")
atan = _unary("atan")
atanh = _unary("atanh")
cbrt = _unary("cbrt")
cos = _unary("cos")
cosh = _unary("cosh")
erf = _unary("erf")
erfc = _unary("erfc")
exp = _unary("exp")
exp10 = _unary("exp10")
exp2 = _unary("exp2")
expm1 = _unary("expm1")
log = _unary("log")
log10 = _unary("log10")
log1p = _unary("log1p")
log2 = _unary("log2")
lgamma = _unary("lgamma")
tgamma = _unary("tgamma")
rsqrt = _unary("rsqrt")
sin = _unary("sin")
sinh = _unary("sinh")
sqrt = _unary("sqrt")
sqrt_rn = _unary("sqrt_rn")
tan = _unary("tan")
tanh = _unary("tanh")
ceil = _unary("ceil")
floor = _unary("floor")
trunc = _unary("trunc")
rint = _unary("rint")
nearbyint = _unary("nearbyint", "rint", "Round to the nearest integer, halfway cases to even (as rint).")
round = _unary("round")
fabs = _unary("fabs", "absf")
# The fast forms: pl's functions already are (see the module's docstring).
fast_expf = _unary("fast_expf", "exp")
fast_exp10f = _unary("fast_exp10f", "exp10")
fast_logf = _unary("fast_logf", "log")
fast_log2f = _unary("fast_log2f", "log2")
fast_log10f = _unary("fast_log10f", "log10")
fast_sinf = _unary("fast_sinf", "sin")
fast_cosf = _unary("fast_cosf", "cos")
fast_tanf = _unary("fast_tanf", "tan")

# -- two floats --------------------------------------------------------------------------
atan2 = _binary("atan2", math_d.BINARY_OPS["atan2"])
hypot = _binary("hypot", math_d.BINARY_OPS["hypot"])
copysign = _binary("copysign", math_d.BINARY_OPS["copysign"])
@builtin
def nextafter(arg0: Any, arg1: Any) -> tensor:
    """The next representable value after arg0 toward arg1, in fp32 or fp64 (as
    libdevice's: a narrower float's next value is not an fp32 step)."""
    x, y = _floats("nextafter", arg0, arg1)
    if t.element_type(x.type) not in (t.f32, t.f64):
        raise semantic_error(f"libdevice.nextafter takes fp32 or fp64 values, got {sem._describe(x)}: convert them "
                             f"with .to(pl.float32) first")
    return tensor(sem.emit(math_d.BINARY_OPS["nextafter"], x.handle, y.handle).result)
fdim = _binary("fdim", math_d.BINARY_OPS["fdim"])
fmax = _binary("fmax", arith.MaxNumFOp, "The larger of two floats; a NaN operand is ignored.")
fmin = _binary("fmin", arith.MinNumFOp, "The smaller of two floats; a NaN operand is ignored.")
pow = _binary("pow", arith.PowFOp, "lhs to the power rhs.")
powf = _binary("powf", arith.PowFOp, "lhs to the power rhs.")
fast_powf = _binary("fast_powf", arith.PowFOp, "lhs to the power rhs.")
fmod = _binary("fmod", arith.RemFOp, "C's fmod: the remainder of lhs / rhs truncated, with lhs's sign.")


@builtin
def div_rn(arg0: Any, arg1: Any) -> tensor:
    """Division, correctly rounded."""
    return standard.div_rn(*_floats("div_rn", arg0, arg1))


@builtin
def fast_dividef(arg0: Any, arg1: Any) -> tensor:
    """Division, approximate (within 2 ulp on NVIDIA): the ``/`` operator."""
    x, y = _floats("fast_dividef", arg0, arg1)
    return sem.binary("truediv", x, y)


@builtin
def fma(arg0: Any, arg1: Any, arg2: Any) -> tensor:
    """arg0 * arg1 + arg2, rounded once."""
    return standard.fma(*_floats("fma", arg0, arg1, arg2))


# -- predicates: int32, as libdevice's -------------------------------------------------
@builtin
def isnan(arg0: Any) -> tensor:
    """1 where the element is NaN, else 0 (int32)."""
    x = _float_arg("isnan", arg0)
    return _as_int32(sem.compare("ne", x, x))


@builtin
def isinf(arg0: Any) -> tensor:
    """1 where the element is +inf or -inf, else 0 (int32)."""
    x = _float_arg("isinf", arg0)
    return _as_int32(sem.compare("eq", standard.abs(x), float("inf")))


def _finite(name: str):
    def fn(arg0: Any) -> tensor:
        x = _float_arg(name, arg0)
        return _as_int32(sem.compare("lt", standard.abs(x), float("inf")))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = "1 where the element is finite (neither inf nor NaN), else 0 (int32)."
    return builtin(fn)


finitef = _finite("finitef")
isfinited = _finite("isfinited")


@builtin
def signbit(arg0: Any) -> tensor:
    """1 where the element's sign bit is set (-0.0 and negative NaNs too), else 0 (int32)."""
    x = _float_arg("signbit", arg0)
    width = t.element_type(x.type).width
    bits = sem.cast_type(x, t.IntType(width), bitcast=True)
    return _as_int32(sem.compare("lt", bits, 0))


# -- integers ----------------------------------------------------------------------------
clz = _bits("clz", "ctlz", "The number of leading zero bits (the width for 0), as int32.")
popc = _bits("popc", "ctpop", "The number of set bits, as int32.")
brev = _bits("brev", "bitreverse", "The bits in reverse order (the argument's type).")

__all__ = sorted(name for name, value in list(globals().items())
                 if not name.startswith("_") and callable(value) and getattr(value, "__module__", "") == __name__)


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
    import difflib

    close = difflib.get_close_matches(name, __all__, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise AttributeError(f"'pl.extra.libdevice' has no attribute '{name}': polytile's libdevice has "
                         f"{len(__all__)} of libdevice's functions (docs/language.md lists them){hint}")
