"""The launcher contract (Backend.make_launcher), grids, and the globals guard."""

import numpy as np
import pytest

import polytile.language as pl
from polytile.backend import Backend, LaunchParam
from polytile.interpreter.plugin import InterpreterBackend
from polytile.ir import types as t
from polytile.runtime import LaunchError, jit
from polytile.runtime.cache import global_snapshot, globals_guard


class Recorder:
    """Wraps the interpreter's make_launcher: counts the launchers made and records
    what each launch hands them."""

    def __init__(self, monkeypatch):
        self.made = []
        self.launches = []
        original = InterpreterBackend.make_launcher

        def make_launcher(backend, **kwargs):
            self.made.append(kwargs)
            inner = original(backend, **kwargs)

            def launcher(grid, args):
                self.launches.append((grid, tuple(args)))
                inner(grid, args)

            return launcher

        monkeypatch.setattr(InterpreterBackend, "make_launcher", make_launcher, raising=False)


class ArrayInterface:
    def __init__(self, array):
        self._array = array
        self.__array_interface__ = array.__array_interface__


def test_one_launcher_per_specialization(monkeypatch):
    recorder = Recorder(monkeypatch)

    @jit
    def k(out_ptr, value, n, BLOCK: pl.constexpr):
        offs = pl.arange(0, BLOCK)
        pl.store(out_ptr + offs, value, mask=offs < n)

    out = np.zeros(16, np.float32)
    for _ in range(5):
        k[(1,)](out, 1.0, 16, BLOCK=16)
    assert len(recorder.made) == 1 and len(recorder.launches) == 5
    k[(1,)](out, 1.0, 16, BLOCK=8)
    k[(1,)](out, 1.0, 16, BLOCK=8)
    assert len(recorder.made) == 2
    made = recorder.made[0]
    assert made["kernel_name"] == "k" and made["options"].num_warps == 4
    aligned = out.ctypes.data % 16 == 0
    assert made["params"] == (LaunchParam("out_ptr", t.PointerType(t.f32), 16 if aligned else 1, False),
                              LaunchParam("value", t.f32, 1, False), LaunchParam("n", t.i32, 16, False))
    assert made["compiled"].module is not None and made["compiled"].binaries == {}


def test_the_launcher_gets_a_3d_grid_and_the_callers_objects(monkeypatch):
    recorder = Recorder(monkeypatch)

    @jit
    def k(ptr, flag, n, C: pl.constexpr):
        pl.store(ptr, n * 1.0 + C)

    data = np.zeros(4, np.float32)
    wrapped = ArrayInterface(data)
    k[(2, 3)](wrapped, np.bool_(True), pl.constexpr(5), C=pl.constexpr(1))
    grid, args = recorder.launches[-1]
    assert grid == (2, 3, 1)
    assert args[0] is wrapped and args[1] is np.bool_(True) and args[2] == 5 and type(args[2]) is int
    assert data[0] == 6.0                        # the default launcher viewed it for the interpreter
    k[lambda meta: 3](data, True, 1, C=2)
    assert recorder.launches[-1][0] == (3, 1, 1)


def test_arguments_passed_none_are_not_handed_to_the_launcher(monkeypatch):
    recorder = Recorder(monkeypatch)

    @jit
    def k(out_ptr, bias_ptr, scale):
        value = scale * 1.0
        if bias_ptr is not None:
            value += pl.load(bias_ptr)
        pl.store(out_ptr, value)

    out, bias = np.zeros(1, np.float32), np.ones(1, np.float32)
    k[(1,)](out, None, 2)
    k[(1,)](out, None, 3)
    assert [p.name for p in recorder.made[0]["params"]] == ["out_ptr", "scale"]
    assert recorder.launches[-1][1] == (out, 3) and out[0] == 3
    k[(1,)](out, bias, 3)
    assert out[0] == 4 and len(recorder.launches[-1][1]) == 3


def test_a_callable_grid_sees_arguments_constexprs_and_launch_options():
    seen = []

    @jit
    def k(out_ptr, n, BLOCK: pl.constexpr = 4):
        pl.store(out_ptr, n)

    def grid(meta):
        seen.append(dict(meta))
        return (1,)

    out = np.zeros(1, np.int32)
    k[grid](out, 7)
    k[grid](out, 7, num_warps=8, num_stages=2)
    first, second = seen
    assert first["n"] == 7 and first["BLOCK"] == 4 and first["out_ptr"] is out
    assert first["num_warps"] == 4 and first["num_stages"] == 3          # the backend's defaults
    assert second["num_warps"] == 8 and second["num_stages"] == 2        # as given

    @jit
    def named(out_ptr, num_warps):
        pl.store(out_ptr, num_warps)

    named[grid](out, 2)
    assert seen[-1]["num_warps"] == 2 and out[0] == 2                   # the parameter wins


def test_a_backend_that_cannot_launch():
    class CompileOnly(Backend):
        name = "compile-only"

    class WithLaunch(CompileOnly):
        def launch(self, module, kernel_name, grid, args):  # not the contract: make_launcher is
            pass

    class WithLauncher(CompileOnly):
        def make_launcher(self, **kwargs):
            return lambda grid, args: None

    assert not CompileOnly().can_launch() and not WithLaunch().can_launch()
    assert WithLauncher().can_launch() and InterpreterBackend().can_launch()
    with pytest.raises(LaunchError, match="backend 'compile-only' compiles but cannot launch"):
        CompileOnly().make_launcher(compiled=None, kernel_name="k", params=(), options=None)


SCALE = 300


@jit
def scaled(out_ptr):
    pl.store(out_ptr, SCALE)


def test_the_globals_guard_compares_identities_then_values():
    global SCALE
    out = np.zeros(1, np.int32)
    scaled[(1,)](out)
    guard = globals_guard(global_snapshot(scaled))
    assert guard()
    try:
        before = SCALE
        SCALE = int("300")     # an equal value in another object: still current
        assert SCALE is not before and guard()
        scaled[(1,)](out)
        assert scaled.compile_count == 1
        SCALE = 4
        assert not guard()
        scaled[(1,)](out)
        assert out[0] == 4 and scaled.compile_count == 2
        SCALE = True           # equal to 1 in Python, but another type: another kernel
        scaled[(1,)](out)
        assert scaled.compile_count == 3
    finally:
        SCALE = 300
    assert globals_guard([]) is None
