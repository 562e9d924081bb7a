"""The backend-contract suite (polytile.backend_tests) run as a third-party backend runs it:
a backend installed outside this repository (a package and its ``.dist-info`` with a
``polytile.backends`` entry point) and the two test files docs/plugins.md shows, run by
pytest in a process of their own.  The suite passes for a backend that keeps the
contract, and fails, naming the test, for one that does not.

The in-tree backends run the suite in tests/backends/test_contract.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"

BACKEND = '''
import os

from polytile.backend import Backend

if os.environ.get("MYGPU_EAGER"):  # a broken build: the vendor SDK imported with the backend
    import mygpu_sdk  # noqa: F401


class MyGpuBackend(Backend):
    name = "mygpu"
    description = "a third party's GPU, compiled to IR only"
    architectures = ("g1", "g2")
'''

PLUGIN = '''
from polytile.plugins import hookimpl

from . import MyGpuBackend


@hookimpl
def polytile_register_backends(registry):
    registry.register(MyGpuBackend())
'''


def documented_files() -> dict[str, str]:
    """The files of docs/plugins.md's "Testing a backend against the contract", by the
    path each names in its first line."""
    section = DOCS.read_text().split("### Testing a backend against the contract", 1)[1].split("\n## ", 1)[0]
    files = {}
    for block in re.findall(r"```python\n(.*?)```", section, re.DOTALL):
        first = block.splitlines()[0]
        assert first.startswith("# tests/"), first
        files[first[2:].split(":")[0]] = block
    return files


@pytest.fixture
def third_party(tmp_path):
    """(the site directory where polytile-mygpu is installed, its project with the
    documented tests)."""
    site = tmp_path / "site"
    (site / "polytile_mygpu").mkdir(parents=True)
    (site / "polytile_mygpu" / "__init__.py").write_text(BACKEND)
    (site / "polytile_mygpu" / "plugin.py").write_text(PLUGIN)
    (site / "mygpu_sdk.py").write_text("")
    info = site / "polytile_mygpu-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: polytile-mygpu\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[polytile.backends]\nmygpu = polytile_mygpu.plugin\n")
    project = tmp_path / "project"
    for path, text in documented_files().items():
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_text(text)
    return site, project


def run_suite(site: Path, project: Path, **environment: str) -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if not name.startswith("POLYTILE_")}
    env.update(environment, PYTHONPATH=os.pathsep.join([str(site), env.get("PYTHONPATH", "")]),
               POLYTILE_CACHE_DIR=str(project / "cache"))
    return subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "tests/test_contract.py"],
                          cwd=project, capture_output=True, text=True, env=env, timeout=300)


def test_the_documented_files_are_a_conftest_and_a_test():
    assert set(documented_files()) == {"tests/conftest.py", "tests/test_contract.py"}


def test_a_third_party_backend_runs_the_suite_against_itself(third_party):
    result = run_suite(*third_party)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    outcomes = dict(re.findall(r"::TestMyGpuContract::(\w+) (PASSED|SKIPPED|FAILED)", result.stdout))
    assert len(outcomes) >= 20 and "FAILED" not in outcomes.values(), result.stdout
    # The vector add compiled for both of its architectures; only what needs a device
    # (it has none, host or GPU) or vendor bindings (it names none) was skipped.
    assert outcomes["test_a_kernel_compiles_for_every_architecture"] == "PASSED"
    assert {name for name, outcome in outcomes.items() if outcome == "SKIPPED"} == {
        "test_a_kernel_runs_on_the_host_device", "test_a_kernel_runs_on_an_active_device",
        "test_host_memory_is_refused_naming_the_kernel_and_argument", "test_missing_vendor_bindings_are_said_so",
        "test_a_backend_that_launches_on_a_device_says_how_to_wait_for_it"}, \
        outcomes


def test_the_suite_fails_a_backend_that_breaks_the_contract(third_party):
    result = run_suite(*third_party, MYGPU_EAGER="1")
    assert result.returncode == 1, result.stdout[-3000:]
    failed = re.findall(r"^FAILED \S+::(\w+)", result.stdout, re.MULTILINE)
    assert failed == ["test_importing_it_loads_no_vendor_module"], result.stdout[-3000:]
    # The rewritten assert says what it compared.
    assert "mygpu_sdk" in result.stdout
