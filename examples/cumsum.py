"""Row-wise cumulative sum with pl.cumsum: one program per row, the row in one tile.
Run: python examples/cumsum.py"""

import numpy as np

import polytile as pt
import polytile.language as pl

from _device import device, empty, host  # NumPy on the interpreter, torch tensors on a GPU


@pt.jit
def cumsum_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK_SIZE: pl.constexpr):
    row = pl.program_id(axis=0)
    cols = pl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    # Masked-off lanes load 0, so they add nothing to the lanes before them; the sum is
    # kept in float32 whatever the input type.
    x = pl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(pl.float32)
    pl.store(out_ptr + row * stride + cols, pl.cumsum(x, axis=0), mask=mask)


def cumsum(x: np.ndarray) -> np.ndarray:
    rows, cols = x.shape
    x = np.ascontiguousarray(x)  # (the row stride below is this array's)
    out = empty(x.shape, x.dtype)
    cumsum_kernel[(rows,)](device(x), out, x.strides[0] // x.itemsize, cols, BLOCK_SIZE=pt.next_power_of_2(cols))
    return host(out)


def main(rows: int = 64, cols: int = 1000) -> bool:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    ok = np.allclose(cumsum(x), np.cumsum(x, axis=1), rtol=1e-4, atol=1e-4)
    print(f"cumsum of {rows} rows of {cols}: {'matches NumPy' if ok else 'MISMATCH'}")
    return ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
