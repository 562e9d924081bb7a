"""A compile-time global read by a helper in another module invalidates the kernel."""

from __future__ import annotations

import importlib
import sys
import textwrap

import numpy as np
import pytest

from polytile import config


@pytest.fixture
def modules(tmp_path, monkeypatch):
    (tmp_path / "scale_helpers.py").write_text(textwrap.dedent("""
        import polytile as pt

        SCALE = 2


        @pt.jit
        def helper(x):
            return x * SCALE
    """))
    (tmp_path / "scale_kernel.py").write_text(textwrap.dedent("""
        import polytile as pt
        import polytile.language as pl
        import scale_helpers


        @pt.jit
        def kernel(out):
            pl.store(out, scale_helpers.helper(5))
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield importlib.import_module("scale_helpers"), importlib.import_module("scale_kernel")
    for name in ("scale_helpers", "scale_kernel"):
        sys.modules.pop(name, None)


@pytest.mark.parametrize("cache", [True, False])
def test_changing_a_helpers_global_recompiles_once(modules, cache, tmp_path):
    helpers, kernels = modules
    out = np.zeros(1, np.int32)
    with config.override(cache=cache, cache_dir=str(tmp_path / "kernels"), target="interp"):
        kernels.kernel[(1,)](out)
        assert out[0] == 10
        helpers.SCALE = 7
        kernels.kernel[(1,)](out)
        assert out[0] == 35
        for _ in range(5):
            kernels.kernel[(1,)](out)
        assert kernels.kernel.compile_count + kernels.kernel.disk_hits == 2  # not once per launch
