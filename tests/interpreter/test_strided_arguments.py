"""Pointer arguments that are strided views (interpreter/memory.py ``memory_span``): the
kernel gets the view's first element and addresses it with the strides it is given, as
Triton kernels do on a GPU; writes land in the caller's array."""

from __future__ import annotations

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.errors import InterpreterError
from polytile.interpreter.memory import Memory, memory_span


@pt.jit
def copy_2d(x, y, stride_x0, stride_x1, stride_y0, BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr):
    rows, cols = pl.arange(0, BLOCK_M), pl.arange(0, BLOCK_N)
    value = pl.load(x + rows[:, None] * stride_x0 + cols[None, :] * stride_x1)
    pl.store(y + rows[:, None] * stride_y0 + cols[None, :], value)


@pt.jit
def scale_2d(x, stride_0, stride_1, BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr):
    rows, cols = pl.arange(0, BLOCK_M), pl.arange(0, BLOCK_N)
    p = x + rows[:, None] * stride_0 + cols[None, :] * stride_1
    pl.store(p, pl.load(p) * 10)


def _elements(array):
    return tuple(s // array.itemsize for s in array.strides)


@pytest.mark.parametrize("view", [
    lambda a: a[:, 1:5],         # columns skipped: not contiguous
    lambda a: a[1:3, ::2],       # rows and a step
    lambda a: a.T[1:5, :4],      # transposed, then sliced
    lambda a: a[::-1, ::-1],     # negative strides: the first element is the highest address
    lambda a: a[::-2, 1:3],
], ids=["columns", "step", "transposed", "reversed", "reversed-step"])
def test_strided_views_are_read_through_their_strides(view):
    x = view(np.arange(64, dtype=np.float32).reshape(8, 8))
    m, n = x.shape
    y = np.zeros((8, 8), np.float32)
    copy_2d[(1,)](x, y, *_elements(x), 8, BLOCK_M=m, BLOCK_N=n)
    np.testing.assert_array_equal(y[:m, :n], x)


def test_writes_through_a_strided_view_land_in_the_callers_array():
    whole = np.arange(16, dtype=np.float32).reshape(4, 4)
    expected = whole.copy()
    expected[1:3, 1:3] *= 10
    scale_2d[(1,)](whole[1:3, 1:3], 4, 1, BLOCK_M=2, BLOCK_N=2)
    np.testing.assert_array_equal(whole, expected)
    reversed_ = np.arange(8, dtype=np.int32)
    scale_2d[(1,)](reversed_[::-2], 1, -2, BLOCK_M=1, BLOCK_N=4)
    assert reversed_.tolist() == [0, 10, 2, 30, 4, 50, 6, 70]


def test_access_outside_the_views_memory_names_the_view():
    @pt.jit
    def past_the_end(x, BLOCK: pl.constexpr):
        pl.store(x + pl.arange(0, BLOCK), 1.0)

    view = np.zeros((4, 4), np.float32)[1:3, 1:3]  # spans 6 elements: 5, 6, (7, 8,) 9, 10
    with pytest.raises(InterpreterError, match=r"out of bounds of argument 'x' \(a strided view of shape \(2, 2\) "
                                               r"whose elements span 6 elements of float32 in memory\)"):
        past_the_end[(1,)](view, BLOCK=8)


def test_strides_that_are_not_whole_elements_are_refused():
    odd = np.ndarray(shape=(3,), dtype=np.float32, buffer=np.zeros(32, np.uint8), strides=(6,))
    with pytest.raises(InterpreterError, match=r"argument 'x'.*strides are whole elements.*\(6,\)"):
        copy_2d[(1,)](odd, np.zeros(4, np.float32), 1, 1, 1, BLOCK_M=1, BLOCK_N=2)


def test_memory_span_of_views():
    a = np.arange(24, dtype=np.int16).reshape(4, 6)
    flat, offset = memory_span(a)
    assert offset == 0 and flat.base is not None and np.shares_memory(flat, a)
    view = a[1:3, 2:5]
    flat, offset = memory_span(view)
    assert flat.tolist() == list(range(8, 17)) and offset == 0
    flat, offset = memory_span(a[::-1, 4])  # elements 22, 16, 10, 4: lowest first
    assert flat.tolist() == list(range(4, 23)) and offset == (22 - 4) * 2
    memory = Memory()
    address = memory.add(a[::-1, 4], "x")
    assert address - memory.buffers[0].base == offset
    flat[0] = -1  # a view, not a copy
    assert a[0, 4] == -1
