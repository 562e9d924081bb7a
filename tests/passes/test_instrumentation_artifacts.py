"""Dumps of the artifacts passes make (LLVM IR, PTX, binaries) next to the IR, the
extension table, and the StageRecorder that ahead-of-time compilation reads."""

from __future__ import annotations

import io
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from polytile import config
from polytile.ir import parse_module
from polytile.passes import Pass, PreservedAnalyses, instrumentation
from polytile.passes.instrumentation import (ARTIFACT_EXTENSIONS, IRPrinter, StageRecorder, artifact_extension,
                                             file_artifacts, instrumentation_from_config,
                                             register_artifact_extension)
from polytile.passes.manager import PassManager
from polytile.passes.pass_base import PassContext
from polytile.passes.pipeline import Pipeline, Stage
from polytile.ir_testing import dedent

MODULE = dedent("""
    func.func @k(%n: i32) attributes {kernel = true} {
      %m = arith.addi %n, %n : i32
      func.return
    }
""")


@dataclass
class Lower(Pass):
    """Makes text artifacts and values, as lower-to-llvm does."""

    name: ClassVar[str] = "fake-lower"

    def run(self, module, context):
        context.artifacts.update(llvm_ir="define void @k() {\n  ret void\n}\n", kernel_name="k", num_warps=4,
                                 llvm_module=object())
        return PreservedAnalyses.all()


@dataclass
class Assemble(Pass):
    """Makes assembly, a binary, and an artifact no table knows."""

    name: ClassVar[str] = "fake-assemble"

    def run(self, module, context):
        context.artifacts.update(amdgcn="s_endpgm\n", hsaco=b"\x7fELF\x02", notes="made by fake-assemble\n")
        return PreservedAnalyses.all()


@dataclass
class Touch(Pass):
    """Changes the IR and no artifact."""

    name: ClassVar[str] = "touch"

    def run(self, module, context):
        next(iter(module.body.block)).set_attr("touched", True)
        return None


def pipeline() -> Pipeline:
    return Pipeline([Stage("tile", [Touch()]), Stage("llvm", [Lower()]), Stage("assemble", [Assemble(), Touch()])])


def run(*instruments, context=None):
    context = context or PassContext()
    PassManager(pipeline(), list(instruments)).run(parse_module(MODULE), context, label="k")
    return context


def test_extension_table_and_which_artifacts_are_files():
    assert [artifact_extension(k, v) for k, v in [("llvm_ir", "x"), ("ptx", "x"), ("cubin", b"x"), ("amdgcn", "x"),
                                                  ("hsaco", b"x"), ("kernel_name", "k"), ("other", "x"),
                                                  ("blob", b"x"), ("num_warps", 4), ("llvm_module", object())]] \
        == ["ll", "ptx", "cubin", "s", "hsaco", None, "txt", "bin", None, None]
    assert list(file_artifacts({"kernel_name": "k", "ptx": "p", "n": 1, "cubin": b"c"})) == ["ptx", "cubin"]


def test_a_backend_registers_its_artifacts(monkeypatch):
    monkeypatch.setattr(instrumentation, "ARTIFACT_EXTENSIONS", dict(ARTIFACT_EXTENSIONS))  # undone after the test
    assert artifact_extension("sass", "text") == "txt" and artifact_extension("arch", "sm_90a") == "txt"
    register_artifact_extension("sass", "sass")
    register_artifact_extension("arch", None)
    assert artifact_extension("sass", "text") == "sass" and artifact_extension("arch", "sm_90a") is None
    with pytest.raises(ValueError, match=r"artifact 'x': the extension must be a name such as 'ptx', without a "
                                         r"dot, got '.x'"):
        register_artifact_extension("x", ".x")


def test_printer_dumps_the_artifacts_after_the_pass_that_made_them():
    stream = io.StringIO()
    context = PassContext()
    run(IRPrinter(after=["all"], stream=stream, artifacts=context.artifacts), context=context)
    text = stream.getvalue()
    titles = [line for line in text.splitlines() if line.startswith("// -----//")]
    assert titles == [
        "// -----// IR after touch (tile) //----- //",
        "// -----// IR after fake-lower (llvm) //----- //",
        "// -----// llvm_ir after fake-lower (llvm) //----- //",
        "// -----// IR after fake-assemble (assemble) //----- //",
        "// -----// amdgcn after fake-assemble (assemble) //----- //",
        "// -----// hsaco after fake-assemble (assemble): 5 bytes, not printed (set dump_ir_dir, "
        "POLYTILE_DUMP_IR_DIR, to have it written to a file) //----- //",
        "// -----// notes after fake-assemble (assemble) //----- //",
        "// -----// IR after touch (assemble) //----- //",
    ]
    assert "// -----// llvm_ir after fake-lower (llvm) //----- //\ndefine void @k() {\n  ret void\n}\n" in text
    assert "// -----// amdgcn after fake-assemble (assemble) //----- //\ns_endpgm\n" in text


def test_printer_writes_artifact_files_in_order(tmp_path):
    context = PassContext()
    run(IRPrinter(after=["all"], directory=tmp_path, print_initial=True, artifacts=context.artifacts),
        context=context)
    folder = tmp_path / "k"
    assert sorted(p.name for p in folder.iterdir()) == [
        "001-input.ir", "002-tile-touch-after.ir", "003-llvm-fake-lower-after.ir", "004-llvm-fake-lower-llvm_ir.ll",
        "005-assemble-fake-assemble-after.ir", "006-assemble-fake-assemble-amdgcn.s",
        "007-assemble-fake-assemble-hsaco.hsaco", "008-assemble-fake-assemble-notes.txt",
        "009-assemble-touch-after.ir"]
    assert (folder / "004-llvm-fake-lower-llvm_ir.ll").read_text() == context.artifacts["llvm_ir"]
    assert (folder / "007-assemble-fake-assemble-hsaco.hsaco").read_bytes() == b"\x7fELF\x02"


def test_printer_dumps_artifacts_only_after_the_passes_it_prints():
    stream = io.StringIO()
    context = PassContext()
    run(IRPrinter(after=["fake-assemble"], stream=stream, artifacts=context.artifacts), context=context)
    titles = [line.split(" //")[0] for line in stream.getvalue().splitlines() if line.startswith("// -----//")]
    assert titles == ["// -----// IR after fake-assemble (assemble)", "// -----// amdgcn after fake-assemble (assemble)",
                      "// -----// hsaco after fake-assemble (assemble): 5 bytes, not printed (set dump_ir_dir, "
                      "POLYTILE_DUMP_IR_DIR, to have it written to a file)",
                      "// -----// notes after fake-assemble (assemble)"]


def test_a_replaced_artifact_is_dumped_again():
    @dataclass
    class Rewrite(Pass):
        name: ClassVar[str] = "rewrite-ll"

        def run(self, module, context):
            context.artifacts["llvm_ir"] = context.artifacts["llvm_ir"].replace("@k", "@k2")
            return PreservedAnalyses.all()

    stream = io.StringIO()
    context = PassContext()
    PassManager(Pipeline([Stage("llvm", [Lower(), Touch(), Rewrite()])]),
                [IRPrinter(after=["all"], stream=stream, artifacts=context.artifacts)]).run(parse_module(MODULE),
                                                                                            context)
    text = stream.getvalue()
    assert text.count("// -----// llvm_ir after") == 2
    assert "// -----// llvm_ir after rewrite-ll (llvm) //----- //\ndefine void @k2()" in text


def test_stage_recorder_keeps_the_ir_and_artifacts_of_each_stage():
    context = PassContext()
    recorder = StageRecorder(context.artifacts)
    run(recorder, context=context)
    assert [(s.name, list(s.artifacts)) for s in recorder.stages] == [
        ("input", []), ("tile", []), ("llvm", ["llvm_ir"]), ("assemble", ["amdgcn", "hsaco", "notes"])]
    assert "touched" not in recorder.stages[0].ir and "touched = true" in recorder.stages[1].ir
    assert recorder.stages[3].artifacts["hsaco"] == b"\x7fELF\x02"


def test_dump_ir_setting_dumps_artifacts_of_a_real_compile(tmp_path, capsys):
    """POLYTILE_DUMP_IR on an NVIDIA compile: the LLVM IR, the PTX and the cubin come
    with the IR, in the dump directory or (text only) on stderr."""
    from polytile.aot import compile_kernel

    kernel = f"{Path(__file__).resolve().parents[2] / 'examples' / 'vector_add.py'}:add_kernel"
    with config.override(dump_ir=True, dump_ir_dir=tmp_path):
        result = compile_kernel(kernel, target="nvidia:sm_90a", signature="*fp32,*fp32,*fp32,i32",
                                constexprs={"BLOCK_SIZE": 128})
    names = sorted(p.name for p in (tmp_path / "add_kernel").iterdir())
    artifacts = [n for n in names if not n.endswith(".ir")]
    assert [n[4:] for n in artifacts] == ["llvm-lower-to-llvm-llvm_ir.ll", "assemble-emit-ptx-ptx.ptx",
                                         "assemble-ptx-to-cubin-cubin.cubin", "resources.txt"]
    # Last, what the kernel takes of the device (docs/resources.md).
    assert (tmp_path / "add_kernel" / artifacts[3]).read_text().startswith("resources of add_kernel: ")
    assert (tmp_path / "add_kernel" / artifacts[1]).read_text() == result.artifacts["ptx"]
    assert (tmp_path / "add_kernel" / artifacts[2]).read_bytes() == result.artifacts["cubin"]
    assert names[0] == "001-input.ir" and any(n.endswith("-distribute-assign-layouts-after.ir") for n in names)
    assert capsys.readouterr().err == ""

    with config.override(dump_ir=True):
        compile_kernel(kernel, target="nvidia:sm_90a", signature="*fp32,*fp32,*fp32,i32",
                       constexprs={"BLOCK_SIZE": 128})
    err = capsys.readouterr().err
    assert "// -----// ptx after emit-ptx (assemble) //----- //\n//\n// Generated by LLVM NVPTX Back-End" in err
    assert "// -----// llvm_ir after lower-to-llvm (llvm) //----- //\n; ModuleID = \"polytile\"" in err
    assert "// -----// cubin after ptx-to-cubin (assemble): " in err
    assert "// -----// resources of add_kernel: " in err and ", no spills, " in err


def test_instrumentation_from_config_passes_the_artifacts_to_the_printer():
    artifacts: dict = {}
    with config.override(dump_ir=True):
        [printer] = [i for i in instrumentation_from_config(artifacts=artifacts) if isinstance(i, IRPrinter)]
    assert printer.artifacts is artifacts
    with config.override(print_ir_after=["cse"]):
        [printer] = [i for i in instrumentation_from_config() if isinstance(i, IRPrinter)]
    assert printer.artifacts is None


@pytest.mark.parametrize("where", ["file", "file-parent"])
def test_a_dump_dir_that_is_a_file_is_a_config_error_naming_it(tmp_path, where):
    """POLYTILE_DUMP_IR_DIR at a file raised NotADirectoryError from inside the pass manager."""
    from polytile.errors import ConfigError

    blocker = tmp_path / "dumps"
    blocker.write_text("not a directory")
    directory = blocker if where == "file" else blocker / "deeper"
    with pytest.raises(ConfigError, match=rf"under dump_ir_dir \({re.escape(str(directory))}, from POLYTILE_DUMP_IR_DIR "
                                          rf"or the configuration\): {re.escape(str(blocker))} is a file, not a directory"):
        run(IRPrinter(after=["all"], directory=directory, print_initial=True))


def test_a_launch_with_a_dump_dir_that_is_a_file_shows_no_compiler_frames(tmp_path):
    import subprocess
    import sys

    blocker = tmp_path / "dumps"
    blocker.write_text("x")
    example = Path(__file__).resolve().parents[2] / "examples" / "vector_add.py"
    env = {**os.environ, "POLYTILE_DUMP_IR": "1", "POLYTILE_DUMP_IR_DIR": str(blocker), "POLYTILE_CACHE": "0",
           "POLYTILE_TARGET": "interp"}
    done = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 1
    assert f"ConfigError: cannot write the IR dump {blocker}/add_kernel under dump_ir_dir" in done.stderr
    assert "passes/" not in done.stderr and "instrumentation" not in done.stderr
