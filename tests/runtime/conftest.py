"""Runtime tests count compilations: each gets its own, empty on-disk cache, so that a
kernel cached by an earlier run (or another test) is not a hit where a compile is expected.
The GPU tests take torch through ``cuda_torch``."""

import pytest

from polytile import config


@pytest.fixture(autouse=True)
def _private_kernel_cache(tmp_path):
    with config.override(cache_dir=tmp_path / "kernel-cache"):
        yield tmp_path / "kernel-cache"


@pytest.fixture
def cuda_torch():
    """torch, where the NVIDIA backend is installed and finds a device; else the test skips."""
    from polytile.plugins.manager import get_plugin_manager

    if get_plugin_manager().backends.find("nvidia") is None:
        pytest.skip("the NVIDIA backend is not installed")
    probe = get_plugin_manager().backends.probe("nvidia")
    if not probe.devices:
        pytest.skip(f"no NVIDIA device: {probe.reason}")
    return pytest.importorskip("torch")
