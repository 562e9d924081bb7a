"""polytile.config: precedence, sources, validation, project files and the target chain."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from polytile import config
from polytile.config import INT, SETTINGS, Config, Setting, TargetChoice, UnknownSettingError
from polytile.errors import ConfigError, TargetError, UnknownNameError
from polytile.target import Target

ALL_ENV_VARS = sorted({v for s in config.settings() for v in (*s.env, *s.fallback_env)} | {"XDG_CACHE_HOME"})
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def clean_config(tmp_path, monkeypatch):
    """Each test starts with no set() values, no polytile variables and no project file."""
    for variable in ALL_ENV_VARS:
        monkeypatch.delenv(variable, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    config.reset()
    config.reload()
    yield work
    config.reset()
    config.reload()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    # Project files are looked up once per directory, and something may have looked here
    # already: config.reload() runs the setting watchers, and once an earlier test has
    # loaded the plugin manager, its watcher reads disabled_plugins (so the project file).
    config.reload()
    return path


class Devices:
    """A fake active_devices callable that records whether it was asked."""

    def __init__(self, devices=()):
        self.devices = list(devices)
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return self.devices


H200 = (Target("nvidia", "sm_90a"), "NVIDIA H200")
MI300 = (Target("amd", "gfx942"), "AMD Instinct MI300X")


# -- precedence -----------------------------------------------------------------------


def test_precedence_set_over_env_over_project_over_default(clean_config, monkeypatch):
    assert config.get("time_passes") is False
    assert config.source_of("time_passes") == "default"

    pyproject = write(clean_config / "pyproject.toml", "[tool.polytile]\ntime_passes = true\n")
    config.reload()
    assert config.get("time_passes") is True
    assert config.source_of("time_passes") == f"[tool.polytile] in {pyproject}"

    monkeypatch.setenv("POLYTILE_TIME_PASSES", "off")
    assert config.get("time_passes") is False
    assert config.source_of("time_passes") == "environment variable POLYTILE_TIME_PASSES"

    config.set(time_passes=True)
    assert config.get("time_passes") is True
    assert config.source_of("time_passes") == "polytile.config.set()"

    config.reset("time_passes")
    assert config.get("time_passes") is False
    monkeypatch.delenv("POLYTILE_TIME_PASSES")
    assert config.get("time_passes") is True
    assert config.source_of("time_passes") == f"[tool.polytile] in {pyproject}"


def test_settings_not_in_the_project_file_keep_their_default(clean_config):
    write(clean_config / "polytile.toml", "dump_ir = true\n")
    assert config.get("dump_ir") is True
    assert config.get("cache") is True
    assert config.source_of("cache") == "default"


def test_environment_changes_are_seen_without_reload(monkeypatch):
    monkeypatch.setenv("POLYTILE_NVIDIA_ASSEMBLER", "ptxas")
    assert config.get("nvidia_assembler") == "ptxas"
    monkeypatch.setenv("POLYTILE_NVIDIA_ASSEMBLER", "nvjitlink")
    assert config.get("nvidia_assembler") == "nvjitlink"
    monkeypatch.delenv("POLYTILE_NVIDIA_ASSEMBLER")
    assert config.get("nvidia_assembler") == "auto"
    assert config.source_of("nvidia_assembler") == "default"


def test_empty_environment_variable_counts_as_unset(clean_config, monkeypatch):
    write(clean_config / "polytile.toml", "dump_ir = true\n")
    monkeypatch.setenv("POLYTILE_DUMP_IR", "")
    assert config.get("dump_ir") is True
    monkeypatch.setenv("POLYTILE_DUMP_IR", "  ")
    assert config.source_of("dump_ir").endswith("polytile.toml")


@pytest.mark.parametrize(
    "raw, expected",
    [("1", True), ("true", True), ("YES", True), ("On", True), (" true ", True),
     ("0", False), ("False", False), ("no", False), ("OFF", False)],
)
def test_boolean_spellings_from_environment(monkeypatch, raw, expected):
    monkeypatch.setenv("POLYTILE_VERIFY_EACH", raw)
    assert config.get("verify_each") is expected


def test_lists_from_environment_are_comma_separated(monkeypatch):
    monkeypatch.setenv("POLYTILE_DISABLE_PLUGINS", " tma, polytile-warpspec ,,lds ")
    assert config.get("disabled_plugins") == ["tma", "polytile-warpspec", "lds"]


def test_returned_lists_cannot_change_the_stored_value():
    config.set(print_ir_after=["cse", "dce"])
    config.get("print_ir_after").append("licm")
    assert config.get("print_ir_after") == ["cse", "dce"]


def test_set_accepts_a_comma_separated_string_for_a_list():
    config.set(print_ir_before="all")
    assert config.get("print_ir_before") == ["all"]
    config.set(disabled_plugins="tma,lds")
    assert config.get("disabled_plugins") == ["tma", "lds"]


def test_fallback_environment_variables_in_order(monkeypatch):
    monkeypatch.setenv("CUDA_PATH", "/opt/cuda-path")
    assert config.get("cuda_home") == Path("/opt/cuda-path")
    assert config.source_of("cuda_home") == "environment variable CUDA_PATH"
    monkeypatch.setenv("CUDA_HOME", "/opt/cuda-home")
    assert config.get("cuda_home") == Path("/opt/cuda-home")
    assert config.source_of("cuda_home") == "environment variable CUDA_HOME"
    monkeypatch.setenv("POLYTILE_CUDA_HOME", "/opt/polytile-cuda")
    assert config.get("cuda_home") == Path("/opt/polytile-cuda")
    assert config.source_of("cuda_home") == "environment variable POLYTILE_CUDA_HOME"

    monkeypatch.setenv("ROCM_PATH", "/opt/rocm-6")
    assert config.get("rocm_path") == Path("/opt/rocm-6")
    monkeypatch.setenv("POLYTILE_ROCM_PATH", "/opt/rocm-7")
    assert config.get("rocm_path") == Path("/opt/rocm-7")


def test_standard_toolkit_variables_rank_below_the_project_file(clean_config, monkeypatch):
    # CUDA_HOME and ROCM_PATH are set machine-wide; a project that names its toolkit wins.
    monkeypatch.setenv("CUDA_HOME", "/usr/local/cuda-12.4")
    monkeypatch.setenv("CUDA_PATH", "/opt/cuda-path")
    monkeypatch.setenv("ROCM_PATH", "/opt/rocm-6.0")
    pyproject = write(clean_config / "pyproject.toml",
                      '[tool.polytile]\ncuda_home = "/opt/cuda-13.0"\nrocm_path = "/opt/rocm-6.4"\n')
    assert config.get("cuda_home") == Path("/opt/cuda-13.0")
    assert config.source_of("cuda_home") == f"[tool.polytile] in {pyproject}"
    assert config.get("rocm_path") == Path("/opt/rocm-6.4")
    assert config.source_of("rocm_path") == f"[tool.polytile] in {pyproject}"
    # The polytile variable still wins over the project file, and set() over everything.
    monkeypatch.setenv("POLYTILE_CUDA_HOME", "/scratch/cuda")
    assert config.get("cuda_home") == Path("/scratch/cuda")
    assert config.source_of("cuda_home") == "environment variable POLYTILE_CUDA_HOME"
    config.set(cuda_home="/mine/cuda")
    assert config.get("cuda_home") == Path("/mine/cuda")
    # Without the project file, the standard variables are read, CUDA_HOME first.
    pyproject.unlink()
    config.reset()
    config.reload()
    monkeypatch.delenv("POLYTILE_CUDA_HOME")
    assert config.get("cuda_home") == Path("/usr/local/cuda-12.4")
    assert config.source_of("cuda_home") == "environment variable CUDA_HOME"
    assert config.get("rocm_path") == Path("/opt/rocm-6.0")
    assert config.source_of("rocm_path") == "environment variable ROCM_PATH"


def test_paths_expand_home(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("POLYTILE_PTXAS", "~/bin/ptxas")
    assert config.get("ptxas_path") == tmp_path / "bin" / "ptxas"


def test_relative_path_in_project_file_is_relative_to_the_file(clean_config):
    write(clean_config / "polytile.toml", 'dump_ir_dir = "dumps"\n')
    sub = clean_config / "src" / "pkg"
    sub.mkdir(parents=True)
    os.chdir(sub)
    assert config.get("dump_ir_dir") == clean_config / "dumps"


def test_cache_dir_default_follows_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert config.get("cache_dir") == tmp_path / "home" / ".cache" / "polytile"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert config.get("cache_dir") == tmp_path / "xdg" / "polytile"
    assert config.source_of("cache_dir") == "default"
    # The XDG spec says a relative XDG_CACHE_HOME must be ignored.
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert config.get("cache_dir") == tmp_path / "home" / ".cache" / "polytile"


def test_set_none_on_an_optional_setting_hides_the_environment(monkeypatch):
    monkeypatch.setenv("POLYTILE_DUMP_IR_DIR", "/tmp/dumps")
    config.set(dump_ir_dir=None)
    assert config.get("dump_ir_dir") is None
    assert config.source_of("dump_ir_dir") == "polytile.config.set()"


def test_set_none_on_the_target_says_why_in_the_reason(clean_config, monkeypatch):
    monkeypatch.setenv("POLYTILE_TARGET", "amd:gfx942")
    pyproject = write(clean_config / "pyproject.toml", '[tool.polytile]\ntarget = "nvidia:sm_80"\n')
    config.set(target=None)
    note = ("polytile.config.set(target=None) asked for the first active device or the interpreter, ignoring "
            f"environment variable POLYTILE_TARGET and [tool.polytile] in {pyproject}")
    choice = config.resolve_target(active_devices=Devices([]))
    assert choice.target == Target("interp")
    assert choice.reason == f"no installed backend has an active device; using the interpreter; {note}"
    choice = config.resolve_target(active_devices=Devices([H200]))
    assert choice.reason == f"first active device: NVIDIA H200 (backend 'nvidia'); {note}"
    # reset() goes back to the whole chain.
    config.reset("target")
    assert config.resolve_target(active_devices=Devices([H200])).target == Target("amd", "gfx942")


def test_target_reason_does_not_claim_a_device_search_that_did_not_happen():
    choice = config.resolve_target()
    assert choice == TargetChoice(Target("interp"), "devices were not looked for; using the interpreter")


def test_choice_is_case_insensitive(monkeypatch):
    monkeypatch.setenv("POLYTILE_NVIDIA_ASSEMBLER", "PTXAS")
    assert config.get("nvidia_assembler") == "ptxas"


# -- bad values -------------------------------------------------------------------------


def test_bad_boolean_from_environment(monkeypatch):
    monkeypatch.setenv("POLYTILE_TIME_PASSES", "maybe")
    with pytest.raises(ConfigError) as info:
        config.get("time_passes")
    assert str(info.value) == (
        "setting 'time_passes' from environment variable POLYTILE_TIME_PASSES: "
        "'maybe' is not a boolean; use 1/0, true/false, yes/no, on/off"
    )
    # Explaining a bad value must not fail on it.
    assert config.source_of("time_passes") == "environment variable POLYTILE_TIME_PASSES"


@pytest.mark.parametrize(
    "variable, raw, setting, allowed",
    [
        ("POLYTILE_TARGET", "nvidia:", "target", "'backend:arch'"),
        ("POLYTILE_TARGET", "NVIDIA sm90", "target", "'interp'"),
        ("POLYTILE_NVIDIA_ASSEMBLER", "nvcc", "nvidia_assembler", "'nvjitlink', 'ptxas'"),
        ("POLYTILE_CACHE", "2", "cache", "on/off"),
        ("POLYTILE_INTERP_BOUNDS_CHECK", "enabled", "interpreter_bounds_check", "yes/no"),
    ],
)
def test_bad_values_from_environment(monkeypatch, variable, raw, setting, allowed):
    monkeypatch.setenv(variable, raw)
    with pytest.raises(ConfigError) as info:
        config.get(setting)
    message = str(info.value)
    assert message.startswith(f"setting '{setting}' from environment variable {variable}: {raw!r}")
    assert allowed in message


def test_bad_environment_value_is_reported_again_after_being_fixed_and_broken(monkeypatch):
    monkeypatch.setenv("POLYTILE_DUMP_IR", "sure")
    with pytest.raises(ConfigError):
        config.get("dump_ir")
    monkeypatch.setenv("POLYTILE_DUMP_IR", "yes")
    assert config.get("dump_ir") is True
    monkeypatch.setenv("POLYTILE_DUMP_IR", "sure")
    with pytest.raises(ConfigError, match="'sure' is not a boolean"):
        config.get("dump_ir")


@pytest.mark.parametrize(
    "values, expected",
    [
        ({"time_passes": "maybe"}, "setting 'time_passes' from polytile.config.set(): 'maybe' is not a boolean; use True or False"),
        ({"cache": 1}, "setting 'cache' from polytile.config.set(): 1 is not a boolean; use True or False"),
        ({"disabled_plugins": ["tma", 3]}, "setting 'disabled_plugins' from polytile.config.set(): ['tma', 3] is not a list of strings: 3 is a int"),
        ({"disabled_plugins": ["tma lds"]}, "setting 'disabled_plugins' from polytile.config.set(): 'tma lds' is not a name"),
        ({"nvidia_assembler": "nvcc"}, "setting 'nvidia_assembler' from polytile.config.set(): 'nvcc' is not allowed; use one of 'auto', 'nvjitlink', 'ptxas'"),
        ({"target": "nvidia:sm 90"}, "setting 'target' from polytile.config.set(): 'nvidia:sm 90' is not a target"),
        ({"target": 90}, "setting 'target' from polytile.config.set(): 90 is not a target"),
        ({"ptxas_path": 3}, "setting 'ptxas_path' from polytile.config.set(): 3 is not a path"),
        ({"cache_dir": ""}, "setting 'cache_dir' from polytile.config.set(): an empty string is not a path"),
        ({"cache_dir": None}, "setting 'cache_dir' from polytile.config.set(): None is not allowed, the value must be a path; use reset('cache_dir')"),
    ],
)
def test_bad_values_from_set(values, expected):
    with pytest.raises(ConfigError) as info:
        config.set(**values)
    assert str(info.value).startswith(expected)
    name = next(iter(values))
    assert config.source_of(name) != "polytile.config.set()"


def test_set_checks_every_value_before_applying_any():
    with pytest.raises(ConfigError, match="verify_each"):
        config.set(dump_ir=True, verify_each="yes please")
    assert config.get("dump_ir") is False
    assert config.source_of("dump_ir") == "default"


@pytest.mark.parametrize(
    "line, expected",
    [
        ("time_passes = \"maybe\"", "setting 'time_passes' from {src}: 'maybe' is not a boolean; use true or false"),
        ("disabled_plugins = 3", "setting 'disabled_plugins' from {src}: 3 is not a list of strings; use an array of strings"),
        ("nvidia_assembler = \"nvcc\"", "setting 'nvidia_assembler' from {src}: 'nvcc' is not allowed"),
        ("target = \"nvidia:\"", "setting 'target' from {src}: 'nvidia:' is not a target"),
        ("cache_dir = false", "setting 'cache_dir' from {src}: False is not a path"),
    ],
)
@pytest.mark.parametrize("kind", ["pyproject", "polytile"])
def test_bad_values_from_project_file(clean_config, line, expected, kind):
    if kind == "pyproject":
        path = write(clean_config / "pyproject.toml", f"[project]\nname = 'x'\n\n[tool.polytile]\n{line}\n")
        source = f"[tool.polytile] in {path}"
    else:
        path = write(clean_config / "polytile.toml", line + "\n")
        source = str(path)
    with pytest.raises(ConfigError) as info:
        config.get("dump_ir")
    assert str(info.value).startswith(expected.format(src=source))


@pytest.mark.parametrize("name, data, line", [
    ("polytile.toml", b"\xff\xfe[tool.polytile]\n", 1),
    ("polytile.toml", b"dump_ir = true\n# caf\xe9\n", 2),
    ("pyproject.toml", b"[tool.polytile]\ndump_ir = true\n\x80\x81\n", 3),
])
def test_a_project_file_that_is_not_utf8_is_a_config_error_naming_it(clean_config, name, data, line):
    """A binary or Latin-1 project file raised UnicodeDecodeError from polytile info and every launch."""
    path = clean_config / name
    path.write_bytes(data)
    config.reload()
    with pytest.raises(ConfigError, match=rf"cannot read {re.escape(str(path))}: it is not UTF-8 text \(byte "
                                          rf"0x[0-9a-f]{{2}} at line {line}, offset \d+\); TOML files must be UTF-8"):
        config.get("dump_ir")


def test_project_file_with_broken_toml_names_the_file(clean_config):
    path = write(clean_config / "polytile.toml", "dump_ir = \n")
    with pytest.raises(ConfigError) as info:
        config.get("dump_ir")
    assert str(info.value).startswith(f"cannot read {path}: it is not valid TOML")


def test_tool_polytile_that_is_not_a_table(clean_config):
    path = write(clean_config / "pyproject.toml", 'tool.polytile = "on"\n')
    with pytest.raises(ConfigError, match=re.escape(f"[tool.polytile] in {path} must be a table")):
        config.get("dump_ir")


def test_a_fixed_project_file_is_read_again_without_reload(clean_config):
    path = write(clean_config / "polytile.toml", "dump_ir = 2\n")
    with pytest.raises(ConfigError):
        config.get("dump_ir")
    path.write_text("dump_ir = true\n")
    assert config.get("dump_ir") is True


# -- unknown names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: config.get("dump_irr"),
        lambda: config.set(dump_irr=True),
        lambda: config.reset("dump_irr"),
        lambda: config.override(dump_irr=True),
        lambda: config.source_of("dump_irr"),
    ],
)
def test_unknown_setting_names_list_close_matches(call):
    with pytest.raises(UnknownNameError) as info:
        call()
    assert isinstance(info.value, ConfigError)
    assert isinstance(info.value, KeyError)
    message = str(info.value)
    assert message.startswith("unknown setting 'dump_irr'")
    assert "did you mean 'dump_ir'" in message


def test_unknown_name_in_set_applies_nothing():
    with pytest.raises(UnknownSettingError):
        config.set(dump_ir=True, tme_passes=True)
    assert config.source_of("dump_ir") == "default"


@pytest.mark.parametrize("kind", ["pyproject", "polytile"])
def test_unknown_key_in_project_file(clean_config, kind):
    if kind == "pyproject":
        path = write(clean_config / "pyproject.toml", "[tool.polytile]\ntime_pases = true\n")
        where = f"[tool.polytile] in {path}"
    else:
        path = write(clean_config / "polytile.toml", "time_pases = true\n")
        where = str(path)
    with pytest.raises(ConfigError) as info:
        config.get("dump_ir")
    assert isinstance(info.value, UnknownNameError)
    assert str(info.value) == f"unknown setting 'time_pases' in {where}; did you mean 'time_passes'?"


# -- override ---------------------------------------------------------------------------------


def test_override_restores_the_previous_state(monkeypatch):
    monkeypatch.setenv("POLYTILE_DUMP_IR", "1")
    config.set(verify_each=True)
    with config.override(verify_each=False, dump_ir=False, print_ir_after=["cse"]):
        assert config.get("verify_each") is False
        assert config.get("dump_ir") is False
        assert config.get("print_ir_after") == ["cse"]
        assert config.source_of("dump_ir") == "polytile.config.set()"
    assert config.get("verify_each") is True
    assert config.source_of("verify_each") == "polytile.config.set()"
    assert config.get("dump_ir") is True
    assert config.source_of("dump_ir") == "environment variable POLYTILE_DUMP_IR"
    assert config.get("print_ir_after") == []


def test_override_restores_on_error_and_nests():
    with pytest.raises(RuntimeError):
        with config.override(time_passes=True):
            with config.override(time_passes=False):
                assert config.get("time_passes") is False
            assert config.get("time_passes") is True
            raise RuntimeError("boom")
    assert config.source_of("time_passes") == "default"


def test_override_checks_values_before_entering():
    with pytest.raises(ConfigError, match="'loud' is not a boolean"):
        config.override(dump_ir="loud")
    assert config.source_of("dump_ir") == "default"


def test_reset_without_names_drops_every_set_value():
    config.set(dump_ir=True, time_passes=True, target="amd:gfx942")
    config.reset("dump_ir")
    assert config.source_of("dump_ir") == "default"
    assert config.source_of("time_passes") == "polytile.config.set()"
    config.reset()
    assert config.source_of("time_passes") == "default"
    assert config.get("target") is None


# -- project file search ----------------------------------------------------------------------


def test_project_file_is_found_in_a_parent_directory(clean_config):
    path = write(clean_config / "pyproject.toml", "[tool.polytile]\ndisabled_plugins = ['tma']\n")
    deep = clean_config / "a" / "b" / "c"
    deep.mkdir(parents=True)
    os.chdir(deep)
    assert config.get("disabled_plugins") == ["tma"]
    assert config.project_file() == path


def test_nearest_project_file_wins(clean_config):
    write(clean_config / "polytile.toml", "dump_ir = true\ntime_passes = true\n")
    inner = write(clean_config / "sub" / "pyproject.toml", "[tool.polytile]\ndump_ir = false\n")
    os.chdir(clean_config / "sub")
    assert config.get("dump_ir") is False
    assert config.project_file() == inner
    # Files do not merge: the farther file's other keys do not apply.
    assert config.get("time_passes") is False


def test_pyproject_without_tool_polytile_is_passed_over(clean_config):
    outer = write(clean_config / "polytile.toml", "verify_each = true\n")
    write(clean_config / "sub" / "pyproject.toml", "[project]\nname = 'app'\ndependencies = ['polytile']\n")
    write(clean_config / "sub" / "deeper" / "pyproject.toml", "[tool.black]\nline-length = 100\n")
    os.chdir(clean_config / "sub" / "deeper")
    assert config.get("verify_each") is True
    assert config.project_file() == outer


@pytest.mark.parametrize("text", [
    "[tool.polytile]\ndump_ir = true\n",
    "[ tool . polytile ]\ndump_ir = true\n",
    "[\"tool\".'polytile']\ndump_ir = true\n",
    "[tool]\npolytile = { dump_ir = true }\n",
    "[tool]\npolytile.dump_ir = true\n",
    "tool.polytile.dump_ir = true\n",
    "tool = { polytile = { dump_ir = true } }\n",
    "[project]\nname = 'polytile-app'\n\n[tool.polytile]\ndump_ir = true\n",
])
def test_every_spelling_of_tool_polytile_is_read(clean_config, text):
    # pyproject.toml files that name polytile without the table are passed over unparsed:
    # the check that decides it must not pass over any spelling of the table.
    write(clean_config / "pyproject.toml", text)
    assert config.get("dump_ir") is True


def test_a_pyproject_naming_polytile_only_as_a_dependency_is_not_parsed(clean_config):
    # Not even read as TOML (it is not valid TOML here): a project that depends on
    # polytile pays nothing for the project-file search.
    write(clean_config / "pyproject.toml", "[project]\nname = 'app'\ndependencies = ['polytile'\n"
                                           "[project.scripts]\npolytile = 'polytile.cli:main'\n")
    assert config.get("dump_ir") is False
    assert config.project_file() is None


def test_polytile_toml_wins_over_pyproject_in_the_same_directory(clean_config):
    write(clean_config / "pyproject.toml", "[tool.polytile]\ndump_ir = false\nverify_each = true\n")
    path = write(clean_config / "polytile.toml", "dump_ir = true\n")
    assert config.get("dump_ir") is True
    assert config.source_of("dump_ir") == str(path)
    assert config.get("verify_each") is False


def test_polytile_toml_uses_top_level_keys(clean_config):
    write(clean_config / "polytile.toml", "[tool.polytile]\ndump_ir = true\n")
    with pytest.raises(UnknownSettingError, match="unknown setting 'tool'"):
        config.get("dump_ir")


def test_search_result_is_cached_per_directory_until_reload(clean_config):
    assert config.project_file() is None
    path = clean_config / "polytile.toml"
    path.write_text("dump_ir = true\n")  # not write(): it reloads
    assert config.get("dump_ir") is False  # the earlier search is cached for this directory
    other = clean_config / "other"
    other.mkdir()
    os.chdir(other)
    assert config.get("dump_ir") is True  # a new directory searches again
    os.chdir(clean_config)
    config.reload()
    assert config.get("dump_ir") is True
    assert config.project_file() == path


def test_no_project_file_means_defaults():
    assert config.project_file() is None
    for name in SETTINGS:
        assert config.source_of(name) == "default"


# -- target chain ---------------------------------------------------------------------------------


def test_target_chain_in_order(clean_config, monkeypatch):
    devices = Devices([H200, MI300])

    choice = config.resolve_target(active_devices=devices)
    assert choice == TargetChoice(Target("nvidia", "sm_90a"), "first active device: NVIDIA H200 (backend 'nvidia')")
    assert devices.calls == 1

    path = write(clean_config / "pyproject.toml", "[tool.polytile]\ntarget = 'amd:gfx90a'\n")
    config.reload()
    choice = config.resolve_target(active_devices=devices)
    assert choice == TargetChoice(Target("amd", "gfx90a"), f"[tool.polytile] in {path}")

    monkeypatch.setenv("POLYTILE_TARGET", "amd:gfx1100")
    choice = config.resolve_target(active_devices=devices)
    assert choice == TargetChoice(Target("amd", "gfx1100"), "environment variable POLYTILE_TARGET")

    config.set(target="nvidia:sm_80")
    choice = config.resolve_target(active_devices=devices)
    assert choice == TargetChoice(Target("nvidia", "sm_80"), "polytile.config.set()")

    choice = config.resolve_target("interp", active_devices=devices)
    assert choice == TargetChoice(Target("interp"), "target= argument")
    choice = config.resolve_target(Target("amd", "gfx942"), active_devices=devices)
    assert choice.target == Target("amd", "gfx942")

    assert devices.calls == 1  # only the first call got that far


def test_interpreter_when_no_device_is_active():
    devices = Devices([])
    choice = config.resolve_target(active_devices=devices)
    assert choice.target == Target("interp")
    assert choice.reason == "no installed backend has an active device; using the interpreter"
    assert devices.calls == 1
    assert config.resolve_target().target == Target("interp")
    assert str(choice) == "interp (no installed backend has an active device; using the interpreter)"


def test_active_devices_may_give_target_strings():
    choice = config.resolve_target(active_devices=lambda: [("amd:gfx942", "AMD Instinct MI300X")])
    assert choice.target == Target("amd", "gfx942")
    assert choice.reason == "first active device: AMD Instinct MI300X (backend 'amd')"


def test_target_set_to_none_falls_through_to_devices(monkeypatch):
    monkeypatch.setenv("POLYTILE_TARGET", "amd:gfx942")
    config.set(target=None)
    devices = Devices([H200])
    assert config.resolve_target(active_devices=devices).target == Target("nvidia", "sm_90a")


def test_malformed_target_argument_names_the_argument():
    with pytest.raises(TargetError, match=r"target= argument"):
        config.resolve_target("nvidia:", active_devices=Devices())


def test_malformed_target_from_environment_is_a_config_error(monkeypatch):
    monkeypatch.setenv("POLYTILE_TARGET", "cuda sm90")
    devices = Devices([H200])
    with pytest.raises(ConfigError, match="setting 'target' from environment variable POLYTILE_TARGET: 'cuda sm90'"):
        config.resolve_target(active_devices=devices)
    assert devices.calls == 0


def test_target_is_normalized():
    config.set(target=" nvidia:sm_90a ")
    assert config.get("target") == "nvidia:sm_90a"
    config.set(target=Target("amd", "gfx942"))
    assert config.get("target") == "amd:gfx942"


# -- the table, describe() and the docs ----------------------------------------------------------


def test_every_setting_is_declared_well():
    for name, setting in SETTINGS.items():
        assert setting.name == name
        assert re.fullmatch(r"[a-z][a-z0-9_]*", name), name
        assert setting.env and setting.env[0].startswith("POLYTILE_"), name
        assert len(setting.doc) > 30, name
        # Defaults skip validation at run time, so check them here.
        default = setting.default_value()
        if default is not None:
            assert setting.convert(default, "python") == default, name
        else:
            assert setting.optional, name


def test_describe_drives_docs_and_matches_the_table():
    rows = config.describe()
    assert [r.name for r in rows][:len(SETTINGS)] == list(SETTINGS)
    assert [r.name for r in rows] == [s.name for s in config.settings()]
    by_name = {r.name: r for r in rows}
    assert by_name["cache"] == ("cache", "bool", "true", "POLYTILE_CACHE", SETTINGS["cache"].doc, "polytile")
    assert by_name["disabled_plugins"].env == "POLYTILE_DISABLE_PLUGINS"
    assert by_name["interpreter_bounds_check"].env == "POLYTILE_INTERP_BOUNDS_CHECK"


def settings_reference() -> str:
    """The page's section "## Settings", made from the registry: every setting of the core
    and of each installed backend or plugin, grouped by owner.  ``python -m
    tests.test_config`` writes it into docs/configuration.md."""
    groups: dict[str, list] = {}
    for info in config.describe():
        groups.setdefault(info.owner, []).append(info)
    recompiling = {s.name for s in config.settings() if s.recompiles}
    lines = ["## Settings", "", SETTINGS_INTRO, ""]
    for owner, infos in groups.items():
        lines += [f"### Settings of `{owner}`" + (" (the core)" if owner == "polytile" else ""), "",
                  "| Setting | Type | Default | Environment variable |", "|---|---|---|---|"]
        for info in infos:
            default = info.default if info.default in ("unset", "empty") or info.default.startswith("$") \
                else f"`{info.default.strip(chr(39))}`"
            env = re.sub(r"(POLYTILE_\w+|CUDA_\w+|ROCM_\w+)", r"`\1`", info.env)
            lines.append(f"| `{info.name}` | {info.type} | {default} | {env} |")
        lines.append("")
        for info in infos:
            lines += [f"#### `{info.name}`", "", info.doc, "",
                      f"*{info.type}; default {info.default}; environment: {info.env}"
                      f"{'; recompiles' if info.name in recompiling else ''}.*", ""]
    return "\n".join(lines)


SETTINGS_INTRO = (
    "Each setting is declared by its owner: the core (`polytile`), or a backend or plugin through the hook\n"
    "`polytile_register_settings` (see [plugins.md](plugins.md#declaring-settings)). A backend's settings exist\n"
    "while it is installed and enabled: with the backend disabled (`disabled_plugins`), `polytile config`\n"
    "leaves them out and `polytile.config.get()` of one says which backend it belongs to and why that one is\n"
    "not loaded. `polytile config` lists every setting, grouped by owner, with its value and its source.\n"
    "The compiled code depends on the settings marked *recompiles* (toolchains, register budgets): changing the\n"
    "value of one through `polytile.config` drops the kernels compiled in the running process and the autotuners'\n"
    "choices, so the next launch compiles the code for the new value (or reads it from the on-disk cache, which\n"
    "keys these settings)."
)


def owner_blocks(text: str) -> dict[str, str]:
    section = text.split("\n## Settings\n", 1)[-1]
    blocks = re.split(r"\n(?=### Settings of `)", section)
    return {re.match(r"### Settings of `([^`]+)`", b).group(1): b.strip() for b in blocks[1:]}


def test_docs_page_lists_every_setting_as_declared_grouped_by_owner():
    page = (REPO / "docs" / "configuration.md").read_text()
    generated = settings_reference()
    assert generated.split("\n### ", 1)[0] in page
    documented, declared = owner_blocks(page), owner_blocks("\n" + generated)
    # Every installed owner's block word for word; no block of an owner that is neither
    # installed nor one of this repository's distributions (uninstalled in this checkout).
    for owner, block in declared.items():
        assert documented.get(owner) == block, f"docs/configuration.md is out of date for {owner}: " \
                                                "run python -m tests.test_config"
    ours = {re.search(r'name = "([^"]+)"', p.read_text()).group(1) for p in REPO.glob("*/*/pyproject.toml")}
    assert set(documented) <= set(declared) | ours, set(documented) - set(declared) - ours
    assert list(documented)[0] == "polytile"


def test_no_core_setting_belongs_to_a_vendor():
    # The core is neutral: a vendor's settings are declared by its backend.
    vendors = re.compile(r"cuda|ptx|nvidia|libdevice|rocm|amd|hip|lld", re.IGNORECASE)
    for name, setting in SETTINGS.items():
        assert not vendors.search(name) and not any(vendors.search(v) for v in (*setting.env, *setting.fallback_env))
        assert config.owner_of(name) == "polytile", name
    source = (REPO / "core" / "polytile" / "config.py").read_text()
    for name in ("cuda_home", "ptxas_path", "nvidia_assembler", "nvidia_launch", "libdevice_path", "rocm_path",
                 "amd_lld", "amd_device_libs"):
        assert f'"{name}"' not in source, name


def test_no_setting_claims_to_be_unread():
    # Settings declared ahead of their code said "(not built yet)"; every one is read now.
    for name, setting in SETTINGS.items():
        assert "(not built yet)" not in setting.doc, name


def test_problems_lists_every_bad_value_at_once(clean_config, monkeypatch):
    assert config.problems() == []
    monkeypatch.setenv("POLYTILE_TIME_PASSES", "maybe")
    monkeypatch.setenv("CUDA_HOME", "/opt/cuda")  # fine
    path = write(clean_config / "polytile.toml", 'cache = "x"\ntargt = "interp"\ndump_ir = true\n')
    assert config.problems() == [
        "setting 'time_passes' from environment variable POLYTILE_TIME_PASSES: 'maybe' is not a boolean; use 1/0, "
        "true/false, yes/no, on/off",
        f"setting 'cache' from {path}: 'x' is not a boolean; use true or false",
        f"unknown setting 'targt' in {path}; did you mean 'target'?",
    ]
    write(clean_config / "polytile.toml", "cache = \n")
    [problem] = [p for p in config.problems() if "polytile.toml" in p]
    assert problem.startswith(f"cannot read {clean_config / 'polytile.toml'}: it is not valid TOML")


def test_watchers_hear_of_every_programmatic_change():
    heard = []
    cfg = Config()
    cfg.watch("disabled_plugins", lambda: heard.append(cfg.get("disabled_plugins")))
    cfg.set(disabled_plugins=["a"])
    cfg.set(dump_ir=True)  # another setting: not announced
    with cfg.override(disabled_plugins=["b"]):
        pass
    cfg.reset("disabled_plugins")
    cfg.set(disabled_plugins=["c"])
    cfg.reset()
    cfg.reload()
    assert heard == [["a"], ["b"], ["a"], [], ["c"], [], []]
    with pytest.raises(UnknownSettingError, match="unknown setting 'disabled' passed to polytile.config.watch"):
        cfg.watch("disabled", lambda: None)


def test_recompile_watchers_hear_of_changes_to_settings_the_compiled_code_depends_on():
    table = {**SETTINGS, "budget": Setting("budget", INT, 40, ("POLYTILE_TEST_BUDGET",), doc="d", recompiles=True)}
    cfg = Config(table)
    heard = []
    cfg.watch_recompiling(lambda: heard.append(cfg.get("budget")))
    cfg.set(budget=48)
    cfg.set(dump_ir=True)  # the compiled code does not depend on it: not announced
    with cfg.override(budget=56, dump_ir=False):  # announced once for the two
        pass
    cfg.reset("dump_ir")
    cfg.reset("budget")
    cfg.set(budget=40)  # the value it has: not announced
    with cfg.override(budget=40):
        pass
    cfg.reset()
    cfg.reload()  # the environment may have changed anything
    assert heard == [48, 56, 48, 40, 40]


def test_the_backends_and_plugins_declare_their_toolchain_and_register_settings_recompiling():
    from polytile.plugins.manager import get_plugin_manager

    get_plugin_manager()
    declared = {s.name: s.recompiles for s in config.settings()}
    expected = {"cuda_home", "libdevice_path", "ptxas_path", "nvidia_assembler", "rocm_path", "amd_lld",
                "amd_device_libs", "warpspec_pingpong", "warpspec_producer_registers", "warpspec_consumer_registers"}
    assert expected <= set(declared), "./dev setup installs every backend and plugin"
    assert all(declared[name] for name in expected)
    assert not any(declared[name] for name in ("dump_ir", "cache_dir", "interpreter_mode", "target"))


def test_the_suite_runs_without_the_developers_environment():
    # tests/conftest.py removes POLYTILE_* variables and leaves no project file in reach.
    kept = {"POLYTILE_VERIFY_EACH", "POLYTILE_AMD_LLD"}
    assert [v for v in os.environ if v.startswith("POLYTILE_") and v not in kept] == []
    assert "CUDA_HOME" not in os.environ and "ROCM_PATH" not in os.environ
    assert config.project_file() is None
    assert config.get("disabled_plugins") == [] and config.get("target") is None


def test_conftest_shields_the_suite_from_the_shell(tmp_path):
    # The check above, run by pytest in the environment a developer might have.
    write(tmp_path / "pyproject.toml", '[tool.polytile]\ntarget = "amd:gfx942"\ndisabled_plugins = ["x"]\n')
    env = {**os.environ, "POLYTILE_TARGET": "nvidia:sm_90", "POLYTILE_DISABLE_PLUGINS": "polytile-amd",
           "POLYTILE_INTERP_BOUNDS_CHECK": "0", "CUDA_HOME": "/opt/cuda"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(REPO),
         f"{Path(__file__).resolve()}::test_the_suite_runs_without_the_developers_environment"],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_check_environment_flags_unknown_polytile_variables():
    warnings = config.check_environment({"POLYTILE_DUMPIR": "1", "POLYTILE_DUMP_IR": "1", "CUDA_HOME": "/x"})
    assert len(warnings) == 1
    assert warnings[0].startswith("environment variable POLYTILE_DUMPIR is not read by polytile; did you mean 'POLYTILE_DUMP_IR'")


def test_other_kinds_in_a_custom_table(monkeypatch):
    from polytile.config import INT, STR

    table = {
        "jobs": Setting("jobs", INT, 4, ("POLYTILE_TEST_JOBS",), doc="number of jobs"),
        "label": Setting("label", STR, "x", ("POLYTILE_TEST_LABEL",), doc="a label"),
    }
    cfg = Config(table)
    assert cfg.get("jobs") == 4
    monkeypatch.setenv("POLYTILE_TEST_JOBS", "12")
    assert cfg.get("jobs") == 12
    monkeypatch.setenv("POLYTILE_TEST_JOBS", "many")
    with pytest.raises(ConfigError, match="'many' is not an integer"):
        cfg.get("jobs")
    with pytest.raises(ConfigError, match="True is not an integer"):
        cfg.set(jobs=True)
    cfg.set(label="run 1")
    assert cfg.get("label") == "run 1"
    # A separate instance does not see the global one's values, nor its table.
    assert config.get("dump_ir") is False
    with pytest.raises(UnknownSettingError):
        cfg.get("dump_ir")


def test_import_does_not_read_toml():
    # tomllib is imported only when a project file is read, to keep `import polytile` fast.
    code = (
        "import sys; before = set(sys.modules); import polytile.config; "
        "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in ('tomllib', 'tomli')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "core")},
    ).stdout
    assert out.strip() == "[]"


if __name__ == "__main__":  # python -m tests.test_config: rewrite the page's settings section
    page = REPO / "docs" / "configuration.md"
    text = page.read_text()
    page.write_text(text.split("\n## Settings\n", 1)[0] + "\n" + settings_reference())
