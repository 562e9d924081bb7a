"""The one place that decides which targets the language tests run on.

Every test in tests/language takes the ``target`` fixture and passes it on as
``kernel[grid](..., target=target)``.  The interpreter always runs; a GPU target runs
where its backend is installed, finds a device and can launch kernels, and is skipped
with the reason otherwise (backends reuse this suite by adding their name to GPU_TARGETS).

Tests pass NumPy arrays.  On a GPU target each launch copies them to the device (as torch
tensors), launches, and copies them back into the same NumPy arrays, so that a test reads
the kernel's results the same way on every target.
"""

import functools

import pytest

#: Hardware targets, by backend name; each is marked `gpu` (see pyproject's markers).
GPU_TARGETS = ("nvidia",)


@functools.lru_cache(maxsize=None)
def unavailable_reason(backend_name: str) -> str:
    """Why ``backend_name`` cannot run these tests here, or "" when it can.  Asked once
    per session: a device probe can initialise a driver."""
    from polytile.plugins.manager import get_plugin_manager

    backends = get_plugin_manager().backends
    backend = backends.find(backend_name)
    if backend is None:
        failure = get_plugin_manager().failure_for(backend_name)
        return f"backend '{backend_name}' is not installed" + (f" ({failure})" if failure else "")
    if getattr(backend, "launch", None) is None and getattr(backend, "make_launcher", None) is None:
        return f"backend '{backend_name}' compiles but cannot launch kernels yet"
    probe = backends.probe(backend_name)
    if not probe.devices:
        return f"backend '{backend_name}' has no active device: {probe.reason}"
    return ""


#: The compile-all run (tests/language/compile_all.py): every launch is compiled for
#: every GPU arch of CI, then runs on the interpreter.
COMPILE_ALL = pytest.param("compile", marks=pytest.mark.compile_all)


def pytest_collection_modifyitems(config, items):
    # ./dev test runs the suite on several processes (pytest-xdist, --dist loadgroup).
    # Each process compiles a launched specialization once per arch (_arch_compiler); the
    # compile-all tests of one file launch the same kernels, so they go to one process,
    # and a kernel is never compiled for the same arch by two.  Other tests spread freely.
    here = config.rootpath / "tests" / "language"
    for item in items:
        if item.get_closest_marker("compile_all") is not None and item.path.parent == here:
            item.add_marker(pytest.mark.xdist_group(f"compile_all-{item.path.name}"))


@pytest.fixture(params=["interp", *(pytest.param(name, marks=pytest.mark.gpu) for name in GPU_TARGETS), COMPILE_ALL])
def target(request, monkeypatch):
    """The target every language test runs on."""
    if request.param == "compile":
        return _compile_for_every_arch(request, monkeypatch)
    if request.param != "interp":
        reason = unavailable_reason(request.param)
        if reason:
            pytest.skip(reason)
        _launch_through_device_memory(monkeypatch)
    return request.param


@functools.lru_cache(maxsize=None)
def _arch_compiler():
    from compile_all import ArchCompiler, selected_archs

    return ArchCompiler(selected_archs())


def _compile_for_every_arch(request, monkeypatch):
    from polytile.runtime.jit import JITFunction

    from compile_all import CompileTarget

    fixture_target = CompileTarget()
    compiler = _arch_compiler()
    test = f"{request.node.path.name}::{request.node.originalname}"
    original_getitem, original_run = JITFunction.__getitem__, JITFunction.run

    def compile_then_launch(fn, launch, args, kwargs):
        # Only the launches made with this fixture's target: a test that runs a kernel
        # on "interp" on purpose (to check an interpreter error, say) is left alone.
        if kwargs.get("target") is fixture_target:
            compiler.check_launch(fn, args, kwargs, test)
        return launch(*args, **kwargs)

    def getitem(self, grid):
        launch = original_getitem(self, grid)
        return lambda *args, **kwargs: compile_then_launch(self, launch, args, kwargs)

    def run(self, *args, grid, **kwargs):
        return compile_then_launch(self, lambda *a, **k: original_run(self, *a, grid=grid, **k), args, kwargs)

    monkeypatch.setattr(JITFunction, "__getitem__", getitem)
    monkeypatch.setattr(JITFunction, "run", run)
    return fixture_target


def _launch_through_device_memory(monkeypatch) -> None:
    torch = pytest.importorskip("torch", reason="GPU language tests move NumPy arrays to the device with torch")
    import numpy as np

    from polytile.runtime import allocator
    from polytile.runtime.jit import JITFunction
    from polytile.runtime.reinterpret import TensorWrapper

    # Kernels with global scratch (descriptors made in the kernel, on Hopper) need an
    # allocator, as a user sets one (polytile.set_allocator); a test's own wins.
    if allocator.get_allocator() is None:
        monkeypatch.setattr(allocator, "_allocator",
                            lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device="cuda"))

    def to_device(value, copies):
        # One array passed twice (c as both result and accumulator) is one device buffer,
        # as on the interpreter: two copies would be copied back in turn, the one the
        # kernel did not write last.
        if isinstance(value, np.ndarray):
            if id(value) not in copies:
                copies[id(value)] = (value, torch.from_numpy(np.ascontiguousarray(value)).cuda())
            return copies[id(value)][1]
        if isinstance(value, TensorWrapper) and isinstance(value.base, np.ndarray):
            # pt.reinterpret(array, pl.bfloat16): the array moves, the wrapper stays.
            return TensorWrapper(to_device(value.base, copies), value.dtype)
        return value

    def round_trip(launch, args, kwargs):
        copies = {}
        args = [to_device(a, copies) for a in args]
        kwargs = {k: to_device(v, copies) for k, v in kwargs.items()}
        try:
            return launch(*args, **kwargs)
        finally:
            torch.cuda.synchronize()
            for array, tensor in copies.values():
                if array.flags.writeable:
                    array[...] = tensor.cpu().numpy().reshape(array.shape)

    original_getitem, original_run = JITFunction.__getitem__, JITFunction.run

    def getitem(self, grid):
        launch = original_getitem(self, grid)
        return lambda *args, **kwargs: round_trip(launch, args, kwargs)

    def run(self, *args, grid, **kwargs):
        return round_trip(lambda *a, **k: original_run(self, *a, grid=grid, **k), args, kwargs)

    monkeypatch.setattr(JITFunction, "__getitem__", getitem)
    monkeypatch.setattr(JITFunction, "run", run)
