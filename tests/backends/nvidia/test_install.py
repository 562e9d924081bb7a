"""polytile-nvidia's install builds the native launch module (backends/nvidia/setup.py):
a platform wheel with ``polytile_nvidia._launch`` inside, and an install that still
succeeds, saying why, where the C compiler fails."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

BACKEND = Path(__file__).resolve().parents[3] / "backends" / "nvidia"


@pytest.fixture
def backend_copy(tmp_path):
    """The distribution's sources in a scratch folder (its build folders stay out of the checkout)."""
    from polytile.runtime.launcher import c_compiler

    if c_compiler() is None or not Path(sysconfig.get_paths()["include"], "Python.h").is_file():
        pytest.skip("no C compiler or Python headers here: the module cannot be built")
    pytest.importorskip("setuptools")
    copy = tmp_path / "nvidia"
    copy.mkdir()
    shutil.copy(BACKEND / "setup.py", copy)
    shutil.copy(BACKEND / "pyproject.toml", copy)
    shutil.copytree(BACKEND / "polytile_nvidia", copy / "polytile_nvidia",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__", "_launch.unbuilt"))
    return copy


def test_the_wheel_is_a_platform_wheel_with_the_launch_module_inside(backend_copy, tmp_path):
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           str(backend_copy), "-w", str(tmp_path / "wheels")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = (tmp_path / "wheels").glob("polytile_nvidia-*.whl")
    assert not wheel.name.endswith("-none-any.whl")  # a platform wheel
    names = zipfile.ZipFile(wheel).namelist()
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert f"polytile_nvidia/_launch{suffix}" in names
    assert {"polytile_nvidia/_launch.c", "polytile_nvidia/_dispatch.h"} <= set(names)  # for the stale check
    assert "polytile_nvidia/_launch.unbuilt" not in names


def test_an_install_whose_compiler_fails_succeeds_and_says_why(backend_copy):
    import os

    env = dict(os.environ, CC="false")  # a compiler that fails on anything
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=backend_copy, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    package = backend_copy / "polytile_nvidia"
    assert not list(package.glob("_launch*.so"))
    marker = (package / "_launch.unbuilt").read_text()
    assert marker.startswith("the C compiler failed on _launch.c at install: ")
    assert "polytile-nvidia: the native launch module was not built" in done.stderr + done.stdout
    # Built once a compiler works: the marker goes.
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=backend_copy,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert list(package.glob("_launch*.so")) and not (package / "_launch.unbuilt").exists()
