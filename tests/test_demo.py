"""The demo that `./dev demo` runs: compiles and runs vector add, checked against NumPy."""

from __future__ import annotations

from polytile.demo import main


def test_demo_runs_on_the_interpreter(capsys):
    assert main(["--target", "interp", "-n", "5000"]) == 0
    out = capsys.readouterr().out
    assert "target: interp  (target= argument)" in out
    assert "pipeline: tile(inline,canonicalize,cse,licm,canonicalize,dce)" in out
    assert "ran add_kernel over 5000 elements on 5 programs" in out and "matches NumPy" in out


def test_demo_on_the_default_target_always_runs(capsys):
    # Whatever the machine, the demo ends with a checked run (on a GPU machine whose
    # backend cannot launch yet, on the interpreter).
    assert main(["-n", "3000"]) == 0
    assert "matches NumPy" in capsys.readouterr().out


def test_demo_shows_the_ir(capsys):
    assert main(["--target", "interp", "-n", "10", "--show-ir"]) == 0
    assert "tile.store %op, %sum mask(%mask)" in capsys.readouterr().out
