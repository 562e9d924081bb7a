"""Runtime tests count compilations: each gets its own, empty on-disk cache, so that a
kernel cached by an earlier run (or another test) is not a hit where a compile is expected."""

import pytest

from polytile import config


@pytest.fixture(autouse=True)
def _private_kernel_cache(tmp_path):
    with config.override(cache_dir=tmp_path / "kernel-cache"):
        yield tmp_path / "kernel-cache"

