"""Ahead-of-time compilation through the Python API (polytile.aot): signatures, constexprs,
loading kernels from files, the argument layout, the metadata and the files written."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

import polytile.language as pl
from polytile import config
from polytile.aot import (AotError, argument_layout, compile_kernel, load_kernel, parse_assignments,
                          parse_constexpr_value, parse_signature)
from polytile.backend import LaunchParam
from polytile.compiler import compile_module
from polytile.errors import CompilationError
from polytile.ir import parse_module
from polytile.ir import types as t

REPO = Path(__file__).resolve().parents[1]
VECTOR_ADD = REPO / "examples" / "vector_add.py"
SPEC = f"{VECTOR_ADD}:add_kernel"


# -- signatures -------------------------------------------------------------------------------


@pytest.mark.parametrize("text, type_, divisibility, equal_to_1, canonical", [
    ("*fp32", t.PointerType(t.f32), 1, False, "*fp32"),
    ("*float32", t.PointerType(t.f32), 1, False, "*fp32"),
    ("*f32", t.PointerType(t.f32), 1, False, "*fp32"),
    ("*fp16:16", t.PointerType(t.f16), 16, False, "*fp16:16"),
    ("*bf16", t.PointerType(t.bf16), 1, False, "*bf16"),
    ("*bfloat16:16", t.PointerType(t.bf16), 16, False, "*bf16:16"),
    ("*fp8e4nv", t.PointerType(t.f8e4m3), 1, False, "*fp8e4nv"),
    ("*float8e5", t.PointerType(t.f8e5m2), 1, False, "*fp8e5"),
    ("*i8", t.PointerType(t.i8), 1, False, "*i8"),
    ("*int64:16", t.PointerType(t.i64), 16, False, "*i64:16"),
    ("i32", t.i32, 1, False, "i32"),
    ("int32", t.i32, 1, False, "i32"),
    ("i32:16", t.i32, 16, False, "i32:16"),
    ("i64:1", t.i64, 1, True, "i64:1"),
    ("u32", t.u32, 1, False, "u32"),
    ("uint8:1", t.u8, 1, True, "u8:1"),
    ("i1", t.i1, 1, False, "i1"),
    ("int1", t.i1, 1, False, "i1"),
    ("fp32", t.f32, 1, False, "fp32"),
    ("fp64", t.f64, 1, False, "fp64"),
    ("float16", t.f16, 1, False, "fp16"),
])
def test_signature_entries(text, type_, divisibility, equal_to_1, canonical):
    [entry] = parse_signature(text)
    assert (entry.type, entry.divisibility, entry.equal_to_1, str(entry)) == (type_, divisibility, equal_to_1,
                                                                                canonical)


def test_signature_lists_spaces_and_empty():
    entries = parse_signature(" *fp32:16 , *fp32,\ti32:1 ")
    assert [str(e) for e in entries] == ["*fp32:16", "*fp32", "i32:1"]
    assert [e.hint for e in entries] == ["D", "", "1"]
    assert [str(e) for e in parse_signature(["*bf16", "u64:16"])] == ["*bf16", "u64:16"]
    assert parse_signature("") == [] and parse_signature("  ") == []


@pytest.mark.parametrize("text, message", [
    ("*fp32,*fp33", "signature entry 2 ('*fp33'): unknown dtype 'fp33'; did you mean 'fp32'"),
    ("*fp32,,i32", "signature entry 2 (''): empty; each run-time parameter needs a type"),
    ("i32,", "signature entry 2 (''): empty"),
    ("**fp32", "signature entry 1 ('**fp32'): pointers to pointers are not supported"),
    ("*fp32:1", "signature entry 1 ('*fp32:1'): ':1' (equal to 1) is for integers; a pointer takes ':16'"),
    ("i32:8", "signature entry 1 ('i32:8'): ':8' is not a specialization; use ':16' (divisible by 16) or ':1'"),
    ("*fp16:32", "signature entry 1 ('*fp16:32'): ':32' is not a specialization; use ':16' (divisible by 16)"),
    ("fp32:16", "signature entry 1 ('fp32:16'): ':16' specializes integers and pointers only, not fp32"),
    ("i1:1", "signature entry 1 ('i1:1'): ':1' specializes integers and pointers only, not i1"),
    ("i32:", "signature entry 1 ('i32:'): nothing follows ':'; write ':16' (divisible by 16) or ':1'"),
    ("fp32 x", "signature entry 1 ('fp32 x'): not a type; write '*DTYPE' for a pointer"),
    ("&fp32", "signature entry 1 ('&fp32'): not a type"),
])
def test_signature_errors_name_the_position_and_the_entry(text, message):
    with pytest.raises(AotError) as caught:
        parse_signature(text)
    assert message in str(caught.value)


# -- constexprs ------------------------------------------------------------------------------


@pytest.mark.parametrize("text, value", [
    ("1024", 1024), ("-3", -3), ("0x40", 64), ("1e-5", 1e-5), ("0.5", 0.5), ("True", True), ("false", False),
    ("None", None), ("'relu'", "relu"), ('"a b"', "a b"), ("relu", "relu"), ("pl.float16", pl.float16),
])
def test_constexpr_values(text, value):
    parsed = parse_constexpr_value(text)
    assert parsed == value and type(parsed) is type(value)


def test_warp_specialize_options_on_the_command_line():
    assert parse_constexpr_value("pl.WarpSpecialize(producer_registers=24, pingpong=True)") == \
        pl.WarpSpecialize(producer_registers=24, pingpong=True)
    with pytest.raises(AotError, match=r"registers per thread of a warp group are a multiple of 8"):
        parse_constexpr_value("pl.WarpSpecialize(producer_registers=20)")
    with pytest.raises(AotError, match=r"unexpected keyword argument 'registers'"):
        parse_constexpr_value("pl.WarpSpecialize(registers=24)")
    with pytest.raises(AotError, match=r"write pl.WarpSpecialize\(name=literal, ...\)"):
        parse_constexpr_value("pl.WarpSpecialize(24)")
    # Its repr (what the metadata records) reads back; Triton's and the bare spelling too.
    options = pl.WarpSpecialize(consumer_registers=232, pingpong=False)
    assert parse_constexpr_value(repr(options)) == options
    overlapped = pl.WarpSpecialize(overlap=True)
    assert repr(overlapped) == ("pl.WarpSpecialize(producer_registers=0, consumer_registers=0, pingpong=None, "
                                "overlap=True)")
    assert parse_constexpr_value(repr(overlapped)) == overlapped
    assert overlapped.attributes() == {"pt.warp_specialize.overlap": True}
    assert parse_constexpr_value("WarpSpecialize(producer_registers=24)") == pl.WarpSpecialize(producer_registers=24)
    assert parse_constexpr_value("tl.WarpSpecialize()") == pl.WarpSpecialize()


def test_constexpr_assignments_and_their_errors():
    assert parse_assignments(["BLOCK=128", "ACT=relu", "EPS=1e-6"], "--constexpr") == {
        "BLOCK": 128, "ACT": "relu", "EPS": 1e-6}
    with pytest.raises(AotError, match=r"--constexpr 'BLOCK': write NAME=VALUE, such as --constexpr BLOCK=1024"):
        parse_assignments(["BLOCK"], "--constexpr")
    with pytest.raises(AotError, match=r"--constexpr '1X=2': write NAME=VALUE"):
        parse_assignments(["1X=2"], "--constexpr")
    with pytest.raises(AotError, match=r"--constexpr B is given twice \(B=1 and 'B=2'\)"):
        parse_assignments(["B=1", "B=2"], "--constexpr")


@pytest.mark.parametrize("constexprs, message", [
    ({"BLOCK": 1024}, "kernel 'add_kernel' has no constexpr parameter 'BLOCK'; did you mean 'BLOCK_SIZE'? "
                      "(its constexpr parameters: BLOCK_SIZE)"),
    ({}, "kernel 'add_kernel': constexpr parameter 'BLOCK_SIZE' needs a value"),
    ({"BLOCK_SIZE": 64, "n_elements": 3}, "kernel 'add_kernel': 'n_elements' is a run-time parameter, not a "
                                          "constexpr; give its type in the signature"),
])
def test_constexpr_errors(constexprs, message):
    with pytest.raises(AotError) as caught:
        compile_kernel(SPEC, target="interp", signature="*fp32,*fp32,*fp32,i32", constexprs=constexprs)
    assert message in str(caught.value)


def test_signature_must_cover_every_run_time_parameter():
    with pytest.raises(AotError, match=r"kernel 'add_kernel' has 4 run-time parameters \(x_ptr, y_ptr, out_ptr, "
                                       r"n_elements\), but the signature gives 3 types"):
        compile_kernel(SPEC, target="interp", signature="*fp32,*fp32,*fp32", constexprs={"BLOCK_SIZE": 64})


def test_constexpr_defaults_and_values_reach_the_kernel(tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(textwrap.dedent("""
        import polytile.language as pl
        import polytile.runtime as pt

        @pt.jit
        def scale(x_ptr, n, FACTOR: pl.constexpr, BLOCK: pl.constexpr = 32, DOUBLE: pl.constexpr = False):
            offs = pl.arange(0, BLOCK)
            x = pl.load(x_ptr + offs, mask=offs < n)
            if DOUBLE:
                x = x * 2.0
            pl.store(x_ptr + offs, x * FACTOR, mask=offs < n)
    """))
    result = compile_kernel(f"{path}:scale", target="interp", signature="*fp32:16,i32", constexprs={"FACTOR": 0.5})
    assert result.metadata["constexprs"] == {"FACTOR": 0.5, "BLOCK": 32, "DOUBLE": False}
    tile_ir = result.emit("tile")
    assert "tile<32x" in tile_ir and "{value = 0.5}" in tile_ir and "{value = 2.0}" not in tile_ir
    doubled = compile_kernel(f"{path}:scale", target="interp", signature="*fp32:16,i32",
                             constexprs={"FACTOR": 0.5, "DOUBLE": True, "BLOCK": 64})
    assert "tile<64x" in doubled.emit("tile") and "{value = 2.0}" in doubled.emit("tile")


# -- loading kernels from files --------------------------------------------------------------


def test_load_kernel_from_a_file_and_its_errors(tmp_path):
    assert load_kernel(SPEC).__name__ == "add_kernel"
    with pytest.raises(AotError, match=r"does not name a kernel: write FILE.py:KERNEL"):
        load_kernel(str(VECTOR_ADD))
    with pytest.raises(AotError, match=r"cannot read kernel file '.*missing.py': no such file"):
        load_kernel(f"{tmp_path}/missing.py:k")
    with pytest.raises(AotError, match=r"cannot read kernel file '.*': it is a directory"):
        load_kernel(f"{tmp_path}:k")
    with pytest.raises(AotError, match=r"has no kernel 'add_kernl'; did you mean 'add_kernel'\? "
                                       r"\(its @jit functions: add_kernel\)"):
        load_kernel(f"{VECTOR_ADD}:add_kernl")
    with pytest.raises(AotError, match=r"'add' in '.*vector_add.py' is a function, not a @jit kernel"):
        load_kernel(f"{VECTOR_ADD}:add")
    broken = tmp_path / "broken.py"
    broken.write_text("x = 1\ndef f(:\n    pass\n")
    with pytest.raises(AotError, match=r"broken.py:2: error: invalid Python: .*\n    def f\(:"):
        load_kernel(f"{broken}:f")
    failing = tmp_path / "failing.py"
    failing.write_text("import math\nvalue = math.sqrt(-1)\n")
    with pytest.raises(AotError, match=r"importing '.*failing.py' failed at line 2 \(value = math.sqrt\(-1\)\): "
                                       r"ValueError: math domain error"):
        load_kernel(f"{failing}:k")


def test_load_kernel_imports_modules_next_to_the_file_and_unwraps_autotune(tmp_path):
    (tmp_path / "helpers_for_aot.py").write_text("BLOCK = 64\n")
    (tmp_path / "tuned.py").write_text(textwrap.dedent("""
        import polytile.language as pl
        import polytile.runtime as pt
        from helpers_for_aot import BLOCK

        @pt.autotune(configs=[pt.Config({"B": BLOCK})], key=["n"])
        @pt.jit
        def copy(src, dst, n, B: pl.constexpr):
            offs = pl.arange(0, B)
            pl.store(dst + offs, pl.load(src + offs, mask=offs < n), mask=offs < n)
    """))
    kernel = load_kernel(f"{tmp_path / 'tuned.py'}:copy")
    assert getattr(kernel, "__polytile_jit__", False) and kernel.__name__ == "copy"


# -- argument layout and metadata -------------------------------------------------------------------


def test_argument_layout_packs_each_parameter_at_its_natural_alignment():
    slots, total = argument_layout([t.i1, t.PointerType(t.f16), t.i16, t.f32, t.i8, t.f64, t.bf16])
    assert [(s.size, s.alignment, s.offset) for s in slots] == [
        (1, 1, 0), (8, 8, 8), (2, 2, 16), (4, 4, 20), (1, 1, 24), (8, 8, 32), (2, 2, 40)]
    assert total == 42
    assert argument_layout([]) == ([], 0)


def test_metadata_describes_the_kernel_for_nvidia(tmp_path):
    result = compile_kernel(SPEC, target="nvidia:sm_90a", signature="*fp32:16,*fp32:16,*fp32:16,i32",
                            constexprs={"BLOCK_SIZE": 1024}, options={"num_warps": 8}, output_dir=tmp_path)
    meta = result.metadata
    assert meta["kernel_name"] == "add_kernel" and meta["target"] == "nvidia:sm_90a"
    assert meta["num_warps"] == 8 and meta["options"]["num_warps"] == 8 and meta["shared_bytes"] == 0
    assert meta["signature"] == "*fp32:16,*fp32:16,*fp32:16,i32" and meta["constexprs"] == {"BLOCK_SIZE": 1024}
    assert [(a["name"], a["type"], a["ir_type"], a["size"], a["alignment"], a["offset"]) for a in meta["arguments"]] \
        == [("x_ptr", "*fp32:16", "ptr<f32>", 8, 8, 0), ("y_ptr", "*fp32:16", "ptr<f32>", 8, 8, 8),
            ("out_ptr", "*fp32:16", "ptr<f32>", 8, 8, 16), ("n_elements", "i32", "i32", 4, 4, 24)]
    assert [(a["divisibility"], a["equal_to_1"]) for a in meta["arguments"]] == [(16, False)] * 3 + [(1, False)]
    assert meta["parameter_bytes"] == 28
    import polytile

    assert meta["polytile_version"] == polytile.__version__
    assert meta["versions"] == dict(result.result.backend.versions()) and "llvmlite" in meta["versions"]
    assert meta["files"] == {"llvm_ir": "add_kernel.ll", "ptx": "add_kernel.ptx", "cubin": "add_kernel.cubin"}
    assert meta["stages"] == ["add_kernel.00-frontend.ir", "add_kernel.01-tile.ir", "add_kernel.02-distribute.ir",
                              "add_kernel.03-memory.ir", "add_kernel.04-llvm.ir", "add_kernel.05-assemble.ir"]
    # What was written is what the result holds, and the JSON on disk is the metadata.
    assert sorted(p.name for p in result.files) == sorted(meta["stages"] + list(meta["files"].values())
                                                          + ["add_kernel.json"])
    assert json.loads((tmp_path / "add_kernel.json").read_text()) == meta
    assert (tmp_path / "add_kernel.cubin").read_bytes() == result.artifacts["cubin"]
    assert (tmp_path / "add_kernel.cubin").read_bytes()[:4] == b"\x7fELF"
    ptx = (tmp_path / "add_kernel.ptx").read_text()
    assert ".target sm_90a" in ptx and ".entry add_kernel(" in ptx and ".maxntid 256" in ptx
    assert (tmp_path / "add_kernel.ll").read_text() == result.result.artifacts["llvm_ir"]


def test_stage_files_parse_back_and_carry_the_hints(tmp_path):
    result = compile_kernel(SPEC, target="nvidia:sm_80", signature="*fp32:16,*fp32,*fp32:16,i32:1",
                            constexprs={"BLOCK_SIZE": 256}, output_dir=tmp_path)
    frontend = (tmp_path / "add_kernel.00-frontend.ir").read_text()
    assert frontend.startswith("// add_kernel for nvidia:sm_80: IR before the pipeline\n")
    assert "pt.divisibility = [16, 1, 16, 1], pt.equal_to_1 = [false, false, false, true]" in frontend
    distribute = (tmp_path / "add_kernel.02-distribute.ir").read_text()
    assert distribute.startswith("// add_kernel for nvidia:sm_80: IR after stage 'distribute'\n")
    assert "#gpu.blocked<" in distribute and "#gpu.blocked<" not in (tmp_path / "add_kernel.01-tile.ir").read_text()
    for stage in result.metadata["stages"]:
        parse_module((tmp_path / stage).read_text(), stage)  # every stage file is valid IR text


def test_the_frontend_ir_is_the_jit_specialization():
    """A signature written for some arguments gives the kernel that a launch with them compiles."""
    from polytile.ir import print_ir

    kernel = load_kernel(SPEC)
    x, y, out = (np.zeros(4096, np.float32) for _ in range(3))
    signature = ",".join("*fp32:16" if a.ctypes.data % 16 == 0 else "*fp32" for a in (x, y, out)) + ",i32:16"
    result = compile_kernel(kernel, target="interp", signature=signature, constexprs={"BLOCK_SIZE": 128})
    assert result.stages[0].ir == print_ir(kernel.lower(x, y, out, 4096, BLOCK_SIZE=128))


def test_emit_picks_stages_artifacts_and_the_metadata():
    result = compile_kernel(SPEC, target="nvidia:sm_80", signature="*fp32,*fp32,*fp32,i32",
                            constexprs={"BLOCK_SIZE": 512})
    assert result.files == []  # no output_dir: nothing written
    assert result.emit("ptx") == result.emit("ptx") == result.artifacts["ptx"]
    assert result.emit("ll") == result.emit("llvm") == result.emit("llvm_ir") == result.artifacts["llvm_ir"]
    assert result.emit("cubin")[:4] == b"\x7fELF"
    assert json.loads(result.emit("json")) == result.metadata
    assert result.emit("tile") == result.emit("01-tile") and "IR after stage 'tile'" in result.emit("tile")
    assert "IR after stage 'llvm'" in result.emit("04-llvm")
    with pytest.raises(AotError, match=r"kernel 'add_kernel' for nvidia:sm_80 has no stage or artifact 'ptxx'; "
                                       r"did you mean 'ptx'\? \(it has: frontend, tile, distribute, memory, "
                                       r"04-llvm, assemble, llvm_ir \(ll\), ptx, cubin, json\)"):
        result.emit("ptxx")


def test_interpreter_target_writes_the_ir_and_metadata_only(tmp_path):
    result = compile_kernel(SPEC, target="interp", signature="*fp32,*fp32,*fp32,i32",
                            constexprs={"BLOCK_SIZE": 128}, output_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["add_kernel.00-frontend.ir", "add_kernel.01-tile.ir",
                                                         "add_kernel.json"]
    assert result.artifacts == {} and result.metadata["files"] == {} and result.metadata["shared_bytes"] == 0


def test_compile_errors_are_compilation_errors(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text(textwrap.dedent("""
        import polytile.language as pl
        import polytile.runtime as pt

        @pt.jit
        def bad(x_ptr, BLOCK: pl.constexpr):
            offs = pl.arange(0, BLOCK)
            pl.store(x_ptr + offs, undefined_name)
    """))
    with pytest.raises(CompilationError) as caught:
        compile_kernel(f"{path}:bad", target="nvidia:sm_80", signature="*fp32", constexprs={"BLOCK": 16})
    assert str(caught.value).startswith(f"{path}:8:28: error: undefined name 'undefined_name'\n")


def test_unwritable_output_is_an_aot_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(AotError, match=r"cannot write the output of kernel 'add_kernel' to '.*file"):
        compile_kernel(SPEC, target="interp", signature="*fp32,*fp32,*fp32,i32", constexprs={"BLOCK_SIZE": 16},
                       output_dir=blocker)


# -- CompileResult: artifacts, binaries, metadata ----------------------------------------------------


def test_compile_result_splits_artifacts_into_binaries_and_metadata():
    from polytile.frontend.codegen import generate_kernel

    kernel = load_kernel(SPEC)
    module, _ = generate_kernel(kernel, {"x_ptr": t.PointerType(t.f32), "y_ptr": t.PointerType(t.f32),
                                         "out_ptr": t.PointerType(t.f32), "n_elements": t.i32}, {"BLOCK_SIZE": 256})
    with config.override(nvidia_assembler="ptxas"):
        result = compile_module(module, "nvidia:sm_80", label="add_kernel")
    assert set(result.binaries) == {"cubin"} and result.binaries["cubin"][:4] == b"\x7fELF"
    metadata = result.metadata
    resources = metadata.pop("resources")  # what the kernel takes of the device: docs/resources.md
    assert resources["spills"] == {"store_bytes": 0, "load_bytes": 0} and resources["shared_bytes"] == 0
    assert metadata == {"kernel_name": "add_kernel", "shared_bytes": 0, "num_warps": 4}
    assert json.loads(json.dumps(result.metadata)) == result.metadata
    assert {"llvm_module", "llvm_ir", "ptx"} <= set(result.artifacts) and result.stages == []


# -- the argument layout comes from the backend ------------------------------------------------------

MIXED = """
import polytile as pt
import polytile.language as pl


@pt.jit
def mixed(flag, x_ptr, scale, n, out_ptr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    value = pl.load(x_ptr + offs, mask=offs < n) * scale + flag
    pl.store(out_ptr + offs, value.to(pl.float16), mask=offs < n)
"""
MIXED_SIGNATURE = "i8,*fp32:16,fp64,i16,*fp16:16"


def _slots(metadata):
    return [(a["name"], a["size"], a["offset"]) for a in metadata["arguments"]]


def test_nvidia_lays_parameters_out_at_their_natural_alignment(tmp_path):
    (tmp_path / "mixed.py").write_text(MIXED)
    result = compile_kernel(f"{tmp_path / 'mixed.py'}:mixed", target="nvidia:sm_90a", signature=MIXED_SIGNATURE,
                            constexprs={"BLOCK": 128})
    assert _slots(result.metadata) == [("flag", 1, 0), ("x_ptr", 8, 8), ("scale", 8, 16), ("n", 2, 24),
                                       ("out_ptr", 8, 32)]
    assert result.metadata["parameter_bytes"] == 40
    # The PTX declares the same parameters, in the same order and widths.
    ptx = result.artifacts["ptx"]
    widths = re.findall(r"\.param \.(?:[a-z]+)(\d+) ", ptx[ptx.index(".entry mixed("):ptx.index(")")])
    assert [int(w) // 8 for w in widths] == [1, 8, 8, 2, 8]


def test_amd_takes_the_offsets_its_code_object_declares(tmp_path, monkeypatch):
    from polytile_amd.backend import AmdBackend
    from polytile_amd.codeobject import read_code_object

    (tmp_path / "mixed.py").write_text(MIXED)
    result = compile_kernel(f"{tmp_path / 'mixed.py'}:mixed", target="amd:gfx942", signature=MIXED_SIGNATURE,
                            constexprs={"BLOCK": 128})
    declared = read_code_object(result.artifacts["hsaco"]).kernel("mixed").explicit_arguments
    assert _slots(result.metadata) == [(p, a.size, a.offset) for p, a in
                                       zip(["flag", "x_ptr", "scale", "n", "out_ptr"], declared)]
    assert result.metadata["parameter_bytes"] == max(a.offset + a.size for a in declared)

    # What the code object says is what is written, even where it is not the natural layout.
    shifted = {"kernel_name": "k", "amd_code_object": {**result.result.metadata["amd_code_object"], "arguments": [
        {**a, "offset": a["offset"] + 16} for a in result.result.metadata["amd_code_object"]["arguments"]]}}
    params = [LaunchParam(n, t.i32) for n in ("flag", "x_ptr", "scale", "n", "out_ptr")]
    layout = AmdBackend().argument_layout(kernel_name="k", params=params, metadata=shifted)
    assert [s.offset for s in layout.slots] == [a.offset + 16 for a in declared]
    with pytest.raises(ValueError, match="the code object declares 5 arguments but the kernel has 2"):
        AmdBackend().argument_layout(kernel_name="k", params=params[:2], metadata=shifted)
    with pytest.raises(ValueError, match="no code object metadata"):
        AmdBackend().argument_layout(kernel_name="k", params=params, metadata={})


def test_a_kernel_reading_its_thread_count_compiles_ahead_of_time_for_the_options_num_warps():
    from tests.language.test_extra_cuda import threads_kernel

    for target, warps, count in (("nvidia:sm_90a", 8, 256), ("interp", 2, 64), ("nvidia:sm_80", None, 128)):
        options = {} if warps is None else {"num_warps": warps}  # the backend's default: 4 warps
        result = compile_kernel(threads_kernel, target=target, signature="*i32:16,*i32:16", options=options)
        assert f"tile<{count}xi32>" in str(result.stages[0].ir), target
