"""On an NVIDIA GPU: pl.inline_asm_elementwise runs its PTX (one element per instance,
four bytes per register with pack=4, two results, a scalar argument), against NumPy.
Skipped without a GPU (and torch with CUDA for the arrays)."""

from __future__ import annotations

import numpy as np
import pytest

from language.test_inline_asm import (funnel_shift_kernel, packed_bytes_kernel, pointer_operands_kernel,
                                      two_results_kernel)

from .fake_cuda import nvidia_gpu, torch_cuda  # noqa: F401  (nvidia_gpu is a fixture)

pytestmark = pytest.mark.gpu


def test_funnel_shift(nvidia_gpu):  # noqa: F811
    torch = torch_cuda()
    x = torch.randint(-2**31, 2**31 - 1, (256,), dtype=torch.int32, device="cuda")
    y = torch.randint(-2**31, 2**31 - 1, (256,), dtype=torch.int32, device="cuda")
    out = torch.empty_like(x)
    funnel_shift_kernel[(1,)](x, y, out, 5, N=256)
    xs, ys = x.cpu().numpy().astype(np.uint32), y.cpu().numpy().astype(np.uint32)
    # shf.l.wrap: the high 32 bits of (y:x) << 5
    expected = ((ys.astype(np.uint64) << 32 | xs) << np.uint64(5)) >> np.uint64(32)
    assert (out.cpu().numpy().astype(np.uint32) == expected.astype(np.uint32)).all()


def test_four_bytes_per_register(nvidia_gpu):  # noqa: F811
    torch = torch_cuda()
    x = torch.randint(0, 256, (512,), dtype=torch.uint8, device="cuda")
    out = torch.empty(512, dtype=torch.int8, device="cuda")
    packed_bytes_kernel[(1,)](x, out, N=512)
    expected = ((x.cpu().numpy() & 0x1F) << 3).astype(np.uint8).view(np.int8)
    assert (out.cpu().numpy() == expected).all()


def test_two_results(nvidia_gpu):  # noqa: F811
    torch = torch_cuda()
    x = torch.randint(-2**62, 2**62, (128,), dtype=torch.int64, device="cuda")
    lo, hi = (torch.empty(128, dtype=torch.int32, device="cuda") for _ in range(2))
    two_results_kernel[(1,)](x, lo, hi, N=128)
    as_words = x.cpu().numpy().view(np.int32).reshape(128, 2)
    assert (lo.cpu().numpy() == as_words[:, 0]).all() and (hi.cpu().numpy() == as_words[:, 1]).all()


def test_pointer_operands(nvidia_gpu):  # noqa: F811
    torch = torch_cuda()
    x = torch.randint(0, 256, (512,), dtype=torch.uint8, device="cuda")
    y = torch.zeros(512, dtype=torch.uint8, device="cuda")
    pointer_operands_kernel[(1,)](x, y, N=512)
    assert (y.cpu().numpy() == (x.cpu().numpy() << 3).astype(np.uint8)).all()
