"""polytile.testing on a GPU: do_bench through CUDA events and do_bench_cudagraph with
polytile kernels captured in a CUDA graph (the host-clock path: tests/test_testing.py)."""

from __future__ import annotations

import pytest

import polytile.language as pl
from polytile import testing
from polytile.runtime import jit

from .fake_cuda import nvidia_gpu, torch_cuda  # noqa: F401  (nvidia_gpu is a fixture)

pytestmark = pytest.mark.gpu


@jit
def add_one(x_ptr, n, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    pl.store(x_ptr + offs, pl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


def test_do_bench_times_a_kernel_with_cuda_events(nvidia_gpu):
    torch = torch_cuda()
    x = torch.zeros(1 << 20, device="cuda")
    run = lambda: add_one[(1 << 10,)](x, x.numel(), BLOCK=1024, target="nvidia")  # noqa: E731
    ms = testing.do_bench(run, warmup=5, rep=20)
    low, high = testing.do_bench(run, warmup=5, rep=20, quantiles=[0.1, 0.9])
    assert 0 < low <= high and 0 < ms < 10
    assert x[0].item() > 1  # the kernel ran every time


def test_do_bench_cudagraph_replays_polytile_launches(nvidia_gpu):
    torch = torch_cuda()
    x = torch.zeros(1 << 16, device="cuda")
    ms = testing.do_bench_cudagraph(lambda: add_one[(64,)](x, x.numel(), BLOCK=1024, target="nvidia"), rep=5)
    assert 0 < ms < 10
    before = x[0].item()
    assert before >= 1
    testing.assert_close(x, torch.full_like(x, before))  # every launch in the graph covered every element
