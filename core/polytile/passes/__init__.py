"""Passes and the pass manager.  See docs/passes.md."""

from .pass_base import Analysis, AnalysisManager, Pass, PassContext, PreservedAnalyses

__all__ = ["Analysis", "AnalysisManager", "Pass", "PassContext", "PreservedAnalyses"]
