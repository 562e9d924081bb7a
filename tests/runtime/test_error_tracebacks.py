"""What a user sees when a launch fails to compile: a short traceback for a mistake in
the kernel, the compiler's own frames for an internal compiler error."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = """
import numpy as np
import polytile as pt
import polytile.language as pl
{setup}

@pt.jit
def kernel(out_ptr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(out_ptr + offs, {value})


out = np.zeros(16, np.float32)
kernel[(1,)](out, BLOCK=16)  # the launch line
"""


def _run(tmp_path: Path, value: str, setup: str = "") -> tuple[list[str], Path]:
    script = tmp_path / "user_kernel.py"
    script.write_text(SCRIPT.format(value=value, setup=textwrap.dedent(setup)))
    env = dict(os.environ, POLYTILE_TARGET="interp", POLYTILE_CACHE="0")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stderr.strip().splitlines(), script


def _frames(stderr: list[str]) -> list[str]:
    return [line.strip() for line in stderr if line.strip().startswith("File ")]


def test_a_mistake_in_the_kernel_shows_the_launch_line_and_the_kernel_line(tmp_path):
    stderr, script = _run(tmp_path, "pl.no_such_function(offs)")
    frames = _frames(stderr)
    assert frames[0].startswith(f'File "{script}", line 14')  # the launch
    assert stderr[stderr.index(f"  {frames[0]}") + 1].strip() == "kernel[(1,)](out, BLOCK=16)  # the launch line"
    # No frame of the frontend, the pass manager or the cache: only the launch entry.
    assert not any(part in frame for frame in frames for part in ("frontend", "passes", "compiler.py", "cache.py"))
    # (the launch, the entry's binding check, the generated entry point, the compile call)
    assert len(frames) <= 4
    assert stderr[-3] == (f"polytile.errors.CompilationError: {script}:10:30: error: 'polytile.language' has no "
                          "attribute 'no_such_function'")
    assert stderr[-2].strip() == "pl.store(out_ptr + offs, pl.no_such_function(offs))"
    assert stderr[-1].strip() == "^" and stderr[-1].index("^") == stderr[-2].index("pl.no_such")
    assert not any("The above exception" in line for line in stderr)


def test_an_unexpected_exception_keeps_the_compiler_frames(tmp_path):
    # A Python error raised inside the frontend may be a compiler bug: its frames stay.
    setup = """
    from polytile.frontend import function

    def broken(self, node):
        raise RuntimeError("a compiler bug")

    function.FunctionGen.visit_Call = broken
    """
    stderr, _ = _run(tmp_path, "pl.full((BLOCK,), 1.0, pl.float32)", setup)
    text = "\n".join(stderr)
    assert "RuntimeError: a compiler bug" in text
    assert "The above exception was the direct cause of the following exception" in text
    assert any("frontend" in frame for frame in _frames(stderr))
    assert stderr[-3].startswith("polytile.errors.CompilationError: ")


def test_an_internal_compiler_error_keeps_its_traceback(tmp_path):
    setup = """
    from polytile.passes import cse

    def broken(self, module, context):
        raise RuntimeError("a pass bug")

    cse.CommonSubexpressionElimination.run = broken
    """
    stderr, _ = _run(tmp_path, "offs.to(pl.float32)", setup)
    text = "\n".join(stderr)
    assert "internal compiler error in pass 'cse'" in text
    assert any("passes" in frame for frame in _frames(stderr))
