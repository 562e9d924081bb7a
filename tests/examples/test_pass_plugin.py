"""The example third-party pass plugin, end to end: pip-installed by the test into a
scratch folder, discovered through its entry point, inserted at an anchor, visible in the
IR dump, and part of the compile cache key."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from polytile import config
from polytile.compiler import compile_module
from polytile.errors import UnknownNameError
from polytile.demo import VECTOR_ADD
from polytile.ir import parse_module, print_ir
from polytile.passes.registry import pass_registry, reset_pass_registry
from polytile.plugins.manager import get_plugin_manager, reset_plugin_manager

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_SOURCE = ROOT / "examples" / "pass_plugin"


@pytest.fixture(scope="module")
def installed_plugin(tmp_path_factory):
    target = tmp_path_factory.mktemp("site")
    # Build from a copy: setuptools leaves build/ and egg-info folders beside the source.
    source = tmp_path_factory.mktemp("source") / "pass_plugin"
    shutil.copytree(PLUGIN_SOURCE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(source)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, f"pip could not install the example plugin:\n{result.stdout}\n{result.stderr}"
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    yield target
    sys.path.remove(str(target))
    for name in [m for m in sys.modules if m.startswith("polytile_example_pass")]:
        del sys.modules[name]
    importlib.invalidate_caches()


@pytest.fixture
def fresh_plugins(installed_plugin):
    reset_plugin_manager()
    reset_pass_registry()
    yield installed_plugin
    reset_plugin_manager()
    reset_pass_registry()


def test_discovered_through_its_entry_point(fresh_plugins):
    records = {r.distribution: r for r in get_plugin_manager().plugins()}
    record = records["polytile-example-pass"]
    assert (record.name, record.version, record.group, record.status) == (
        "mul-to-shift", "1.2.0", "polytile.plugins", "loaded")
    registry = pass_registry()
    assert "mul-to-shift" in registry
    assert registry.owner_of("mul-to-shift").distribution == "polytile-example-pass"


def test_inserted_at_its_anchor_and_visible_in_the_dump(fresh_plugins, tmp_path):
    module = parse_module(VECTOR_ADD)
    with config.override(target="interp", dump_ir=True, dump_ir_dir=str(tmp_path)):
        result = compile_module(module, label="add_kernel")
    names = [p.name for p in result.pipeline.stage("tile").passes]
    # Right after the anchor (other plugins installed beside it may add passes too).
    assert names.index("mul-to-shift") == names.index("cse") + 1
    text = print_ir(result.module)
    assert "arith.muli" not in text
    assert "%start = arith.shli %pid" in text
    dumps = sorted((tmp_path / "add_kernel").iterdir())
    after = [p for p in dumps if p.name.endswith("-tile-mul-to-shift-after.ir")]
    assert len(after) == 1, [p.name for p in dumps]
    before_dump = dumps[dumps.index(after[0]) - 1].read_text()
    assert "arith.muli %pid" in before_dump and "arith.shli %pid" in after[0].read_text()
    assert result.context.statistics["mul-to-shift.rewritten"] == 1


#: Every backend's pipeline: the interpreter's, NVIDIA's (two architectures) and AMD's.
#: The GPU ones compile to a cubin and an HSACO here, without a GPU.
EVERY_BACKEND = ["interp", "nvidia:sm_80", "nvidia:sm_90a", "amd:gfx942"]


@pytest.mark.parametrize("target", EVERY_BACKEND)
def test_works_in_every_backends_pipeline(fresh_plugins, target, caplog):
    import logging

    if target.startswith("nvidia"):
        from tests.toolchains import ptxas_or_skip

        ptxas_or_skip()
    module = parse_module(VECTOR_ADD)
    with caplog.at_level(logging.WARNING, logger="polytile.plugins"), config.override(strict_plugins=True):
        result = compile_module(module, target, label="add_kernel")
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    tile = [p.name for p in result.pipeline.stage("tile").passes]
    assert tile.index("mul-to-shift") == tile.index("cse") + 1
    assert sum(p.name == "mul-to-shift" for _, p in result.pipeline.passes()) == 1
    assert result.context.statistics["mul-to-shift.rewritten"] == 1
    if target == "interp":
        assert "%start = arith.shli %pid" in print_ir(result.module)
    else:
        assert "cse" in [p.name for p in result.pipeline.stage("distribute").passes]  # why a bare "cse" was ambiguous
        binary = "cubin" if target.startswith("nvidia") else "hsaco"
        assert result.binaries[binary][:4] == b"\x7fELF"


def test_enters_the_cache_key(fresh_plugins):
    with config.override(target="interp"):
        result = compile_module(parse_module(VECTOR_ADD))
    assert "polytile-example-pass:mul-to-shift==1.2.0" in result.cache_key
    assert "polytile-example-pass:mul-to-shift: max-shift=30" in result.cache_key


def test_the_documented_ir_test_holds(installed_plugin):
    from polytile.ir_testing import apply_passes
    from polytile_example_pass.mul_to_shift import MulToShift

    assert apply_passes("""
        func.func @f(%x: i32) -> i32 {
          %c = arith.constant {value = 8} : i32
          %y = arith.muli %x, %c : i32
          func.return %y
        }
    """, MulToShift()) == """\
func.func @f(%x: i32) -> i32 {
  %c = arith.constant {value = 8} : i32
  %0 = arith.constant {value = 3} : i32
  %y = arith.shli %x, %0 : i32
  func.return %y
}
"""


def test_disabled_by_configuration(fresh_plugins):
    with config.override(disabled_plugins=["polytile-example-pass"], target="interp"):
        reset_plugin_manager()
        reset_pass_registry()
        records = {r.distribution: r for r in get_plugin_manager().plugins()}
        assert records["polytile-example-pass"].status == "disabled"
        assert "mul-to-shift" not in pass_registry()
        with pytest.raises(UnknownNameError) as info:
            pass_registry().create("mul-to-shift")
        assert "plugin 'mul-to-shift' (distribution 'polytile-example-pass' 1.2.0) is disabled" in str(info.value)
        result = compile_module(parse_module(VECTOR_ADD))
        assert "mul-to-shift" not in str(result.pipeline)
        assert "arith.muli %pid" in print_ir(result.module)


def test_usable_from_polytile_opt(fresh_plugins, tmp_path):
    source = tmp_path / "in.ir"
    source.write_text(parse_and_keep_mul())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fresh_plugins), str(ROOT / "core"),
                                                        os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-m", "polytile.cli", "opt", str(source), "-p", "mul-to-shift{max-shift=4}"],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    assert "%y = arith.shli %x, %0 : i32" in run.stdout
    assert "%z = arith.muli %x, %big : i32" in run.stdout  # 2**5 is over max-shift=4


def parse_and_keep_mul() -> str:
    return """\
func.func @f(%x: i32) -> i32 {
  %c = arith.constant {value = 8} : i32
  %big = arith.constant {value = 32} : i32
  %y = arith.muli %x, %c : i32
  %z = arith.muli %x, %big : i32
  %s = arith.addi %y, %z : i32
  func.return %s
}
"""
