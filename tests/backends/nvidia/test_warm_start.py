"""What a process launching an NVIDIA kernel from the disk cache imports and builds.

The timing itself is measured by ``python -m bench compile`` (bench/RESULTS.md); these
tests keep the two things that cost most off that path: importing cuda-bindings' Python
API (``cuda.bindings.driver``, 10-25 ms) and making dataclasses (a few hundred
microseconds each).  They run without a GPU: the path up to the first driver call is
the same.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

#: The dataclasses a warm start still makes: the backends' typed options, which backends
#: define as dataclasses (polytile.backend.BackendOptions documents it).
OPTION_CLASSES = {"BackendOptions", "NvidiaOptions", "AmdOptions"}


def _child(directory, script: str) -> dict:
    path = directory / "warm_child.py"  # a file: @jit reads its kernels' source
    path.write_text(textwrap.dedent(script))
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_warm_start_makes_no_dataclass_but_the_backend_options(tmp_path):
    found = _child(tmp_path, """
        import dataclasses, json
        made = []
        process = dataclasses._process_class
        def recording(cls, *args, **kwargs):
            made.append((cls.__module__, cls.__qualname__))
            return process(cls, *args, **kwargs)
        dataclasses._process_class = recording
        import polytile as pt
        import polytile.language as pl
        from polytile.plugins.manager import get_plugin_manager
        from polytile.runtime import cache

        @pt.jit
        def kernel(x, n, BLOCK: pl.constexpr):
            pl.store(x + pl.arange(0, BLOCK), 1.0)

        manager = get_plugin_manager()
        backend, target = manager.backends.resolve("nvidia:sm_90a")
        manager.cache_key_components(target, backend.parse_options({}))
        cache.dependency_hash(kernel)
        import polytile_nvidia.launcher, polytile_nvidia.driver
        print(json.dumps({"made": [name for module, name in made if module.startswith("polytile")]}))
    """)
    assert set(found["made"]) <= OPTION_CLASSES, found["made"]


def test_the_driver_calls_do_not_import_the_python_api(tmp_path):
    pytest.importorskip("cuda.bindings.cydriver")
    found = _child(tmp_path, """
        import json, sys
        from polytile_nvidia import driver
        from polytile_nvidia.driver_calls import DriverCalls
        calls = driver.bindings()
        print(json.dumps({"light": isinstance(calls, DriverCalls), "python_api": "cuda.bindings.driver" in sys.modules,
                          "passes": "polytile.passes.pass_base" in sys.modules}))
    """)
    assert found == {"light": True, "python_api": False, "passes": False}
