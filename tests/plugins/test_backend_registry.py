"""BackendRegistry.resolve: a backend name alone picks this machine's architecture."""

from __future__ import annotations

import pytest

from polytile.backend import Backend, BackendUnavailable, Device
from polytile.errors import TargetError
from polytile.plugins.backends import BackendRegistry
from polytile.target import Target


class Gpu(Backend):
    name = "gpu"
    architectures = ("a1", "a2")

    def __init__(self, devices=(), missing=False):
        self.devices = list(devices)
        self.missing = missing
        self.probes = 0

    def active_devices(self):
        self.probes += 1
        if self.missing:
            raise BackendUnavailable("no driver")
        return [Device(Target("gpu", arch), f"card {i}", i) for i, arch in enumerate(self.devices)]


def registry_with(backend):
    registry = BackendRegistry()
    registry.add(backend.name, backend)
    return registry


def test_backend_alone_resolves_to_the_first_device_architecture():
    backend = Gpu(devices=["a2", "a1"])
    registry = registry_with(backend)
    assert registry.resolve("gpu") == (backend, Target("gpu", "a2"))
    assert registry.resolve("gpu") == (backend, Target("gpu", "a2"))
    assert backend.probes == 1  # the probe is remembered


def test_an_explicit_architecture_wins_over_the_device():
    backend = Gpu(devices=["a2"])
    assert registry_with(backend).resolve("gpu:a1") == (backend, Target("gpu", "a1"))
    assert backend.probes == 0


@pytest.mark.parametrize("backend", [Gpu(), Gpu(missing=True)], ids=["no-device", "no-driver"])
def test_without_a_device_the_architecture_must_be_named(backend):
    with pytest.raises(TargetError, match="names no architecture; use one of 'gpu:a1', 'gpu:a2'; 'gpu' alone means the "
                                          "architecture of this machine's device, and backend 'gpu' found none") as raised:
        registry_with(backend).resolve("gpu")
    # The probe's own reason says why there is no device.
    assert str(raised.value).endswith(f"({registry_with(backend).probe('gpu').reason})")
