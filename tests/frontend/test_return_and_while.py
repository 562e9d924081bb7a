"""Early returns nested in run-time ifs, and while conditions with side effects."""

from __future__ import annotations

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl


@pt.jit
def nested_return(o, v, w):
    if v > 3:
        if w > 3:
            return
        pl.store(o, 1)
    pl.store(o + 1, 2)


@pt.jit
def pick(v, w):
    if v > 3:
        if w > 3:
            return 10
        x = 20
    else:
        x = 30
    return x + 1


@pt.jit
def calls_pick(o, v, w):
    pl.store(o, pick(v, w))


@pt.jit
def spin_lock(lock, count):
    while pl.atomic_cas(lock, 0, 1) == 1:
        pass
    pl.store(count, pl.load(count) + 1)
    pl.atomic_xchg(lock, 0)


@pytest.mark.parametrize("v, w, expected", [(5, 1, [1, 2]), (5, 5, [0, 0]), (1, 5, [0, 2]), (1, 1, [0, 2])])
def test_code_after_a_nested_if_runs_on_every_path_that_did_not_return(v, w, expected):
    out = np.zeros(2, np.int32)
    nested_return[(1,)](out, v, w, target="interp")
    assert out.tolist() == expected


@pytest.mark.parametrize("v, w, expected", [(5, 1, 21), (5, 5, 10), (1, 5, 31)])
def test_helper_returning_on_some_paths_of_a_nested_if(v, w, expected):
    out = np.zeros(1, np.int32)
    calls_pick[(1,)](out, v, w, target="interp")
    assert out[0] == expected


@pt.jit
def return_under_a_static_if(o, e, MODE: pl.constexpr):
    # Triton's test_if_return: the run-time if that returns sits in a compile-time if; the
    # store after the compile-time if must run on the paths that did not return (it was
    # dropped: a silent wrong result on every target).
    if MODE == "dynamic":
        if pl.load(e):
            pl.store(o, 0)
            return
    else:
        pl.store(o + 1, 5)
    pl.store(o, 1)


@pt.jit
def value_under_a_static_if(v, CHECK: pl.constexpr):
    if CHECK:
        if v > 3:
            return 10
    return v + 1


@pt.jit
def calls_value_under_a_static_if(o, v, CHECK: pl.constexpr):
    pl.store(o, value_under_a_static_if(v, CHECK))


@pytest.mark.parametrize("exit_early, expected", [(1, [0, 0]), (0, [1, 0])])
def test_code_after_a_static_if_runs_where_a_run_time_if_inside_did_not_return(exit_early, expected):
    out = np.zeros(2, np.int32)
    return_under_a_static_if[(1,)](out, np.array([exit_early], np.int32), "dynamic", target="interp")
    assert out.tolist() == expected
    # In the IR the store after the ifs is on the path that did not return (any target).
    text = str(return_under_a_static_if.lower(out, np.zeros(1, np.int32), "dynamic"))
    assert text.count("tile.store") == 2 and text.index("scf.if") < text.rindex("tile.store")
    out = np.zeros(2, np.int32)
    return_under_a_static_if[(1,)](out, np.array([exit_early], np.int32), "static", target="interp")
    assert out.tolist() == [1, 5]


@pytest.mark.parametrize("v, check, expected", [(5, True, 10), (2, True, 3), (5, False, 6)])
def test_a_helper_returning_under_a_static_if(v, check, expected):
    out = np.zeros(1, np.int32)
    calls_value_under_a_static_if[(1,)](out, v, check, target="interp")
    assert out[0] == expected


def test_a_while_condition_runs_as_often_as_written():
    # Evaluating the condition once more before the loop would take the lock and spin forever.
    lock, count = np.zeros(1, np.int32), np.zeros(1, np.int32)
    spin_lock[(4,)](lock, count, target="interp")
    assert count[0] == 4 and lock[0] == 0
    text = str(spin_lock.lower(lock, count))
    assert text.count("tile.atomic_cas") == 1


@pt.jit
def add_literal(o, a, K: pl.constexpr):
    pl.store(o, a + K)


@pytest.mark.parametrize("literal", [2**40, -2**31 - 1])
def test_an_integer_that_does_not_fit_the_other_operand_is_an_error(literal):
    with pytest.raises(pt.CompilationError, match=f"the number {literal} does not fit in int32"):
        add_literal[(1,)](np.zeros(1, np.int32), 5, literal, target="interp")


def test_an_integer_that_fits_keeps_the_operand_type():
    out = np.zeros(1, np.int32)
    add_literal[(1,)](out, 5, 2**31 - 6, target="interp")
    assert out[0] == 2**31 - 1


@pt.jit
def merge_float_literal(o, c):
    if c > 0:
        x = c
    else:
        x = 0.5
    pl.store(o, x)


@pt.jit
def merge_wide_literals(o, c):
    if c > 0:
        x = 1
    else:
        x = 2**40
    pl.store(o, x)


@pt.jit
def carry_float_literal(o, n):
    x = 0.5
    for i in range(n):
        x = i
    pl.store(o, x)


def test_a_number_on_one_path_must_fit_the_tensor_on_the_other():
    with pytest.raises(pt.CompilationError, match="'x' is int32 on one path and the number 0.5 on the other"):
        merge_float_literal[(1,)](np.zeros(1, np.float32), 0, target="interp")


def test_two_numbers_merge_in_a_type_that_holds_both():
    out = np.zeros(1, np.int64)
    merge_wide_literals[(1,)](out, 0, target="interp")
    assert out[0] == 2**40


def test_a_loop_cannot_turn_a_float_literal_into_an_integer():
    with pytest.raises(pt.CompilationError, match="'x' is int32 on one path and the number 0.5"):
        carry_float_literal[(1,)](np.zeros(1, np.float32), 0, target="interp")
