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

Every pass a plugin provides (a backend's, a plugin's: its class is registered by the
plugin, or the plugin inserted it) is followed by the verifier, whatever ``verify_each`` says: a plugin must
never turn a valid kernel into a silently wrong one.  The cost is small next to code
generation (docs/passes.md gives the measurements, bench/verify_plugin_passes.py makes
them).  Invalid IR after a pass is :class:`~polytile.errors.InvalidIRError`: an
internal error of that pass naming its plugin and distribution, never a mistake at the
user's kernel line.
"""

from __future__ import annotations

import traceback
import time
from typing import Any, Iterable

from ..errors import InvalidIRError, PassFailure, PolytileError, VerificationError
from .instrumentation import (PassInstrumentation, Verifier, after_pass_order, call_after_pipeline,
                              instrumentation_from_config, ir_dump_hint)
from .pass_base import Pass, PassContext, PreservedAnalyses
from .pipeline import Pipeline


def invalid_ir_error(pass_name: str, stage: str, owner: Any, problem: VerificationError, hint: str = "",
                     suspects: tuple[str, ...] = ()) -> InvalidIRError:
    """The :class:`~polytile.errors.InvalidIRError` of pass ``pass_name`` (stage
    ``stage``) of ``owner`` (from :func:`pass_owner`), with its message: which pass, whose
    it is, what the verifier found, where the op came from (the kernel's line is not at
    fault) and whom to tell."""
    what = f"'{problem.op_name}' op: " if problem.op_name else ""
    # The verifier's message may go on with how to see the IR: that comes last.
    first, _, more = problem.message.partition("\n")
    made_for = (f"\n(The op was made for the kernel source at {problem.location}; "
                "the kernel is not at fault.)") if problem.location is not None else ""
    culprit = (f"pass '{pass_name}' (stage '{stage}')" if len(suspects) <= 1 else
               f"one of the passes {', '.join(suspects)}")
    text = (f"internal compiler error: {culprit} of {describe_owner(owner)} "
            f"left invalid IR: {what}{first}{made_for}\n{_blame(owner)}")
    for extra in (more, hint):
        if extra:
            text += "\n" + extra
    return InvalidIRError(text, pass_name, stage, owner, problem, suspects,
                          plugin=owner.name if is_plugin(owner) else "",
                          distribution=owner.distribution if is_plugin(owner) else "")


def describe_owner(owner: Any) -> str:
    """``plugin 'x' (distribution 'polytile-x' 1.0)``; polytile itself for the core."""
    from ..plugins.registry import CORE_OWNER

    if owner is None:
        return "code outside any plugin"
    return "polytile itself (distribution 'polytile')" if owner == CORE_OWNER else owner.describe()


def _blame(owner: Any) -> str:
    from ..plugins.registry import CORE_OWNER

    if owner is None:
        return "The pass's code, not the kernel, is at fault."
    if owner == CORE_OWNER:
        return "This is a bug in polytile; please report it with the IR file below."
    return (f"This is a bug in {owner.describe()}: report it to its authors, or disable the plugin with the "
            f"setting 'disabled_plugins' (POLYTILE_DISABLE_PLUGINS={owner.name}).")


def pass_owner(pass_: Pass, pipeline: Pipeline | None = None) -> Any:
    """Who provides ``pass_``: a :class:`~polytile.plugins.registry.PluginInfo` (the
    core's is ``CORE_OWNER``), or None for a pass nobody registered or inserted (one a
    program or a test built a pipeline with itself).

    The owner of its class in the pass registry comes first (a core pass that a plugin
    inserts is still the core's); then the plugin that put the instance in the pipeline
    (:meth:`Pipeline.attribute`).
    """
    cls = type(pass_)
    try:
        from .registry import pass_registry

        registry = pass_registry()
    except PolytileError:  # a plugin conflict: raised where the registry is needed
        registry = None
    if registry is not None and registry.find(cls.name) is cls:
        return registry.owner_of(cls.name)
    return pipeline.contributor(pass_) if pipeline is not None else None


def is_plugin(owner: Any) -> bool:
    """Whether ``owner`` (from :func:`pass_owner`) is a plugin: its passes are verified."""
    from ..plugins.registry import CORE_OWNER

    return owner is not None and owner != CORE_OWNER


class PassManager:
    def __init__(self, pipeline: Pipeline, instrumentation: Iterable[PassInstrumentation] | None = None):
        self.pipeline = pipeline
        #: None means "from the settings", read when the pipeline runs.
        self.instrumentation = None if instrumentation is None else list(instrumentation)

    def run(self, module: Any, context: PassContext | None = None, label: str = "module") -> PassContext:
        context = context or PassContext()
        instruments = instrumentation_from_config() if self.instrumentation is None else self.instrumentation
        after_pass = after_pass_order(instruments)
        # A Verifier among the instruments (verify_each) checks every pass already.
        verifies_all = any(isinstance(i, Verifier) for i in instruments)
        owners = {id(p): pass_owner(p, self.pipeline) for _, p in self.pipeline.passes()}
        #: The passes run since the IR was last verified, (stage, pass, owner): the IR is
        #: checked before a plugin's pass too when they changed it, so that invalid IR is
        #: blamed on the pass that made it, never on the plugin that found it.
        unchecked: list[tuple[str, Pass, Any]] = []
        for instrument in instruments:
            instrument.before_pipeline(module, label)
        for stage, pass_ in self.pipeline.passes():
            owner = owners.get(id(pass_)) if id(pass_) in owners else pass_owner(pass_, self.pipeline)
            try:
                # A pass with nothing to do on this module is not run, so there is nothing of
                # it to check either (a plugin's lowering of ops the kernel does not use).
                applies = pass_.applies_to(module)
            except PolytileError:
                raise
            except Exception as exc:
                provided = f"The pass comes from {owner.describe()}.\n" if is_plugin(owner) else ""
                raise PassFailure(pass_.name, exc, provided + _raised_at(exc)) from exc
            checked = (verifies_all or is_plugin(owner)) and applies
            if checked and unchecked:
                _verify_before(module, pass_, stage.name, owner, unchecked)
            for instrument in instruments:
                instrument.before_pass(pass_, stage.name, module)
            start = time.perf_counter()
            try:
                preserved = pass_.run(module, context) if applies else PreservedAnalyses.all()
            except PolytileError:
                raise
            except Exception as exc:  # an internal compiler error, reported by pass
                provided = f"The pass comes from {owner.describe()}.\n" if is_plugin(owner) else ""
                hint = provided + _raised_at(exc) + ir_dump_hint(module, pass_.name, stage.name)
                raise PassFailure(pass_.name, exc, hint) from exc
            seconds = time.perf_counter() - start
            if preserved is None:
                context.analyses.clear()
            else:
                context.analyses.invalidate(preserved)
            try:
                for instrument in after_pass:
                    instrument.after_pass(pass_, stage.name, module, seconds)
                if not verifies_all and is_plugin(owner) and applies:
                    _verify_after(module, pass_, stage.name)
            except InvalidIRError:
                raise
            except VerificationError as exc:
                raise invalid_ir_error(pass_.name, stage.name, owner, exc) from None
            if checked:
                unchecked.clear()
            elif applies:
                unchecked.append((stage.name, pass_, owner))
        for instrument in instruments:
            call_after_pipeline(instrument, module, label, context.statistics)
        return context


def _verify_after(module: Any, pass_: Pass, stage: str) -> None:
    from ..ir.verifier import verify

    try:
        verify(module)
    except VerificationError as exc:
        raise VerificationError(f"{exc.message}\n{ir_dump_hint(module, pass_.name, stage)}", exc.op_name,
                                exc.location) from None


def _verify_before(module: Any, pass_: Pass, stage: str, owner: Any, unchecked: list[tuple[str, Pass, Any]]) -> None:
    """Verify the IR before the plugin pass ``pass_``: invalid IR here was made by the
    passes in ``unchecked`` (run since the last verification), not by the plugin."""
    from ..ir.verifier import verify

    try:
        verify(module)
    except VerificationError as exc:
        last_stage, last, last_owner = unchecked[-1]
        owners = {o for _, _, o in unchecked}
        suspects = tuple(f"{s}/{p.name}" for s, p, _ in unchecked)
        found = (f"(Found when checking the IR before pass '{pass_.name}' (stage '{stage}') of "
                 f"{describe_owner(owner)}, which is not at fault.")
        if len(suspects) > 1:
            found += (f" POLYTILE_VERIFY_EACH=1 verifies after every pass and names the one of "
                      f"{', '.join(suspects)} that broke the IR.")
        raise invalid_ir_error(last.name, last_stage, last_owner if len(owners) == 1 else None, exc,
                             found + ")\n" + ir_dump_hint(module, last.name, last_stage), suspects) from None


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

