"""Deferred artifacts (polytile.passes.artifacts): made once, by what reads them as files
or values (IR dumps, the stage recorder, CompileResult.artifacts), never by what keeps
artifacts by type (binaries, metadata)."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from polytile.compiler import CompileResult
from polytile.ir import parse_module
from polytile.passes import Pass, PreservedAnalyses
from polytile.passes.artifacts import ArtifactsView, DeferredArtifact, resolve_artifact
from polytile.passes.instrumentation import IRPrinter, StageRecorder, artifact_extension, file_artifacts
from polytile.passes.manager import PassManager
from polytile.passes.pass_base import PassContext
from polytile.passes.pipeline import Pipeline, Stage
from polytile.ir_testing import dedent

MODULE = dedent("""
    func.func @k(%n: i32) attributes {kernel = true} {
      func.return
    }
""")


class Maker:
    """A ``make`` that counts its calls."""

    def __init__(self, value="s_endpgm\n"):
        self.value = value
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return self.value


@dataclass
class EmitDeferred(Pass):
    """An object now, its assembly when read (as emit-amdgcn)."""

    name: ClassVar[str] = "emit-deferred"
    maker: Maker = field(default=None, init=False)  # not an option: set by run()

    def run(self, module, context):
        context.artifacts.update(object=b"\x7fELF", amdgcn=DeferredArtifact(self.maker), num_warps=4)
        return PreservedAnalyses.all()


@dataclass
class Link(Pass):
    name: ClassVar[str] = "link"

    def run(self, module, context):
        context.artifacts["hsaco"] = b"\x7fELF\x02"
        return PreservedAnalyses.all()


def run(maker, *instruments, context=None):
    context = context or PassContext()
    emit = EmitDeferred()
    emit.maker = maker
    pipeline = Pipeline([Stage("assemble", [emit, Link()])])
    PassManager(pipeline, list(instruments)).run(parse_module(MODULE), context, label="k")
    return context


def test_a_deferred_artifact_is_made_once_when_resolved():
    maker = Maker()
    artifacts = {"amdgcn": DeferredArtifact(maker)}
    assert artifact_extension("amdgcn", artifacts["amdgcn"]) == "s"
    assert artifact_extension("blob", DeferredArtifact(maker, text=False)) == "bin"
    assert maker.calls == 0
    assert resolve_artifact(artifacts, "amdgcn") == "s_endpgm\n" and artifacts == {"amdgcn": "s_endpgm\n"}
    assert resolve_artifact(artifacts, "amdgcn") == "s_endpgm\n" and maker.calls == 1


def test_a_deferred_artifact_of_the_wrong_type_is_an_error():
    with pytest.raises(TypeError, match="a deferred bytes artifact was made as str"):
        DeferredArtifact(Maker(), text=False).resolve()


def test_a_compile_that_nothing_reads_never_makes_it():
    maker = Maker()
    context = run(maker, IRPrinter(after=["link"], stream=io.StringIO()))
    assert maker.calls == 0 and isinstance(context.artifacts["amdgcn"], DeferredArtifact)
    result = CompileResult(None, None, "", None, None, None, context)
    assert result.binaries == {"object": b"\x7fELF", "hsaco": b"\x7fELF\x02"} and result.metadata == {"num_warps": 4}
    assert maker.calls == 0


def test_the_printer_makes_it_after_the_pass_that_offered_it():
    maker = Maker()
    stream = io.StringIO()
    context = PassContext()
    run(maker, IRPrinter(after=["all"], stream=stream, artifacts=context.artifacts), context=context)
    titles = [line.split(" //")[0] for line in stream.getvalue().splitlines() if line.startswith("// -----//")]
    assert titles == ["// -----// IR after emit-deferred (assemble)",
                      "// -----// object after emit-deferred (assemble): 4 bytes, not printed (set dump_ir_dir, "
                      "POLYTILE_DUMP_IR_DIR, to have it written to a file)",
                      "// -----// amdgcn after emit-deferred (assemble)",
                      "// -----// IR after link (assemble)",
                      "// -----// hsaco after link (assemble): 5 bytes, not printed (set dump_ir_dir, "
                      "POLYTILE_DUMP_IR_DIR, to have it written to a file)"]
    assert "// -----// amdgcn after emit-deferred (assemble) //----- //\ns_endpgm\n" in stream.getvalue()
    assert maker.calls == 1 and context.artifacts["amdgcn"] == "s_endpgm\n"


def test_the_stage_recorder_and_file_artifacts_make_it():
    maker = Maker()
    context = PassContext()
    recorder = StageRecorder(context.artifacts)
    run(maker, recorder, context=context)
    assert [(s.name, s.artifacts) for s in recorder.stages] == [
        ("input", {}), ("assemble", {"object": b"\x7fELF", "amdgcn": "s_endpgm\n", "hsaco": b"\x7fELF\x02"})]
    assert maker.calls == 1
    other = Maker("other\n")
    assert file_artifacts({"amdgcn": DeferredArtifact(other), "n": 1}) == {"amdgcn": "other\n"}


def test_the_view_of_compile_result_artifacts_makes_what_is_read():
    maker = Maker()
    artifacts = {"hsaco": b"x", "amdgcn": DeferredArtifact(maker)}
    view = ArtifactsView(artifacts)
    assert view["hsaco"] == b"x" and view.get("missing") is None and "amdgcn" in view and len(view) == 2
    assert maker.calls == 0
    assert view["amdgcn"] == "s_endpgm\n" and artifacts["amdgcn"] == "s_endpgm\n"
    view["shared_bytes"] = 0
    assert artifacts["shared_bytes"] == 0 and dict(view) == artifacts and maker.calls == 1
