"""The vendor libraries through torch, in the shape of the kernel modules: cuBLAS for the
matmul (``torch.matmul``) and SDPA's flash backend for attention, so that the matmul
mode's table has a column of what a user gets without writing a kernel.

Each name takes the same ``[grid](...)`` call as polytile's and Triton's kernels and
ignores the grid and the launch options.  Only the cases in :data:`CASES` have one; the
others are skipped for this column.
"""

from __future__ import annotations

from typing import Any

#: The cases this module serves.
CASES = frozenset({"matmul", "attention", "attention_causal"})


class _Launch:
    def __init__(self, run: Any):
        self._run = run

    def __getitem__(self, grid: Any) -> Any:
        return self._run


def _matmul(a: Any, b: Any, c: Any, M: int, N: int, K: int, *strides: Any, **meta: Any) -> None:
    import torch

    torch.matmul(a, b, out=c)


def _attention(q: Any, k: Any, v: Any, out: Any, scale: float, seq_len: int, HEAD_DIM: int, CAUSAL: bool,
               **meta: Any) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    heads = q.shape[0] // seq_len
    shape = (1, heads, seq_len, HEAD_DIM)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        result = scaled_dot_product_attention(q.view(shape), k.view(shape), v.view(shape), is_causal=CAUSAL,
                                              scale=scale)
    # SDPA has no output argument: the copy (one pass over the output) is timed too.
    out.view(shape).copy_(result)


matmul_kernel = _Launch(_matmul)
attention_kernel = _Launch(_attention)

__all__ = ["CASES", "attention_kernel", "matmul_kernel"]
