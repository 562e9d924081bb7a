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


def test_a_while_condition_runs_as_often_as_written():
    # Evaluating the condition once more before the loop would take the lock and spin forever.
    lock, count = np.zeros(1, np.int32), np.zeros(1, np.int32)
    spin_lock[(4,)](lock, count, target="interp")
    assert count[0] == 4 and lock[0] == 0
    text = str(spin_lock.lower(lock, count))
    assert text.count("tile.atomic_cas") == 1
