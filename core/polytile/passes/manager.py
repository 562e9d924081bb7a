"""The pass manager: runs a pipeline over a module with instrumentation.

A pass that raises a :class:`~polytile.errors.PolytileError` (a user's mistake found while
compiling) lets it through unchanged.  Any other exception is an internal compiler
error: it becomes :class:`~polytile.errors.PassFailure`, naming the pass, and the IR the
pass was given is written to a file whose path the message gives.
"""

from __future__ import annotations

import tempfile
import traceback
import time
from typing import Any, Iterable

from ..errors import PassFailure, PolytileError
from .instrumentation import PassInstrumentation, instrumentation_from_config
from .pass_base import PassContext
from .pipeline import Pipeline


class PassManager:
    def __init__(self, pipeline: Pipeline, instrumentation: Iterable[PassInstrumentation] | None = None):
        self.pipeline = pipeline
        #: None means "from the settings", read when the pipeline runs.
        self.instrumentation = None if instrumentation is None else list(instrumentation)

    def run(self, module: Any, context: PassContext | None = None, label: str = "module") -> PassContext:
        context = context or PassContext()
        instruments = instrumentation_from_config() if self.instrumentation is None else self.instrumentation
        for instrument in instruments:
            instrument.before_pipeline(module, label)
        for stage, pass_ in self.pipeline.passes():
            for instrument in instruments:
                instrument.before_pass(pass_, stage.name, module)
            start = time.perf_counter()
            try:
                preserved = pass_.run(module, context)
            except PolytileError:
                raise
            except Exception as exc:  # an internal compiler error, reported by pass
                raise PassFailure(pass_.name, exc, _raised_at(exc) + _dump_hint(module, pass_.name, stage.name)) from exc
            seconds = time.perf_counter() - start
            if preserved is None:
                context.analyses.clear()
            else:
                context.analyses.invalidate(preserved)
            for instrument in instruments:
                instrument.after_pass(pass_, stage.name, module, seconds)
        for instrument in instruments:
            instrument.after_pipeline(module, label)
        return context


def _raised_at(exc: BaseException) -> str:
    """Where the pass raised, so a plugin author sees their own line without a traceback."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f"It was raised at {last.filename}:{last.lineno}, in {last.name}: {last.line}\n"


def _dump_hint(module: Any, pass_name: str, stage: str) -> str:
    """Where the IR is, for the bug report: written as the failing pass left it (the
    input would need a print before every pass, too slow to do always)."""
    hint = (f"This is a bug in polytile or in the plugin that provides pass '{pass_name}' (stage '{stage}'). "
            f"To see the IR the pass was given, rerun with POLYTILE_PRINT_IR_BEFORE={pass_name} "
            f"(polytile opt: --print-ir-before {pass_name}).")
    try:
        from ..ir.printer import print_ir

        text = print_ir(module, print_locations=True)
        with tempfile.NamedTemporaryFile("w", prefix=f"polytile-ice-{pass_name}-", suffix=".ir",
                                         delete=False) as handle:
            handle.write(text)
        return hint + f"\nThe IR as the pass left it is in {handle.name}"
    except Exception:  # the IR may be too broken to print; the hint still helps
        return hint


def run_pipeline(module: Any, pipeline: Pipeline | str, context: PassContext | None = None,
                 instrumentation: Iterable[PassInstrumentation] | None = None, label: str = "module") -> PassContext:
    """Run ``pipeline`` (a Pipeline or its text) over ``module``."""
    if isinstance(pipeline, str):
        from .pipeline import parse_pipeline

        pipeline = parse_pipeline(pipeline)
    return PassManager(pipeline, instrumentation).run(module, context, label)

