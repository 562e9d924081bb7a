"""A persistent matrix multiplication: one program per SM (the interpreter: per CPU core),
each looping over output tiles with a stride of the program count, the K loop inside.
The grid is sized from ``polytile.device_properties()`` (Triton users write
``torch.cuda.get_device_properties(0).multi_processor_count``, which works too).
``flatten=True`` on the tile loop lets a GPU load the next tile's first K blocks while
this tile is stored (docs/gpu-lowering.md, "Persistent loops"); it takes ``c`` not to
overlap ``a`` or ``b``, as Triton does.
Run: python examples/persistent_matmul.py"""

import numpy as np

import polytile as pt
import polytile.language as pl

from _device import device, host  # NumPy on the interpreter, torch tensors on a GPU


@pt.jit
def persistent_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                             stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                             BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr, BLOCK_K: pl.constexpr,
                             NUM_PROGRAMS: pl.constexpr):
    num_pid_n = pl.cdiv(N, BLOCK_N)
    num_tiles = pl.cdiv(M, BLOCK_M) * num_pid_n
    # Tiles pid, pid + NUM_PROGRAMS, ...: every program walks its share of the output.
    for tile_id in pl.range(pl.program_id(0), num_tiles, NUM_PROGRAMS, flatten=True):
        offs_m = (tile_id // num_pid_n) * BLOCK_M + pl.arange(0, BLOCK_M)
        offs_n = (tile_id % num_pid_n) * BLOCK_N + pl.arange(0, BLOCK_N)
        offs_k = pl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
        acc = pl.zeros((BLOCK_M, BLOCK_N), dtype=pl.float32)
        for k in range(0, pl.cdiv(K, BLOCK_K)):
            k_left = K - k * BLOCK_K
            a = pl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
            b = pl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
            acc = pl.dot(a, b, acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        pl.store(c_ptrs, acc.to(pl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def persistent_matmul(a: np.ndarray, b: np.ndarray, block: int = 32) -> np.ndarray:
    (M, K), (_, N) = a.shape, b.shape
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    c = np.empty((M, N), dtype=np.float16)
    c_on_device = device(c)
    tiles = pt.cdiv(M, block) * pt.cdiv(N, block)
    programs = min(pt.device_properties()["multiprocessor_count"], tiles)
    persistent_matmul_kernel[(programs,)](
        device(a), device(b), c_on_device, M, N, K, K, 1, N, 1, N, 1,
        BLOCK_M=block, BLOCK_N=block, BLOCK_K=block, NUM_PROGRAMS=programs)
    return host(c_on_device)


def main(M: int = 100, N: int = 72, K: int = 130) -> bool:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    reference = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    ok = np.allclose(persistent_matmul(a, b), reference, rtol=1e-2, atol=1e-2)
    print(f"persistent matmul {M}x{K} @ {K}x{N}: {'matches NumPy' if ok else 'MISMATCH'}")
    return ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
