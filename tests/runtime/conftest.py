"""Runtime tests count compilations: each gets its own, empty on-disk cache, so that a
kernel cached by an earlier run (or another test) is not a hit where a compile is expected.

They test the runtime on the interpreter, with NumPy arrays: on a machine with a GPU the
default target would be that GPU, so the target is the interpreter unless a test is
marked ``gpu`` (and then it names its target itself)."""

import pytest

from polytile import config


@pytest.fixture(autouse=True)
def _private_kernel_cache(tmp_path):
    with config.override(cache_dir=tmp_path / "kernel-cache"):
        yield tmp_path / "kernel-cache"


@pytest.fixture(autouse=True)
def _interpreter_unless_gpu(request, monkeypatch):
    if request.node.get_closest_marker("gpu") is None:
        monkeypatch.setenv("POLYTILE_TARGET", "interp")
