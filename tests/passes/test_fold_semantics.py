"""Folding semantics that are easy to get wrong: a fused multiply-add rounds once, i1 is a
1-bit two's complement number (true is -1 when read as signed), and a float converted to
an integer it does not fit is not folded (LLVM makes it poison).

Folding and the interpreter share the dialects' NumPy ``semantics``, so each case also
checks that the interpreter computes what the folder does (or refuses alike).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from polytile.dialects.arith import BINARY_OPS, INTEGER_PREDICATES, FPToSIOp
from polytile.dialects.math import FmaOp
from polytile.interpreter.executor import InterpreterError, run_kernel
from polytile.ir import parse_module, verify
from polytile.passes.canonicalize import Canonicalize
from polytile.ir_testing import apply_passes, dedent


def fold(text: str) -> str:
    return apply_passes(text, Canonicalize())


def folded_constant(text: str) -> str | None:
    """The constant the function folds to (its returned value), or None if not folded."""
    out = fold(text)
    lines = [line.strip() for line in out.splitlines()]
    if any(" = arith.constant " not in line for line in lines[1:-2]):
        return None
    (value,) = [line.split("{value = ")[1].split("}")[0] for line in lines if "arith.constant" in line]
    return value


# -- math.fma: one rounding -------------------------------------------------------------


def _round_exactly(x: Fraction, dtype) -> float:
    """``x`` rounded to nearest-even in ``dtype`` (f16, f32, f64), as a Python float:
    the reference, independent of how math.fma computes."""
    info = np.finfo(dtype)
    precision, min_exp, max_exp = info.nmant + 1, info.minexp, info.maxexp
    if x == 0:
        return 0.0
    sign = -1.0 if x < 0 else 1.0
    n, d = abs(x).numerator, abs(x).denominator
    e = n.bit_length() - d.bit_length()
    if (n < d << e) if e >= 0 else (n << -e < d):
        e -= 1
    q = max(e, min_exp) - (precision - 1)
    m = round(Fraction(n << -q, d) if q < 0 else Fraction(n, d << q))  # ties to even
    if Fraction(m) * Fraction(2) ** q > Fraction(2 ** precision - 1) * Fraction(2) ** (max_exp - precision):
        return sign * math.inf
    return sign * math.ldexp(m, q)


def fma_text(a: float, b: float, c: float, type_: str) -> str:
    return dedent(f"""
        func.func @f() -> {type_} {{
          %a = arith.constant {{value = {a!r}}} : {type_}
          %b = arith.constant {{value = {b!r}}} : {type_}
          %c = arith.constant {{value = {c!r}}} : {type_}
          %r = math.fma %a, %b, %c : {type_}
          func.return %r
        }}
    """)


def test_fma_f64_is_fused():
    # (1 + 2^-52)(1 - 2^-52) - 1 = -2^-104 exactly; multiplying first in f64 gives 0.0.
    a, b = 1 + 2.0 ** -52, 1 - 2.0 ** -52
    assert folded_constant(fma_text(a, b, -1.0, "f64")) == repr(-(2.0 ** -104)) == "-4.930380657631324e-32"


@pytest.mark.parametrize("a, c, type_, expected", [
    # a*a is exactly halfway between two f32 values; the tiny c decides the way.
    # Rounding a*a+c to f64 first lands on the halfway point, and rounding that to
    # nearest-even then goes the wrong way for c > 0.
    (1 + 2.0 ** -12, 2.0 ** -80, "f32", 1 + 2.0 ** -11 + 2.0 ** -23),
    (1 + 2.0 ** -12, -(2.0 ** -80), "f32", 1 + 2.0 ** -11),
    # The same for f16 (whose finite sums are exact in f64, so only one rounding is in play).
    (1.46875, 2.0 ** -24, "f16", 2.158203125),
    (1.46875, -(2.0 ** -24), "f16", 2.15625),
])
def test_fma_f32_and_f16_round_once(a, c, type_, expected):
    exact = Fraction(a) * Fraction(a) + Fraction(c)
    assert _round_exactly(exact, np.float32 if type_ == "f32" else np.float16) == expected
    assert folded_constant(fma_text(a, a, c, type_)) == repr(expected)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_fma_semantics_match_exact_rounding_elementwise(dtype):
    rng = np.random.default_rng(7)
    bits = np.dtype(f"uint{np.dtype(dtype).itemsize * 8}")
    a, b, c = (rng.integers(0, np.iinfo(bits).max, size=3000, dtype=np.uint64, endpoint=True).astype(bits).view(dtype)
               for _ in range(3))
    # And near-cancellation, where rounding twice goes wrong most often.
    with np.errstate(all="ignore"):
        c[::2] = np.nextafter((-(a[::2].astype(np.float64) * b[::2])).astype(dtype), dtype(0))
    got = FmaOp.semantics(a, b, c)
    assert got.dtype == dtype and got.shape == a.shape
    for x, y, z, r in zip(a.tolist(), b.tolist(), c.tolist(), got.tolist()):
        if not all(map(math.isfinite, (x, y, z))):
            continue
        exact = Fraction(x) * Fraction(y) + Fraction(z)
        if exact == 0:
            continue
        expected = _round_exactly(exact, dtype)
        assert r == expected and math.copysign(1, r) == math.copysign(1, expected), (x, y, z)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("a, b, c, expected", [
    (math.inf, 0.0, 1.0, math.nan),           # inf * 0
    (math.inf, 2.0, -math.inf, math.nan),     # inf - inf
    (math.inf, -2.0, 1.0, -math.inf),
    (2.0, 3.0, math.inf, math.inf),
    (2.0, 3.0, math.nan, math.nan),
    (math.nan, 0.0, 1.0, math.nan),
    (-0.0, 1.0, -0.0, -0.0),                  # (-0) + (-0) is -0
    (0.0, -1.0, 0.0, 0.0),                    # (-0) + (+0) is +0
    (1.0, 1.0, -1.0, 0.0),                    # an exact zero sum is +0
    (-1.0, 1.0, 1.0, 0.0),
])
def test_fma_special_values_follow_ieee(dtype, a, b, c, expected):
    got = FmaOp.semantics(np.array(a, dtype), np.array(b, dtype), np.array(c, dtype))
    assert np.asarray(got).dtype == dtype
    got = float(got)
    if math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == expected and math.copysign(1, got) == math.copysign(1, expected)


def test_fma_f64_product_overflowing_is_still_exact():
    # 1e300 * 1e300 is finite as a real number: adding -inf gives -inf, not NaN.
    assert float(FmaOp.semantics(np.array(1e300), np.array(1e300), np.array(-math.inf))) == -math.inf
    assert float(FmaOp.semantics(np.array(1e200), np.array(1e200), np.array(1.0))) == math.inf


def test_the_interpreter_computes_the_fused_result():
    module = parse_module(dedent("""
        func.func @k(%o: ptr<f64>, %a: f64, %b: f64, %c: f64) attributes {kernel = true} {
          %r = math.fma %a, %b, %c : f64
          tile.store %o, %r
          func.return
        }
    """))
    verify(module)
    out = np.zeros(1, np.float64)
    run_kernel(module, "k", 1, [out, 1 + 2.0 ** -52, 1 - 2.0 ** -52, -1.0])
    assert out[0] == -(2.0 ** -104)


# -- i1 is a 1-bit two's complement number ---------------------------------------------------


def compare_text(predicate: str, lhs: str, rhs: str) -> str:
    return dedent(f"""
        func.func @f() -> i1 {{
          %a = arith.constant {{value = {lhs}}} : i1
          %b = arith.constant {{value = {rhs}}} : i1
          %r = arith.cmpi %a, %b {{predicate = "{predicate}"}} : i1
          func.return %r
        }}
    """)


I1_SIGNED = {"false": 0, "true": -1}
I1_UNSIGNED = {"false": 0, "true": 1}
COMPARE = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "slt": lambda x, y: x < y,
           "sle": lambda x, y: x <= y, "sgt": lambda x, y: x > y, "sge": lambda x, y: x >= y,
           "ult": lambda x, y: x < y, "ule": lambda x, y: x <= y, "ugt": lambda x, y: x > y,
           "uge": lambda x, y: x >= y}


@pytest.mark.parametrize("predicate", sorted(INTEGER_PREDICATES))
@pytest.mark.parametrize("lhs", ["false", "true"])
@pytest.mark.parametrize("rhs", ["false", "true"])
def test_i1_comparisons_fold_as_1_bit_integers(predicate, lhs, rhs):
    values = I1_SIGNED if predicate.startswith("s") else I1_UNSIGNED
    expected = COMPARE[predicate](values[lhs], values[rhs])
    assert folded_constant(compare_text(predicate, lhs, rhs)) == ("true" if expected else "false")


def test_slt_false_true_is_false():
    # true is -1 read as signed: -1 < 0, so false < true is false (and true < false holds).
    assert folded_constant(compare_text("slt", "false", "true")) == "false"
    assert folded_constant(compare_text("slt", "true", "false")) == "true"


def test_the_interpreter_agrees_on_signed_i1_comparisons():
    # select(t >s f, t, f) is the signed maximum of t and f: both must give false (0).
    module = parse_module(dedent("""
        func.func @k(%o: ptr<i32>, %a: i32) attributes {kernel = true} {
          %z = arith.constant {value = 0} : i32
          %t = arith.cmpi %a, %z {predicate = "eq"} : i1
          %f = arith.cmpi %a, %z {predicate = "ne"} : i1
          %gt = arith.cmpi %t, %f {predicate = "sgt"} : i1
          %viaselect = arith.select %gt, %t, %f : i1
          %viamax = arith.maxsi %t, %f : i1
          %r1 = arith.extui %viaselect : i32
          %r2 = arith.extui %viamax : i32
          %s = arith.subi %r1, %r2 : i32
          tile.store %o, %s
          func.return
        }
    """))
    verify(module)
    out = np.full(1, 7, np.int32)
    run_kernel(module, "k", 1, [out, 0])
    assert out[0] == 0


def division_text(op: str, lhs: str, rhs: str) -> str:
    return dedent(f"""
        func.func @f() -> i1 {{
          %a = arith.constant {{value = {lhs}}} : i1
          %b = arith.constant {{value = {rhs}}} : i1
          %r = arith.{op} %a, %b : i1
          func.return %r
        }}
    """)


def _folded(text: str, constants: list) -> list | None:
    op = parse_module(text).body.block.first_op.entry_block.last_op.prev_op
    return op.fold(constants)


@pytest.mark.parametrize("op", ["divsi", "remsi"])
def test_i1_signed_division_of_the_minimum_by_minus_one_does_not_fold(op):
    # true is -1, the minimum of i1: -1 / -1 = +1 does not fit, as INT_MIN / -1 (and
    # srem INT_MIN, -1 is undefined in LLVM too).  Canonicalization may still rewrite
    # "x / -1" by identities; the folder must not invent a value.
    text = division_text(op, "true", "true")
    assert _folded(text, [True, True]) is None
    assert BINARY_OPS[op].semantics(np.array(True), np.array(True)) is None
    assert BINARY_OPS[op].semantics(np.array([False, True]), np.array([True, True])) is None
    assert _folded(text, [False, True]) == [False]


@pytest.mark.parametrize("op, lhs, rhs, expected", [
    ("divsi", "false", "true", "false"),   # 0 / -1
    ("remsi", "false", "true", "false"),
    ("divui", "true", "true", "true"),     # 1 / 1
    ("remui", "true", "true", "false"),
])
def test_other_i1_divisions_fold(op, lhs, rhs, expected):
    assert folded_constant(division_text(op, lhs, rhs)) == expected


# -- float to integer: only values that fit fold --------------------------------------------


def cast_text(op: str, source: str, value: float, target: str) -> str:
    return dedent(f"""
        func.func @f() -> {target} {{
          %a = arith.constant {{value = {value!r}}} : {source}
          %r = arith.{op} %a : {target}
          func.return %r
        }}
    """)


@pytest.mark.parametrize("op, source, value, target", [
    ("fptosi", "f32", -129.0, "i8"),
    ("fptosi", "f32", 128.0, "i8"),
    ("fptoui", "f32", 300.0, "u8"),
    ("fptoui", "f32", -1.0, "u32"),
    ("fptosi", "f64", 9.3e18, "i64"),
    ("fptosi", "f64", 9223372036854775808.0, "i64"),   # 2^63
    ("fptoui", "f64", 1.9e19, "u64"),
    ("fptosi", "f32", 1.0, "i1"),                       # i1 holds -1 and 0 as signed
    ("fptoui", "f32", 2.0, "i1"),
    ("fptoui", "f32", -1.0, "i1"),
    ("fptosi", "f32", math.inf, "i32"),
    ("fptoui", "f32", math.nan, "i32"),
])
def test_out_of_range_float_to_int_does_not_fold(op, source, value, target):
    text = cast_text(op, source, value, target)
    assert fold(text) == text


@pytest.mark.parametrize("op, source, value, target, expected", [
    ("fptosi", "f32", -128.9, "i8", "-128"),            # truncated toward zero, it fits
    ("fptosi", "f32", 127.9, "i8", "127"),
    ("fptoui", "f32", 255.5, "u8", "255"),
    ("fptoui", "f32", -0.5, "u32", "0"),                # truncates to 0, which fits
    ("fptosi", "f64", 9223372036854774784.0, "i64", "9223372036854774784"),  # the largest double below 2^63
    ("fptoui", "f64", 1.8e19, "u64", "18000000000000000000"),
    ("fptosi", "f32", -1.0, "u32", "4294967295"),       # the op, not the type, says signed
    ("fptoui", "f64", 4294967295.0, "i32", "-1"),       # ... or unsigned
    ("fptosi", "f32", -1.0, "i1", "true"),
    ("fptoui", "f32", 1.0, "i1", "true"),
    ("fptosi", "f16", -0.0, "i1", "false"),
])
def test_float_to_int_in_range_folds(op, source, value, target, expected):
    assert folded_constant(cast_text(op, source, value, target)) == expected


def test_the_interpreter_refuses_an_out_of_range_conversion():
    module = parse_module(dedent("""
        func.func @k(%o: ptr<i8>, %x: f32) attributes {kernel = true} {
          %r = arith.fptosi %x : i8
          tile.store %o, %r
          func.return
        }
    """))
    verify(module)
    out = np.zeros(1, np.int8)
    run_kernel(module, "k", 1, [out, -128.5])
    assert out[0] == -128
    with pytest.raises(InterpreterError, match="arith.fptosi"):
        run_kernel(module, "k", 1, [out, -129.0])
    assert FPToSIOp.semantics(np.array([1.0, 300.0], np.float32), np.int8) is None
