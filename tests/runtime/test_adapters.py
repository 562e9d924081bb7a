"""Kernel arguments of a plugin's types (``polytile_adapt_argument``, runtime/adapters.py):
keyed, typed, expanded into parts, flattened at launch, checked, restored by the tuner."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import polytile.language as pl
from polytile.errors import LaunchError, PluginError
from polytile.ir import types as t
from polytile.plugins import hookimpl
from polytile.plugins.manager import get_plugin_manager, reset_plugin_manager
from polytile.plugins.registry import PluginInfo
from polytile.runtime import binder, jit
from polytile.runtime.adapters import ArgumentAdapter, LaunchPart


class Window:
    """A plugin's argument type: an array and the part of it a kernel may touch."""

    def __init__(self, array, start, stop):
        self.array, self.start, self.stop = array, start, stop


class WindowAdapter(ArgumentAdapter):
    name = "Window"

    def key(self, value):
        return str(value.array.dtype)

    def ir_type(self, key):
        return t.PointerType(t.SCALAR_TYPES["f32"])  # what the name means when there is one part

    def parts(self, key):
        return [LaunchPart("_array", t.PointerType(t.SCALAR_TYPES["f32"]), 16), LaunchPart("_start", t.i32),
                LaunchPart("_stop", t.i32)]

    def build(self, key, parts):
        return tuple(parts)  # the kernel sees (pointer, start, stop)

    def flatten(self, value):
        return (value.array, value.start, value.stop)

    def check(self, kernel, argument, value):
        if value.stop > value.array.size:
            raise LaunchError(f"kernel '{kernel}': argument '{argument}' (a Window) ends past its array")

    def storage(self, value):
        return value.array


def _forget_window_kind():
    for table in (binder._KINDS, binder.PROBES, binder.PLAIN_PROBES):
        table.pop(Window, None)


@contextlib.contextmanager
def _windows_plugin(answer):
    """A plugin that answers ``answer(value)`` for Window values, in a fresh manager."""
    reset_plugin_manager()
    _forget_window_kind()

    class Plugin:
        @staticmethod
        @hookimpl
        def polytile_adapt_argument(value, target):
            return answer(value) if isinstance(value, Window) else None

    get_plugin_manager().register(Plugin, PluginInfo("windows", "polytile-windows", "1.0"))
    try:
        yield
    finally:
        _forget_window_kind()
        reset_plugin_manager()


@pytest.fixture
def windows():
    with _windows_plugin(lambda value: WindowAdapter()):
        yield


@jit
def add_one(window, BLOCK: pl.constexpr):
    array, start, stop = window
    offs = start + pl.arange(0, BLOCK)
    mask = offs < stop
    pl.store(array + offs, pl.load(array + offs, mask=mask) + 1, mask=mask)


def test_an_adapted_argument_passes_as_its_parts(windows):
    x = np.zeros(64, np.float32)
    add_one[(1,)](Window(x, 8, 20), BLOCK=32, target="interp")
    expected = np.zeros(64, np.float32)
    expected[8:20] = 1
    np.testing.assert_array_equal(x, expected)
    module = add_one.lower(Window(x, 8, 20), BLOCK=32)
    assert "%window_array: ptr<f32>, %window_start: i32, %window_stop: i32" in str(module.body.block.first_op)
    assert add_one.mutated_args(Window(x, 0, 4), BLOCK=32) == ["window"]


def test_the_check_runs_before_a_launch(windows):
    with pytest.raises(LaunchError, match=r"argument 'window' \(a Window\) ends past its array"):
        add_one[(1,)](Window(np.zeros(8, np.float32), 0, 20), BLOCK=32, target="interp")


def test_an_adapter_that_is_not_one_is_a_plugin_error():
    with _windows_plugin(lambda value: (value.array,)):
        with pytest.raises(PluginError, match="must return a polytile.runtime.adapters.ArgumentAdapter or None"):
            add_one[(1,)](Window(np.zeros(8, np.float32), 0, 4), BLOCK=32, target="interp")


def test_a_native_answer_is_used_only_beside_the_key_and_parts_it_answers_for():
    from polytile.runtime.adapters import native_answer_of

    answer = object()  # stands for a capsule

    class Answering(ArgumentAdapter):
        native_answer = answer

        def key_and_parts(self, value):
            return "key", (value,)

    class OwnCall(Answering):
        # Another key_and_parts: the parent's C answer would pack the parent's parts.
        def key_and_parts(self, value):
            return "other key", (value, 1)

    class OwnBoth(OwnCall):
        native_answer = answer

    class Inherits(Answering):
        pass

    assert native_answer_of(Answering()) is answer and native_answer_of(Inherits()) is answer
    assert native_answer_of(OwnCall()) is None and native_answer_of(OwnBoth()) is answer
    assert native_answer_of(ArgumentAdapter()) is None
    on_instance = Answering()
    on_instance.key_and_parts = lambda value: ("mine", (value,))
    assert native_answer_of(on_instance) is None
    on_instance.native_answer = answer
    assert native_answer_of(on_instance) is answer
