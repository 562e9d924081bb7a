"""Triton's tutorial kernels run unchanged with ``import polytile as triton`` and
``import polytile.language as tl``, at small sizes, against NumPy: 02 and 03 from
triton_tutorials.py, 01 (vector add) and 05 (layer norm forward) from the bench's Triton
kernels (bench/triton_kernels.py, run the same way: tests/bench/loading.py)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

# Loaded by path: tests/ directories are not packages.
_spec = importlib.util.spec_from_file_location("language_triton_tutorials",
                                               Path(__file__).with_name("triton_tutorials.py"))
tut = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tut)

triton = tut.triton


def bench_triton_kernels():
    from tests.bench.loading import triton_kernels_on_polytile

    return triton_kernels_on_polytile()


@pytest.mark.parametrize("n", [98, 256])
def test_01_vector_add(target, n):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    output = np.zeros_like(x)
    n_elements = output.size
    grid = lambda meta: (triton.cdiv(n_elements, meta['BLOCK_SIZE']), )  # noqa: E731 (as the tutorial)
    bench_triton_kernels().add_kernel[grid](x, y, output, n_elements, BLOCK_SIZE=64, target=target)
    np.testing.assert_array_equal(output, x + y)


@pytest.mark.parametrize("shape", [(5, 13), (7, 32)])
def test_02_fused_softmax(target, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    n_rows, n_cols = x.shape
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    y = np.empty_like(x)
    num_programs = 3  # fewer programs than rows: each one strides over several rows
    tut.softmax_kernel[(num_programs, 1, 1)](y, x, x.strides[0] // x.itemsize, y.strides[0] // y.itemsize, n_rows,
                                             n_cols, BLOCK_SIZE=BLOCK_SIZE, num_stages=2, target=target)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("activation", ["", "leaky_relu"])
def test_03_matmul_with_autotune(target, activation):
    rng = np.random.default_rng(2)
    M, N, K = 40, 24, 50  # no size a multiple of every block: the masks and the `% M` wrap matter
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.empty((M, N), dtype=np.float16)
    grid = lambda META: (triton.cdiv(M, META['BLOCK_SIZE_M']) * triton.cdiv(N, META['BLOCK_SIZE_N']), )  # noqa: E731

    def stride(x, d):
        return x.strides[d] // x.itemsize

    tut.matmul_kernel[grid](a, b, c, M, N, K, stride(a, 0), stride(a, 1), stride(b, 0), stride(b, 1), stride(c, 0),
                            stride(c, 1), ACTIVATION=activation, target=target)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    if activation == "leaky_relu":
        ref = np.where(ref >= 0, ref, np.float32(0.01) * ref)
    np.testing.assert_allclose(c.astype(np.float32), ref.astype(np.float16).astype(np.float32), rtol=1e-2, atol=1e-2)
    assert tut.matmul_kernel.best_config.kwargs["BLOCK_SIZE_M"] in (16, 32)


@pytest.mark.parametrize("M, N, BLOCK_SIZE", [(3, 50, 16), (4, 64, 64)])
def test_05_layer_norm_forward(target, M, N, BLOCK_SIZE):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((M, N)).astype(np.float32)
    w, b = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    y, mean, rstd = np.empty_like(x), np.empty(M, np.float32), np.empty(M, np.float32)
    eps = 1e-5
    bench_triton_kernels().layer_norm_fwd_kernel[(M, )](x, y, w, b, mean, rstd, x.strides[0] // x.itemsize, N, eps,
                                                        BLOCK_SIZE=BLOCK_SIZE, target=target)
    mu = x.astype(np.float64).mean(axis=1)
    sigma = 1 / np.sqrt(x.astype(np.float64).var(axis=1) + eps)
    np.testing.assert_allclose(mean, mu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd, sigma, rtol=1e-5)
    np.testing.assert_allclose(y, (x - mu[:, None]) * sigma[:, None] * w + b, rtol=1e-4, atol=1e-5)
