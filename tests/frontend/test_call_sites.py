"""An error inside a @jit helper shows the helper's line with a caret, then each call site
that led there (innermost first), like a traceback of kernel frames."""

import importlib.util
import inspect

import numpy as np
import pytest

import polytile.language as pl
from polytile.errors import CompilationError
from polytile.runtime import jit

HERE = __file__

HELPERS = '''\
import polytile.language as pl
from polytile.runtime import jit


@jit
def scale(x, factor):
    return x * factor + "one"


@jit
def outer(x):
    y = x + 1
    return scale(y, 2)


@jit(noinline=True)
def noinline_bad(p):
    return pl.load(p) @ pl.load(p)


@jit
def recurse(x, DEPTH: pl.constexpr):
    return recurse(x, DEPTH + 1)
'''


@pytest.fixture
def helpers(tmp_path):
    path = tmp_path / "kernel_helpers.py"
    path.write_text(HELPERS)
    spec = importlib.util.spec_from_file_location("kernel_helpers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _helper_line(module, text):
    lines = inspect.getsource(module).splitlines()
    for number, line in enumerate(lines, 1):
        if text in line:
            return number, line
    raise AssertionError(text)


def _call_line(fn, text):
    lines, start = inspect.getsourcelines(fn.fn)
    for i, line in enumerate(lines):
        if text in line:
            return start + i, line.rstrip("\n")
    raise AssertionError(text)


def _frames(err):
    """(file:line, source line, caret line) of each call site in the message."""
    lines = str(err).splitlines()
    found = []
    for i, line in enumerate(lines):
        if line.startswith("  in helper "):
            found.append((line, lines[i + 1], lines[i + 2]))
    return found


def test_error_in_a_helper_of_another_module_names_the_call_site(helpers):
    @jit
    def kernel(x_ptr):
        x = pl.load(x_ptr)
        pl.store(x_ptr, helpers.scale(x, 3))

    with pytest.raises(CompilationError) as info:
        kernel.lower(np.zeros(1, np.float32))
    err = info.value
    line, source = _helper_line(helpers, 'x * factor + "one"')
    assert err.location.file == helpers.__file__ and err.location.line == line  # innermost: the helper's line
    assert err.source_line == source
    call_line, call_source = _call_line(kernel, "helpers.scale(x, 3)")
    column = call_source.index("helpers.scale") + 1
    [(where, text, caret)] = _frames(err)
    assert where == f"  in helper 'scale' called from {HERE}:{call_line}:{column}"
    assert text == f"    {call_source}"
    assert caret == "    " + " " * (column - 1) + "^"
    # The first lines are the helper's, unchanged: file:line:col, message, line, caret.
    assert str(err).startswith(f"{helpers.__file__}:{line}:")


def test_nested_helpers_list_every_call_site_innermost_first(helpers):
    @jit
    def kernel(x_ptr):
        pl.store(x_ptr, helpers.outer(pl.load(x_ptr)))

    with pytest.raises(CompilationError) as info:
        kernel.lower(np.zeros(1, np.float32))
    frames = _frames(info.value)
    inner_line, inner_source = _helper_line(helpers, "return scale(y, 2)")
    call_line, _ = _call_line(kernel, "helpers.outer(")
    assert [f[0].split(" called from ")[0] for f in frames] == ["  in helper 'scale'", "  in helper 'outer'"]
    assert f"{helpers.__file__}:{inner_line}:" in frames[0][0] and frames[0][1] == f"    {inner_source}"
    assert f"{HERE}:{call_line}:" in frames[1][0]


def test_error_in_a_noinline_helper_names_the_call_site(helpers):
    @jit
    def kernel(x_ptr):
        helpers.noinline_bad(x_ptr)

    with pytest.raises(CompilationError, match="'@' is not supported on tensors") as info:
        kernel.lower(np.zeros(1, np.float32))
    [(where, _, _)] = _frames(info.value)
    assert where.startswith("  in helper 'noinline_bad' called from " + HERE)


def test_error_at_the_call_itself_points_at_the_call(helpers):
    @jit
    def kernel(x_ptr):
        pl.store(x_ptr, helpers.scale(pl.load(x_ptr)))

    with pytest.raises(CompilationError, match="'scale': missing a required argument: 'factor'") as info:
        kernel.lower(np.zeros(1, np.float32))
    assert info.value.location.file == HERE and _frames(info.value) == []


def test_recursion_is_one_frame_with_a_count(helpers):
    @jit
    def kernel(x_ptr):
        helpers.recurse(x_ptr, 0)

    with pytest.raises(CompilationError, match="calls nest too deeply at 'recurse'") as info:
        kernel.lower(np.zeros(1, np.float32))
    frames = _frames(info.value)
    assert len(frames) == 2  # the recursive call (counted), then the kernel's call
    assert "more times]" in str(info.value)
