"""``test-print-axis-info``: writes the axis info analysis onto the IR, for tests and
debugging (``pt.axis_info`` on ops, ``pt.arg_axis_info`` on functions and loops)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..analysis.axis_info import AxisInfoAnalysis, annotate_axis_info
from .pass_base import Pass, PassContext, PreservedAnalyses


@dataclass
class TestPrintAxisInfo(Pass):
    """Annotate every value with its axis info (for tests and debugging)."""

    __test__ = False  # not a pytest test class, despite its name
    name: ClassVar[str] = "test-print-axis-info"
    summary: ClassVar[str] = "annotate ops with the axis info of their results"

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        annotate_axis_info(module, context.analyses.get(AxisInfoAnalysis, module))
        # Only discardable attributes were added; no analysis reads them.
        return PreservedAnalyses.all()


__all__ = ["TestPrintAxisInfo"]
