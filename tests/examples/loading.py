"""Loading the example scripts (examples/*.py) in tests, as ``python examples/NAME.py`` does.

A script finds its neighbour ``_device`` (where the examples keep their arrays) because
Python puts the script's directory first on ``sys.path``; the tests put it there too.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
#: Every example script (a helper module's name starts with "_"): one added to
#: examples/ is picked up by the tests that go over all of them.
EXAMPLES = sorted(path.stem for path in EXAMPLES_DIR.glob("*.py") if not path.stem.startswith("_"))


def load_example(name: str, module_name: str | None = None) -> ModuleType:
    if str(EXAMPLES_DIR) not in sys.path:
        sys.path.insert(0, str(EXAMPLES_DIR))
    spec = importlib.util.spec_from_file_location(module_name or f"example_{name}", EXAMPLES_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def keep_arrays_on_the_host(monkeypatch, multiprocessors: int = 4) -> None:
    """Examples launched for a GPU target with launching replaced by a recorder (compile
    tests on machines without a GPU) keep NumPy arrays: nothing runs, nothing is copied.
    The target has no device here, so ``polytile.device_properties()`` (a persistent
    kernel's SM count) answers for one with ``multiprocessors`` SMs."""
    import polytile

    load_example("vector_add")  # imports _device
    monkeypatch.setattr(sys.modules["_device"], "on_gpu", lambda: False)
    monkeypatch.setattr(polytile, "device_properties", lambda device=0, *, target=None: {
        "name": "no device (compile test)", "target": "", "index": device, "multiprocessor_count": multiprocessors,
        "warp_size": 32, "shared_memory_per_block": 0})
