"""The vendor libraries through torch, in the shape of the kernel modules: cuBLAS for the
matmul (``torch.matmul``; for fp8, ``torch._scaled_mm`` with unit scales, where torch has
it) and SDPA's flash backend for attention, so that the matmul mode's table has a column
of what a user gets without writing a kernel.

Each name takes the same ``[grid](...)`` call as polytile's and Triton's kernels and
ignores the grid and the launch options.  Only the cases in :data:`CASES` have one; the
others are skipped for this column.
"""

from __future__ import annotations

from typing import Any


def _cases() -> frozenset[str]:
    import torch

    fp8 = {"matmul_fp8"} if hasattr(torch, "_scaled_mm") else set()  # else no torch number for fp8
    return frozenset({"matmul", "matmul_autotuned", "attention", "attention_causal", *fp8})


#: The cases this module serves.
CASES = _cases()


class _Launch:
    def __init__(self, run: Any):
        self._run = run

    def __getitem__(self, grid: Any) -> Any:
        return self._run


def _matmul(a: Any, b: Any, c: Any, M: int, N: int, K: int, *strides: Any, **meta: Any) -> None:
    import torch

    if a.element_size() == 1:  # fp8: B is (N, K), so b.t() is the column-major (K, N) _scaled_mm wants
        one = _unit_scale(a.device)
        # use_fast_accum: the fp8 tensor cores' own accumulation, as Triton's and polytile's
        # kernels use it (no promotion to full fp32 every few steps).
        torch._scaled_mm(a, b.t(), one, one, out_dtype=c.dtype, use_fast_accum=True, out=c)
    else:
        torch.matmul(a, b, out=c)


_SCALES: dict[Any, Any] = {}


def _unit_scale(device: Any) -> Any:
    """A float32 1.0 on ``device``, made once (not inside the timed call)."""
    import torch

    if device not in _SCALES:
        _SCALES[device] = torch.ones((), dtype=torch.float32, device=device)
    return _SCALES[device]


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
matmul_kernel_autotuned = matmul_kernel  # cuBLAS chooses its own kernel: the same column as the matmul's
attention_kernel = _Launch(_attention)

__all__ = ["CASES", "attention_kernel", "matmul_kernel", "matmul_kernel_autotuned"]
