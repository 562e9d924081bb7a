"""Layer norm forward: one program per row, walking the row in BLOCK_SIZE chunks
(three passes: mean, variance, then normalize with weight and bias), as Triton's tutorial.
Also writes each row's mean and 1/std, which a backward pass would reuse.
Run: python examples/layer_norm.py"""

import numpy as np

import polytile as pt
import polytile.language as pl

from _device import device, empty, host  # NumPy on the interpreter, torch tensors on a GPU


@pt.jit
def layer_norm_fwd_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, n_cols, eps,
                          BLOCK_SIZE: pl.constexpr):
    row = pl.program_id(0)
    x_ptr += row * stride
    y_ptr += row * stride
    # Accumulate per lane and reduce once at the end: fewer reductions than one per chunk.
    acc = pl.zeros((BLOCK_SIZE,), dtype=pl.float32)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + pl.arange(0, BLOCK_SIZE)
        acc += pl.load(x_ptr + cols, mask=cols < n_cols, other=0.0).to(pl.float32)
    mean = pl.sum(acc, axis=0) / n_cols
    # Variance about the mean (two passes): stabler than E[x^2] - E[x]^2.
    acc = pl.zeros((BLOCK_SIZE,), dtype=pl.float32)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + pl.arange(0, BLOCK_SIZE)
        x = pl.load(x_ptr + cols, mask=cols < n_cols, other=0.0).to(pl.float32)
        d = pl.where(cols < n_cols, x - mean, 0.0)  # padding lanes must not add (0 - mean)^2
        acc += d * d
    var = pl.sum(acc, axis=0) / n_cols
    rstd = 1 / pl.sqrt(var + eps)
    pl.store(mean_ptr + row, mean)
    pl.store(rstd_ptr + row, rstd)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + pl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        w = pl.load(w_ptr + cols, mask=mask).to(pl.float32)
        b = pl.load(b_ptr + cols, mask=mask).to(pl.float32)
        x = pl.load(x_ptr + cols, mask=mask, other=0.0).to(pl.float32)
        pl.store(y_ptr + cols, (x - mean) * rstd * w + b, mask=mask)


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = 1e-5, block: int = 256):
    rows, cols = x.shape
    y = empty(x.shape, x.dtype)
    mean = empty(rows, np.float32)
    rstd = empty(rows, np.float32)
    layer_norm_fwd_kernel[(rows,)](device(x), y, device(weight), device(bias), mean, rstd, x.shape[1], cols, eps,
                                   BLOCK_SIZE=block)
    return host(y), host(mean), host(rstd)


def reference(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = 1e-5):
    mean = x.mean(axis=1, dtype=np.float64)
    var = x.var(axis=1, dtype=np.float64)
    rstd = 1 / np.sqrt(var + eps)
    y = (x - mean[:, None]) * rstd[:, None] * weight + bias
    return y.astype(np.float32), mean.astype(np.float32), rstd.astype(np.float32)


def main(rows: int = 32, cols: int = 1000) -> bool:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((rows, cols)) * 2 + 0.5).astype(np.float32)
    weight = rng.standard_normal(cols).astype(np.float32)
    bias = rng.standard_normal(cols).astype(np.float32)
    got, want = layer_norm(x, weight, bias), reference(x, weight, bias)
    ok = all(np.allclose(g, w, rtol=1e-4, atol=1e-4) for g, w in zip(got, want))
    print(f"layer norm of a {rows}x{cols} matrix: {'matches NumPy' if ok else 'MISMATCH'}")
    return ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
