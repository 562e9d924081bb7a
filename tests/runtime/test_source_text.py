"""Kernels compiled from source text (JITFunction.src and _unsafe_update_src, Triton's
names): templates with parts replaced, as Triton's tests and code generators make them,
and functions defined by exec, whose source no file holds."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.compiler import compile_module
from polytile.errors import CompilationError
from polytile.runtime.cache import dependency_hash


@pt.jit
def template(Z, X, SIZE: pl.constexpr):
    off = pl.arange(0, SIZE)
    x = pl.load(X + off)
    z = GENERATE_TEST_HERE
    pl.store(Z + off, z)


@pt.jit
def calls_helper(Z, SIZE: pl.constexpr):
    pl.store(Z + pl.arange(0, SIZE), helper(SIZE))


@pt.jit
def helper(SIZE: pl.constexpr):
    return pl.full((SIZE,), 1.0, pl.float32)


def patched(expression: str) -> pt.JITFunction:
    """Triton's test_core.patch_kernel, compiled path."""
    kernel = pt.JITFunction(template.fn)
    kernel._unsafe_update_src(kernel.src.replace("GENERATE_TEST_HERE", expression))
    return kernel


def test_src_is_the_source_from_the_def():
    assert template.src.startswith("def template(Z, X, SIZE: pl.constexpr):\n")
    assert "z = GENERATE_TEST_HERE" in template.src and "@pt.jit" not in template.src


@pytest.mark.parametrize("expression, expected", [("x * 2", np.arange(8) * 2), ("x + 100", np.arange(8) + 100)])
def test_patched_templates_run(expression, expected):
    x, z = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    patched(expression)[(1,)](z, x, SIZE=8)
    np.testing.assert_array_equal(z, expected)


def test_updated_source_compiles_again_and_keys_the_disk_cache():
    kernel = pt.JITFunction(template.fn)
    kernel._unsafe_update_src(kernel.src.replace("GENERATE_TEST_HERE", "x - 1"))
    first = dependency_hash(kernel)
    z, x = np.zeros(4, np.float32), np.ones(4, np.float32)
    kernel[(1,)](z, x, SIZE=4)
    assert z.tolist() == [0.0] * 4
    kernel._unsafe_update_src(kernel.src.replace("x - 1", "x - 3"))
    assert dependency_hash(kernel) != first
    kernel[(1,)](z, x, SIZE=4)
    assert z.tolist() == [-2.0] * 4  # not the kernel compiled from the old text


def test_a_callers_kernel_sees_its_helpers_new_source():
    z = np.zeros(4, np.float32)
    calls_helper[(1,)](z, SIZE=4)
    assert z.tolist() == [1.0] * 4
    old = helper.src
    try:
        helper._unsafe_update_src(old.replace("1.0", "5.0"))
        calls_helper[(1,)](z, SIZE=4)
        assert z.tolist() == [5.0] * 4
    finally:
        helper._unsafe_update_src(old)


def test_mistakes_in_the_text_point_into_it():
    with pytest.raises(CompilationError, match=r"<source of template, \w+>:4:\d+: error: cannot parse 'template'") as info:
        patched("x +* 1")
    assert "z = x +* 1" in str(info.value)
    kernel = patched("x & x")
    with pytest.raises(CompilationError, match=r"<source of template, \w+>:4:9: error: invalid operands of type fp32"):
        kernel[(1,)](np.zeros(4, np.float32), np.zeros(4, np.float32), SIZE=4)
    with pytest.raises(ValueError, match=r"takes \(Z, Y, SIZE\), the function takes \(Z, X, SIZE\)"):
        pt.JITFunction(template.fn)._unsafe_update_src(template.src.replace("X", "Y"))


def test_functions_defined_by_exec_find_the_text_that_ran():
    # Triton's tests exec a template's source with parts replaced, then launch: the text
    # is still in the caller's variables when @jit runs, and compiling it gives the same
    # bytecode as the function, so it is the function's source.
    namespace = {"pt": pt, "pl": pl}
    text = textwrap.dedent("""
        @pt.jit
        def made(Z, SIZE: pl.constexpr):
            pl.store(Z + pl.arange(0, SIZE), 7.0)
    """)
    exec(text, namespace)  # noqa: S102
    made, z = namespace["made"], np.zeros(4, np.float32)
    made[(1,)](z, SIZE=4)
    assert z.tolist() == [7.0] * 4
    assert made.src.lstrip().startswith("def made(Z, SIZE: pl.constexpr):")


def test_a_function_whose_text_is_gone_says_how_to_give_it():
    namespace = {"pt": pt, "pl": pl}
    exec(textwrap.dedent("""
        @pt.jit
        def made(Z, SIZE: pl.constexpr):
            pl.store(Z + pl.arange(0, SIZE), 7.0)
    """), namespace)  # noqa: S102  (the text was never a variable: nothing to find)
    made, z = namespace["made"], np.zeros(4, np.float32)
    with pytest.raises(CompilationError, match=r"cannot read the source of 'made'.*_unsafe_update_src\(text\)"):
        made[(1,)](z, SIZE=4)


def test_a_text_that_is_not_the_function_is_not_taken():
    namespace = {"pt": pt, "pl": pl}
    # Texts of the same name and lines in the caller's variables, with other constants:
    # neither is the code that ran (its text was never a variable).
    near = "@pt.jit\ndef made(Z, SIZE: pl.constexpr):\n    pl.store(Z + pl.arange(0, SIZE), 7.0)\n"
    other = near.replace("7.0", "8.0")
    exec(compile(other.replace("8.0", "9.0"), "<string>", "exec"), namespace)  # noqa: S102
    made, z = namespace["made"], np.zeros(4, np.float32)
    with pytest.raises(CompilationError, match=r"cannot read the source of 'made'"):
        made[(1,)](z, SIZE=4)


@pytest.mark.parametrize("target", ["nvidia:sm_90a", "nvidia:sm_80", "amd:gfx942"])
def test_patched_templates_compile_for_every_backend(target):
    pytest.importorskip("polytile_nvidia" if target.startswith("nvidia") else "polytile_amd")
    x = np.zeros(128, np.float32)
    module = patched("x * 2 + 1").lower(x, x, SIZE=128)
    result = compile_module(module, target, num_warps=4)
    assert result.binaries


@pt.jit
def writes_one(X, Y, N: pl.constexpr):
    offs = pl.arange(0, N)
    pl.store(X + offs, pl.load(X + offs) + 1)


def test_what_a_kernel_writes_is_read_again_from_the_new_source():
    # The autotuner restores what mutated_args reports: after an update it must be the new code's.
    x, y = np.zeros(4, np.float32), np.zeros(4, np.float32)
    kernel = pt.JITFunction(writes_one.fn)
    assert kernel.mutated_args(x, y, N=4) == ["X"]
    kernel._unsafe_update_src(kernel.src.replace("pl.store(X + offs, pl.load(X + offs) + 1)",
                                                 "pl.store(Y + offs, pl.load(Y + offs) + 1)"))
    assert kernel.mutated_args(x, y, N=4) == ["Y"]


def test_an_indented_text_points_at_its_own_columns():
    text = "\n    def template(Z, X, SIZE: pl.constexpr):\n        off = pl.arange(0, SIZE)\n" \
           "        pl.store(Z + off, pl.load(X + off) & pl.load(X + off))\n"
    kernel = pt.JITFunction(template.fn)
    kernel._unsafe_update_src(text)
    with pytest.raises(CompilationError, match=r":4:27: error: invalid operands"):
        kernel[(1,)](np.zeros(4, np.float32), np.zeros(4, np.float32), SIZE=4)
