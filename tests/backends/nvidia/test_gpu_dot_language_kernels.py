"""On a GPU: the language suite's dot kernels (tests/language/test_dot.py and
test_builtins.py), launched directly on torch tensors rather than through the language
suite's NumPy round trip, against NumPy; the same cases tests/gpu/test_lowering_dot_kernels.py
runs on the CTA simulator.  A failure here is the compiler's; one only in tests/language
is the round trip's.  Skipped without a supported NVIDIA GPU (and torch with CUDA)."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

import polytile.language as pl

from .fake_cuda import nvidia_gpu, torch_cuda  # noqa: F401  (nvidia_gpu is a fixture)

pytestmark = pytest.mark.gpu


def _language_tests(name: str):
    path = pathlib.Path(__file__).parents[2] / "language" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_launched_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


test_dot = _language_tests("test_dot")
test_builtins = _language_tests("test_builtins")


def cuda(array):
    return torch_cuda().from_numpy(np.ascontiguousarray(array)).cuda()


def launch_language_dot(dtype, result, mnk, acc, precision="ieee", out=None, alias=False):
    m, n, k = mnk
    rng = np.random.default_rng(0)
    # Small integers: every product and sum is exact in every type, tf32 included.
    a, b = rng.integers(-4, 5, (m, k)).astype(dtype), rng.integers(-4, 5, (k, n)).astype(dtype)
    c_init = rng.integers(-4, 5, (m, n)).astype(result)
    c = cuda(np.zeros((m, n), result))
    blocks = [max(16, 1 << (d - 1).bit_length()) for d in mnk]
    test_dot.dot_kernel[(1,)](cuda(a), cuda(b), c, c if alias else cuda(c_init), m, n, k, *blocks, ACC=acc,
                              PRECISION=precision, OUT=out, target="nvidia")
    expected = a.astype(np.int64) @ b.astype(np.int64) + (c_init if acc else 0)
    return c.cpu().numpy(), expected.astype(result)


@pytest.mark.parametrize("dtype, result, precision, mnk, acc", [
    (np.float32, np.float32, "ieee", (16, 16, 16), False),
    (np.float32, np.float32, "ieee", (20, 33, 45), True),
    (np.float32, np.float32, "tf32", (16, 16, 32), True),
    (np.float32, np.float32, "tf32x3", (16, 16, 16), False),
    (np.float16, np.float32, "ieee", (20, 33, 45), True),
    (np.int8, np.int32, "ieee", (16, 16, 32), True),
    (np.float64, np.float64, "ieee", (16, 16, 16), True),
])
def test_language_dot_kernel(nvidia_gpu, dtype, result, precision, mnk, acc):
    got, expected = launch_language_dot(dtype, result, mnk, acc, precision)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("precision", ["ieee", "tf32", "tf32x3"])
def test_result_and_accumulator_on_one_tensor(nvidia_gpu, precision):
    got, expected = launch_language_dot(np.float32, np.float32, (16, 16, 32), False, precision, alias=True)
    np.testing.assert_array_equal(got, expected)


def test_f16_out_dtype(nvidia_gpu):
    got, expected = launch_language_dot(np.float16, np.float16, (16, 16, 16), False, out=pl.float16, alias=True)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("acc", [False, True])
def test_builtins_dot_kernel(nvidia_gpu, dtype, acc):
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((16, 32)).astype(dtype), rng.standard_normal((32, 16)).astype(dtype)
    c = cuda(np.zeros((16, 16), np.float32))
    test_builtins.dot_kernel[(1,)](cuda(a), cuda(b), c, 16, 16, 32, ACC=acc, target="nvidia")
    # f32 defaults to tf32 (10 mantissa bits per input), as in Triton.
    tolerance = 5e-3 if dtype == np.float32 else 1e-3
    np.testing.assert_allclose(c.cpu().numpy(), a.astype(np.float64) @ b + (1.0 if acc else 0.0), rtol=tolerance,
                               atol=tolerance * 8)
