"""polytile: a plugin-based, multi-backend compiler for Triton-style tile kernels.

``import polytile`` stays cheap: submodules (the IR, the passes, the plugin manager, the
backends) load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import (
    CompilationError,
    ConfigError,
    IRParseError,
    OutOfResourcesError,
    PassFailure,
    PluginConflictError,
    PluginError,
    PolytileError,
    TargetError,
    UnknownNameError,
    VerificationError,
)
from .target import Target

__version__ = "0.1.0"

_LAZY_MODULES = {"config", "ir", "passes", "dialects", "testing", "compiler", "plugins", "errors", "language",
                 "runtime"}
#: Host-side API (as in Triton's top level), imported from polytile.runtime on first use.
_RUNTIME_NAMES = {"jit", "cdiv", "next_power_of_2", "JITFunction", "LaunchError", "autotune", "heuristics", "Config",
                  "device_properties", "set_allocator", "reinterpret", "TensorWrapper"}


def __getattr__(name: str) -> Any:
    # PEP 562: polytile.config, polytile.jit ... import on first touch, so that
    # `import polytile` stays cheap.
    if name in _LAZY_MODULES:
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    if name in _RUNTIME_NAMES:
        value = getattr(importlib.import_module(".runtime", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'polytile' has no attribute '{name}'")


__all__ = [
    "CompilationError", "ConfigError", "IRParseError", "OutOfResourcesError", "PassFailure", "PluginConflictError", "PluginError",
    "PolytileError", "Target", "TargetError", "UnknownNameError", "VerificationError", "__version__", "config",
    "jit", "cdiv", "next_power_of_2", "JITFunction", "LaunchError", "autotune", "heuristics", "Config",
    "device_properties", "set_allocator", "reinterpret", "TensorWrapper",
]
