"""Flash attention, forward: softmax(Q K^T / sqrt(d)) V one block of queries per program,
streaming over the keys with a running max and sum (no N x N matrix is ever stored), causal
or not.  The second dot takes P straight from registers.  Run: python examples/flash_attention.py"""

import math

import numpy as np

import polytile as pt
import polytile.language as pl

from _device import device, host  # NumPy on the interpreter, torch tensors on a GPU


@pt.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, out_ptr, scale, seq_len,
                     HEAD_DIM: pl.constexpr, BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr, CAUSAL: pl.constexpr):
    # q, k, v and out are (batch * heads * seq_len, HEAD_DIM) rows, one head after another;
    # one program per block of queries of a head.
    block = pl.program_id(0)
    head = pl.program_id(1)  # batch and head together
    offs_m = block * BLOCK_M + pl.arange(0, BLOCK_M)
    offs_n = pl.arange(0, BLOCK_N)
    offs_d = pl.arange(0, HEAD_DIM)
    base = head * seq_len * HEAD_DIM
    q = pl.load(q_ptr + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < seq_len,
                other=0.0)
    m_i = pl.full((BLOCK_M,), float("-inf"), pl.float32)  # the running max of each row
    l_i = pl.zeros((BLOCK_M,), dtype=pl.float32)          # the running sum of exp
    acc = pl.zeros((BLOCK_M, HEAD_DIM), dtype=pl.float32)
    qk_scale = scale * 1.4426950408889634  # exp(x) = exp2(x * log2(e))
    end = pl.minimum((block + 1) * BLOCK_M, seq_len) if CAUSAL else seq_len
    for start in range(0, end, BLOCK_N):
        cols = start + offs_n
        # K^T's block: (HEAD_DIM, BLOCK_N)
        k = pl.load(k_ptr + base + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=cols[None, :] < seq_len,
                    other=0.0)
        qk = pl.dot(q, k)
        keep = cols[None, :] < seq_len
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= cols[None, :])
        qk = pl.where(keep, qk * qk_scale, float("-inf"))
        m_new = pl.maximum(m_i, pl.max(qk, axis=1))
        p = pl.exp2(qk - m_new[:, None])
        alpha = pl.exp2(m_i - m_new)
        l_i = l_i * alpha + pl.sum(p, axis=1)
        v = pl.load(v_ptr + base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=cols[:, None] < seq_len,
                    other=0.0)
        acc = pl.dot(p.to(pl.float16), v, acc * alpha[:, None])
        m_i = m_new
    out = acc / l_i[:, None]
    pl.store(out_ptr + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], out.to(pl.float16),
             mask=offs_m[:, None] < seq_len)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool, block_m: int = 64,
              block_n: int = 64) -> np.ndarray:
    """``softmax(q k^T / sqrt(d)) v`` over the last two axes of (batch, heads, seq_len, d) float16 arrays."""
    batch, heads, seq_len, head_dim = q.shape
    flat = [np.ascontiguousarray(x.reshape(batch * heads * seq_len, head_dim)) for x in (q, k, v)]
    out = np.empty_like(flat[0])
    out_on_device = device(out)
    grid = (pt.cdiv(seq_len, block_m), batch * heads)
    attention_kernel[grid](device(flat[0]), device(flat[1]), device(flat[2]), out_on_device,
                           1.0 / math.sqrt(head_dim), seq_len,
                           HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal, num_warps=4)
    return host(out_on_device).reshape(batch, heads, seq_len, head_dim)


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    q, k, v = (x.astype(np.float32) for x in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        scores = np.where(np.tril(np.ones((n, n), bool)), scores, -np.inf)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (scores / scores.sum(axis=-1, keepdims=True)) @ v


def main(batch: int = 1, heads: int = 2, seq_len: int = 100, head_dim: int = 64) -> bool:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((batch, heads, seq_len, head_dim)).astype(np.float16) for _ in range(3))
    ok = True
    for causal in (False, True):
        got = attention(q, k, v, causal)
        match = np.allclose(got, reference(q, k, v, causal), rtol=1e-2, atol=1e-2)
        print(f"attention{' (causal)' if causal else ''} {batch}x{heads}x{seq_len}x{head_dim}: "
              f"{'matches NumPy' if match else 'MISMATCH'}")
        ok = ok and match
    return ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
