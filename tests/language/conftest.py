"""The one place that decides which targets the language tests run on.

Every test in tests/language takes the ``target`` fixture and passes it on as
``kernel[grid](..., target=target)``.  The interpreter always runs; a GPU target runs
where its backend is installed, finds a device and can launch kernels, and is skipped
with the reason otherwise (backends reuse this suite by adding their name to GPU_TARGETS).
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


@pytest.fixture(params=["interp", *(pytest.param(name, marks=pytest.mark.gpu) for name in GPU_TARGETS)])
def target(request):
    """The target every language test runs on."""
    if request.param != "interp":
        reason = unavailable_reason(request.param)
        if reason:
            pytest.skip(reason)
    return request.param
