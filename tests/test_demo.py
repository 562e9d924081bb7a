"""The demo that `./dev demo` runs: compiles and runs vector add, checked against NumPy."""

from __future__ import annotations

from polytile.demo import main


def test_demo_runs_on_the_interpreter(capsys):
    assert main(["--target", "interp", "-n", "5000"]) == 0
    out = capsys.readouterr().out
    assert "target: interp  (target= argument)" in out
    # The core's tile stage, with whatever installed plugins insert into it (polytile-tma
    # its descriptor lowering): the pipeline the compile really ran.
    from polytile.passes.default_pipeline import build_pipeline
    from polytile.plugins.manager import get_plugin_manager
    from polytile.target import Target

    backend = get_plugin_manager().backends.get("interp")
    expected = build_pipeline(Target("interp"), backend.parse_options({}), backend)
    assert f"pipeline: {expected}" in out
    assert str(expected).startswith("tile(inline,") and str(expected).endswith("canonicalize,cse,licm,canonicalize,dce)")
    assert "ran add_kernel over 5000 elements on 5 programs" in out and "matches NumPy" in out


def test_demo_on_the_default_target_always_runs(capsys):
    # Whatever the machine, the demo ends with a checked run (on a GPU machine whose
    # backend cannot launch yet, on the interpreter).
    assert main(["-n", "3000"]) == 0
    assert "matches NumPy" in capsys.readouterr().out


def test_demo_shows_the_ir(capsys):
    assert main(["--target", "interp", "-n", "10", "--show-ir"]) == 0
    assert "tile.store %op, %sum mask(%mask)" in capsys.readouterr().out
