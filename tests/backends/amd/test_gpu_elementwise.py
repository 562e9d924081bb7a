"""On an AMD GPU: kernels launched through ``kernel[grid](..., target="amd")`` match NumPy.

Skipped cleanly where there is no AMD GPU (no hip-python, no ROCm runtime, no device):
none of this has run on hardware yet.  Arrays are torch tensors on the GPU (ROCm builds
of torch call it "cuda").
"""

from __future__ import annotations

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile_amd import AmdBackend

pytestmark = pytest.mark.gpu


def _reason() -> str:
    try:
        devices = AmdBackend().active_devices()
    except Exception as exc:  # BackendUnavailable, or a broken runtime: either way, no device
        return f"no AMD GPU: {exc}"
    return "" if devices else "no AMD GPU: the ROCm runtime found none"


REASON = _reason()
if REASON:
    pytest.skip(REASON, allow_module_level=True)
torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or getattr(torch.version, "hip", None) is None:
    pytest.skip("torch built for ROCm cannot use the GPU here", allow_module_level=True)


@pt.jit
def add(x, y, out, n, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    pl.store(out + offs, pl.load(x + offs, mask=mask) + pl.load(y + offs, mask=mask), mask=mask)


@pt.jit
def math_kernel(x, out, n, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    v = pl.load(x + offs, mask=mask, other=1.0)
    pl.store(out + offs, pl.exp(v) + pl.sin(v) + pl.sqrt(pl.abs(v)), mask=mask)


@pt.jit
def row_sum(x, out, n, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    v = pl.load(x + pl.program_id(0) * n + offs, mask=offs < n, other=0.0)
    pl.store(out + pl.program_id(0), pl.sum(v, axis=0))


@pytest.mark.parametrize("n, block, num_warps", [(1, 64, 1), (1000, 256, 4), (98432, 1024, 8)])
def test_vector_add(n, block, num_warps):
    x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    out = torch.empty_like(x)
    add[(pt.cdiv(n, block),)](x, y, out, n, BLOCK=block, num_warps=num_warps, target="amd")
    np.testing.assert_array_equal(out.cpu().numpy(), (x + y).cpu().numpy())


def test_math():
    n = 5000
    x = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    math_kernel[(pt.cdiv(n, 512),)](x, out, n, BLOCK=512, target="amd")
    v = x.cpu().numpy()
    np.testing.assert_allclose(out.cpu().numpy(), np.exp(v) + np.sin(v) + np.sqrt(np.abs(v)), rtol=1e-5, atol=1e-5)


def test_row_sum_crosses_a_whole_wavefront():
    rows, n = 64, 1000
    x = torch.rand(rows, n, device="cuda")
    out = torch.empty(rows, device="cuda")
    row_sum[(rows,)](x, out, n, BLOCK=1024, target="amd")
    np.testing.assert_allclose(out.cpu().numpy(), x.cpu().numpy().sum(axis=1), rtol=1e-5)
