"""Globals a kernel reads: values the cache key and the launch guard can compare are
folded; anything that can change unseen (a list, a dict, an object's attributes) is a
compile error, since the old code would run from both caches after a change."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile import config
from polytile.errors import CompilationError
from polytile.frontend.globals import is_keyed_constant, refusal

GLOBALS = """
import sys
import types

import numpy as np
import polytile as pt
import polytile.language as pl

LIST = [1, 3]
DICT = {"scale": 3}
NAMESPACE = types.SimpleNamespace(scale=3)
ARRAY = np.array([1, 3])
WRAPPED_LIST = pl.constexpr([1, 3])
TUPLE_OF_LIST = (1, [3])
TUPLE_OF_INTS = (1, 3)


class Settings:
    scale = 3
    table = [1, 3]


this_module = sys.modules[__name__]
"""


@pytest.fixture
def make_kernel(tmp_path, monkeypatch):
    """A kernel storing ``expression``, in a module of its own holding the globals above."""
    monkeypatch.syspath_prepend(str(tmp_path))
    made = []

    def make(expression: str):
        name = f"globals_kernel_{len(made)}"
        (tmp_path / f"{name}.py").write_text(GLOBALS + textwrap.dedent(f"""

            @pt.jit
            def kernel(out_ptr):
                pl.store(out_ptr, {expression})
        """))
        importlib.invalidate_caches()
        made.append(name)
        return importlib.import_module(name).kernel

    yield make
    for name in made:
        sys.modules.pop(name, None)


@pytest.mark.parametrize("expression, name, what", [
    ("LIST[1]", "LIST", "a list"),
    ("DICT['scale']", "DICT", "a dict"),
    ("NAMESPACE.scale", "NAMESPACE", "a SimpleNamespace"),
    ("ARRAY[1]", "ARRAY", "a NumPy array"),
    ("WRAPPED_LIST[1]", "WRAPPED_LIST", "a list"),
    ("TUPLE_OF_LIST[0]", "TUPLE_OF_LIST", "a tuple holding a list"),
    ("Settings.table[1]", "Settings.table", "a list"),
    ("this_module.LIST[1]", "this_module.LIST", "a list"),
])
def test_a_global_that_can_change_unseen_is_a_located_compile_error(make_kernel, expression, name, what):
    kernel = make_kernel(expression)
    out = np.zeros(1, np.int32)
    with pytest.raises(CompilationError) as info:
        kernel[(1,)](out, target="interp")
    message = str(info.value)
    assert f"the kernel reads the global '{name}', which is {what}" in message
    assert "pl.constexpr" in message and "tuple" in message
    assert expression in message  # the source line is shown


@pytest.mark.parametrize("expression, expected", [
    ("Settings.scale * 2", 6), ("this_module.Settings.scale", 3), ("len(TUPLE_OF_INTS)", 2),
])
def test_constants_modules_and_classes_are_still_readable(make_kernel, expression, expected):
    kernel = make_kernel(expression)
    out = np.zeros(1, np.int32)
    kernel[(1,)](out, target="interp")
    assert out[0] == expected


def test_a_closure_list_is_refused_too():
    table = [1, 3]

    @pt.jit
    def kernel(out_ptr):
        pl.store(out_ptr, table[0])

    with pytest.raises(CompilationError, match="reads the global 'table', which is a list"):
        kernel[(1,)](np.zeros(1, np.int32), target="interp")


def test_what_is_keyed():
    assert is_keyed_constant((1, 2.0, "a", None, True, pl.float16, (3,)))
    assert not is_keyed_constant([1]) and not is_keyed_constant((1, {}))
    assert refusal(pl.constexpr(4)) is None and refusal(np) is None and refusal(len) is None
    assert refusal(pl.constexpr({})) == "a dict"


DTYPE = pl.float16


@pytest.mark.parametrize("cache", [True, False])
def test_a_changed_dtype_global_recompiles(cache, tmp_path):
    """A dtype global was read but neither keyed nor guarded: a rebinding ran the old code."""
    global DTYPE

    @pt.jit
    def kernel(out_ptr):
        pl.store(out_ptr, pl.full((1,), 1.5, DTYPE))

    out = np.zeros(1, np.float32)
    try:
        with config.override(cache=cache, cache_dir=str(tmp_path / "kernels")):
            kernel[(1,)](out, target="interp")
            assert out[0] == 1.5
            DTYPE = pl.int32
            kernel[(1,)](out, target="interp")
            assert out[0] == 1.0
    finally:
        DTYPE = pl.float16


def test_a_changed_tuple_global_is_a_miss_of_the_disk_cache(tmp_path):
    """A fresh process after the module's tuple was edited must not load the old kernel."""
    script = tmp_path / "kernel_module.py"
    template = textwrap.dedent("""
        import numpy as np
        import polytile as pt
        import polytile.language as pl

        SCALE = {scale}

        @pt.jit
        def kernel(out_ptr):
            pl.store(out_ptr, SCALE[1])

        out = np.zeros(1, np.int32)
        kernel[(1,)](out, target="interp")
        print(out[0], kernel.compile_count, kernel.disk_hits)
    """)
    env = {**__import__("os").environ, "POLYTILE_CACHE_DIR": str(tmp_path / "cache")}

    def run(scale: str) -> str:
        script.write_text(template.format(scale=scale))
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, check=True)
        return done.stdout.split()

    assert run("(1, 3)") == ["3", "1", "0"]
    assert run("(1, 3)") == ["3", "0", "1"]  # the disk cache serves the same value
    assert run("(1, 7)") == ["7", "1", "0"]  # an edited tuple is a new kernel
