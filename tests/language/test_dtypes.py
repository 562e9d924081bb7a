"""Every dtype of the language: its name and predicates, a round trip through memory, and
for bfloat16 and the fp8 types (which NumPy cannot hold) the interpreter's clear refusal."""

import numpy as np
import pytest

import polytile.language as pl
from polytile.runtime import jit

# (dtype, Triton's str(), bit width, kind): kind is "b" bool, "i" signed, "u" unsigned, "f" float.
DTYPES = [
    (pl.int1, "int1", 1, "b"), (pl.int8, "int8", 8, "i"), (pl.int16, "int16", 16, "i"), (pl.int32, "int32", 32, "i"),
    (pl.int64, "int64", 64, "i"), (pl.uint8, "uint8", 8, "u"), (pl.uint16, "uint16", 16, "u"),
    (pl.uint32, "uint32", 32, "u"), (pl.uint64, "uint64", 64, "u"), (pl.float16, "fp16", 16, "f"),
    (pl.bfloat16, "bf16", 16, "f"), (pl.float32, "fp32", 32, "f"), (pl.float64, "fp64", 64, "f"),
    (pl.float8e4nv, "fp8e4nv", 8, "f"), (pl.float8e5, "fp8e5", 8, "f"),
]
NUMPY = {"int1": np.bool_, "fp16": np.float16, "fp32": np.float32, "fp64": np.float64}


@pytest.mark.parametrize("dt, name, bits, kind", DTYPES, ids=[d[1] for d in DTYPES])
def test_dtype_names_and_predicates(dt, name, bits, kind):
    assert str(dt) == name and dt.primitive_bitwidth == bits
    assert dt.is_floating() == (kind == "f") and dt.is_int() == (kind in "biu")
    assert dt.is_int_signed() == (kind == "i") and dt.is_int_unsigned() == (kind == "u") and dt.is_bool() == (kind == "b")
    assert dt.is_fp8() == name.startswith("fp8") and dt.is_bf16() == (name == "bf16")
    assert eval(repr(dt), {"pl": pl}) == dt  # repr names the pl attribute


def test_triton_spellings():
    assert pl.float8e4m3 == pl.float8e4nv and pl.float8e5m2 == pl.float8e5 and pl.bool_ == pl.int1


@jit
def roundtrip_kernel(x_ptr, out_ptr, n, DT: pl.constexpr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    mask = offs < n
    x = pl.load(x_ptr + offs, mask=mask)
    pl.static_assert(x.dtype == DT)
    pl.store(out_ptr + offs, x, mask=mask)


HOST = [d for d in DTYPES if d[1] in NUMPY or d[3] in "iu"]


@pytest.mark.parametrize("n", [37, 64])
@pytest.mark.parametrize("dt, name, bits, kind", HOST, ids=[d[1] for d in HOST])
def test_round_trip_through_memory(target, dt, name, bits, kind, n):
    np_dtype = NUMPY.get(name) or np.dtype(name)
    if kind == "b":
        x = np.arange(n) % 3 == 0
    elif kind == "f":
        x = np.array([np.inf, -np.inf, np.nan, -0.0, np.finfo(np_dtype).max, np.finfo(np_dtype).tiny] +
                     list(np.linspace(-5, 5, n - 6)), np_dtype)
    else:
        info = np.iinfo(np_dtype)
        x = np.random.default_rng(0).integers(info.min, info.max, n, dtype=np_dtype, endpoint=True)
        x[:2] = info.min, info.max
    out = np.zeros(n, np_dtype)
    roundtrip_kernel[(1,)](x, out, n, DT=dt, BLOCK=64, target=target)
    assert out.tobytes() == x.tobytes()  # bit for bit, NaN and -0.0 included


@jit
def narrow_float_kernel(x_ptr, out_ptr, DT: pl.constexpr):
    offs = pl.arange(0, 8)
    pl.store(out_ptr + offs, pl.load(x_ptr + offs).to(DT).to(pl.float32))


@pytest.mark.parametrize("dt", [pl.bfloat16, pl.float8e4nv, pl.float8e5], ids=str)
def test_narrow_floats(target, dt):
    """bf16 and fp8: exact for values they hold (small integers), on every target (the
    interpreter emulates them: tests/interpreter/test_emulated_floats.py)."""
    x = np.arange(8, dtype=np.float32) - 4
    out = np.zeros(8, np.float32)
    narrow_float_kernel[(1,)](x, out, DT=dt, target=target)
    np.testing.assert_array_equal(out, x)


def test_triton_names_of_dtypes():
    # Triton's constructor by name and its lists of names.
    assert pl.dtype("int8") == pl.int8 and pl.dtype("fp16") == pl.float16 and pl.dtype("bf16") == pl.bfloat16
    assert [pl.dtype(n) for n in pl.dtype.SINT_TYPES] == [pl.int8, pl.int16, pl.int32, pl.int64]
    assert pl.dtype("uint32") in [pl.dtype(n) for n in pl.dtype.UINT_TYPES]
    with pytest.raises(TypeError, match="unknown dtype name 'int7'"):
        pl.dtype("int7")
    assert pl.PropagateNan.NONE == 0 and pl.PropagateNan.ALL == 0xFFFF
    # Triton's float layout facts, which its tests decode fp8 bits with.
    assert [(d.primitive_bitwidth, d.fp_mantissa_width, d.exponent_bias) for d in
            (pl.float32, pl.float16, pl.bfloat16, pl.float8e4nv, pl.float8e5, pl.float8e4b15)] == [
        (32, 23, 127), (16, 10, 15), (16, 7, 127), (8, 3, 7), (8, 2, 15), (8, 3, 15)]
    with pytest.raises(AttributeError, match="pl.int32 is not a float type"):
        pl.int32.fp_mantissa_width


@jit
def fp8_variant_kernel(x_ptr):
    pl.store(x_ptr, pl.load(x_ptr).to(pl.float8e4b15).to(pl.float32))


def test_fp8_variants_polytile_lacks_are_named_where_used():
    assert pl.float8e4b15.is_fp8() and repr(pl.float8e4b15) == "pl.float8e4b15" and pl.float8e4b15 != pl.float8e4nv
    from polytile.errors import CompilationError

    with pytest.raises(CompilationError, match=r"pl.float8e4b15 \(fp8 e4m3 with exponent bias 15\) is not "
                                                  r"supported by polytile: use pl.float8e4nv or pl.float8e5"):
        fp8_variant_kernel[(1,)](np.zeros(1, np.float32))


@jit
def rounding_kernel(x_ptr, y_ptr, ROUNDING: pl.constexpr, SPELLING: pl.constexpr):
    v = pl.load(x_ptr + pl.arange(0, 4))
    if SPELLING == "cast method":
        half = v.cast(pl.float16, fp_downcast_rounding=ROUNDING)
    else:
        half = pl.cast(v, pl.float16, fp_downcast_rounding=ROUNDING)
    pl.store(y_ptr + pl.arange(0, 4), half.to(pl.float32))


@pytest.mark.parametrize("spelling", ["cast method", "pl.cast"])
def test_downcast_rounding_is_to_nearest_even_or_refused(target, spelling):
    x = np.array([1.0 + 2.0 ** -11, 2.25, -3.0, 65504.0], np.float32)  # the first: halfway, rounds to even
    y = np.zeros(4, np.float32)
    rounding_kernel[(1,)](x, y, ROUNDING="rtne", SPELLING=spelling, target=target)
    np.testing.assert_array_equal(y, x.astype(np.float16).astype(np.float32))
    from polytile.errors import CompilationError

    with pytest.raises(CompilationError, match=r"fp_downcast_rounding='rtz' \(round toward zero\) is not supported "
                                               r"yet"):
        rounding_kernel[(1,)](x, y, ROUNDING="rtz", SPELLING=spelling, target=target)


@jit
def rounding_on_other_casts_kernel(x_ptr, WHICH: pl.constexpr):
    v = pl.load(x_ptr + pl.arange(0, 4))
    if WHICH == "widening":
        pl.store(x_ptr + pl.arange(0, 4), v.to(pl.float16).to(pl.float32, fp_downcast_rounding="rtne"))
    elif WHICH == "to int":
        pl.store(x_ptr + pl.arange(0, 4), v.to(pl.int32, fp_downcast_rounding="rtne").to(pl.float32))


@pytest.mark.parametrize("which", ["widening", "to int"])
def test_downcast_rounding_only_on_narrowing_float_casts(which):
    from polytile.errors import CompilationError

    with pytest.raises(CompilationError, match="fp_downcast_rounding applies only to a conversion from a float to "
                                               "a narrower float"):
        rounding_on_other_casts_kernel[(1,)](np.zeros(4, np.float32), WHICH=which)


def test_every_name_in_the_dtype_lists_is_a_dtype():
    for name in (*pl.dtype.SINT_TYPES, *pl.dtype.UINT_TYPES, *pl.dtype.FP_TYPES):
        assert pl.dtype(name).name == name
    assert pl.dtype("fp8e4b15") == pl.float8e4b15 and pl.dtype("fp8e4b15") != pl.float8e4b8


@jit
def fp8_arith_kernel(x_ptr, y_ptr, out_ptr, DT: pl.constexpr):
    offs = pl.arange(0, 16)
    x = pl.load(x_ptr + offs)
    y = pl.load(y_ptr + offs)
    # Arithmetic on 8-bit floats computes in f32 and rounds once to the type (saturating),
    # on every target (Triton keeps fp8 op fp8 in fp8).
    pl.store(out_ptr + offs, pl.abs(x) * y + pl.maximum(x, y))


def fp8_operands(fp8, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two 16-element operands of ``fp8`` (an emulated format) as bits; the first pair
    overflows e4m3 (600 + 300 saturates)."""
    rng = np.random.default_rng(seed)
    x, y = (fp8.encode(fp8.round(rng.standard_normal(16).astype(np.float32) * 8)) for _ in range(2))
    x[0], y[0] = fp8.encode(np.float32(300.0)), fp8.encode(np.float32(2.0))
    return x, y


@pytest.mark.parametrize("dt, kind", [(pl.float8e4nv, "f8e4m3"), (pl.float8e5, "f8e5m2")], ids=["e4m3", "e5m2"])
def test_fp8_arithmetic(target, dt, kind):
    from polytile import reinterpret
    from polytile.dialects.emulated_floats import EMULATED_FLOATS

    fp8 = EMULATED_FLOATS[kind]
    x, y = fp8_operands(fp8, 4)
    out = np.zeros(16, np.uint8)
    fp8_arith_kernel[(1,)](*(reinterpret(a, dt) for a in (x, y, out)), DT=dt, target=target)
    xv, yv = fp8.decode(x), fp8.decode(y)
    product = fp8.round(np.abs(xv) * yv)
    expected = fp8.round(product + fp8.round(np.maximum(xv, yv)))
    np.testing.assert_array_equal(fp8.decode(out), expected)
