"""Installed distributions read from ``*.dist-info`` folders, without importlib.metadata."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from polytile.plugins import distributions


def install(site: Path, name: str, version: str, entry_points: dict[str, dict[str, str]] | None = None) -> Path:
    """A ``<name>-<version>.dist-info`` folder under ``site``, as pip writes one."""
    folder = site / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n"
                                     "Name: not-a-header (the description)\n")
    if entry_points:
        text = "# written by a test\n"
        for group, points in entry_points.items():
            text += f"[{group}]\n" + "".join(f"{n} = {v}\n" for n, v in points.items()) + "\n"
        (folder / "entry_points.txt").write_text(text)
    return folder


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    return tmp_path


def test_versions_come_from_the_metadata_headers(site):
    install(site, "Some_Tool", "2.5.1")
    assert distributions.version("some-tool") == "2.5.1"
    assert distributions.version("some.tool") == "2.5.1"  # compared as pip compares names
    assert distributions.version("absent") is None
    assert distributions.installed_versions("some-tool", "absent") == {"some-tool": "2.5.1"}


def test_entry_points_load_the_object_they_name(site):
    package = site / "fake_polytile_plugin"
    package.mkdir()
    (package / "__init__.py").write_text("class Holder:\n    VALUE = 42\n")
    install(site, "fake-polytile-plugin", "1.0", {"polytile.plugins": {
        "whole": "fake_polytile_plugin", "attr": "fake_polytile_plugin:Holder.VALUE",
        "extras": "fake_polytile_plugin:Holder [fast]"}})
    found = {ep.name: ep for ep in distributions.entry_points("polytile.plugins")}
    assert found["whole"].load().__name__ == "fake_polytile_plugin"
    assert found["attr"].load() == 42
    assert found["extras"].load().VALUE == 42
    assert found["attr"].dist.name == "fake-polytile-plugin" and found["attr"].group == "polytile.plugins"
    sys.modules.pop("fake_polytile_plugin", None)


def test_a_malformed_value_names_the_entry_point(site):
    install(site, "broken", "1.0", {"polytile.plugins": {"bad": "not a module!"}})
    (bad,) = distributions.entry_points("polytile.plugins")
    with pytest.raises(ValueError, match="entry point 'bad' of distribution 'broken'"):
        bad.load()


def test_an_installation_during_the_process_is_seen(site):
    assert distributions.version("late") is None
    install(site, "late", "1.0")
    # The folder's modification time moved; some file systems keep it in whole seconds.
    os.utime(site, ns=(os.stat(site).st_atime_ns, os.stat(site).st_mtime_ns + 2_000_000_000))
    assert distributions.version("late") == "1.0"


def test_agrees_with_importlib_metadata_on_this_environment():
    expected = {}
    for group in ("polytile.backends", "polytile.plugins", "console_scripts"):
        for ep in importlib.metadata.entry_points(group=group):
            expected[(group, ep.name)] = (ep.value, distributions.normalize(ep.dist.name), ep.dist.version)
    found = {}
    for group in ("polytile.backends", "polytile.plugins", "console_scripts"):
        for ep in distributions.entry_points(group):
            found[(group, ep.name)] = (ep.value, distributions.normalize(ep.dist.name), ep.dist.version)
    assert found == expected
    for name in ("pytest", "pluggy", "numpy"):
        assert distributions.version(name) == importlib.metadata.version(name)


def test_finding_plugins_does_not_import_importlib_metadata():
    # It costs 30 to 60 ms, more than a launch from a warm disk cache may take in all.
    code = ("import sys; from polytile.plugins.manager import get_plugin_manager; "
            "get_plugin_manager().plugins(); print('importlib.metadata' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
