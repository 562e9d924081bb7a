"""Settings that backends and plugins declare (hook polytile_register_settings): one
registry with the core's, read like them, and gone with a disabled plugin."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from polytile import config
from polytile.config import SETTINGS, Setting
from polytile.errors import ConfigError, PluginError, UnknownSettingError
from polytile.plugins.manager import FAILED, LOADED, PluginManager, get_plugin_manager, reset_plugin_manager
from polytile.plugins.registry import PluginInfo

REPO = Path(__file__).resolve().parents[2]
NVIDIA = ("cuda_home", "libdevice_path", "ptxas_path", "nvidia_assembler", "nvidia_launch")
AMD = ("rocm_path", "amd_lld", "amd_device_libs")


def docs_example() -> str:
    """The plugin of docs/plugins.md, section "Declaring settings"."""
    section = (REPO / "docs" / "plugins.md").read_text().split("## Declaring settings", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def plugin_from(source: str, name: str, monkeypatch, distribution: str = "polytile-myplugin") -> object:
    module = types.ModuleType(f"settings_plugin_{name}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)

    class EntryPoint:
        group, value = "polytile.plugins", module.__name__
        dist = types.SimpleNamespace(name=distribution, version="1.0")

        def load(self):
            return module

    entry = EntryPoint()
    entry.name = name
    return entry


def install(*entry_points, disabled=()) -> PluginManager:
    """A manager over these plugins only, made the process-wide one (conftest restores)."""
    manager = PluginManager(entry_points=list(entry_points), disabled=disabled)
    reset_plugin_manager(manager)
    return manager


@pytest.fixture
def myplugin(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    config.reload()
    install(plugin_from(docs_example(), "myplugin", monkeypatch))
    yield tmp_path
    config.reload()


# -- the installed backends ----------------------------------------------------------------


def test_the_backends_settings_are_theirs_and_listed_after_the_core():
    assert config.owner_of("nvidia_assembler") == "polytile-nvidia"
    assert config.owner_of("amd_lld") == "polytile-amd"
    assert config.owner_of("cache") == "polytile"
    rows = [(info.name, info.owner) for info in config.describe()]
    assert rows[:len(SETTINGS)] == [(name, "polytile") for name in SETTINGS]
    assert [r for r in rows if r[1] == "polytile-nvidia"] == [(n, "polytile-nvidia") for n in NVIDIA]
    assert [r for r in rows if r[1] == "polytile-amd"] == [(n, "polytile-amd") for n in AMD]
    assert config.get("nvidia_assembler") == "auto"


def test_no_core_setting_is_owned_by_a_backend():
    owners = {s.name: config.owner_of(s.name) for s in config.settings()}
    assert {name for name, owner in owners.items() if owner == "polytile"} == set(SETTINGS)
    assert not set(NVIDIA + AMD) & set(SETTINGS)


def run_python(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("POLYTILE_")}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          env={**environ, **env})


def test_a_backends_variable_is_known_before_its_modules_are_imported(tmp_path):
    # check_environment in a fresh process: nothing imported the backend, yet its
    # variable is not "unknown"; a typo still is.
    code = ("import sys; from polytile import config; "
            "print('polytile_nvidia' in sys.modules); print(*config.check_environment(), sep='\\n')")
    run = run_python(code, tmp_path, POLYTILE_PTXAS="/opt/ptxas", POLYTILE_NVIDIA_ASEMBLER="ptxas")
    assert run.returncode == 0, run.stderr
    imported, *warnings = run.stdout.splitlines()
    assert imported == "False"
    [warning] = warnings
    assert warning.startswith("environment variable POLYTILE_NVIDIA_ASEMBLER is not read by polytile; did you mean "
                              "'POLYTILE_NVIDIA_ASSEMBLER'")


def test_reading_a_core_setting_loads_no_plugin(tmp_path):
    code = ("import sys; from polytile import config; config.get('cache'); config.get('target'); "
            "print([m for m in ('pluggy', 'polytile.plugins.manager', 'polytile_nvidia') if m in sys.modules])")
    run = run_python(code, tmp_path)
    assert (run.returncode, run.stdout.strip()) == (0, "[]"), run.stderr


def test_disabling_the_backend_removes_its_settings_and_get_says_why(tmp_path):
    code = """
from polytile import config
assert config.get('nvidia_assembler') == 'auto'
config.set(disabled_plugins=['polytile-nvidia'])
print(sorted(s.name for s in config.settings() if config.owner_of(s.name) == 'polytile-nvidia'))
try:
    config.get('nvidia_assembler')
except config.UnknownSettingError as e:
    print(e)
config.reset('disabled_plugins')
print(config.get('nvidia_assembler'), config.owner_of('nvidia_assembler'))
"""
    run = run_python(code, tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "[]",
        "unknown setting 'nvidia_assembler'; it is a setting of plugin 'nvidia' (distribution 'polytile-nvidia' "
        "0.1.0), which is not loaded: disabled by the setting 'disabled_plugins' (entry 'polytile-nvidia')",
        "auto polytile-nvidia",
    ]


def test_polytile_config_leaves_out_a_disabled_backend_and_notes_its_project_key(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.polytile]\nnvidia_assembler = "ptxas"\n')
    environ = {k: v for k, v in os.environ.items() if not k.startswith("POLYTILE_")}
    run = subprocess.run([sys.executable, "-m", "polytile.cli", "config"], cwd=tmp_path, capture_output=True,
                         text=True, env={**environ, "POLYTILE_DISABLE_PLUGINS": "nvidia"})
    assert run.returncode == 0, run.stderr
    assert "# settings of polytile (the core)" in run.stdout and "# settings of polytile-amd" in run.stdout
    assert "polytile-nvidia" not in run.stdout.split("note:")[0]
    assert not re.search(r"^(cuda_home|nvidia_assembler|ptxas_path) =", run.stdout, re.M)
    assert (f"note: setting 'nvidia_assembler' in [tool.polytile] in {tmp_path / 'pyproject.toml'} is ignored: "
            "neither polytile nor an installed and enabled plugin declares it") in run.stdout
    assert "plugin 'nvidia' (distribution 'polytile-nvidia' 0.1.0): disabled by the setting" in run.stdout
    # Enabled, the same file gives the value, and says where from.
    run = subprocess.run([sys.executable, "-m", "polytile.cli", "config"], cwd=tmp_path, capture_output=True,
                         text=True, env=environ)
    assert run.returncode == 0, run.stderr
    assert f"nvidia_assembler = 'ptxas'   ([tool.polytile] in {tmp_path / 'pyproject.toml'})" in run.stdout
    assert "# settings of polytile-nvidia" in run.stdout and "note:" not in run.stdout


# -- the docs' example plugin: every source, every check ------------------------------------------


def test_the_docs_example_declares_a_setting_owned_by_its_distribution(myplugin):
    assert config.get("myplugin_unroll") == 4
    assert config.source_of("myplugin_unroll") == "default"
    assert config.owner_of("myplugin_unroll") == "polytile-myplugin"
    assert ("myplugin_unroll", "polytile-myplugin") in [(i.name, i.owner) for i in config.describe()]
    # Its cache-key hook reads it through the same registry.
    assert "polytile-myplugin:myplugin: unroll=4" in get_plugin_manager().cache_key_components(None, None)


def _myplugin_warnings() -> list[str]:
    """check_environment() about this plugin's variable only: ./dev exports the machine's
    POLYTILE_AMD_LLD, a setting of the AMD backend, which these tests' plugin manager lacks."""
    return [w for w in config.check_environment() if "POLYTILE_MYPLUGIN_" in w]


def test_a_plugin_setting_from_the_environment(myplugin, monkeypatch):
    monkeypatch.setenv("POLYTILE_MYPLUGIN_UNROLL", "8")
    assert config.get("myplugin_unroll") == 8
    assert config.source_of("myplugin_unroll") == "environment variable POLYTILE_MYPLUGIN_UNROLL"
    assert _myplugin_warnings() == []
    monkeypatch.setenv("POLYTILE_MYPLUGIN_UNROLL", "100")
    with pytest.raises(ConfigError) as info:
        config.get("myplugin_unroll")
    assert str(info.value) == ("setting 'myplugin_unroll' from environment variable POLYTILE_MYPLUGIN_UNROLL: 100 is "
                               "not allowed; use 1 to 64")
    assert str(info.value) in config.problems()


def test_a_plugin_setting_from_the_project_file(myplugin):
    path = myplugin / "polytile.toml"
    path.write_text("myplugin_unroll = 16\ncache = false\n")
    config.reload()
    assert (config.get("myplugin_unroll"), config.get("cache")) == (16, False)
    assert config.source_of("myplugin_unroll") == str(path)
    path.write_text('myplugin_unroll = "16"\n')
    config.reload()
    with pytest.raises(ConfigError, match=re.escape(f"setting 'myplugin_unroll' from {path}: '16' is not an integer")):
        config.get("cache")  # the file is checked as a whole
    path.write_text("myplugin_unrol = 16\n")
    config.reload()
    with pytest.raises(UnknownSettingError, match=re.escape(f"unknown setting 'myplugin_unrol' in {path}; did you "
                                                            "mean 'myplugin_unroll'?")):
        config.get("cache")


def test_a_plugin_setting_from_set_and_override(myplugin):
    config.set(myplugin_unroll=2)
    assert (config.get("myplugin_unroll"), config.source_of("myplugin_unroll")) == (2, "polytile.config.set()")
    with config.override(myplugin_unroll=32):
        assert config.get("myplugin_unroll") == 32
    assert config.get("myplugin_unroll") == 2
    with pytest.raises(ConfigError, match=re.escape("setting 'myplugin_unroll' from polytile.config.set(): 0 is not "
                                                    "allowed; use 1 to 64")):
        config.set(myplugin_unroll=0)
    with pytest.raises(ConfigError, match="True is not an integer"):
        config.override(myplugin_unroll=True)
    config.reset("myplugin_unroll")
    assert config.get("myplugin_unroll") == 4


def test_a_disabled_plugins_setting_is_named_and_its_project_key_noted(myplugin, monkeypatch, caplog):
    entry = plugin_from(docs_example(), "myplugin", monkeypatch)
    assert config.get("myplugin_unroll") == 4  # declared once in this process
    install(entry, disabled=["polytile-myplugin"])
    with pytest.raises(UnknownSettingError) as info:
        config.get("myplugin_unroll")
    assert str(info.value) == (
        "unknown setting 'myplugin_unroll'; it is a setting of plugin 'myplugin' (distribution 'polytile-myplugin' "
        "1.0), which is not loaded: disabled by the setting 'disabled_plugins' (entry 'polytile-myplugin')")
    assert "myplugin_unroll" not in [s.name for s in config.settings()]
    (myplugin / "polytile.toml").write_text("myplugin_unroll = 16\ncache = false\n")
    config.reload()
    with caplog.at_level("WARNING", logger="polytile.config"):
        assert config.get("cache") is False  # not a crash: the file's other settings apply
    note = (f"setting 'myplugin_unroll' in {myplugin / 'polytile.toml'} is ignored: it is a setting of plugin "
            "'myplugin' (distribution 'polytile-myplugin' 1.0), which is not loaded: disabled by the setting "
            "'disabled_plugins' (entry 'polytile-myplugin')")
    assert config.notes() == [note]
    assert note in caplog.messages
    monkeypatch.setenv("POLYTILE_MYPLUGIN_UNROLL", "8")
    [warning] = _myplugin_warnings()
    assert warning == ("environment variable POLYTILE_MYPLUGIN_UNROLL is not read by polytile; read by setting "
                       "'myplugin_unroll' of plugin 'myplugin' (distribution 'polytile-myplugin' 1.0), which is not "
                       "loaded: disabled by the setting 'disabled_plugins' (entry 'polytile-myplugin')")


def test_a_key_no_plugin_declares_is_noted_unless_it_looks_like_a_typo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    install()
    (tmp_path / "polytile.toml").write_text("tma_descriptors = true\n")
    config.reload()
    assert config.get("cache") is True
    [note] = config.notes()
    assert note.startswith(f"setting 'tma_descriptors' in {tmp_path / 'polytile.toml'} is ignored: neither polytile "
                           "nor an installed and enabled plugin declares it")
    (tmp_path / "polytile.toml").write_text("verify_eech = true\n")
    config.reload()
    with pytest.raises(UnknownSettingError, match="did you mean 'verify_each'"):
        config.get("cache")
    config.reload()


# -- what a plugin may declare ------------------------------------------------------------------


CLAIMS_CORE_NAME = """
from polytile.config import BOOL, Setting
from polytile.plugins import hookimpl

@hookimpl
def polytile_register_settings(registry):
    registry.register(Setting("cache", BOOL, False, ("POLYTILE_MY_CACHE",), doc="x" * 40))
"""

SHARES_A_VARIABLE = """
from polytile.config import BOOL, Setting
from polytile.plugins import hookimpl

@hookimpl
def polytile_register_settings(registry):
    registry.register(Setting("{name}_flag", BOOL, False, ("POLYTILE_SHARED_FLAG",), doc="x" * 40))
"""


def test_a_plugin_taking_a_core_setting_name_is_disabled(monkeypatch):
    manager = install(plugin_from(CLAIMS_CORE_NAME, "greedy", monkeypatch, "polytile-greedy"))
    assert [s.name for s in config.settings()] == list(SETTINGS)
    assert config.get("cache") is True and config.owner_of("cache") == "polytile"
    [record] = [r for r in manager.plugins() if r.name == "greedy"]
    assert record.status == FAILED
    assert record.reason.startswith("it registers setting 'cache', which polytile itself provides")


def test_two_plugins_reading_one_variable_is_a_conflict_naming_both(monkeypatch):
    install(plugin_from(SHARES_A_VARIABLE.format(name="one"), "one", monkeypatch, "polytile-one"),
            plugin_from(SHARES_A_VARIABLE.format(name="two"), "two", monkeypatch, "polytile-two"))
    with pytest.raises(PluginError) as info:
        config.get("one_flag")
    message = str(info.value)
    assert message.startswith("environment variable POLYTILE_SHARED_FLAG is read by setting '")
    assert "distribution 'polytile-one'" in message and "distribution 'polytile-two'" in message


def test_register_takes_a_setting_read_from_polytile_variables():
    from polytile.plugins.settings import SettingRegistry

    registry = SettingRegistry({})
    with registry.owned_by(PluginInfo("p", "polytile-p")):
        with pytest.raises(TypeError, match="takes a polytile.config.Setting"):
            registry.register({"name": "x"})
        with pytest.raises(ValueError, match="POLYTILE_"):
            registry.register(Setting("p_path", config.PATH, None, ("P_PATH",), optional=True, doc="x" * 40))
    assert len(registry) == 0
    assert [r.status for r in PluginManager(entry_points=[], disabled=()).plugins()] == [LOADED]


def test_polytile_config_shows_the_core_settings_when_the_plugins_cannot_load(tmp_path):
    # disabled_plugins is read before any plugin loads: a bad value hides the plugins'
    # settings, which the listing says, instead of failing before the first line.
    environ = {k: v for k, v in os.environ.items() if not k.startswith("POLYTILE_")}
    run = subprocess.run([sys.executable, "-m", "polytile.cli", "config"], cwd=tmp_path, capture_output=True,
                         text=True, env={**environ, "POLYTILE_DISABLE_PLUGINS": "polytile amd"})
    assert run.returncode == 1 and "Traceback" not in run.stderr
    problem = ("setting 'disabled_plugins' from environment variable POLYTILE_DISABLE_PLUGINS: 'polytile amd' is not "
               "a name; names have no spaces or commas")
    lines = run.stdout.splitlines()
    assert lines[0] == f"# the settings of backends and plugins cannot be listed: {problem}"
    assert f"disabled_plugins = <invalid: {problem}>   (environment variable POLYTILE_DISABLE_PLUGINS)" in run.stdout
    assert "time_passes = False   (default)" in run.stdout
    assert run.stderr == "polytile: error: 1 setting has an invalid value (above)\n"
