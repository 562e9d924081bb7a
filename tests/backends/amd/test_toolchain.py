"""Finding ld.lld: the setting, ROCm, PATH, versioned names; and linking failures."""

from __future__ import annotations

import os
import stat

import pytest

from polytile import config
from polytile.errors import ConfigError
from polytile_amd import toolchain
from polytile_amd.assemble import link_hsaco
from polytile_amd.errors import LinkError, ToolNotFoundError


def fake_tool(path, version="LLD 17.0.6 (compatible with GNU linkers)", exit_code=0):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{version}'\necho 'ld.lld: error: bad object' >&2\nexit {exit_code}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def bare_machine(monkeypatch, tmp_path):
    """No ld.lld anywhere but where a test puts one."""
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr(toolchain, "glob_paths", lambda pattern: [])
    with config.override(amd_lld=None, rocm_path=tmp_path / "rocm"):
        yield tmp_path


def test_the_highest_versioned_name_on_path_wins(bare_machine):
    fake_tool(bare_machine / "bin" / "ld.lld-17")
    fake_tool(bare_machine / "bin" / "ld.lld-21")
    assert toolchain.find_lld() == bare_machine / "bin" / "ld.lld-21"
    fake_tool(bare_machine / "bin" / "ld.lld")
    assert toolchain.find_lld() == bare_machine / "bin" / "ld.lld"


def test_rocm_comes_before_path(bare_machine):
    fake_tool(bare_machine / "bin" / "ld.lld")
    rocm = fake_tool(bare_machine / "rocm" / "llvm" / "bin" / "ld.lld")
    assert toolchain.find_lld() == rocm


def test_not_found_lists_every_place(bare_machine):
    with pytest.raises(ToolNotFoundError) as info:
        toolchain.find_lld()
    message = str(info.value)
    assert message.startswith("ld.lld (the linker for AMD code objects) not found; looked in:")
    assert str(bare_machine / "rocm" / "llvm" / "bin" / "ld.lld") in message
    assert "ld.lld on PATH" in message and "ld.lld-NN on PATH" in message and "amd_lld" in message
    assert toolchain.toolchain_versions() == {"ld.lld": "not found"}


def test_the_setting_wins_and_must_exist(bare_machine):
    tool = fake_tool(bare_machine / "elsewhere" / "my-lld")
    with config.override(amd_lld=tool):
        assert toolchain.find_lld() == tool
        assert toolchain.lld_version(tool) == "17.0.6"
    with config.override(amd_lld=bare_machine / "missing"), pytest.raises(ConfigError, match="setting 'amd_lld'"):
        toolchain.find_lld()


def test_a_failing_link_quotes_the_linker(bare_machine):
    fake_tool(bare_machine / "bin" / "ld.lld", exit_code=1)
    with pytest.raises(LinkError) as info:
        link_hsaco(b"\x7fELF", "k", "gfx942")
    assert "kernel 'k':" in str(info.value) and "ld.lld: error: bad object" in str(info.value)


def test_dev_exports_a_linker():
    # ./dev finds one (installing lld when needed) so that CI covers linking.
    assert os.environ.get("POLYTILE_AMD_LLD") or toolchain.find_lld()
