"""Atomic histogram: every program counts its block of values into one shared histogram
with pl.atomic_add, so no count is lost whatever order programs run in.
Run: python examples/histogram.py"""

import numpy as np

import polytile as pt
import polytile.language as pl

from _device import device, host, zeros  # NumPy on the interpreter, torch tensors on a GPU


@pt.jit
def histogram_kernel(x_ptr, hist_ptr, n_elements, NUM_BINS: pl.constexpr, BLOCK_SIZE: pl.constexpr):
    pid = pl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + pl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = pl.load(x_ptr + offsets, mask=mask, other=0)
    # Values outside [0, NUM_BINS) are not counted (np.bincount would grow instead).
    in_range = mask & (x >= 0) & (x < NUM_BINS)
    pl.atomic_add(hist_ptr + x, 1, mask=in_range, sem="relaxed")


def histogram(x: np.ndarray, num_bins: int) -> np.ndarray:
    hist = zeros(num_bins, np.int32)
    n = x.size
    grid = lambda meta: (pt.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
    histogram_kernel[grid](device(x), hist, n, NUM_BINS=num_bins, BLOCK_SIZE=1024)
    return host(hist)


def main(n: int = 100_000, num_bins: int = 64) -> bool:
    rng = np.random.default_rng(0)
    x = rng.integers(0, num_bins, n, dtype=np.int32)
    ok = np.array_equal(histogram(x, num_bins), np.bincount(x, minlength=num_bins))
    print(f"histogram of {n} values into {num_bins} bins: {'matches np.bincount' if ok else 'MISMATCH'}")
    return ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
