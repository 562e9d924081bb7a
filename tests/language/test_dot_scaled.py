"""pl.dot_scaled (language/scaled_dot.py) against a NumPy reference of Triton's emulation:
every operand format, scales on either side or both, fp4 packed along K or along M/N,
an accumulator, fast_math and NaN scales, batched operands; and its errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import polytile.language as pl
from polytile import reinterpret
from polytile.dialects.emulated_floats import EMULATED_FLOATS
from polytile.errors import CompilationError
from polytile.runtime import jit

FORMATS = ("e2m1", "e4m3", "e5m2", "bf16", "fp16")
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])
BF16 = EMULATED_FLOATS["bf16"]


@jit
def dot_scaled_kernel(a_ptr, sa_ptr, b_ptr, sb_ptr, acc_ptr, out_ptr, M: pl.constexpr, N: pl.constexpr,
                      K: pl.constexpr, FA: pl.constexpr, FB: pl.constexpr, A_SHAPE: pl.constexpr,
                      B_SHAPE: pl.constexpr, A_K_PACK: pl.constexpr, B_K_PACK: pl.constexpr, FAST: pl.constexpr):
    a = pl.load(a_ptr + pl.arange(0, A_SHAPE[0])[:, None] * A_SHAPE[1] + pl.arange(0, A_SHAPE[1])[None, :])
    b = pl.load(b_ptr + pl.arange(0, B_SHAPE[0])[:, None] * B_SHAPE[1] + pl.arange(0, B_SHAPE[1])[None, :])
    sa = None
    if sa_ptr is not None:
        sa = pl.load(sa_ptr + pl.arange(0, M)[:, None] * (K // 32) + pl.arange(0, K // 32)[None, :])
    sb = None
    if sb_ptr is not None:
        sb = pl.load(sb_ptr + pl.arange(0, N)[:, None] * (K // 32) + pl.arange(0, K // 32)[None, :])
    out = pl.arange(0, M)[:, None] * N + pl.arange(0, N)[None, :]
    acc = None
    if acc_ptr is not None:
        acc = pl.load(acc_ptr + out)
    c = pl.dot_scaled(a, sa, FA, b, sb, FB, acc, fast_math=FAST, lhs_k_pack=A_K_PACK, rhs_k_pack=B_K_PACK)
    pl.store(out_ptr + out, c)


# -- the reference: Triton's emulation (upcast, scale in the compute type, fp32 dot) --------


def _values(x: np.ndarray, fmt: str, packed_axis: int) -> np.ndarray:
    """The elements ``x`` holds (float64): fp4 pairs unpacked along ``packed_axis``."""
    if fmt == "e2m1":
        lo, hi = E2M1[x & 15], E2M1[x >> 4]
        return np.stack([lo, hi], axis=packed_axis + 1 if packed_axis >= 0 else packed_axis).reshape(
            *(2 * d if i == packed_axis % x.ndim else d for i, d in enumerate(x.shape)))
    if fmt in ("e4m3", "e5m2"):
        return EMULATED_FLOATS["f8" + fmt].decode(x).astype(np.float64)
    if fmt == "bf16":
        return BF16.decode(x).astype(np.float64)
    return x.astype(np.float64)


def _factors(s: np.ndarray, compute: str, fast: bool) -> np.ndarray:
    """2 ** (s - 127) as the compute type holds it (bf16: the exponent's bits; fp16: through f32)."""
    if compute == "bf16":
        f = BF16.decode((s.astype(np.uint16) << 7)).astype(np.float64)
    else:
        with np.errstate(over="ignore"):
            f = (s.astype(np.uint32) << 23).view(np.float32).astype(np.float16).astype(np.float64)
    return f if fast else np.where(s == 255, np.nan, f)


def reference(a, sa, fa, b, sb, fb, acc=None, fast=False, a_k_pack=True, b_k_pack=True):
    compute = "fp16" if "fp16" in (fa, fb) else "bf16"
    x = _values(a, fa, -1 if a_k_pack else -2)
    y = _values(b, fb, -2 if b_k_pack else -1)
    to_compute = (lambda v: v.astype(np.float16).astype(np.float64)) if compute == "fp16" else \
        (lambda v: BF16.round(v).astype(np.float64))
    x, y = to_compute(x), to_compute(y)
    if sa is not None:
        with np.errstate(invalid="ignore"):  # 0 times an infinite fast_math scale
            x = to_compute(x * np.repeat(_factors(sa, compute, fast), 32, axis=-1))
    if sb is not None:
        y = to_compute(y * np.repeat(_factors(sb, compute, fast), 32, axis=-1).swapaxes(-1, -2))
    with np.errstate(invalid="ignore"):
        out = x @ y
    return out if acc is None else out + acc


def operand(rng, fmt: str, shape: tuple[int, ...]) -> np.ndarray:
    """Random bits of ``fmt`` (finite values of modest size), in the dtype a kernel loads."""
    if fmt == "e2m1":
        return rng.integers(0, 256, shape, dtype=np.uint8)
    if fmt in ("e4m3", "e5m2"):
        bits = rng.integers(0, 256, shape, dtype=np.uint8)
        return bits & (0xB7 if fmt == "e4m3" else 0xBB)  # exponents far from the top: finite
    values = rng.standard_normal(shape) * 4
    return values.astype(np.float16) if fmt == "fp16" else BF16.encode(BF16.round(values.astype(np.float32)))


def run(target, fa, fb, m, n, k, *, scale_a=True, scale_b=True, acc=False, fast=False, a_k_pack=True,
        b_k_pack=True, seed=0, scales=(118, 136), nan_scales=()):
    rng = np.random.default_rng(seed)
    a_shape = (m, k // 2 if fa == "e2m1" else k) if a_k_pack else (m // 2, k)
    b_shape = (k // 2 if fb == "e2m1" else k, n) if b_k_pack else (k, n // 2)
    a, b = operand(rng, fa, a_shape), operand(rng, fb, b_shape)
    sa = rng.integers(*scales, (m, k // 32), dtype=np.uint8) if scale_a else None
    sb = rng.integers(*scales, (n, k // 32), dtype=np.uint8) if scale_b else None
    for row, group in nan_scales:
        sa[row, group] = 0xFF
    c = rng.standard_normal((m, n)).astype(np.float32) if acc else None
    out = np.zeros((m, n), np.float32)
    kernel_a = reinterpret(a, pl.bfloat16) if fa == "bf16" else a
    kernel_b = reinterpret(b, pl.bfloat16) if fb == "bf16" else b
    dot_scaled_kernel[(1,)](kernel_a, sa, kernel_b, sb, c, out, M=m, N=n, K=k, FA=fa, FB=fb, A_SHAPE=a_shape,
                            B_SHAPE=b_shape, A_K_PACK=a_k_pack, B_K_PACK=b_k_pack, FAST=fast, target=target)
    return out, reference(a, sa, fa, b, sb, fb, c, fast, a_k_pack, b_k_pack)


def assert_close(out, expected):
    # fp32 accumulation in another order than float64's: relative to the sum of magnitudes.
    scale = np.abs(expected).max() or 1.0
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5 * scale)


# Each case compiles for every GPU arch in the compile-all run: a handful of them, which
# between them use every format on each side; every pair runs on the interpreter below.
CASES = [("e2m1", "e4m3", True, False), ("e4m3", "e2m1", False, True), ("e5m2", "bf16", True, False),
         ("fp16", "e2m1", True, True), ("bf16", "e5m2", False, True)]


@pytest.mark.parametrize("fa, fb, scale_a, scale_b", CASES)
def test_dot_scaled_matches_the_emulation(target, fa, fb, scale_a, scale_b):
    out, expected = run(target, fa, fb, 32, 64, 64, scale_a=scale_a, scale_b=scale_b)
    assert_close(out, expected)


def test_dot_scaled_fp4_packed_along_m_and_n_with_an_accumulator(target):
    out, expected = run(target, "e2m1", "e2m1", 64, 32, 64, a_k_pack=False, b_k_pack=False, acc=True)
    assert_close(out, expected)


@pytest.mark.parametrize("fa, fb", list(itertools.product(FORMATS, repeat=2)))
def test_every_pair_of_formats_on_the_interpreter(fa, fb):
    for scale_a, scale_b in ((True, True), (False, True), (True, False), (False, False)):
        out, expected = run("interp", fa, fb, 16, 32, 64, scale_a=scale_a, scale_b=scale_b, seed=len(fa + fb))
        assert_close(out, expected)


def test_scales_of_0xff_are_nan_unless_fast_math():
    poisoned = ((3, 1), (7, 0))
    out, expected = run("interp", "e4m3", "bf16", 16, 16, 64, scale_b=False, nan_scales=poisoned)
    rows = np.isnan(out).all(axis=1)
    assert rows.tolist() == [i in (3, 7) for i in range(16)] and not np.isnan(out[~rows]).any()
    assert_close(out[~rows], expected[~rows])
    # fast_math: such a scale is infinity (the exponent's bits as they are), so products are
    # infinite (NaN where the element is 0) and sums of both signs NaN, as the reference.
    out, expected = run("interp", "e4m3", "bf16", 16, 16, 64, scale_b=False, nan_scales=poisoned, fast=True)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))
    np.testing.assert_array_equal(np.isposinf(out), np.isposinf(expected))
    assert np.isinf(out[[3, 7]]).any() or np.isnan(out[[3, 7]]).all()
    finite = np.isfinite(expected)
    assert_close(out[finite], expected[finite])


@jit
def batched_dot_scaled_kernel(a_ptr, sa_ptr, b_ptr, out_ptr, B: pl.constexpr, M: pl.constexpr, N: pl.constexpr,
                              K: pl.constexpr):
    ib = pl.arange(0, B)[:, None, None]
    a = pl.load(a_ptr + ib * (M * K // 2) + pl.arange(0, M)[None, :, None] * (K // 2)
                + pl.arange(0, K // 2)[None, None, :])
    sa = pl.load(sa_ptr + ib * (M * K // 32) + pl.arange(0, M)[None, :, None] * (K // 32)
                 + pl.arange(0, K // 32)[None, None, :])
    b = pl.load(b_ptr + ib * (K * N) + pl.arange(0, K)[None, :, None] * N + pl.arange(0, N)[None, None, :])
    c = pl.dot_scaled(a, sa, "e2m1", b, None, "fp16")
    pl.store(out_ptr + ib * (M * N) + pl.arange(0, M)[None, :, None] * N + pl.arange(0, N)[None, None, :], c)


def test_batched_operands(target):
    rng = np.random.default_rng(7)
    a = rng.integers(0, 256, (2, 16, 32), dtype=np.uint8)
    sa = rng.integers(124, 131, (2, 16, 2), dtype=np.uint8)
    b = (rng.standard_normal((2, 64, 16)) * 2).astype(np.float16)
    out = np.zeros((2, 16, 16), np.float32)
    batched_dot_scaled_kernel[(1,)](a, sa, b, out, B=2, M=16, N=16, K=64, target=target)
    assert_close(out, reference(a, sa, "e2m1", b, None, "fp16"))


# -- errors -------------------------------------------------------------------------------


@jit
def bad_dot_scaled_kernel(x_ptr, y_ptr, WHAT: pl.constexpr):
    a = pl.load(x_ptr + pl.arange(0, 16)[:, None] * 32 + pl.arange(0, 32)[None, :])
    b = pl.load(y_ptr + pl.arange(0, 32)[:, None] * 16 + pl.arange(0, 16)[None, :])
    s = pl.load(x_ptr + pl.arange(0, 16)[:, None] + pl.arange(0, 2)[None, :])
    if WHAT == "format":
        pl.dot_scaled(a, None, "e3m2", b, None, "e4m3")
    elif WHAT == "dtype":
        pl.dot_scaled(a.to(pl.int16), None, "e4m3", b, None, "e4m3")
    elif WHAT == "k":
        pl.dot_scaled(a, None, "e2m1", b, None, "e4m3")
    elif WHAT == "scale shape":
        pl.dot_scaled(a, s, "e4m3", b, None, "e4m3")
    elif WHAT == "out_dtype":
        pl.dot_scaled(a, None, "e4m3", b, None, "e4m3", out_dtype=pl.float16)
    elif WHAT == "k_pack":
        pl.dot_scaled(a, None, "e4m3", b, None, "e4m3", lhs_k_pack=False)
    elif WHAT == "scale dtype":
        pl.dot_scaled(a, s.to(pl.int32), "e4m3", b, None, "e4m3")


@pytest.mark.parametrize("what, message", [
    ("format", r"lhs_format must be one of 'e2m1', 'e4m3', 'e5m2', 'bf16', 'fp16', got 'e3m2'"),
    ("dtype", r"lhs in e4m3 must be pl.float8e4nv or pl.uint8 \(its bits\), got pl.int16"),
    ("k", r"different numbers of elements along K: lhs \[16, 32\] in e2m1 is \[16, 64\], rhs \[32, 16\] in e4m3"),
    ("scale shape", r"lhs_scale must be a tensor of shape \[16, 1\], got \[16, 2\]"),
    ("out_dtype", r"out_dtype must be pl.float32"),
    ("k_pack", r"lhs_k_pack=False packs fp4 pairs along M or N; only e2m1 operands are packed, and lhs is e4m3"),
    ("scale dtype", r"lhs_scale must be uint8 \(e8m0 exponents, one per 32 elements along K\) or float8e4nv"),
])
def test_mistakes_are_located_errors(what, message):
    x, y = np.zeros(16 * 32, np.uint8), np.zeros(32 * 16, np.uint8)
    with pytest.raises(CompilationError, match=message) as info:
        bad_dot_scaled_kernel[(1,)](x, y, WHAT=what)
    assert "test_dot_scaled.py" in str(info.value)
