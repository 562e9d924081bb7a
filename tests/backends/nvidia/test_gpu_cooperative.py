"""On an NVIDIA GPU: ``launch_cooperative_grid=True`` (Triton's launch option) launches
every program at once, so a grid-wide barrier made of atomics completes; a grid the GPU
cannot hold at once is a launch error that says so."""

from __future__ import annotations

import pytest

import polytile as pt
import polytile.language as pl
from polytile.errors import LaunchError

from .fake_cuda import nvidia_gpu, torch_cuda  # noqa: F401  (nvidia_gpu is a fixture)

pytestmark = pytest.mark.gpu


@pt.jit
def grid_barrier_kernel(counter_ptr, out_ptr):
    pid = pl.program_id(0)
    pl.atomic_add(counter_ptr, 1)
    while pl.atomic_add(counter_ptr, 0) < pl.num_programs(0):  # every program waits for all
        pass
    pl.store(out_ptr + pid, pl.atomic_add(counter_ptr, 0))


def test_a_grid_barrier_completes(nvidia_gpu):  # noqa: F811
    torch = torch_cuda()
    programs = 2 * torch.cuda.get_device_properties(0).multi_processor_count
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    out = torch.zeros(programs, dtype=torch.int32, device="cuda")
    grid_barrier_kernel[(programs,)](counter, out, launch_cooperative_grid=True)
    torch.cuda.synchronize()
    assert (out == programs).all()


def test_a_grid_too_large_for_one_wave_is_refused(nvidia_gpu):  # noqa: F811
    torch = torch_cuda()
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    out = torch.zeros(1 << 20, dtype=torch.int32, device="cuda")
    with pytest.raises(LaunchError, match="launch_cooperative_grid=True needs every program of the grid resident "
                                          "at once"):
        grid_barrier_kernel[(1 << 20,)](counter, out, launch_cooperative_grid=True)
