"""The test modules of tests/language (not a package) loaded under names of their own, so
that the simulator tests here run the same kernels the language tests run on devices."""

from __future__ import annotations

import importlib.util
import pathlib
from types import ModuleType


def language_tests(name: str) -> ModuleType:
    """``tests/language/<name>.py``, loaded as ``_simulated_<name>``."""
    path = pathlib.Path(__file__).parents[1] / "language" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_simulated_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
