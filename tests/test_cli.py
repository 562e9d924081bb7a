"""The `polytile` command: info, passes, opt, config."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys

import pytest

from polytile.cli import main

INPUT = """\
func.func @k(%a: i32) -> i32 attributes {kernel = true} {
  %zero = arith.constant {value = 0} : i32
  %x = arith.addi %a, %zero : i32
  %y = arith.addi %a, %zero : i32
  %s = arith.muli %x, %y : i32
  func.return %s
}
"""


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polytile.cli", *args], capture_output=True, text=True)


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


@pytest.mark.default_target
def test_info_lists_backends_and_the_chosen_target():
    for distribution in ("polytile-nvidia", "polytile-amd"):
        assert _installed(distribution), f"{distribution} is not installed: run ./dev setup (or ./dev test)"
    run = run_cli("info")
    assert run.returncode == 0, run.stderr
    out = run.stdout
    for line in ("nvidia ", "amd ", "interp ", "targets: nvidia:sm_80, nvidia:sm_86, nvidia:sm_89, nvidia:sm_90, "
                 "nvidia:sm_90a", "targets: amd:gfx90a, amd:gfx942, amd:gfx950, amd:gfx1100",
                 "from polytile-nvidia 0.1.0", "from polytile-amd 0.1.0", "targets: interp\n"):
        assert line in out, f"{line!r} missing from:\n{out}"
    from polytile.plugins.manager import get_plugin_manager

    devices = get_plugin_manager().backends.active_devices()
    if not devices:
        assert out.count("no device:") >= 2
        assert "Target:\n  interp  (no installed backend has an active device; using the interpreter)" in out
    else:  # on a GPU machine: the first device is listed and chosen
        assert f"device: {devices[0].name}" in out
        assert f"Target:\n  {devices[0].target}  (first active device: {devices[0].name}" in out
    assert ("passes: allocate-shared, assign-layouts, async-dots, canonicalize, cse, dce, hoist-dot-operands, inline, insert-barriers, licm, "
            "lower-block-pointers, lower-to-llvm, pipeline-loops, "
            "remove-redundant-converts, test-print-axis-info") in out


def test_info_explains_a_configured_target(monkeypatch):
    monkeypatch.setenv("POLYTILE_TARGET", "amd:gfx942")
    run = run_cli("info")
    assert "amd:gfx942  (environment variable POLYTILE_TARGET)" in run.stdout


def test_passes_lists_options_and_owners(capsys):
    assert main(["passes"]) == 0
    out = capsys.readouterr().out
    for name in ("canonicalize", "cse", "dce", "inline", "licm"):
        assert f"\n{name} " in "\n" + out
    assert "from polytile" in out
    assert "max-iterations: int = 10" in out


def test_opt_runs_a_pipeline(tmp_path, capsys):
    source = tmp_path / "in.ir"
    source.write_text(INPUT)
    assert main(["opt", str(source), "-p", "canonicalize,cse"]) == 0
    out = capsys.readouterr().out
    assert out == (
        "func.func @k(%a: i32) -> i32 attributes {kernel = true} {\n"
        "  %s = arith.muli %a, %a : i32\n"
        "  func.return %s\n"
        "}\n"
    )


def test_opt_writes_output_and_prints_ir_after_passes(tmp_path, capsys):
    source = tmp_path / "in.ir"
    source.write_text(INPUT)
    output = tmp_path / "out.ir"
    assert main(["opt", str(source), "-p", "cse", "-o", str(output), "--print-ir-after", "cse", "--time-passes"]) == 0
    err = capsys.readouterr().err
    assert "IR after cse (main)" in err and "pass timing" in err
    assert "%y" not in output.read_text()


VECTOR_ADD_TILE = """
func.func @add(%x: ptr<f32>, %out: ptr<f32>, %n: i32) attributes {kernel = true} {
  %offs = tile.arange {end = 128, start = 0} : tile<128xi32>
  %p = tile.splat %x : tile<128xptr<f32>>
  %q = tile.addptr %p, %offs : tile<128xptr<f32>>
  %v = tile.load %q : tile<128xf32>
  %o = tile.splat %out : tile<128xptr<f32>>
  %r = tile.addptr %o, %offs : tile<128xptr<f32>>
  tile.store %r, %v
  func.return
}
"""


@pytest.mark.parametrize("target", ["nvidia:sm_90a", "amd:gfx942"])
def test_opt_runs_a_targets_passes_with_target(tmp_path, capsys, target):
    pytest.importorskip("polytile_nvidia" if target.startswith("nvidia") else "polytile_amd")
    source = tmp_path / "in.ir"
    source.write_text(VECTOR_ADD_TILE)
    assert main(["opt", str(source), "-t", target, "--option", "num_warps=2", "-p",
                 "distribute(assign-layouts)"]) == 0
    out = capsys.readouterr().out
    assert "gpu.num_warps = 2" in out and "#gpu.blocked<" in out
    # Each layout once, at the top, and its alias in the types (as mlir-opt prints them).
    assert out.startswith("#blocked0 = #gpu.blocked<") and "tile<128xf32, #blocked0>" in out
    assert main(["opt", str(source), "-t", target, "--option", "num_warps=2", "-p", "distribute(assign-layouts)",
                 "--no-layout-aliases"]) == 0
    full = capsys.readouterr().out
    assert "#blocked0" not in full and "tile<128xf32, #gpu.blocked<" in full
    # Without a target the GPU passes say what they need.
    assert main(["opt", str(source), "-p", "assign-layouts"]) == 1
    assert "the GPU passes need a target" in capsys.readouterr().err


def test_opt_prints_a_targets_whole_pipeline(capsys):
    pytest.importorskip("polytile_nvidia")
    from polytile.passes.default_pipeline import build_pipeline
    from polytile.plugins.manager import get_plugin_manager

    assert main(["opt", "--target", "nvidia:sm_90a", "--print-pipeline"]) == 0
    printed = capsys.readouterr().out.strip()
    backend, resolved = get_plugin_manager().backends.resolve("nvidia:sm_90a")
    assert printed == str(build_pipeline(target=resolved, options=backend.parse_options({}), backend=backend))
    assert "distribute(lower-block-pointers,unbatch-dots," in printed
    assert "assign-layouts,remove-redundant-converts,pipeline-loops" in printed
    assert "assemble(emit-ptx,keep-loop-offsets,ptx-to-cubin)" in printed
    for args, message in [(["--print-pipeline"], "--print-pipeline prints a target's pipeline: give the target"),
                          ([], "give the IR file to run the passes on"),
                          (["--option", "num_warps=4", "x.ir"], "--option sets a target's option: give the target")]:
        assert main(["opt", *args]) == 1
        assert message in capsys.readouterr().err


def test_opt_reads_standard_input():
    run = subprocess.run([sys.executable, "-m", "polytile.cli", "opt", "-", "-p", "dce"], input=INPUT,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "func.return %s" in run.stdout


@pytest.mark.parametrize("ir, pipeline, message", [
    ("func.func @k() {\n  func.return\n", "cse", "in.ir:2:14: error: missing '}' to close the region opened at line 1"),
    ("func.func @k() {\n  %x = arith.bogus : i32\n  func.return\n}\n", "cse", "unknown op 'arith.bogus'"),
    (INPUT, "csee", "unknown pass 'csee' in pipeline text at column 1; did you mean 'cse'"),
    (INPUT, "cse{agressive=1}", "unknown option of pass 'cse' 'agressive'"),
    ("func.func @k(%a: i32) -> i32 {\n  func.return\n}\n", "cse",
     "in.ir:2:3: error: 'func.return' op returns () but the function returns (i32)"),
])
def test_opt_errors_are_clear_and_without_traceback(tmp_path, ir, pipeline, message):
    source = tmp_path / "in.ir"
    source.write_text(ir)
    run = run_cli("opt", str(source), "-p", pipeline)
    assert run.returncode == 1
    first_line = run.stderr.split("\n")[0]
    assert first_line.startswith("polytile: ") and "error: " in first_line and "error: error:" not in first_line
    assert message in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def _nested_ifs(depth: int) -> str:
    """A function whose body nests ``depth`` scf.if ops (so depth + 1 regions)."""
    return ("func.func @f(%c: i1, %x: i32) {\n" + "scf.if %c {\n" * depth + "%y = arith.addi %x, %x : i32\n"
            + "scf.yield\n} {\nscf.yield\n}\n" + "scf.yield\n} {\nscf.yield\n}\n" * (depth - 1) + "func.return\n}\n")


@pytest.mark.parametrize("text, message", [
    (_nested_ifs(1000), "in.ir:201:11: error: regions are nested more than 200 deep here; polytile's IR allows at "
                        "most 200"),
    ("func.func @f() {\n  %0 = arith.constant {value = " + "[" * 5000 + "]" * 5000 + "} : i32\n  func.return\n}\n",
     "error: the text is nested too deeply to parse here"),
    ("", "error: IR file '{path}' holds no operation (it is empty)"),
    ("\n  // a comment\n\n", "error: IR file '{path}' holds no operation (only comments)"),
])
def test_opt_refuses_text_too_deep_or_empty_with_a_located_error(tmp_path, text, message):
    """IR nested 1,000 deep raised RecursionError; an empty file was accepted with exit 0."""
    source = tmp_path / "in.ir"
    source.write_text(text)
    run = run_cli("opt", str(source), "-p", "cse")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert message.format(path=source) in run.stderr


def test_opt_runs_passes_at_the_deepest_nesting_allowed(tmp_path):
    source = tmp_path / "in.ir"
    source.write_text(_nested_ifs(199))
    run = run_cli("opt", str(source), "-p", "cse,licm")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.count("scf.if") == 199
    run = run_cli("opt", str(source), "-p", "inline,canonicalize,cse,licm,dce")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout == "func.func @f(%c: i1, %x: i32) {\n  func.return\n}\n"  # all of it dead
    empty_module = tmp_path / "empty_module.ir"
    empty_module.write_text("module {\n}\n")
    assert run_cli("opt", str(empty_module)).returncode == 0  # an explicit empty module is an input


def test_opt_missing_file():
    run = run_cli("opt", "/no/such/file.ir")
    assert run.returncode == 1 and "cannot read IR file '/no/such/file.ir'" in run.stderr


def test_opt_input_that_is_not_utf8_is_named(tmp_path):
    source = tmp_path / "latin1.ir"
    source.write_bytes(b"func.func @k() {\n  // caf\xe9\n  func.return\n}\n")
    run = run_cli("opt", str(source))
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr == (f"polytile: error: cannot read IR file '{source}': it is not UTF-8 text "
                          "(byte 0xe9 on line 2, at byte offset 25); save it as UTF-8\n")
    run = subprocess.run([sys.executable, "-m", "polytile.cli", "opt", "-"], input=source.read_bytes(),
                         capture_output=True)
    assert run.returncode == 1 and b"cannot read IR from standard input: it is not UTF-8 text" in run.stderr


def test_opt_output_that_cannot_be_written_is_named(tmp_path):
    source = tmp_path / "in.ir"
    source.write_text(INPUT)
    target = tmp_path / "no-such-dir" / "x.ir"
    run = run_cli("opt", str(source), "-o", str(target))
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr == f"polytile: error: cannot write output file '{target}': No such file or directory\n"


@pytest.mark.default_target
def test_info_shows_the_whole_report_despite_bad_settings(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.polytile]\ncache = "yes please"\ntime_passes = true\n')
    env = {**os.environ, "POLYTILE_DISABLE_PLUGINS": "polytile amd", "POLYTILE_DUMP_IR": "maybe",
           "POLYTILE_TRAGET": "interp"}
    run = subprocess.run([sys.executable, "-m", "polytile.cli", "info"], capture_output=True, text=True,
                         cwd=tmp_path, env=env)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    out = run.stdout
    # The report is all there: every backend and plugin (the unreadable disabled_plugins
    # disables none), and the target, whose own chain runs into the broken project file.
    for line in ("interp   NumPy interpreter", "amd          loaded", "nvidia       loaded",
                 "passes: allocate-shared, assign-layouts, async-dots, canonicalize, cse, dce, hoist-dot-operands, inline, insert-barriers, licm, "
            "lower-block-pointers, lower-to-llvm, pipeline-loops, "
                 "remove-redundant-converts, test-print-axis-info", "Target:\n  none: setting 'cache' from",
                 "(the setting 'disabled_plugins' cannot be read, see below: no plugin is disabled)"):
        assert line in out, f"{line!r} missing from:\n{out}"
    problems = out.split("Configuration problems:\n", 1)[1].splitlines()
    assert problems == [
        "  error: setting 'disabled_plugins' from environment variable POLYTILE_DISABLE_PLUGINS: 'polytile amd' "
        "is not a name; names have no spaces or commas",
        "  error: setting 'dump_ir' from environment variable POLYTILE_DUMP_IR: 'maybe' is not a boolean; use 1/0, "
        "true/false, yes/no, on/off",
        f"  error: setting 'cache' from [tool.polytile] in {tmp_path / 'pyproject.toml'}: 'yes please' is not a "
        "boolean; use true or false",
        "  warning: environment variable POLYTILE_TRAGET is not read by polytile; did you mean 'POLYTILE_TARGET', "
        "'POLYTILE_PTXAS' or 'POLYTILE_CACHE'?",
    ]
    assert run.stderr == "polytile: error: 3 problems in the setup (above)\n"


def test_config_shows_values_and_sources(monkeypatch):
    monkeypatch.setenv("POLYTILE_TIME_PASSES", "1")
    run = run_cli("config")
    assert run.returncode == 0
    assert "time_passes = True   (environment variable POLYTILE_TIME_PASSES)" in run.stdout
    assert "verify_each" in run.stdout


def test_unknown_target_lists_close_matches(monkeypatch):
    monkeypatch.setenv("POLYTILE_TARGET", "nvidai:sm_90a")
    run = run_cli("info")
    assert "unknown target backend 'nvidai'" in run.stdout and "did you mean 'nvidia'" in run.stdout


def test_info_shows_how_a_backend_with_a_device_launches():
    # Only machines with a GPU reach this line of `polytile info`: checked here with a
    # stand-in manager, so a machine without one runs it too.
    from types import SimpleNamespace

    from polytile.cli import _launch_path_lines

    class Backends:
        def find(self, name):
            return {"fast": SimpleNamespace(launch_path=lambda: "native (C extension): built"),
                    "plain": SimpleNamespace(),
                    "broken": SimpleNamespace(launch_path=lambda: 1 / 0)}[name]

    manager = SimpleNamespace(backends=Backends())
    assert _launch_path_lines(manager, "fast") == ["           launch: native (C extension): built"]
    assert _launch_path_lines(manager, "plain") == []
    assert _launch_path_lines(manager, "broken") == ["           launch: unknown (division by zero)"]


def test_version(capsys):
    import polytile
    from polytile.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out == f"polytile {polytile.__version__}\n"
