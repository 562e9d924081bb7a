"""The workspace form on a Hopper GPU: real tensor maps written into the workspace by one
kernel and read through by it or by another, against torch, at and past the edges of the
arrays; a map rule broken at run time stops the kernel (in a child process: a trap leaves
the CUDA context unusable)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import polytile.language as pl
from polytile.runtime import jit

torch = pytest.importorskip("torch", reason="the GPU descriptor tests hold their arrays in torch tensors")

from tests.backends.nvidia.fake_cuda import nvidia_gpu  # noqa: E402, F401  (a fixture)
from tests.plugins.tma.test_gpu_bulk import hopper  # noqa: E402, F401  (a fixture)
from tests.plugins.tma.test_workspace import scale_through_maps, workspace_matmul  # noqa: E402  (PTX-tested)

pytestmark = pytest.mark.gpu


def _cdiv(a, b):
    return (a + b - 1) // b


@pytest.mark.parametrize("shape", [(256, 256, 256), (200, 136, 104)])  # the second: every edge block partial
def test_a_matmul_through_maps_in_a_workspace_matches_torch(hopper, shape):
    m, n, k = shape
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16)
    c = torch.full((m + 8, n), 7.0, device="cuda", dtype=torch.float16)  # rows past M must stay
    grid = (_cdiv(m, 128), _cdiv(n, 128))
    workspace = torch.zeros(grid[0] * grid[1] * 3 * 128, dtype=torch.int8, device="cuda")  # 3 maps per program
    workspace_matmul[grid](a, b, c, workspace, m, n, k, BM=128, BN=128, BK=64, num_stages=3)
    torch.cuda.synchronize()
    torch.testing.assert_close(c[:m].float(), a.float() @ b.float().T, atol=0.1, rtol=0.02)
    assert bool((c[m:] == 7.0).all())


@jit
def make_maps(src, dst, workspace, m, n, BLOCK: pl.constexpr):
    pl.extra.cuda.experimental_device_tensormap_create2d(desc_ptr=workspace, global_address=src,
                                                         load_size=[BLOCK, BLOCK], global_size=[m, n],
                                                         element_ty=src.dtype.element_ty)
    pl.extra.cuda.experimental_device_tensormap_create2d(desc_ptr=workspace + 128, global_address=dst,
                                                         load_size=[BLOCK, BLOCK], global_size=[m, n],
                                                         element_ty=dst.dtype.element_ty)


def test_maps_one_kernel_writes_are_read_by_another(hopper):
    m, n, block = 100, 72, 64  # every edge block partial: the maps read zeros and drop stores past the edges
    src = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    out = torch.full((m, n), -1.0, device="cuda", dtype=torch.bfloat16)
    workspace = torch.zeros(256, dtype=torch.int8, device="cuda")
    make_maps[(1,)](src, out, workspace, m, n, BLOCK=block)
    scale_through_maps[(_cdiv(m, block), _cdiv(n, block))](workspace, BLOCK=block)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, src * 2)


CHILD = textwrap.dedent('''
    import sys
    import torch
    import polytile.language as pl
    from polytile import config
    from tests.plugins.tma.test_gpu_workspace import make_maps

    m, n, offset, debug = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "debug"
    shift = int(sys.argv[5])  # elements the array starts past an aligned address
    src = torch.zeros(m * n + 64, device="cuda", dtype=torch.float16)[shift:]
    workspace = torch.zeros(512, dtype=torch.int8, device="cuda")
    with config.override(cache=False):
        make_maps[(1,)](src, src, workspace[offset:], m, n, BLOCK=64, debug=debug)
    try:
        torch.cuda.synchronize()
    except Exception as exc:  # the CUDA context is gone after a trap
        print("SYNC-ERROR:", type(exc).__name__, exc, flush=True)
        sys.exit(3)
    print("SYNC-OK", flush=True)
''')


def _child(tmp_path, m, n, offset, mode, shift=0):
    script = tmp_path / "workspace_child.py"
    script.write_text(CHILD)
    root = str(Path(__file__).resolve().parents[3])  # the checkout: the child imports this module's kernel
    return subprocess.run([sys.executable, str(script), str(m), str(n), str(offset), mode, str(shift)],
                          capture_output=True, text=True, timeout=240, cwd=root, env={**os.environ, "PYTHONPATH": root})


@pytest.mark.parametrize("m, n, offset, shift, rule", [
    (64, 100, 0, 0, "a row (global_size[1] elements of f16) must be a multiple of 16 bytes"),
    (64, 64, 16, 0, "desc_ptr must be 128-byte aligned"),
    (64, 64, 0, 4, "global_address must be 16-byte aligned"),  # 8 bytes past an aligned address
])
def test_a_broken_map_rule_stops_the_kernel_and_debug_says_which(hopper, tmp_path, m, n, offset, shift, rule):
    plain = _child(tmp_path, m, n, offset, "plain", shift)
    assert plain.returncode == 3 and "SYNC-ERROR" in plain.stdout, plain.stdout + plain.stderr
    debug = _child(tmp_path, m, n, offset, "debug", shift)
    output = debug.stdout + debug.stderr
    assert debug.returncode == 3 and rule in output, output


def test_a_map_that_keeps_the_rules_runs(hopper, tmp_path):
    done = _child(tmp_path, 64, 64, 128, "plain")
    assert done.returncode == 0 and "SYNC-OK" in done.stdout, done.stdout + done.stderr
