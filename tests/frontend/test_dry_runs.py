"""Compile-time effects (static_print, static_assert, compile-time `assert`) act once per
generation that is kept: the dry runs that infer a loop's carried values are silent."""

import numpy as np
import pytest

import polytile.language as pl
from polytile.errors import CompilationError
from polytile.ir import print_ir
from polytile.runtime import jit


@jit
def print_in_loop_kernel(x_ptr, out_ptr, n):
    acc = 0  # carried as fp32 only after a dry run sees `acc += x`: the body is generated twice
    for i in range(n):
        pl.static_print("body of the loop, acc is", acc.dtype)
        acc += pl.load(x_ptr + i)
    pl.store(out_ptr, acc)


def test_static_print_in_a_loop_prints_once(capsys):
    x = np.arange(4, dtype=np.float32)
    out = np.zeros(1, np.float32)
    print_in_loop_kernel.lower(x, out, 4)
    assert capsys.readouterr().out == "body of the loop, acc is fp32\n"  # the kept generation's type
    print_in_loop_kernel[(1,)](x, out, 4)
    assert out[0] == 6


@jit
def nested_loops_kernel(out_ptr, n):
    acc = 0
    for i in range(n):
        pl.static_print("outer")
        for j in range(n):
            pl.static_print("inner")
            for k in pl.static_range(3):
                pl.static_print("unrolled", k)
            acc += i * j
    pl.store(out_ptr, acc)


def test_nested_loops_print_once_per_kept_generation(capsys):
    out = np.zeros(1, np.int32)
    nested_loops_kernel[(1,)](out, 3)
    # An unrolled loop prints once per iteration, as it generates its body once per iteration.
    assert capsys.readouterr().out == "outer\ninner\nunrolled 0\nunrolled 1\nunrolled 2\n"
    assert out[0] == sum(i * j for i in range(3) for j in range(3))


@jit
def assert_on_carried_type_kernel(x_ptr, out_ptr, n):
    acc = 0
    for i in range(n):
        # The first dry run carries acc as int32 (its initial value): only the kept
        # generation, where acc is fp32, is checked.
        pl.static_assert(acc.dtype == pl.float32, "acc must be fp32")
        assert acc.dtype == pl.float32, "acc must be fp32 (assert)"
        acc += pl.load(x_ptr + i)
    pl.store(out_ptr, acc)


def test_static_assert_is_checked_on_the_kept_generation_only():
    x = np.arange(3, dtype=np.float32)
    out = np.zeros(1, np.float32)
    assert_on_carried_type_kernel[(1,)](x, out, 3)
    assert out[0] == 3


@jit
def failing_assert_in_loop_kernel(out_ptr, n):
    acc = 0
    for i in range(n):
        pl.static_assert(acc.dtype == pl.int64, "acc must be int64")
        acc += i
    pl.store(out_ptr, acc)


def test_a_failing_static_assert_in_a_loop_still_fails():
    with pytest.raises(CompilationError, match="static assertion failed: acc must be int64") as info:
        failing_assert_in_loop_kernel.lower(np.zeros(1, np.int32), 3)
    assert "pl.static_assert(acc.dtype == pl.int64" in info.value.source_line


@jit
def noisy_condition(i, n, LABEL: pl.constexpr):
    pl.static_print("condition", LABEL)
    return i < n


@jit
def while_kernel(out_ptr, n):
    i = 0
    while noisy_condition(i, n, "run-time"):  # probed once, generated once
        i += 1
    while noisy_condition(0, 0, "static") and False:  # compile-time: the probe is its only evaluation
        i += 100
    pl.store(out_ptr, i)


def test_while_condition_prints_once(capsys):
    out = np.zeros(1, np.int32)
    while_kernel[(1,)](out, 5)
    assert capsys.readouterr().out == "condition run-time\ncondition static\n"
    assert out[0] == 5


@jit(noinline=True)
def noinline_step(x):
    pl.static_print("noinline body")
    return x + 1


@jit
def noinline_in_loop_kernel(out_ptr, n):
    acc = 0
    for i in range(n):
        acc = noinline_step(acc)
    pl.store(out_ptr, acc)


def test_noinline_function_first_made_in_a_dry_run_prints_once(capsys):
    out = np.zeros(1, np.int32)
    module = noinline_in_loop_kernel.lower(out, 4)
    assert capsys.readouterr().out == "noinline body\n"
    assert print_ir(module).count("func.func @noinline_step") == 1
    noinline_in_loop_kernel[(1,)](out, 4)
    assert out[0] == 4
