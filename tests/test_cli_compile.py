"""`polytile compile`: ahead-of-time compilation from the command line, without a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from polytile.cli import main

REPO = Path(__file__).resolve().parents[1]
KERNEL = f"{REPO / 'examples' / 'vector_add.py'}:add_kernel"
SIGNATURE = "*fp32:16,*fp32:16,*fp32:16,i32"
STAGES = ["00-frontend", "01-tile", "02-distribute", "03-memory", "04-llvm", "05-assemble"]


def run_cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "polytile.cli", *args], capture_output=True,
                          env={**os.environ, **env})


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_compile_writes_every_stage_the_binary_and_the_metadata(tmp_path, arch):
    # ptxas makes the cubin (and the cuda driver is never loaded: no GPU is needed).
    run = run_cli("compile", KERNEL, "--target", f"nvidia:{arch}", "--signature", SIGNATURE,
                  "--constexpr", "BLOCK_SIZE=1024", "--num-warps", "8", "-o", str(tmp_path / "out"),
                  POLYTILE_NVIDIA_ASSEMBLER="ptxas")
    assert run.returncode == 0, run.stderr.decode()
    assert run.stdout == b""
    compiled, resources = run.stderr.decode().splitlines()
    assert compiled == f"polytile: compiled 'add_kernel' for nvidia:{arch}: 10 files in {tmp_path / 'out'}"
    # 256 threads, no shared memory: 8 blocks hold the SM's 2048 threads.
    assert resources.startswith("polytile: resources: ") and resources.endswith(
        ", no spills, 0 bytes shared memory; occupancy: 8 blocks per SM, 64 warps per SM, limited by threads")
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"add_kernel.{stage}.ir" for stage in STAGES]
        + ["add_kernel.ll", "add_kernel.ptx", "add_kernel.cubin", "add_kernel.json"])
    cubin = (out / "add_kernel.cubin").read_bytes()
    assert cubin[:4] == b"\x7fELF"
    meta = json.loads((out / "add_kernel.json").read_text())
    assert meta["kernel_name"] == "add_kernel" and meta["target"] == f"nvidia:{arch}"
    assert meta["num_warps"] == 8 and meta["shared_bytes"] == 0 and meta["constexprs"] == {"BLOCK_SIZE": 1024}
    assert meta["signature"] == SIGNATURE and meta["parameter_bytes"] == 28
    assert [(a["name"], a["offset"], a["size"]) for a in meta["arguments"]] == [
        ("x_ptr", 0, 8), ("y_ptr", 8, 8), ("out_ptr", 16, 8), ("n_elements", 24, 4)]
    assert meta["versions"]["nvidia-assembler"].startswith("ptxas ")
    assert meta["files"]["cubin"] == "add_kernel.cubin"
    ptx = (out / "add_kernel.ptx").read_text()
    assert f".target {arch}" in ptx and ".visible .entry add_kernel(" in ptx
    assert "define ptx_kernel void @\"add_kernel\"" in (out / "add_kernel.ll").read_text()


def test_compile_for_amd_writes_the_assembly_and_the_code_object(tmp_path, amd_linker):
    # The writer is generic: whatever text or bytes the AMD stages leave is written.
    assert main(["compile", KERNEL, "-t", "amd:gfx942", "-s", SIGNATURE, "-c", "BLOCK_SIZE=1024",
                 "-o", str(tmp_path)]) == 0
    meta = json.loads((tmp_path / "add_kernel.json").read_text())
    assert meta["kernel_name"] == "add_kernel" and meta["target"] == "amd:gfx942" and meta["parameter_bytes"] == 28
    assert meta["files"]["amdgcn"] == "add_kernel.s" and meta["files"]["hsaco"] == "add_kernel.hsaco"
    assert ".amdgcn_target \"amdgcn-amd-amdhsa--gfx942" in (tmp_path / "add_kernel.s").read_text()
    assert (tmp_path / "add_kernel.hsaco").read_bytes()[:4] == b"\x7fELF"
    assert {f"add_kernel.{stage}.ir" for stage in STAGES} <= {p.name for p in tmp_path.iterdir()}


def test_compile_needs_no_gpu_driver(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        from polytile.cli import main
        assert main(["compile", {KERNEL!r}, "-t", "nvidia:sm_90a", "-s", {SIGNATURE!r}, "-c", "BLOCK_SIZE=256",
                     "-o", {str(tmp_path)!r}]) == 0
        loaded = [m for m in sys.modules if m.startswith(("cuda.bindings.driver", "hip"))]
        assert not loaded, loaded
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "add_kernel.cubin").read_bytes()[:4] == b"\x7fELF"


@pytest.mark.parametrize("stage, expected", [
    ("frontend", "// add_kernel for nvidia:sm_80: IR before the pipeline\nfunc.func @add_kernel("),
    ("tile", "// add_kernel for nvidia:sm_80: IR after stage 'tile'\nfunc.func @add_kernel("),
    ("distribute", "// add_kernel for nvidia:sm_80: IR after stage 'distribute'\nfunc.func @add_kernel("),
    ("memory", "// add_kernel for nvidia:sm_80: IR after stage 'memory'\nfunc.func @add_kernel("),
    ("04-llvm", "// add_kernel for nvidia:sm_80: IR after stage 'llvm'\nfunc.func @add_kernel("),
    ("assemble", "// add_kernel for nvidia:sm_80: IR after stage 'assemble'\nfunc.func @add_kernel("),
    ("llvm", "; ModuleID = \"polytile\"\ntarget triple = \"nvptx64-nvidia-cuda\""),
    ("ll", "; ModuleID = \"polytile\"\n"),
    ("ptx", "//\n// Generated by LLVM NVPTX Back-End\n"),
    ("json", "{\n  \"kernel_name\": \"add_kernel\",\n"),
])
def test_emit_prints_one_stage_and_writes_nothing(tmp_path, monkeypatch, capsys, stage, expected):
    monkeypatch.chdir(tmp_path)
    assert main(["compile", KERNEL, "-t", "nvidia:sm_80", "-s", SIGNATURE, "-c", "BLOCK_SIZE=128",
                 "--emit", stage]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(expected) and out.endswith("\n")
    assert err == "" and list(tmp_path.iterdir()) == []


def test_emit_with_an_output_directory_does_both(tmp_path, capsys):
    assert main(["compile", KERNEL, "-t", "nvidia:sm_80", "-s", SIGNATURE, "-c", "BLOCK_SIZE=128",
                 "--emit", "ptx", "-o", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert out == (tmp_path / "add_kernel.ptx").read_text()
    assert err.startswith("polytile: compiled 'add_kernel' for nvidia:sm_80: 10 files in ")


def test_compile_prints_ir_after_passes_and_their_times(tmp_path, capsys):
    pytest.importorskip("polytile_nvidia")
    from polytile.cli import main

    assert main(["compile", KERNEL, "-t", "nvidia:sm_80", "-s", SIGNATURE, "-c", "BLOCK_SIZE=128",
                 "-o", str(tmp_path), "--print-ir-after", "assign-layouts", "--print-ir-before", "lower-to-llvm",
                 "--time-passes"]) == 0
    err = capsys.readouterr().err
    assert "IR after assign-layouts (distribute)" in err and "IR before lower-to-llvm (llvm)" in err
    assert "pass timing" in err and "assemble/emit-ptx" in err


def test_emit_cubin_writes_the_bytes_to_a_pipe():
    run = run_cli("compile", KERNEL, "-t", "nvidia:sm_90a", "-s", SIGNATURE, "-c", "BLOCK_SIZE=128", "--emit", "cubin")
    assert run.returncode == 0, run.stderr.decode()
    assert run.stdout[:4] == b"\x7fELF" and run.stderr == b""


def test_without_output_directory_files_go_to_the_current_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["compile", KERNEL, "-t", "interp", "-s", SIGNATURE, "-c", "BLOCK_SIZE=64"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["add_kernel.00-frontend.ir", "add_kernel.01-tile.ir",
                                                         "add_kernel.json"]
    assert capsys.readouterr().err == "polytile: compiled 'add_kernel' for interp: 3 files in .\n"


BAD_KERNEL = """\
import polytile.language as pl
import polytile.runtime as pt


@pt.jit
def bad(x_ptr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(x_ptr + offs, pl.load(x_ptr + offs) + missing)
"""


@pytest.mark.parametrize("args, message", [
    (["nowhere.py:k", "-s", "*fp32"], "polytile: error: cannot read kernel file 'nowhere.py': no such file\n"),
    ([f"{KERNEL}x", "-s", "*fp32"],
     "polytile: error: '{examples}/vector_add.py' has no kernel 'add_kernelx'; did you mean 'add_kernel'? "
     "(its @jit functions: add_kernel)\n"),
    ([KERNEL[: -len(":add_kernel")] + ":add", "-s", "*fp32"],
     "polytile: error: 'add' in '{examples}/vector_add.py' is a function, not a @jit kernel (its @jit functions: "
     "add_kernel)\n"),
    ([KERNEL, "-s", "*fp32,*fp32,*fp32,i33", "-c", "BLOCK_SIZE=64"],
     "polytile: error: signature entry 4 ('i33'): unknown dtype 'i33'; did you mean 'i32' or 'int32'?\n"),
    ([KERNEL, "-s", SIGNATURE, "-c", "BLOCK=64"],
     "polytile: error: kernel 'add_kernel' has no constexpr parameter 'BLOCK'; did you mean 'BLOCK_SIZE'? "
     "(its constexpr parameters: BLOCK_SIZE)\n"),
    ([KERNEL, "-s", SIGNATURE, "-c", "BLOCK_SIZE"],
     "polytile: error: --constexpr 'BLOCK_SIZE': write NAME=VALUE, such as --constexpr BLOCK=1024\n"),
    ([KERNEL, "-s", SIGNATURE],
     "polytile: error: kernel 'add_kernel': constexpr parameter 'BLOCK_SIZE' needs a value (--constexpr "
     "BLOCK_SIZE=VALUE, or constexprs={'BLOCK_SIZE': ...})\n"),
    ([KERNEL, "-s", SIGNATURE, "-c", "BLOCK_SIZE=64", "--num-warps", "3"],
     "polytile: error: option 'num_warps' must be a power of 2 (1, 2, 4, 8, ...), got 3\n"),
    ([KERNEL, "-s", SIGNATURE, "-c", "BLOCK_SIZE=64", "--num-warps", "4", "--option", "num_warps=8"],
     "polytile: error: --num-warps and --option num_warps=... both give num_warps: keep one\n"),
    ([KERNEL, "-s", SIGNATURE, "-c", "BLOCK_SIZE=64", "--emit", "sass"],
     "polytile: error: kernel 'add_kernel' for nvidia:sm_80 has no stage or artifact 'sass'; did you mean "
     "'assemble'? (it has: frontend, "
     "tile, distribute, memory, 04-llvm, assemble, llvm_ir (ll), ptx, cubin, json)\n"),
    (["bad.py:bad", "-s", "*fp32", "-c", "BLOCK=16"],
     "polytile: {tmp}/bad.py:8:52: error: undefined name 'missing'\n"
     "        pl.store(x_ptr + offs, pl.load(x_ptr + offs) + missing)\n"
     "                                                       ^\n"),
])
def test_errors_are_one_clean_message(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.py").write_text(BAD_KERNEL)
    assert main(["compile", *args, "--target", "nvidia:sm_80"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == message.replace("{examples}", str(REPO / "examples")).replace("{tmp}", str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.py"]  # nothing written on an error


def test_errors_print_no_traceback(tmp_path):
    (tmp_path / "boom.py").write_text("raise RuntimeError('no CUDA here')\n")
    run = run_cli("compile", f"{tmp_path / 'boom.py'}:k", "-t", "nvidia:sm_90a", "-s", "*fp32")
    assert run.returncode == 1
    assert run.stderr.decode() == (f"polytile: error: importing '{tmp_path / 'boom.py'}' failed at line 1 "
                                   "(raise RuntimeError('no CUDA here')): RuntimeError: no CUDA here\n")
    run = run_cli("compile", KERNEL, "-t", "nvidia:sm_99", "-s", SIGNATURE, "-c", "BLOCK_SIZE=64")
    assert run.returncode == 1 and b"Traceback" not in run.stderr
    assert run.stderr.decode().startswith("polytile: error: target 'nvidia:sm_99': backend 'nvidia' has no "
                                          "architecture 'sm_99'")


def test_compile_requires_target_and_signature(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["compile", KERNEL, "-s", SIGNATURE])
    assert caught.value.code == 2
    assert "the following arguments are required: -t/--target" in capsys.readouterr().err


def test_a_bad_target_names_the_option_it_came_from(tmp_path, capsys):
    assert main(["compile", KERNEL, "-t", "nvidia:sm_75", "-s", SIGNATURE, "-c", "BLOCK_SIZE=1024",
                 "-o", str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert "no architecture 'sm_75'" in err and "(the target came from --target)" in err
    assert "target= argument" not in err and not list(tmp_path.iterdir())
