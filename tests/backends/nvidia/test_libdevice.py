"""Finding libdevice.10.bc: the setting, cuda_home, the nvcc wheel, system toolkits; and\nthe error of a kernel that calls a math function where it is nowhere."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile import config
from polytile.compiler import compile_module
from polytile.errors import ConfigError
from polytile_nvidia import libdevice, toolkit
from polytile_nvidia.codegen import LibdeviceMissingError
from polytile_nvidia.libdevice import find_libdevice


def _bitcode(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "libdevice.10.bc"
    path.write_bytes(b"BC\xc0\xde")
    return path


@pytest.fixture
def bare_machine(monkeypatch, tmp_path):
    """No toolkit anywhere but where a test puts one under tmp_path."""
    # The plugins and their settings are loaded before sys.path is emptied: a plugin
    # manager made afresh under it (an earlier test changed disabled_plugins) would find
    # no entry point, and 'libdevice_path' would be an unknown setting.
    config.get("libdevice_path")
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])
    monkeypatch.setattr(toolkit, "COMMON_CUDA_ROOTS", (str(tmp_path / "usr-local-cuda"), str(tmp_path / "cuda-*")))
    monkeypatch.setattr(libdevice, "DEBIAN_DIRECTORIES", (str(tmp_path / "debian"),))
    return tmp_path


def test_setting_wins(bare_machine):
    path = _bitcode(bare_machine / "mine")
    _bitcode(bare_machine / "cuda" / "nvvm" / "libdevice")
    config.set(libdevice_path=str(path), cuda_home=str(bare_machine / "cuda"))
    assert find_libdevice() == path


def test_the_libdevice_math_links_from_is_part_of_the_cache_key(bare_machine):
    # libdevice_path and cuda_home are declared recompiles=True: the on-disk cache must
    # tell the kernels apart too, not only the process's caches.
    from polytile_nvidia.backend import NvidiaBackend

    backend = NvidiaBackend()
    mine = _bitcode(bare_machine / "mine")
    home = _bitcode(bare_machine / "cuda" / "nvvm" / "libdevice")
    keys = []
    for settings in ({}, {"libdevice_path": str(mine)}, {"cuda_home": str(bare_machine / "cuda")}):
        with config.override(**settings):
            keys.append(backend.versions()["libdevice"])
    assert keys[0].startswith("none (") and keys[1].startswith(str(mine)) and keys[2].startswith(str(home))
    mine.write_bytes(b"BC\xc0\xde" * 2)  # another file at the same place
    with config.override(libdevice_path=str(mine)):
        assert backend.versions()["libdevice"] != keys[1]


def test_setting_that_points_nowhere_is_an_error(bare_machine, monkeypatch):
    monkeypatch.setenv("POLYTILE_LIBDEVICE", str(bare_machine / "missing.bc"))
    with pytest.raises(ConfigError) as info:
        find_libdevice()
    assert "setting 'libdevice_path' (from environment variable POLYTILE_LIBDEVICE)" in str(info.value)
    assert "does not exist" in str(info.value)


def test_cuda_home(bare_machine, monkeypatch):
    path = _bitcode(bare_machine / "cuda" / "nvvm" / "libdevice")
    monkeypatch.setenv("CUDA_PATH", str(bare_machine / "cuda"))
    assert find_libdevice() == path


@pytest.mark.parametrize("root", ["cu13", "cuda_nvcc"])
def test_nvcc_wheel(bare_machine, root):
    path = _bitcode(bare_machine / "site" / "nvidia" / root / "nvvm" / "libdevice")
    assert find_libdevice() == path


def test_cuda_home_wins_over_the_wheel(bare_machine):
    _bitcode(bare_machine / "site" / "nvidia" / "cu13" / "nvvm" / "libdevice")
    path = _bitcode(bare_machine / "cuda" / "nvvm" / "libdevice")
    config.set(cuda_home=str(bare_machine / "cuda"))
    assert find_libdevice() == path


def test_toolkit_of_ptxas_on_path(bare_machine, monkeypatch):
    bin_dir = bare_machine / "toolkit" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "ptxas").write_text("#!/bin/sh\n")
    (bin_dir / "ptxas").chmod(0o755)
    path = _bitcode(bare_machine / "toolkit" / "nvvm" / "libdevice")
    monkeypatch.setenv("PATH", str(bin_dir))
    assert find_libdevice() == path


def test_newest_system_toolkit_wins(bare_machine):
    _bitcode(bare_machine / "cuda-12.9" / "nvvm" / "libdevice")
    newest = _bitcode(bare_machine / "cuda-12.10" / "nvvm" / "libdevice")
    assert find_libdevice() == newest


def test_missing_libdevice_lists_every_place_looked(bare_machine):
    config.set(cuda_home=str(bare_machine / "cuda"))
    (bare_machine / "site" / "nvidia").mkdir(parents=True)
    (bare_machine / "cuda-12.4").mkdir()
    with pytest.raises(toolkit.ToolkitNotFoundError) as info:
        find_libdevice()
    lines = str(info.value).splitlines()
    assert lines[0] == "libdevice.10.bc not found; looked in:"
    site = bare_machine / "site" / "nvidia"
    assert lines[1:-1] == [
        f"  - {bare_machine / 'cuda/nvvm/libdevice/libdevice.10.bc'} (cuda_home, from polytile.config.set())",
        f"  - {site / 'cu13/nvvm/libdevice/libdevice.10.bc'} (nvidia-cuda-nvcc wheel)",
        f"  - {site / 'cuda_nvcc/nvvm/libdevice/libdevice.10.bc'} (nvidia-cuda-nvcc wheel)",
        f"  - {bare_machine / 'usr-local-cuda/nvvm/libdevice/libdevice.10.bc'} (system CUDA toolkit)",
        f"  - {bare_machine / 'cuda-12.4/nvvm/libdevice/libdevice.10.bc'} (system CUDA toolkit)",
        f"  - {bare_machine / 'debian/libdevice.10.bc'} (Debian's nvidia-cuda-toolkit)",
    ]
    assert "set libdevice_path (POLYTILE_LIBDEVICE)" in lines[-1]


def test_missing_cuda_home_and_wheel_are_said(bare_machine):
    with pytest.raises(toolkit.ToolkitNotFoundError) as info:
        find_libdevice()
    assert "cuda_home: not set (POLYTILE_CUDA_HOME, CUDA_HOME, CUDA_PATH)" in str(info.value)
    assert "no nvidia/ package on sys.path" in str(info.value)


# -- a compile that needs libdevice, on a machine without it ---------------------------


@pt.jit
def sine(x, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(out + offs, pl.sin(pl.load(x + offs)))


@pt.jit
def doubled(x, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(out + offs, pl.load(x + offs) * 2.0)


def _lowered(kernel):
    return kernel.lower(np.zeros(256, np.float32), np.zeros(256, np.float32), BLOCK=256)


@pytest.fixture
def nvidia_backend():
    """The backend, found through its entry point before ``bare_machine`` empties sys.path."""
    from polytile.plugins.manager import get_plugin_manager

    return get_plugin_manager().backends.find("nvidia")


def test_a_math_function_without_libdevice_names_kernel_function_and_places(nvidia_backend, bare_machine):
    with pytest.raises(LibdeviceMissingError) as info:
        compile_module(_lowered(sine), "nvidia:sm_90a")
    lines = str(info.value).splitlines()
    assert lines[0] == ("kernel 'sine' calls __nv_sinf from libdevice, the CUDA math library, which was not "
                        "found:")
    assert lines[1] == "libdevice.10.bc not found; looked in:"
    assert lines[2:-1] == [
        "  - cuda_home: not set (POLYTILE_CUDA_HOME, CUDA_HOME, CUDA_PATH)",
        "  - the nvidia-cuda-nvcc wheel (pip install nvidia-cuda-nvcc): no nvidia/ package on sys.path",
        f"  - {bare_machine / 'usr-local-cuda/nvvm/libdevice/libdevice.10.bc'} (system CUDA toolkit)",
        f"  - {bare_machine / 'debian/libdevice.10.bc'} (Debian's nvidia-cuda-toolkit)",
    ]
    assert "pip install nvidia-cuda-nvcc" in lines[-1] and "libdevice_path (POLYTILE_LIBDEVICE)" in lines[-1]


def test_a_kernel_without_math_functions_needs_no_libdevice(nvidia_backend, ptxas, bare_machine):
    # ptxas was found before the machine was emptied; libdevice is nowhere.
    config.set(ptxas_path=str(ptxas))
    with pytest.raises(toolkit.ToolkitNotFoundError):
        find_libdevice()
    result = compile_module(_lowered(doubled), "nvidia:sm_90a")
    assert "__nv_" not in result.context.artifacts["llvm_ir"]
    assert result.binaries["cubin"][:4] == b"\x7fELF"
