"""The NVIDIA backend's device discovery, architecture table and toolchain versions.

Device discovery runs against a fake ``cuda.bindings.driver`` so that the mapping from
compute capability to architecture is tested on machines without a GPU.  Its targets,
options, packaging and a kernel's compile and launch are held to the backend contract
with every other backend's, in tests/backends/test_contract.py.
"""

from __future__ import annotations

import enum
import sys
import types
from importlib import metadata

import pytest

from polytile.backend import BackendUnavailable
from polytile_nvidia import ARCHITECTURES, NvidiaBackend
from polytile_nvidia.architectures import architecture_for_compute_capability


@pytest.fixture
def backend() -> NvidiaBackend:
    return NvidiaBackend()


# -- devices through a fake driver -----------------------------------------------------


class CUresult(enum.Enum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_INSUFFICIENT_DRIVER = 35


class CUdevice_attribute(enum.Enum):
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
    CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97


def fake_driver(gpus=(), init_result=CUresult.CUDA_SUCCESS, init_raises=None):
    """A stand-in for ``cuda.bindings.driver`` with the same tuple-returning calls."""
    ok = CUresult.CUDA_SUCCESS
    attr = CUdevice_attribute

    def cuInit(flags):
        if init_raises is not None:
            raise init_raises
        return (init_result,)

    def cuDeviceGetAttribute(attribute, dev):
        name, (major, minor), sms, smem = gpus[dev]
        values = {
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: major,
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: minor,
            attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: sms,
            attr.CU_DEVICE_ATTRIBUTE_WARP_SIZE: 32,
            attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: smem,
        }
        return (ok, values[attribute])

    return types.SimpleNamespace(
        CUresult=CUresult,
        CUdevice_attribute=CUdevice_attribute,
        cuInit=cuInit,
        cuDeviceGetCount=lambda: (ok, len(gpus)),
        cuDeviceGet=lambda index: (ok, index),
        cuDeviceGetName=lambda length, dev: (ok, gpus[dev][0].encode() + b"\0" * (length - len(gpus[dev][0]))),
        cuDeviceGetAttribute=cuDeviceGetAttribute,
    )


@pytest.fixture
def install_driver(monkeypatch):
    def install(driver):
        bindings = types.ModuleType("cuda.bindings")
        bindings.driver = driver
        monkeypatch.setitem(sys.modules, "cuda", types.ModuleType("cuda"))
        monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
        monkeypatch.setitem(sys.modules, "cuda.bindings.driver", driver)
        # No C layer: the probe falls back on the (fake) Python API, as it does where
        # cuda-bindings' cydriver cannot be used.
        monkeypatch.setitem(sys.modules, "cuda.bindings.cydriver", None)

    return install


H100 = ("NVIDIA H100 80GB HBM3", (9, 0), 132, 232448)
A100 = ("NVIDIA A100-SXM4-80GB", (8, 0), 108, 166912)
RTX3090 = ("NVIDIA GeForce RTX 3090", (8, 6), 82, 101376)
L4 = ("NVIDIA L4", (8, 9), 58, 101376)
V100 = ("Tesla V100-SXM2-16GB", (7, 0), 80, 98304)


def test_devices_map_compute_capability_to_architecture(backend, install_driver):
    install_driver(fake_driver([H100, A100, RTX3090, L4]))
    devices = backend.active_devices()
    assert [(d.index, d.name, str(d.target)) for d in devices] == [
        (0, "NVIDIA H100 80GB HBM3", "nvidia:sm_90a"),
        (1, "NVIDIA A100-SXM4-80GB", "nvidia:sm_80"),
        (2, "NVIDIA GeForce RTX 3090", "nvidia:sm_86"),
        (3, "NVIDIA L4", "nvidia:sm_89"),
    ]
    assert dict(devices[0].properties) == {
        "compute_capability": (9, 0),
        "multiprocessor_count": 132,
        "warp_size": 32,
        "shared_memory_per_block": 232448,
        "shared_memory_per_block_optin": 232448,
    }


@pytest.fixture
def probe_again_afterwards():
    """The plugin manager's device probe, made again once the fake driver is gone (this
    fixture's teardown runs after install_driver's)."""
    from polytile.plugins.manager import get_plugin_manager

    yield
    get_plugin_manager().backends.probe("nvidia", refresh=True)


def test_device_properties_give_the_sm_count_of_the_chosen_device(probe_again_afterwards, backend, install_driver):
    """What a persistent kernel sizes its grid by: polytile.device_properties(), of the
    device a launch would use (Triton's get_device_properties(...)["multiprocessor_count"])."""
    import polytile as pt
    from polytile import config
    from polytile.errors import LaunchError
    from polytile.plugins.manager import get_plugin_manager

    install_driver(fake_driver([H100, A100]))
    get_plugin_manager().backends.probe("nvidia", refresh=True)
    with config.override(target="nvidia"):
        assert pt.device_properties() == {
            "name": "NVIDIA H100 80GB HBM3", "target": "nvidia:sm_90a", "index": 0, "compute_capability": (9, 0),
            "multiprocessor_count": 132, "warp_size": 32, "shared_memory_per_block": 232448,
            "shared_memory_per_block_optin": 232448}
        assert pt.device_properties(1)["multiprocessor_count"] == 108
        with pytest.raises(LaunchError, match=r"device_properties\(2\): the target nvidia:sm_90a .* has devices 0-1"):
            pt.device_properties(2)


def test_unsupported_devices_are_skipped(backend, install_driver):
    install_driver(fake_driver([V100, H100]))
    devices = backend.active_devices()
    assert [(d.index, str(d.target)) for d in devices] == [(1, "nvidia:sm_90a")]


def test_only_unsupported_devices_says_why(backend, install_driver):
    install_driver(fake_driver([V100]))
    with pytest.raises(BackendUnavailable) as info:
        backend.active_devices()
    message = str(info.value)
    assert message.startswith("no supported NVIDIA GPU")
    assert "Tesla V100-SXM2-16GB" in message and "7.0" in message and "sm_90a" in message


def test_no_device_is_an_empty_list(backend, install_driver):
    install_driver(fake_driver(init_result=CUresult.CUDA_ERROR_NO_DEVICE))
    assert backend.active_devices() == []
    install_driver(fake_driver([]))
    assert backend.active_devices() == []


def test_missing_libcuda_is_reported(backend, install_driver):
    install_driver(fake_driver(init_raises=RuntimeError("libcuda.so.1: cannot open shared object file")))
    with pytest.raises(BackendUnavailable, match="^CUDA driver not found: libcuda.so.1: cannot open"):
        backend.active_devices()


def test_old_driver_is_reported(backend, install_driver):
    install_driver(fake_driver(init_result=CUresult.CUDA_ERROR_INSUFFICIENT_DRIVER))
    with pytest.raises(BackendUnavailable, match="CUDA_ERROR_INSUFFICIENT_DRIVER.*upgrade the driver"):
        backend.active_devices()


# -- architecture table ----------------------------------------------------------------


def test_table_matches_backend():
    assert tuple(ARCHITECTURES) == NvidiaBackend.architectures


@pytest.mark.parametrize(
    "arch, capability, smem, wgmma",
    [
        ("sm_80", (8, 0), 166912, False),
        ("sm_86", (8, 6), 101376, False),
        ("sm_89", (8, 9), 101376, False),
        ("sm_90", (9, 0), 232448, False),
        ("sm_90a", (9, 0), 232448, True),
    ],
)
def test_architecture_data(arch, capability, smem, wgmma):
    data = ARCHITECTURES[arch]
    assert data.name == arch
    assert data.compute_capability == capability
    assert data.shared_memory_per_block_optin == smem
    assert data.has_wgmma is wgmma
    assert data.warp_size == 32


def test_table_is_read_only():
    with pytest.raises(TypeError):
        ARCHITECTURES["sm_100"] = ARCHITECTURES["sm_90"]  # type: ignore[index]
    with pytest.raises(AttributeError):
        ARCHITECTURES["sm_90"].has_wgmma = True  # type: ignore[misc]


def test_compute_capability_lookup():
    assert architecture_for_compute_capability(9, 0).name == "sm_90a"
    assert architecture_for_compute_capability(8, 0).name == "sm_80"
    assert architecture_for_compute_capability(7, 5) is None
    assert architecture_for_compute_capability(10, 0) is None


# -- versions --------------------------------------------------------------------------


def test_versions_are_installed_distributions_and_the_assembler(backend):
    versions = dict(backend.versions())
    assembler = versions.pop("nvidia-assembler")
    # The assembler that will run, with its version, or why none can (keys are still computed).
    assert assembler.split()[0] in ("nvjitlink", "ptxas", "unavailable")
    # Beside nvJitLink: the ptxas that kernels needing whole-program compilation get.
    whole_program = versions.pop("nvidia-whole-program-assembler", None)
    if assembler.startswith("nvjitlink"):
        assert whole_program is not None and whole_program.split()[0] in ("ptxas", "none")
    else:
        assert whole_program is None
    # The libdevice math links from: its path, size and time, or why there is none.
    libdevice = versions.pop("libdevice")
    assert libdevice.startswith("none (") or len(libdevice.split()) >= 3
    assert set(versions) <= {"llvmlite", "cuda-bindings"}
    for dist, version in versions.items():
        assert version == metadata.version(dist)


