"""pl.sort, pl.flip and pl.topk compiled for nvidia:sm_90a and run on the CTA simulator
(tests/gpu/llvm_cta.py): their permutes, splits and joins through the GPU layouts and
shared memory, without a GPU (tests/language/test_sorting.py runs them on devices)."""

from __future__ import annotations

import numpy as np
import pytest

from polytile.compiler import compile_module

from .language_tests import language_tests
from .llvm_cta import run_kernel

pytest.importorskip("polytile_nvidia")

test_sorting = language_tests("test_sorting")


@pytest.mark.parametrize("dtype, shape, k, dim, descending", [
    (np.float32, (4, 8), 2, 1, False), (np.int32, (2, 16), 4, 0, True), (np.float16, (8, 4), 4, 1, True),
])
def test_reorders_on_the_simulator(dtype, shape, k, dim, descending):
    rng = np.random.default_rng(3)
    x = rng.integers(-50, 100, shape).astype(dtype)
    outs = [np.zeros_like(x), np.zeros_like(x), np.zeros((shape[0], k), dtype)]
    args = [x, *outs]
    meta = dict(M=shape[0], N=shape[1], DIM=dim, DESCENDING=descending, K=k)
    module = test_sorting.reorder_kernel.lower(*args, **meta)
    artifacts = compile_module(module, "nvidia:sm_90a", num_warps=4).context.artifacts
    run_kernel(artifacts, args, 4)
    expected = np.sort(x, axis=dim)
    np.testing.assert_array_equal(outs[0], np.flip(expected, axis=dim) if descending else expected)
    np.testing.assert_array_equal(outs[1], np.flip(x, axis=dim))
    np.testing.assert_array_equal(outs[2], np.flip(np.sort(x, axis=1), axis=1)[:, :k])
