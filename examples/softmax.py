"""Fused row-wise softmax: one program per row, a reduction for the max and the sum.
Run: python examples/softmax.py"""

import numpy as np

import polytile as pt
import polytile.language as pl

from _device import device, empty, host  # NumPy on the interpreter, torch tensors on a GPU


@pt.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: pl.constexpr):
    row = pl.program_id(0)
    cols = pl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    # In float32 whatever the input type (float16 and bfloat16 rows too).
    x = pl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf")).to(pl.float32)
    x = x - pl.max(x, axis=0)
    numerator = pl.exp(x)
    denominator = pl.sum(numerator, axis=0)
    pl.store(out_ptr + row * out_row_stride + cols, numerator / denominator, mask=mask)


def softmax(x: np.ndarray) -> np.ndarray:
    rows, cols = x.shape
    out = empty(x.shape, x.dtype)
    softmax_kernel[(rows,)](out, device(x), x.shape[1], out.shape[1], cols, BLOCK_SIZE=pt.next_power_of_2(cols))
    return host(out)


def reference(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def main(rows: int = 64, cols: int = 781) -> bool:
    x = np.random.default_rng(0).standard_normal((rows, cols), dtype=np.float32)
    ok = np.allclose(softmax(x), reference(x), rtol=1e-5, atol=1e-6)
    print(f"softmax of a {rows}x{cols} matrix: {'matches NumPy' if ok else 'MISMATCH'}")
    return ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
