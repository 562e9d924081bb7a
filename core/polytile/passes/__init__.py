"""Passes and the pass manager.  See docs/passes.md."""

from __future__ import annotations

from typing import Any

__all__ = ["Analysis", "AnalysisManager", "Pass", "PassContext", "PreservedAnalyses"]


def __getattr__(name: str) -> Any:
    # Imported when asked for: loading the core's plugin module (polytile.passes.builtin)
    # must not import the pass machinery, which a launch from the disk cache never uses.
    if name in __all__:
        from . import pass_base

        return getattr(pass_base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
