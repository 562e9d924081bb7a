"""pl.histogram (Triton's tl.histogram) on every target's pipeline: bins of several
sizes, signed and unsigned inputs, values outside the bins, a mask, many programs."""

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl


@pt.jit
def histogram_kernel(x_ptr, out_ptr, limit, N: pl.constexpr, BINS: pl.constexpr, MASKED: pl.constexpr):
    pid = pl.program_id(0)
    offs = pl.arange(0, N)
    x = pl.load(x_ptr + pid * N + offs)
    if MASKED:
        counts = pl.histogram(x, BINS, mask=offs < limit)
    else:
        counts = pl.histogram(x, BINS)
    pl.store(out_ptr + pid * BINS + pl.arange(0, BINS), counts)


def _expected(x, bins, keep=None):
    keep = np.ones(x.shape, bool) if keep is None else keep
    inside = (x.astype(np.int64) >= 0) & (x.astype(np.int64) < bins) & keep
    return np.stack([np.bincount(row[k].astype(np.int64), minlength=bins) for row, k in zip(x, inside)])


@pytest.mark.parametrize("n, bins, dtype", [
    (1024, 64, np.int32), (256, 256, np.uint8), (128, 8, np.int64), (64, 128, np.int16), (8, 2, np.int32),
])
def test_histogram(target, n, bins, dtype):
    programs = 3
    rng = np.random.default_rng(11)
    low = 0 if np.dtype(dtype).kind == "u" else -4
    high = min(bins + 4, np.iinfo(dtype).max + 1)
    x = rng.integers(low, high, (programs, n)).astype(dtype)  # some values outside the bins
    out = np.zeros((programs, bins), np.int32)
    histogram_kernel[(programs,)](x, out, n, N=n, BINS=bins, MASKED=False, target=target)
    np.testing.assert_array_equal(out, _expected(x, bins))


@pytest.mark.parametrize("limit", [0, 100, 256])
def test_histogram_with_a_mask(target, limit):
    x = np.random.default_rng(5).integers(0, 32, (2, 256)).astype(np.int32)
    out = np.zeros((2, 32), np.int32)
    histogram_kernel[(2,)](x, out, limit, N=256, BINS=32, MASKED=True, target=target)
    keep = np.broadcast_to(np.arange(256) < limit, x.shape)
    np.testing.assert_array_equal(out, _expected(x, 32, keep))


@pt.jit
def bad_histogram_kernel(x_ptr, WHICH: pl.constexpr):
    if WHICH == "bins":
        pl.histogram(pl.load(x_ptr + pl.arange(0, 8)), 10)
    elif WHICH == "float":
        pl.histogram(pl.load(x_ptr + pl.arange(0, 8)).to(pl.float32), 8)
    elif WHICH == "rank":
        pl.histogram(pl.load(x_ptr + pl.arange(0, 8)[:, None] + pl.arange(0, 2)[None, :]), 8)


@pytest.mark.parametrize("which, message", [
    ("bins", "pl.histogram: num_bins must be a compile-time power of two, got 10"),
    ("float", "pl.histogram counts the values of a 1-D integer tensor, got"),
    ("rank", "pl.histogram counts the values of a 1-D integer tensor, got"),
])
def test_bad_histograms_are_named(which, message):
    with pytest.raises(pt.CompilationError) as info:
        bad_histogram_kernel[(1,)](np.zeros(16, np.int32), WHICH=which)
    assert message in str(info.value)
