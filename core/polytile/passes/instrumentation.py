"""Pass instrumentation: IR printing, timing and verification around each pass.

``instrumentation_from_config()`` builds the list the settings ask for
(``dump_ir``, ``dump_ir_dir``, ``print_ir_before``, ``print_ir_after``, ``time_passes``,
``verify_each``); the API takes the same objects directly.

Besides the IR, the stages leave *artifacts* in :attr:`PassContext.artifacts` (the LLVM IR,
PTX, a cubin, AMDGCN assembly, an HSACO).  Those that are text or bytes are files to a
reader: :data:`ARTIFACT_EXTENSIONS` names the extension of each (a backend adds its own
with :func:`register_artifact_extension`), and the IR printer dumps the ones a pass made
next to the IR after that pass.  :class:`StageRecorder` keeps the IR after each stage and
the artifacts each stage made, for ahead-of-time compilation (:mod:`polytile.aot`).

After each pass the pass manager calls the instruments that check the IR
(:attr:`PassInstrumentation.checks_ir`, the :class:`Verifier`) after all the others, so
a dump of the IR after a pass is written even when that IR then fails to verify: the
broken IR is what its reader needs to see.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any, ClassVar, Iterable, Mapping, NamedTuple

from ..errors import ConfigError, UnknownNameError, VerificationError
from .artifacts import DeferredArtifact, resolve_artifact, same_artifact
from .pass_base import Pass


class PassInstrumentation:
    """Hooks around passes.  ``stage`` is the name of the stage running the pass."""

    #: True for instruments that check the IR after a pass and may raise: their
    #: ``after_pass`` runs after every other instrument's, so printers and timers see
    #: the pass first.
    checks_ir: ClassVar[bool] = False

    def before_pipeline(self, module: Any, label: str) -> None:
        pass

    def before_pass(self, pass_: Pass, stage: str, module: Any) -> None:
        pass

    def after_pass(self, pass_: Pass, stage: str, module: Any, seconds: float) -> None:
        pass

    def after_pipeline(self, module: Any, label: str, *, statistics: Mapping[str, int] | None = None) -> None:
        """The pipeline finished.  ``statistics`` are the counters the passes kept
        (:meth:`PassContext.count`); an override without the keyword still works: the
        pass manager only passes it to those that accept it."""


def after_pass_order(instruments: Iterable[PassInstrumentation]) -> list[PassInstrumentation]:
    """``instruments`` in the order their ``after_pass`` runs: those that check the IR
    last, each group in its given order."""
    instruments = list(instruments)
    return ([i for i in instruments if not getattr(i, "checks_ir", False)]
            + [i for i in instruments if getattr(i, "checks_ir", False)])


def call_after_pipeline(instrument: Any, module: Any, label: str, statistics: Mapping[str, int]) -> None:
    """``instrument.after_pipeline``, with ``statistics`` if its signature takes them
    (instruments written before the keyword existed take ``(module, label)`` only)."""
    method = instrument.after_pipeline
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: do not guess
        parameters = ()
    if any(p.name == "statistics" or p.kind is p.VAR_KEYWORD for p in parameters):
        method(module, label, statistics=statistics)
    else:
        method(module, label)


def ir_dump_hint(module: Any, pass_name: str, stage: str) -> str:
    """What to tell about a pass that failed or broke the IR: that it is a bug of the
    pass, how to see its input, and a file holding the IR as the pass left it.

    Only the output is written: the input would need a print before every pass, too
    slow to do always, so the hint says how to get it.
    """
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


def _matches(pass_: Pass, selection: frozenset[str] | None) -> bool:
    return selection is not None and ("all" in selection or pass_.name in selection)


#: File extension of each artifact that is a file, by artifact key; None marks a text
#: artifact that is a value rather than a file (the kernel's name).  Text or bytes
#: artifacts under other keys are files too, ``.txt`` or ``.bin``: a backend's new
#: artifact is never silently dropped from a dump.
ARTIFACT_EXTENSIONS: dict[str, str | None] = {
    "llvm_ir": "ll",
    "ptx": "ptx",
    "cubin": "cubin",
    "amdgcn": "s",
    "hsaco": "hsaco",
    "kernel_name": None,
}


def register_artifact_extension(key: str, extension: str | None) -> None:
    """Dump and write the artifact ``key`` as ``<name>.<extension>``; None says it is a
    value (it goes to the compile metadata), not a file."""
    if extension is not None and (not extension or extension.startswith(".") or "/" in extension):
        raise ValueError(f"artifact '{key}': the extension must be a name such as 'ptx', without a dot, "
                         f"got {extension!r}")
    ARTIFACT_EXTENSIONS[key] = extension


def artifact_extension(key: str, value: Any) -> str | None:
    """The extension the artifact ``key`` holding ``value`` is written with, or None
    when it is not a file (not text or bytes, or declared a value).  A deferred artifact
    (:mod:`.artifacts`) counts as the text or bytes it will be."""
    if isinstance(value, DeferredArtifact):
        value = "" if value.text else b""
    if not isinstance(value, (str, bytes)):
        return None
    if key in ARTIFACT_EXTENSIONS:
        return ARTIFACT_EXTENSIONS[key]
    return "txt" if isinstance(value, str) else "bin"


def file_artifacts(artifacts: Mapping[str, Any]) -> dict[str, str | bytes]:
    """The artifacts that are files, in the order they were made (a deferred one is made
    now, and stored in its place)."""
    return {key: resolve_artifact(artifacts, key) for key, value in list(artifacts.items())
            if artifact_extension(key, value) is not None}


def _made_since(snapshot: Mapping[str, Any], artifacts: Mapping[str, Any]) -> dict[str, str | bytes]:
    """File artifacts added or replaced since ``snapshot`` (a shallow copy, which keeps
    the old values alive so that identity tells a replaced value from the same one).
    Only these are made if they are deferred: an artifact no dump shows is never made."""
    return {key: resolve_artifact(artifacts, key) for key, value in list(artifacts.items())
            if artifact_extension(key, value) is not None and not same_artifact(snapshot.get(key), value)}


class IRPrinter(PassInstrumentation):
    """Prints the IR before and/or after the selected passes (``"all"`` for every pass).

    Output goes to ``stream`` (stderr by default) or, with ``directory``, one file per
    dump named ``<label>/<NNN>-<stage>-<pass>-<before|after>.ir`` so dumps sort in order.

    With ``artifacts`` (the running pipeline's :attr:`PassContext.artifacts`), the
    artifacts that a pass printed after made or replaced are dumped after its IR: into
    ``<NNN>-<stage>-<pass>-<key>.<ext>`` files, or to the stream when they are text
    (bytes, a cubin say, only get a line saying their size: they need a directory).
    """

    def __init__(self, before: Iterable[str] = (), after: Iterable[str] = (), *, stream: IO[str] | None = None,
                 directory: str | os.PathLike | None = None, print_initial: bool = False,
                 print_locations: bool = False, artifacts: Mapping[str, Any] | None = None):
        self.before = frozenset(before) or None
        self.after = frozenset(after) or None
        self.stream = stream
        self.directory = Path(directory) if directory is not None else None
        self.print_initial = print_initial
        self.print_locations = print_locations
        self.artifacts = artifacts
        self._label = "module"
        self._counter = 0
        self._snapshot: dict[str, Any] = {}

    def _folder(self) -> Path:
        assert self.directory is not None
        folder = self.directory / re.sub(r"[^A-Za-z0-9_.-]", "_", self._label)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise self._dump_error(folder, error) from None
        return folder

    def _dump_error(self, path: Path, error: OSError) -> ConfigError:
        in_the_way = next((p for p in (self.directory, *self.directory.parents) if p.exists() and not p.is_dir()),
                          None) if self.directory is not None else None
        reason = f"{in_the_way} is a file, not a directory" if in_the_way is not None else (error.strerror or error)
        return ConfigError(f"cannot write the IR dump {path} under dump_ir_dir ({self.directory}, from "
                           f"POLYTILE_DUMP_IR_DIR or the configuration): {reason}; point dump_ir_dir at a directory "
                           "(it is created when missing)")

    def _write_file(self, path: Path, value: str | bytes) -> None:
        try:
            if isinstance(value, bytes):
                path.write_bytes(value)
            else:
                path.write_text(value, encoding="utf-8")
        except OSError as error:
            raise self._dump_error(path, error) from None

    def _write(self, module: Any, title: str, slug: str) -> None:
        from ..ir.printer import print_ir

        text = print_ir(module, print_locations=self.print_locations, layout_aliases=True)
        self._counter += 1
        if self.directory is not None:
            self._write_file(self._folder() / f"{self._counter:03d}-{slug}.ir", f"// {title}\n{text}")
            return
        stream = self.stream or sys.stderr
        stream.write(f"// -----// {title} //----- //\n{text}\n")

    def _write_artifact(self, key: str, value: str | bytes, title: str, slug: str) -> None:
        self._counter += 1
        if self.directory is not None:
            path = self._folder() / f"{self._counter:03d}-{slug}-{key}.{artifact_extension(key, value)}"
            self._write_file(path, value)
            return
        stream = self.stream or sys.stderr
        if isinstance(value, bytes):
            stream.write(f"// -----// {title}: {len(value)} bytes, not printed (set dump_ir_dir, "
                         f"POLYTILE_DUMP_IR_DIR, to have it written to a file) //----- //\n")
        else:
            stream.write(f"// -----// {title} //----- //\n{value}\n")

    def before_pipeline(self, module: Any, label: str) -> None:
        self._label = label
        self._counter = 0
        if self.print_initial:
            self._write(module, f"IR of {label} before the pipeline", "input")

    def after_pipeline(self, module: Any, label: str, *, statistics: Mapping[str, int] | None = None) -> None:
        """Last, what the compiled kernel takes of the device, where the backend says
        (the artifact ``resources``: registers, spills, shared memory, occupancy)."""
        from ..resources import RESOURCES, describe

        if self.after is None or self.artifacts is None or RESOURCES not in self.artifacts:
            return
        text = f"resources of {label}: {describe(self.artifacts[RESOURCES])}\n"
        if self.directory is not None:
            self._counter += 1
            self._write_file(self._folder() / f"{self._counter:03d}-resources.txt", text)
            return
        (self.stream or sys.stderr).write(f"// -----// {text}")

    def before_pass(self, pass_: Pass, stage: str, module: Any) -> None:
        if self.artifacts is not None and _matches(pass_, self.after):
            self._snapshot = dict(self.artifacts)
        if _matches(pass_, self.before):
            self._write(module, f"IR before {pass_.spelling()} ({stage})", f"{stage}-{pass_.name}-before")

    def after_pass(self, pass_: Pass, stage: str, module: Any, seconds: float) -> None:
        if _matches(pass_, self.after):
            self._write(module, f"IR after {pass_.spelling()} ({stage})", f"{stage}-{pass_.name}-after")
            if self.artifacts is not None:
                for key, value in _made_since(self._snapshot, self.artifacts).items():
                    self._write_artifact(key, value, f"{key} after {pass_.spelling()} ({stage})",
                                         f"{stage}-{pass_.name}")
                self._snapshot = {}


class PassTimer(PassInstrumentation):
    """Collects the wall time of every pass and the passes' statistics; :meth:`report`
    formats them as two tables."""

    def __init__(self, stream: IO[str] | None = None, print_on_finish: bool = True):
        self.stream = stream
        self.print_on_finish = print_on_finish
        self.records: list[tuple[str, str, float]] = []
        #: The counters of the last pipeline (``{"cse.erased": 3}``), from after_pipeline.
        self.statistics: dict[str, int] = {}
        self._start = 0.0
        self.total = 0.0

    def before_pipeline(self, module: Any, label: str) -> None:
        self.records = []
        self.statistics = {}
        self._start = time.perf_counter()
        self._label = label

    def after_pass(self, pass_: Pass, stage: str, module: Any, seconds: float) -> None:
        self.records.append((stage, pass_.spelling(), seconds))

    def after_pipeline(self, module: Any, label: str, *, statistics: Mapping[str, int] | None = None) -> None:
        self.total = time.perf_counter() - self._start
        self.statistics = dict(statistics or {})
        if self.print_on_finish:
            (self.stream or sys.stderr).write(self.report() + "\n")

    def report(self) -> str:
        total = self.total or sum(s for _, _, s in self.records) or 1e-12
        lines = [f"===- pass timing: {getattr(self, '_label', 'module')} -===",
                 f"{'wall ms':>10}  {'share':>6}  stage/pass"]
        for stage, name, seconds in self.records:
            lines.append(f"{seconds * 1e3:10.3f}  {100 * seconds / total:5.1f}%  {stage}/{name}")
        lines.append(f"{total * 1e3:10.3f}  100.0%  total")
        # Zero counters only say that a pass ran, which the table above already shows.
        counted = sorted((name, value) for name, value in self.statistics.items() if value)
        if counted:
            width = max(len(name) for name, _ in counted)
            lines.append("===- pass statistics -===")
            lines.extend(f"{name:<{width}}  {value}" for name, value in counted)
        return "\n".join(lines)


class Verifier(PassInstrumentation):
    """Verifies the IR after every pass.  An invalid result names the pass that made it
    and the file where the invalid IR was written (see :func:`ir_dump_hint`)."""

    checks_ir = True

    def after_pass(self, pass_: Pass, stage: str, module: Any, seconds: float) -> None:
        from ..ir.verifier import verify

        try:
            verify(module)
        except VerificationError as exc:
            raise VerificationError(f"{exc.message} (the IR became invalid in pass '{pass_.name}' of stage "
                                    f"'{stage}')\n{ir_dump_hint(module, pass_.name, stage)}",
                                    exc.op_name, exc.location) from None


class StageOutput(NamedTuple):
    """What one stage left: the IR after it, as text, and the file artifacts it made or
    replaced (by key, in the order they were made)."""

    name: str
    ir: str
    artifacts: dict[str, str | bytes]


class StageRecorder(PassInstrumentation):
    """Keeps the IR before the pipeline (as stage ``initial``) and after each stage, and
    the file artifacts each stage made, in :attr:`stages`.

    The IR after a stage is taken before the next stage's first pass runs (or when the
    pipeline ends), so a stage is recorded once however many passes it has.
    """

    def __init__(self, artifacts: Mapping[str, Any], *, initial: str = "input", print_locations: bool = False):
        self.artifacts = artifacts
        self.initial = initial
        self.print_locations = print_locations
        self.stages: list[StageOutput] = []
        self._stage: str | None = None
        self._snapshot: dict[str, Any] = {}

    def _record(self, name: str, module: Any) -> None:
        from ..ir.printer import print_ir

        self.stages.append(StageOutput(name, print_ir(module, print_locations=self.print_locations),
                                       _made_since(self._snapshot, self.artifacts)))
        self._snapshot = dict(self.artifacts)

    def before_pipeline(self, module: Any, label: str) -> None:
        self.stages = []
        self._stage = None
        self._snapshot = {}
        self._record(self.initial, module)

    def before_pass(self, pass_: Pass, stage: str, module: Any) -> None:
        if stage != self._stage:
            if self._stage is not None:
                self._record(self._stage, module)
            self._stage = stage

    def after_pipeline(self, module: Any, label: str, *, statistics: Mapping[str, int] | None = None) -> None:
        if self._stage is not None:
            self._record(self._stage, module)
            self._stage = None


def check_pass_names(names: Iterable[str], setting: str) -> frozenset[str]:
    """Reject unknown pass names in a print-IR setting, with close matches."""
    from .registry import pass_registry

    selection = frozenset(n for n in names if n)
    known = pass_registry().names()
    for name in selection:
        if name != "all" and name not in known:
            raise UnknownNameError("pass", name, known + ["all"], f"in setting '{setting}'")
    return selection


def instrumentation_from_config(artifacts: Mapping[str, Any] | None = None) -> list[PassInstrumentation]:
    """What the current settings ask for (the pass manager runs the Verifier's
    ``after_pass`` last whatever its place here, see :func:`after_pass_order`).

    ``artifacts``: the pipeline's :attr:`PassContext.artifacts`, so that IR dumps
    include the artifacts the passes make (the compile driver passes them)."""
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
        result.append(IRPrinter(before, after, directory=config.get("dump_ir_dir"), print_initial=dump,
                                artifacts=artifacts))
    if config.get("time_passes"):
        result.append(PassTimer())
    return result
