"""Every test runs in the same clean environment, whatever the developer's shell holds.

Without this, ``POLYTILE_TARGET=nvidia:sm_90`` or ``POLYTILE_DISABLE_PLUGINS=polytile-amd``
in the shell, or a ``pyproject.toml`` with ``[tool.polytile]`` above the working
directory, change what the tests see.  The autouse fixture below

* removes every ``POLYTILE_*`` variable but those in :data:`KEPT_VARIABLES`,
* runs the test in an empty directory, so that no project file of the developer's is
  found (tests reach repository files through absolute paths, e.g. ``Path(__file__)``),
* afterwards puts back the configuration, the plugin manager and the pass registry if the
  test changed them, so that one test cannot leak into the next.

Subprocesses started by a test inherit the cleaned environment and directory.
"""

from __future__ import annotations

import os

import pytest

from polytile import config
from polytile.passes import registry as pass_registry_module
from polytile.plugins import manager as manager_module
from tests.toolchains import REQUIRE_LLD_VARIABLE, missing_linker

#: Variables the test runner sets on purpose: ``./dev test`` turns the verifier on after
#: every pass, and exports the ld.lld it found for the AMD linker.
KEPT_VARIABLES = frozenset({"POLYTILE_VERIFY_EACH", "POLYTILE_AMD_LLD"})

#: Standard variables that settings fall back on (cuda_home, rocm_path).  Removed too: a
#: test of the configuration must not find the machine's CUDA installation.
FALLBACK_VARIABLES = frozenset(v for s in config.settings() for v in s.fallback_env)


@pytest.fixture(scope="session")
def _empty_directory(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(scope="session")
def _cache_directory(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("kernel-cache"))


@pytest.fixture(autouse=True)
def _clean_polytile_environment(_empty_directory: str, _cache_directory: str):
    # Not the monkeypatch fixture: this must be undone after the test's own monkeypatch,
    # so that the state restored below is the clean one.
    patch = pytest.MonkeyPatch()
    for variable in list(os.environ):
        if (variable.startswith("POLYTILE_") and variable not in KEPT_VARIABLES) or variable in FALLBACK_VARIABLES:
            patch.delenv(variable)
    patch.chdir(_empty_directory)
    # Compiled kernels go to a scratch cache, never to the developer's ~/.cache/polytile.
    patch.setenv("POLYTILE_CACHE_DIR", _cache_directory)
    settings = dict(config._config._set)
    manager = manager_module._manager
    passes = pass_registry_module._REGISTRY
    try:
        yield
    finally:
        if config._config._set != settings:
            config.reset()
            config.set(**settings)
        config.reload()
        if manager_module._manager is not manager or pass_registry_module._REGISTRY is not passes:
            # A test replaced them (or disabled a plugin): start the next one afresh.
            manager_module.reset_plugin_manager()
            pass_registry_module.reset_pass_registry()
        patch.undo()


def _skip_without_linker():
    # A GPU machine without network access may have no ld.lld (./dev setup installs one
    # where it can): the AMD tests that link code objects then skip, saying why, rather
    # than fail by the hundred.  CI requires the linker (.ci/run sets PT_REQUIRE_LLD).
    try:
        return (yield)
    except Exception as error:
        missing = missing_linker(error)
        if missing is None or os.environ.get(REQUIRE_LLD_VARIABLE):
            raise
        pytest.skip(f"{missing}: AMD code objects cannot be linked here (install lld, or set POLYTILE_AMD_LLD)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _skip_without_linker())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _skip_without_linker())


@pytest.fixture
def amd_linker():
    """The ld.lld the AMD backend links with; without one the test skips (fails under
    PT_REQUIRE_LLD, as in CI)."""
    from polytile_amd.errors import ToolNotFoundError
    from polytile_amd.toolchain import find_lld

    try:
        return find_lld()
    except ToolNotFoundError as error:
        if os.environ.get(REQUIRE_LLD_VARIABLE):
            raise
        pytest.skip(f"{missing_linker(error)}: AMD code objects cannot be linked here")


@pytest.fixture(autouse=True)
def _interpreter_by_default(request, monkeypatch):
    """Tests that launch without naming a target run on the interpreter, also on a
    machine with a GPU (where the default would be the GPU).  Tests marked ``gpu`` name
    their target; those marked ``default_target`` test how the default is chosen."""
    if request.node.get_closest_marker("gpu") is None and request.node.get_closest_marker("default_target") is None:
        monkeypatch.setenv("POLYTILE_TARGET", "interp")
