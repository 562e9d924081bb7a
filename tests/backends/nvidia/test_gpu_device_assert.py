"""``device_assert`` on an NVIDIA GPU.

A failed assertion stops the kernel through ``__assertfail`` and leaves the process's CUDA
context unusable (as in CUDA C++ and Triton), so each check runs in a child process: the
child launches, synchronizes and reports what it saw; the parent checks the device's
message (the assertion's text, the kernel's file and line, the failing thread) and that
the failure reached Python as an error.  Skipped without a device or torch.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.gpu

CHILD = textwrap.dedent('''
    import sys
    import torch
    import polytile as pt
    import polytile.language as pl
    from polytile import config

    @pt.jit
    def check_positive(x_ptr, n, BLOCK: pl.constexpr):
        offs = pl.arange(0, BLOCK)
        mask = offs < n
        x = pl.load(x_ptr + offs, mask=mask, other=1)
        pl.device_assert(x > 0, "x must be positive", mask=mask)

    values, n, debug = eval(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "debug"
    x = torch.tensor(values, dtype=torch.int32, device="cuda")
    with config.override(cache=False):
        check_positive[(1,)](x, n, BLOCK=len(values), target="nvidia", num_warps=1, debug=debug)
    try:
        torch.cuda.synchronize()
    except Exception as exc:  # the CUDA context is gone after a device-side assertion
        print("SYNC-ERROR:", type(exc).__name__, exc, flush=True)
        sys.exit(3)
    print("SYNC-OK", flush=True)
''')


@pytest.fixture(scope="module")
def nvidia_device():
    from polytile.plugins.manager import get_plugin_manager

    probe = get_plugin_manager().backends.probe("nvidia")
    if not probe.devices:
        pytest.skip(f"no NVIDIA device: {probe.reason}")
    pytest.importorskip("torch")


def run_child(tmp_path, values, n, mode) -> subprocess.CompletedProcess:
    script = tmp_path / "assert_kernel.py"
    script.write_text(CHILD)
    return subprocess.run([sys.executable, str(script), repr(values), str(n), mode],
                          capture_output=True, text=True, timeout=240)


def test_a_failed_assertion_names_the_message_line_and_thread(nvidia_device, tmp_path):
    result = run_child(tmp_path, [1, -2] + [5] * 30, 32, "debug")
    output = result.stdout + result.stderr
    assert result.returncode == 3, output
    assert "SYNC-ERROR" in output and "assert" in output.lower(), output
    assert "x must be positive" in output, output  # printed by the device
    line = next(i for i, text in enumerate(CHILD.splitlines(), 1) if "pl.device_assert(" in text)
    assert f"assert_kernel.py:{line}" in output, output
    assert "thread: [1,0,0]" in output, output  # one warp, 32 elements: element 1 is thread 1's alone


def test_masked_lanes_and_true_conditions_do_not_fire(nvidia_device, tmp_path):
    result = run_child(tmp_path, [1, 2, 3, -9] + [7] * 28, 3, "debug")  # the negative lane is masked off
    assert result.returncode == 0 and "SYNC-OK" in result.stdout, result.stdout + result.stderr


def test_without_debug_assertions_are_not_checked(nvidia_device, tmp_path):
    # Triton's rule: device_assert is compiled in only with debug=True.
    result = run_child(tmp_path, [1, -2] + [5] * 30, 32, "nodebug")
    assert result.returncode == 0 and "SYNC-OK" in result.stdout, result.stdout + result.stderr
