"""Blocked matrix multiplication, as Triton's matmul tutorial: one program per block of C,
programs ordered in groups for L2 reuse, a K loop carrying the accumulator, pl.dot on
float16 tiles accumulating in float32.  ``python -m bench matmul`` times this kernel.
Run: python examples/matmul.py"""

import numpy as np

import polytile as pt
import polytile.language as pl

from _device import device, host  # NumPy on the interpreter, torch tensors on a GPU


@pt.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr, BLOCK_K: pl.constexpr, GROUP_M: pl.constexpr = 8,
                  WS: pl.constexpr = False):
    # Programs walk the output in groups of GROUP_M block rows, so that the blocks of A
    # and B a group reads stay in L2 (Triton's matmul tutorial).
    pid = pl.program_id(axis=0)
    num_pid_m = pl.cdiv(M, BLOCK_M)
    num_pid_n = pl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    # Rows and columns past the edge wrap around (% M, % N): their loads stay in bounds
    # and need no mask, and the store below leaves them out.
    offs_am = (pid_m * BLOCK_M + pl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + pl.arange(0, BLOCK_N)) % N
    offs_k = pl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    acc = pl.zeros((BLOCK_M, BLOCK_N), dtype=pl.float32)
    # WS: warp_specialize=True splits the loop into a producer and the consumers.
    for k in pl.range(pl.cdiv(K, BLOCK_K), warp_specialize=WS):
        a = pl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = pl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = pl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)  # the output array's type: float16 here
    offs_cm = pid_m * BLOCK_M + pl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + pl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    pl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    (M, K), (_, N) = a.shape, b.shape
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)  # (the strides below are these arrays')
    c = np.empty((M, N), dtype=np.float16)
    c_on_device = device(c)
    grid = lambda meta: (pt.cdiv(M, meta["BLOCK_M"]) * pt.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
    matmul_kernel[grid](device(a), device(b), c_on_device, M, N, K, a.strides[0] // a.itemsize, a.strides[1] // a.itemsize,
                        b.strides[0] // b.itemsize, b.strides[1] // b.itemsize,
                        c.strides[0] // c.itemsize, c.strides[1] // c.itemsize,
                        BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=2)
    return host(c_on_device)


def main(M: int = 100, N: int = 72, K: int = 130) -> bool:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    reference = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    ok = np.allclose(matmul(a, b), reference, rtol=1e-2, atol=1e-2)
    print(f"matmul {M}x{K} @ {K}x{N}: {'matches NumPy' if ok else 'MISMATCH'}")
    return ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
