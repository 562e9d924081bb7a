"""The AMD backend's device discovery, hip-python layouts, architecture table and
toolchain versions.

Device discovery runs against a fake ``hip`` module so that the mapping from
``gcnArchName`` to architecture is tested on machines without ROCm.  Its targets,
options, packaging and a kernel's compile and launch are held to the backend contract
with every other backend's, in tests/backends/test_contract.py.
"""

from __future__ import annotations

import enum
import os
import subprocess
import sys
import types
from importlib import metadata
from pathlib import Path

import pytest

from polytile.backend import BackendUnavailable
from polytile_amd import ARCHITECTURES, AmdBackend
from polytile_amd.architectures import architecture_for_gcn_arch_name


@pytest.fixture
def backend() -> AmdBackend:
    return AmdBackend()


# -- devices on this machine -----------------------------------------------------------


def test_active_devices_without_rocm_is_unavailable(backend):
    # No ROCm on the development and CI machines: with or without hip-python installed,
    # the answer is BackendUnavailable with a reason, never another exception.
    with pytest.raises(BackendUnavailable) as info:
        backend.active_devices()
    assert str(info.value).startswith(("hip-python is not installed", "ROCm runtime not found:")), str(info.value)


# -- devices through a fake hip --------------------------------------------------------


class hipError_t(enum.IntEnum):
    hipSuccess = 0
    hipErrorNoDevice = 100
    hipErrorInvalidValue = 1


def fake_hip(gpus=(), init_result=hipError_t.hipSuccess, init_raises=None):
    """A stand-in for ``hip.hip`` with hip-python's tuple-returning calls."""
    ok = hipError_t.hipSuccess

    def hipInit(flags):
        if init_raises is not None:
            raise init_raises
        return (init_result,)

    def hipGetDeviceProperties(index):
        name, gcn, cus, lds, wave = gpus[index]
        props = types.SimpleNamespace(
            name=name.encode(), gcnArchName=gcn, multiProcessorCount=cus, sharedMemPerBlock=lds, warpSize=wave
        )
        return (ok, props)

    return types.SimpleNamespace(
        hipError_t=hipError_t,
        hipInit=hipInit,
        hipGetDeviceCount=lambda: (ok, len(gpus)) if gpus else (hipError_t.hipErrorNoDevice, 0),
        hipGetDeviceProperties=hipGetDeviceProperties,
    )


@pytest.fixture
def install_hip(monkeypatch):
    def install(hip):
        package = types.ModuleType("hip")
        package.hip = hip
        monkeypatch.setitem(sys.modules, "hip", package)
        monkeypatch.setitem(sys.modules, "hip.hip", hip)

    return install


MI300X = ("AMD Instinct MI300X", "gfx942:sramecc+:xnack-", 304, 65536, 64)
MI250X = ("AMD Instinct MI250X", "gfx90a:sramecc+:xnack-", 110, 65536, 64)
RX7900 = ("Radeon RX 7900 XTX", "gfx1100", 48, 65536, 32)
MI100 = ("AMD Instinct MI100", "gfx908:sramecc+:xnack-", 120, 65536, 64)


def test_devices_map_gcn_arch_name_to_architecture(backend, install_hip):
    install_hip(fake_hip([MI300X, MI250X, RX7900]))
    devices = backend.active_devices()
    assert [(d.index, d.name, str(d.target)) for d in devices] == [
        (0, "AMD Instinct MI300X", "amd:gfx942"),
        (1, "AMD Instinct MI250X", "amd:gfx90a"),
        (2, "Radeon RX 7900 XTX", "amd:gfx1100"),
    ]
    assert devices[0].properties["gcn_arch_name"] == "gfx942:sramecc+:xnack-"
    assert devices[0].properties["multiprocessor_count"] == 304
    assert devices[2].properties["wavefront_size"] == 32


def test_unsupported_devices_are_skipped(backend, install_hip):
    install_hip(fake_hip([MI100, MI300X]))
    assert [(d.index, str(d.target)) for d in backend.active_devices()] == [(1, "amd:gfx942")]


def test_only_unsupported_devices_says_why(backend, install_hip):
    install_hip(fake_hip([MI100]))
    with pytest.raises(BackendUnavailable) as info:
        backend.active_devices()
    assert str(info.value).startswith("no supported AMD GPU")
    assert "AMD Instinct MI100" in str(info.value) and "gfx908" in str(info.value)


def test_no_device_is_an_empty_list(backend, install_hip):
    install_hip(fake_hip(init_result=hipError_t.hipErrorNoDevice))
    assert backend.active_devices() == []
    install_hip(fake_hip([]))
    assert backend.active_devices() == []


def test_missing_rocm_runtime_is_reported(backend, install_hip):
    install_hip(fake_hip(init_raises=RuntimeError("failed to dlopen libamdhip64.so")))
    with pytest.raises(BackendUnavailable, match="^ROCm runtime not found: failed to dlopen libamdhip64.so"):
        backend.active_devices()


def test_failing_init_is_reported(backend, install_hip):
    install_hip(fake_hip(init_result=hipError_t.hipErrorInvalidValue))
    with pytest.raises(BackendUnavailable, match="hipInit failed with hipErrorInvalidValue"):
        backend.active_devices()


# -- hip-python 10's layout: `from hip import hip` without a hip.hip submodule ----------

#: hip-python 10.x: ``hip`` is a compatibility package binding ``rocm.bindings.hip`` to its
#: attribute ``hip``; there is no ``hip/hip`` submodule.  Its calls load libamdhip64.so on
#: first use, so without ROCm the import works and ``hipInit`` raises.
HIP_PYTHON_10 = """
import types
hip = types.ModuleType("rocm.bindings.hip")
def hipInit(flags):
    raise RuntimeError("failed to dlopen 'libamdhip64.so': cannot open shared object file")
hip.hipInit = hipInit
"""


@pytest.fixture
def hip_python_10(tmp_path):
    (tmp_path / "hip").mkdir()
    (tmp_path / "hip" / "__init__.py").write_text(HIP_PYTHON_10)
    return tmp_path


def test_hip_python_10_without_rocm_is_installed_with_no_device(hip_python_10):
    # `polytile info` on a machine with hip-python but no ROCm: the backend is there, the
    # runtime library is what is missing (not "hip-python is not installed").
    path = os.pathsep.join([str(hip_python_10), os.environ.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, "-m", "polytile.cli", "info"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": path})
    assert run.returncode == 0, run.stderr
    amd = run.stdout[run.stdout.index("\n  amd "):run.stdout.index("\n  interp ")]
    assert "targets: amd:gfx90a, amd:gfx942, amd:gfx950, amd:gfx1100" in amd
    assert "no device: ROCm runtime not found: failed to dlopen 'libamdhip64.so'" in amd, amd


def test_compiling_for_amd_does_not_import_hip(hip_python_10):
    # hip-python importable (the fake above), yet compiling never touches it: only a launch
    # or device discovery (polytile info, choosing a default target) imports it.
    code = (
        "import sys, numpy as np\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from kernels import add, compile_amd\n"
        "f = np.zeros(256, np.float32)\n"
        "assert compile_amd(add, f, f, f, 256, BLOCK=256)['hsaco'][:4] == b'\\x7fELF'\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('hip', 'rocm')))\n"
    )
    path = os.pathsep.join([str(hip_python_10), os.environ.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": path})
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_the_bindings_are_found_as_an_attribute_or_a_submodule(backend, monkeypatch):
    from polytile_amd import driver

    bindings = types.ModuleType("rocm.bindings.hip")
    package = types.ModuleType("hip")
    package.hip = bindings  # hip-python 10: no "hip.hip" in sys.modules, nor on disk
    monkeypatch.setitem(sys.modules, "hip", package)
    monkeypatch.delitem(sys.modules, "hip.hip", raising=False)
    assert driver.import_bindings() is bindings
    del package.hip  # hip-python 6: a real submodule
    monkeypatch.setitem(sys.modules, "hip.hip", bindings)
    assert driver.import_bindings() is bindings
    monkeypatch.setitem(sys.modules, "hip.hip", None)
    with pytest.raises(BackendUnavailable, match="hip-python is installed .* but has no HIP bindings module"):
        driver.import_bindings()


def test_launching_without_the_rocm_runtime_says_so(monkeypatch):
    from polytile_amd import driver

    bindings = types.SimpleNamespace(hipError_t=hipError_t,
                                     hipInit=lambda flags: (_ for _ in ()).throw(RuntimeError("failed to dlopen")))
    monkeypatch.setattr(driver, "_state", driver._State(bindings))
    with pytest.raises(BackendUnavailable, match="^ROCm runtime not found: failed to dlopen; AMD kernels compile"):
        driver.current_device()


# -- architecture table ----------------------------------------------------------------


def test_table_matches_backend():
    assert tuple(ARCHITECTURES) == AmdBackend.architectures


@pytest.mark.parametrize(
    "arch, wavefront, lds",
    [("gfx90a", 64, 65536), ("gfx942", 64, 65536), ("gfx950", 64, 163840), ("gfx1100", 32, 65536)],
)
def test_architecture_data(arch, wavefront, lds):
    data = ARCHITECTURES[arch]
    assert data.name == arch
    assert data.wavefront_size == wavefront
    assert data.lds_bytes == lds
    assert data.matrix_instructions == ("wmma" if arch.startswith("gfx11") else "mfma")


def test_table_is_read_only():
    with pytest.raises(TypeError):
        ARCHITECTURES["gfx908"] = ARCHITECTURES["gfx90a"]  # type: ignore[index]
    with pytest.raises(AttributeError):
        ARCHITECTURES["gfx942"].lds_bytes = 0  # type: ignore[misc]


def test_gcn_arch_name_lookup():
    assert architecture_for_gcn_arch_name("gfx950:sramecc+:xnack-").name == "gfx950"
    assert architecture_for_gcn_arch_name("gfx1100").name == "gfx1100"
    assert architecture_for_gcn_arch_name("gfx908") is None
    assert architecture_for_gcn_arch_name("") is None


# -- versions --------------------------------------------------------------------------


def test_versions_are_distributions_linker_and_device_libraries(backend):
    from polytile_amd import toolchain

    versions = dict(backend.versions())
    assert {"llvmlite", "ld.lld", "amd-device-libs"} <= set(versions) <= {"llvmlite", "hip-python", "ld.lld",
                                                                          "amd-device-libs"}
    for dist in set(versions) & {"llvmlite", "hip-python"}:
        assert versions[dist] == metadata.version(dist)
    assert versions["ld.lld"] == toolchain.lld_version(toolchain.find_lld())
    assert versions["ld.lld"][0].isdigit()
    assert versions["amd-device-libs"] == str(toolchain.find_device_libs() or "none")


