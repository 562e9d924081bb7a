"""Vector add: the smallest polytile kernel.  Run: python examples/vector_add.py"""

import numpy as np

import polytile as pt
import polytile.language as pl

from _device import device, empty, host  # NumPy on the interpreter, torch tensors on a GPU


@pt.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: pl.constexpr):
    pid = pl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + pl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = pl.load(x_ptr + offsets, mask=mask)
    y = pl.load(y_ptr + offsets, mask=mask)
    pl.store(out_ptr + offsets, x + y, mask=mask)


def add(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = empty(x.shape, x.dtype)
    n = x.size
    grid = lambda meta: (pt.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
    add_kernel[grid](device(x), device(y), out, n, BLOCK_SIZE=1024)
    return host(out)


def main(n: int = 98_432) -> bool:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    ok = np.array_equal(add(x, y), x + y)
    print(f"vector_add over {n} elements: {'matches NumPy' if ok else 'MISMATCH'}")
    return ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
