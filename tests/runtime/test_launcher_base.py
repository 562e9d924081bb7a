"""The vendor-neutral launcher base (polytile.runtime.launcher): grids, devices, modules
per device, streams, and the native helper builder."""

from __future__ import annotations

import sys
import types

import pytest

from polytile.runtime import args as polytile_args
from polytile.runtime import launcher as base
from polytile.runtime.jit import LaunchError
from polytile.runtime.launcher import LauncherBase, NativeBuildError, build_native_module


class Array:
    def __init__(self, device):
        self.device = device


class Tensor(Array):
    pass


Tensor.__module__ = "torch"


class ToyLauncher(LauncherBase):
    """A backend's launcher reduced to its hooks: arguments are Arrays (a device) or ints."""

    runtime_name = "ToyRT"
    block_word = "tiles"
    max_grid = (100, 10, 1)

    def __init__(self, current=0):
        super().__init__("toy", ["a", "b"])
        self.current = current
        self.loads = []
        self.launches = []

    def _pack(self, args):
        self.check_argument_count(args)
        devices = [a.device for a in args if isinstance(a, Array)]
        return (devices[0] if devices else -1), any(isinstance(a, Tensor) for a in args)

    def _current_device(self):
        return self.current

    def _load(self, device):
        self.loads.append(device)
        return f"function on {device}"

    def _launch(self, loaded, gx, gy, gz, stream, device):
        self.launches.append((loaded, (gx, gy, gz), stream, device))


def test_launches_on_the_device_of_the_arguments_loading_once_per_device():
    launcher = ToyLauncher(current=3)
    launcher((2, 1, 1), [Array(1), 5])
    launcher((2, 1, 1), [Array(1), 6])
    launcher((1, 1, 1), [7, 8])  # no argument says: the current device
    assert launcher.loads == [1, 3]
    assert [(loaded, device) for loaded, _, _, device in launcher.launches] == [
        ("function on 1", 1), ("function on 1", 1), ("function on 3", 3)]
    assert launcher.loaded(1) == "function on 1" and launcher.loads == [1, 3]


def test_stream_is_torchs_current_one_only_for_torch_arguments(monkeypatch):
    fake_torch = types.ModuleType("torch")
    fake_torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0xA0 + device)
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(polytile_args, "_current_raw_stream", None)
    launcher = ToyLauncher()
    launcher((1, 1, 1), [Tensor(2), 0])
    launcher((1, 1, 1), [Array(2), 0])
    launcher((1, 1, 1), [Tensor(2), 0], stream=0x55)
    assert [stream for _, _, stream, _ in launcher.launches] == [0xA2, 0, 0x55]


@pytest.mark.parametrize("grid, message", [
    ((101, 1, 1), r"kernel 'toy': grid \(101, 1, 1\): axis 0 has 101 tiles, more than the 100 ToyRT allows"),
    ((1, 1, 2), r"axis 2 has 2 tiles, more than the 1 ToyRT allows"),
    ((-1, 1, 1), r"axis 0 must be a non-negative integer, got -1"),
    ((1, 11.5, 1), r"axis 1 must be a non-negative integer, got 11.5"),
])
def test_bad_grids_are_named(grid, message):
    launcher = ToyLauncher()
    with pytest.raises(LaunchError, match=message):
        launcher(grid, [1, 2])
    assert launcher.launches == []


def test_empty_grid_launches_nothing_and_loads_nothing():
    launcher = ToyLauncher()
    launcher((0, 1, 1), [Array(0), 1])
    assert launcher.launches == [] and launcher.loads == []


def test_argument_count_error_lists_the_parameters():
    with pytest.raises(LaunchError, match=r"kernel 'toy' takes 2 run-time arguments \(a, b\), got 1"):
        ToyLauncher()((1, 1, 1), [1])


def test_mixed_devices_error_spells_devices_as_the_library_does():
    error = base.mixed_devices_error("k", "y", 1, "x", 0, "cuda:{}")
    assert str(error) == ("kernel 'k': argument 'y' is on cuda:1, but argument 'x' is on cuda:0; a kernel runs on "
                          "one device: move the arrays to the same device")


# -- native helpers --------------------------------------------------------------------

ANSWER_C = """
#include <Python.h>
static PyObject *answer(PyObject *self, PyObject *unused) { return PyLong_FromLong(42); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_polytile_answer", NULL, -1, methods};
PyMODINIT_FUNC PyInit__polytile_answer(void) { return PyModule_Create(&module); }
"""


@pytest.fixture
def compiler():
    if base.c_compiler() is None:
        pytest.skip("no C compiler on this machine")


def test_native_module_is_built_once_and_reused(tmp_path, compiler):
    source = tmp_path / "answer.c"
    source.write_text(ANSWER_C)
    module = build_native_module("_polytile_answer", source, tmp_path / "built")
    assert module.answer() == 42
    (built,) = (tmp_path / "built").iterdir()
    assert built.name.startswith("_polytile_answer-")
    stamp = built.stat().st_mtime_ns
    build_native_module("_polytile_answer", source, tmp_path / "built")
    assert [p.stat().st_mtime_ns for p in (tmp_path / "built").iterdir()] == [stamp]  # not rebuilt
    source.write_text(ANSWER_C.replace("42", "43"))
    assert build_native_module("_polytile_answer", source, tmp_path / "built").answer() == 43
    assert len(list((tmp_path / "built").iterdir())) == 2  # another source, another file


def test_a_local_header_is_part_of_the_build(tmp_path, compiler):
    # Editing a header the source includes from its directory rebuilds the module.
    (tmp_path / "value.h").write_text("#define VALUE 42\n")
    source = tmp_path / "answer.c"
    source.write_text('#include "value.h"\n' + ANSWER_C.replace("PyLong_FromLong(42)", "PyLong_FromLong(VALUE)"))
    assert build_native_module("_polytile_answer", source, tmp_path / "built").answer() == 42
    (tmp_path / "value.h").write_text("#define VALUE 44\n")
    assert build_native_module("_polytile_answer", source, tmp_path / "built").answer() == 44
    (tmp_path / "value.h").unlink()
    with pytest.raises(NativeBuildError, match="value.h, which is missing"):
        build_native_module("_polytile_answer", source, tmp_path / "built")


def test_compiler_errors_say_what_failed(tmp_path, compiler):
    source = tmp_path / "broken.c"
    source.write_text("this is not C;\n")
    with pytest.raises(NativeBuildError, match=r"failed on broken.c: .*error"):
        build_native_module("_polytile_broken", source, tmp_path / "built")
    assert not list((tmp_path / "built").iterdir())  # nothing half-written is left


def test_no_compiler_is_a_reason_not_a_crash(tmp_path, monkeypatch):
    source = tmp_path / "answer.c"
    source.write_text(ANSWER_C)
    monkeypatch.setattr(base, "c_compiler", lambda: None)
    with pytest.raises(NativeBuildError, match="no C compiler found"):
        build_native_module("_polytile_answer", source, tmp_path / "built")
