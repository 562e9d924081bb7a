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

_LAZY_MODULES = {"config", "ir", "passes", "dialects", "testing", "compiler", "plugins", "errors"}


def __getattr__(name: str) -> Any:
    # PEP 562: polytile.config, polytile.ir ... import on first touch.
    if name in _LAZY_MODULES:
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'polytile' has no attribute '{name}'")


__all__ = [
    "CompilationError", "ConfigError", "IRParseError", "PassFailure", "PluginConflictError", "PluginError",
    "PolytileError", "Target", "TargetError", "UnknownNameError", "VerificationError", "__version__", "config",
]
