"""The pass manager: runs a pipeline over a module with instrumentation.

A pass that raises a :class:`~polytile.errors.PolytileError` (a user's mistake found while
compiling) lets it through unchanged.  Any other exception is an internal compiler
error: it becomes :class:`~polytile.errors.PassFailure`, naming the pass, and the IR as
the pass left it (possibly half-changed) is written to a file whose path the message
gives; the message also says how to print the IR the pass was given.

Instruments run in their given order, except that those that check the IR (the
verifier) run after the others after each pass, so an IR dump comes before a
verification failure.  When the pipeline ends, instruments receive the context's
statistics (``PassTimer`` prints them under its timing table).
"""

from __future__ import annotations

import traceback
import time
from typing import Any, Iterable

from ..errors import PassFailure, PolytileError
from .instrumentation import (PassInstrumentation, after_pass_order, call_after_pipeline, instrumentation_from_config,
                              ir_dump_hint)
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
        after_pass = after_pass_order(instruments)
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
                hint = _raised_at(exc) + ir_dump_hint(module, pass_.name, stage.name)
                raise PassFailure(pass_.name, exc, hint) from exc
            seconds = time.perf_counter() - start
            if preserved is None:
                context.analyses.clear()
            else:
                context.analyses.invalidate(preserved)
            for instrument in after_pass:
                instrument.after_pass(pass_, stage.name, module, seconds)
        for instrument in instruments:
            call_after_pipeline(instrument, module, label, context.statistics)
        return context


def _raised_at(exc: BaseException) -> str:
    """Where the pass raised, so a plugin author sees their own line without a traceback."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f"It was raised at {last.filename}:{last.lineno}, in {last.name}: {last.line}\n"


def run_pipeline(module: Any, pipeline: Pipeline | str, context: PassContext | None = None,
                 instrumentation: Iterable[PassInstrumentation] | None = None, label: str = "module") -> PassContext:
    """Run ``pipeline`` (a Pipeline or its text) over ``module``."""
    if isinstance(pipeline, str):
        from .pipeline import parse_pipeline

        pipeline = parse_pipeline(pipeline)
    return PassManager(pipeline, instrumentation).run(module, context, label)

