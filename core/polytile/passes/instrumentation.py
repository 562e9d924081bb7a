"""Pass instrumentation: IR printing, timing and verification around each pass.

``instrumentation_from_config()`` builds the list the settings ask for
(``dump_ir``, ``dump_ir_dir``, ``print_ir_before``, ``print_ir_after``, ``time_passes``,
``verify_each``); the API takes the same objects directly.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import IO, Any, Iterable

from ..errors import UnknownNameError, VerificationError
from .pass_base import Pass


class PassInstrumentation:
    """Hooks around passes.  ``stage`` is the name of the stage running the pass."""

    def before_pipeline(self, module: Any, label: str) -> None:
        pass

    def before_pass(self, pass_: Pass, stage: str, module: Any) -> None:
        pass

    def after_pass(self, pass_: Pass, stage: str, module: Any, seconds: float) -> None:
        pass

    def after_pipeline(self, module: Any, label: str) -> None:
        pass


def _matches(pass_: Pass, selection: frozenset[str] | None) -> bool:
    return selection is not None and ("all" in selection or pass_.name in selection)


class IRPrinter(PassInstrumentation):
    """Prints the IR before and/or after the selected passes (``"all"`` for every pass).

    Output goes to ``stream`` (stderr by default) or, with ``directory``, one file per
    dump named ``<label>/<NNN>-<stage>-<pass>-<before|after>.ir`` so dumps sort in order.
    """

    def __init__(self, before: Iterable[str] = (), after: Iterable[str] = (), *, stream: IO[str] | None = None,
                 directory: str | os.PathLike | None = None, print_initial: bool = False,
                 print_locations: bool = False):
        self.before = frozenset(before) or None
        self.after = frozenset(after) or None
        self.stream = stream
        self.directory = Path(directory) if directory is not None else None
        self.print_initial = print_initial
        self.print_locations = print_locations
        self._label = "module"
        self._counter = 0

    def _write(self, module: Any, title: str, slug: str) -> None:
        from ..ir.printer import print_ir

        text = print_ir(module, print_locations=self.print_locations)
        self._counter += 1
        if self.directory is not None:
            folder = self.directory / re.sub(r"[^A-Za-z0-9_.-]", "_", self._label)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{self._counter:03d}-{slug}.ir").write_text(f"// {title}\n{text}")
            return
        stream = self.stream or sys.stderr
        stream.write(f"// -----// {title} //----- //\n{text}\n")

    def before_pipeline(self, module: Any, label: str) -> None:
        self._label = label
        self._counter = 0
        if self.print_initial:
            self._write(module, f"IR of {label} before the pipeline", "input")

    def before_pass(self, pass_: Pass, stage: str, module: Any) -> None:
        if _matches(pass_, self.before):
            self._write(module, f"IR before {pass_.spelling()} ({stage})", f"{stage}-{pass_.name}-before")

    def after_pass(self, pass_: Pass, stage: str, module: Any, seconds: float) -> None:
        if _matches(pass_, self.after):
            self._write(module, f"IR after {pass_.spelling()} ({stage})", f"{stage}-{pass_.name}-after")


class PassTimer(PassInstrumentation):
    """Collects the wall time of every pass; :meth:`report` formats a table."""

    def __init__(self, stream: IO[str] | None = None, print_on_finish: bool = True):
        self.stream = stream
        self.print_on_finish = print_on_finish
        self.records: list[tuple[str, str, float]] = []
        self._start = 0.0
        self.total = 0.0

    def before_pipeline(self, module: Any, label: str) -> None:
        self.records = []
        self._start = time.perf_counter()
        self._label = label

    def after_pass(self, pass_: Pass, stage: str, module: Any, seconds: float) -> None:
        self.records.append((stage, pass_.spelling(), seconds))

    def after_pipeline(self, module: Any, label: str) -> None:
        self.total = time.perf_counter() - self._start
        if self.print_on_finish:
            (self.stream or sys.stderr).write(self.report() + "\n")

    def report(self) -> str:
        total = self.total or sum(s for _, _, s in self.records) or 1e-12
        lines = [f"===- pass timing: {getattr(self, '_label', 'module')} -===",
                 f"{'wall ms':>10}  {'share':>6}  stage/pass"]
        for stage, name, seconds in self.records:
            lines.append(f"{seconds * 1e3:10.3f}  {100 * seconds / total:5.1f}%  {stage}/{name}")
        lines.append(f"{total * 1e3:10.3f}  100.0%  total")
        return "\n".join(lines)


class Verifier(PassInstrumentation):
    """Verifies the IR after every pass; an invalid result names the pass that made it."""

    def after_pass(self, pass_: Pass, stage: str, module: Any, seconds: float) -> None:
        from ..ir.verifier import verify

        try:
            verify(module)
        except VerificationError as exc:
            raise VerificationError(f"{exc.message} (the IR became invalid in pass '{pass_.name}' of stage "
                                    f"'{stage}')", exc.op_name, exc.location) from None


def check_pass_names(names: Iterable[str], setting: str) -> frozenset[str]:
    """Reject unknown pass names in a print-IR setting, with close matches."""
    from .registry import pass_registry

    selection = frozenset(n for n in names if n)
    known = pass_registry().names()
    for name in selection:
        if name != "all" and name not in known:
            raise UnknownNameError("pass", name, known + ["all"], f"in setting '{setting}'")
    return selection


def instrumentation_from_config() -> list[PassInstrumentation]:
    """What the current settings ask for, in the order they must run."""
    from .. import config

    result: list[PassInstrumentation] = []
    if config.get("verify_each"):
        result.append(Verifier())
    before = check_pass_names(config.get("print_ir_before"), "print_ir_before")
    after = check_pass_names(config.get("print_ir_after"), "print_ir_after")
    dump = config.get("dump_ir")
    if dump:
        after = after | {"all"}
    if before or after:
        result.append(IRPrinter(before, after, directory=config.get("dump_ir_dir"), print_initial=dump))
    if config.get("time_passes"):
        result.append(PassTimer())
    return result
