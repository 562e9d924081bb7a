"""Which path each NVIDIA launch takes, and why: the launch module built at install, the
run-time build only as a fallback, the dispatcher adopted whatever came before, and the
launch counts that say so (``polytile_nvidia.launcher.launch_counts``).

Against the fake driver: the kernels are compiled for real, the launch module is a
private copy of the installed one (``native_module``) calling the fake through C function
pointers, as it calls libcuda.
"""

from __future__ import annotations

import ctypes
import importlib
import threading

import pytest

from polytile import config
from polytile_nvidia import driver
from polytile_nvidia.launcher import LaunchCounts, launch_counts

from . import fake_cuda
from .fake_cuda import FakeGpu, fake_driver, native_module  # noqa: F401
from .test_dispatch import _AnyImage, _args, _forget_launches, scale_add

TARGET = "nvidia:sm_90a"


def _entry_points(fake) -> tuple[int, int, int]:
    """The fake driver's calls as C function pointers (what driver_entry_points gives for libcuda)."""

    def launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        return int(fake.cuLaunchKernel(function, gx, gy, gz, bx, by, bz, shared, stream or 0, params, extra)[0])

    def get_current(out):
        out[0] = int(fake.current) or None
        return 0

    def set_current(context):
        return int(fake.cuCtxSetCurrent(fake_cuda.Handle("CUcontext", context or 0))[0])

    entry = (fake_cuda._LAUNCH_KERNEL(launch), fake_cuda._CTX_GET_CURRENT(get_current),
             fake_cuda._CTX_SET_CURRENT(set_current))
    fake_cuda._ENTRY_POINTS.append(entry)
    return tuple(ctypes.cast(e, ctypes.c_void_p).value for e in entry)


def _no_run_time_build(*args, **kwargs):
    raise AssertionError("the launch module was built at run time")


@pytest.fixture
def fresh_process(fake_driver, native_module, monkeypatch, tmp_path, ptxas):
    """A process as a user's starts: nothing chosen yet, an empty cache directory, the
    bindings taken for cuda-bindings' own, and the installed module (our private copy)
    found by import; any run-time build fails the test."""
    from polytile.runtime import launcher as base

    real_import = importlib.import_module
    monkeypatch.setattr(driver.importlib, "import_module",
                        lambda name, *a: native_module if name == driver.NATIVE_MODULE else real_import(name, *a))
    monkeypatch.setattr(driver, "_is_cuda_bindings", lambda cuda: True)
    monkeypatch.setattr(driver, "driver_entry_points", lambda: _entry_points(fake_driver))
    monkeypatch.setattr(base, "build_native_module", _no_run_time_build)
    monkeypatch.setattr(base, "c_compiler", _no_run_time_build)
    fake_driver.gpus = [FakeGpu(), FakeGpu()]
    fake_driver.images = _AnyImage()
    _forget_launches(scale_add)
    with config.override(nvidia_launch="auto", cache_dir=str(tmp_path / "cache")):
        yield fake_driver
    _forget_launches(scale_add)


def test_a_process_with_an_empty_cache_launches_natively_from_its_first_launch(fresh_process, tmp_path):
    for _ in range(10):
        scale_add[(4,)](*_args(), target=TARGET)
    assert len(fresh_process.launches) == 10
    # Through the Python entry point, on the installed module: the first launch (it
    # compiles) and the second (it makes the dispatcher, which has no plan yet: the plan
    # is made from this call).  Every later one is the dispatcher's.
    assert launch_counts(scale_add) == LaunchCounts(native=8, python=2,
                                                    why={"no dispatcher": 1, "no plan matched": 1})
    assert not driver.native_pending()
    assert driver.launch_path().startswith("native (C extension calling cuLaunchKernel): nvidia_launch is 'auto'; "
                                           "polytile_nvidia._launch built at install (")
    assert not (tmp_path / "cache" / "native").exists()  # nothing was built into the cache


@pytest.fixture
def pending_build(fresh_process, native_module, monkeypatch):
    """The installed module unusable, so the module is being built at run time on a
    thread, until the test sets the event it returns."""
    release = threading.Event()

    def build(unusable):
        assert release.wait(30)
        return native_module

    monkeypatch.setattr(driver, "installed_module", lambda: (None, "the test removed it"))
    monkeypatch.setattr(driver, "_build_in_background", lambda: True)
    monkeypatch.setattr(driver, "_build_at_run_time", build)
    yield release
    release.set()


def test_a_kernel_first_launched_while_the_module_was_pending_adopts_the_dispatcher(pending_build, fresh_process):
    for _ in range(100):  # more launches than the plan budget (64)
        scale_add[(4,)](*_args(), target=TARGET)
    assert driver.native_pending()
    assert launch_counts(scale_add) == LaunchCounts(native=0, python=100, why={"native launcher pending": 100})
    assert scale_add._dispatcher is None
    pending_build.set()
    driver._state.native_builder.join()
    for _ in range(10):
        scale_add[(4,)](*_args(), target=TARGET)
    # The next launch takes the module and makes the dispatcher, which makes its plan from
    # that very call; the rest are the dispatcher's.
    counts = launch_counts(scale_add)
    assert counts.native == 9, counts
    assert counts.why == {"native launcher pending": 100, "no plan matched": 1}
    assert scale_add._plan_budget == 64 - 1  # the launches while pending spent none of it
    assert driver.launch_path().startswith("native (C extension calling cuLaunchKernel): nvidia_launch is 'auto'; "
                                           "built at run time as ")
    assert len(fresh_process.launches) == 110


def test_a_kernel_still_waits_for_the_module_when_asked_just_as_its_build_ends(pending_build, fresh_process):
    scale_add[(4,)](*_args(), target=TARGET)
    launcher = next(iter(scale_add.cache.values())).backend_launcher
    assert launcher.make_dispatcher(scale_add._dispatch_slow) is None  # still building
    pending_build.set()
    driver._state.native_builder.join()
    # The build ended between the dispatcher's "none yet" and the question whether one
    # may come: the answer is yes until this launcher has taken the module.
    assert launcher.dispatcher_pending()
    assert launcher.make_dispatcher(scale_add._dispatch_slow) is not None
    assert not launcher.dispatcher_pending()


def test_a_call_the_dispatcher_hands_over_is_counted_with_its_reason(fresh_process):
    for _ in range(3):
        scale_add[(4,)](*_args(), target=TARGET)
    scale_add[(0,)](*_args(), target=TARGET)  # an empty grid: Python's to judge, nothing launched
    scale_add[(4,)](*_args(device=1), target=TARGET)  # not loaded on device 1: Python loads it
    scale_add[(4,)](*_args(), target=TARGET)
    counts = launch_counts(scale_add)
    # Device 1's call needs the Python path (the kernel is loaded there by it), and then
    # gets no plan of its own (a planned call needing Python once is not planned again).
    assert counts.why == {"no dispatcher": 1, "no plan matched": 1, "needs Python": 1}, counts
    assert counts.native == 2 and counts.python == 3
    assert len(fresh_process.launches) == 5


def test_without_a_native_module_every_launch_says_why(fake_driver, ptxas):
    fake_driver.gpus = [FakeGpu()]
    fake_driver.images = _AnyImage()
    _forget_launches(scale_add)
    try:
        for _ in range(3):
            scale_add[(4,)](*_args(), target=TARGET)
        assert launch_counts(scale_add) == LaunchCounts(native=0, python=3, why={"no native launcher": 3})
    finally:
        _forget_launches(scale_add)


def test_launch_counts_takes_a_kernel_or_a_launcher(fresh_process):
    compiled = scale_add[(4,)](*_args(), target=TARGET)
    assert launch_counts(compiled) == launch_counts(compiled.backend_launcher) == launch_counts(scale_add)
    with pytest.raises(TypeError, match="launch_counts takes a @jit function"):
        launch_counts(42)


def test_a_kernel_whose_first_launch_failed_before_loading_still_adopts_the_dispatcher(fresh_process):
    from polytile.runtime.jit import LaunchError

    x, y, out, n = _args()
    with pytest.raises(LaunchError, match="on cuda:1, but argument 'x' is on cuda:0"):
        scale_add[(4,)](x, _args(device=1)[1], out, n, target=TARGET)  # compiled, never loaded
    for _ in range(10):
        scale_add[(4,)](*_args(), target=TARGET)
    counts = launch_counts(scale_add)
    # The failed launch compiled the kernel; the next one makes the dispatcher and its plan.
    assert counts.native == 9 and counts.why == {"no plan matched": 1}, counts


def test_a_plan_needs_room_for_every_launch_counter(native_module):
    def plan(counts):
        return native_module.Plan(0, None, b"", (), b"", b"", 128, 0, None, None, None, (), None, counts)

    assert plan(bytearray(64)) is not None
    with pytest.raises(ValueError, match="counts must hold the launch counters"):
        plan(bytearray(8))
    with pytest.raises(TypeError):
        plan(b"\0" * 64)  # the counters are written in place: immutable bytes cannot hold them
