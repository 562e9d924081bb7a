"""The compile driver (polytile.compiler): hooks it calls around the pipeline."""

from __future__ import annotations

import pytest

from polytile.compiler import compile_module
from polytile.errors import PolytileError
from polytile.ir import parse_module
from polytile.plugins import hookimpl
from polytile.plugins.manager import PluginManager, reset_plugin_manager
from polytile.plugins.records import PluginInfo

KERNEL = "func.func @k() {\n  func.return\n}\n"


@pytest.fixture
def manager():
    fresh = PluginManager()
    previous = reset_plugin_manager(fresh)
    yield fresh
    reset_plugin_manager(previous)


class AddsMetadata:
    @hookimpl
    def polytile_compile_metadata(self, kernel_name, target, metadata):
        metadata["example.seen"] = f"{kernel_name} for {target}"


class ChangesMetadata:
    def __init__(self, key, value):
        self.key, self.value = key, value

    @hookimpl
    def polytile_compile_metadata(self, kernel_name, target, metadata):
        metadata[self.key] = self.value


def test_plugins_add_to_the_compiled_kernels_metadata(manager):
    manager.register(AddsMetadata(), PluginInfo("adds", "polytile-example-adds", "1.0"))
    result = compile_module(parse_module(KERNEL), "interp", label="k")
    assert result.metadata["example.seen"] == "k for interp"


def test_a_plugin_may_not_change_what_the_backend_recorded(manager):
    # The NVIDIA backend records num_warps (the interpreter records nothing).
    pytest.importorskip("polytile_nvidia")
    from tests.toolchains import ptxas_or_skip

    ptxas_or_skip()
    manager.register(ChangesMetadata("num_warps", 8), PluginInfo("changes", "polytile-example-changes", "1.0"))
    with pytest.raises(PolytileError, match="changed or removed the metadata entry 'num_warps'"):
        compile_module(parse_module(KERNEL), "nvidia:sm_90a", label="k", num_warps=4)


def test_a_plugins_metadata_must_be_json(manager):
    manager.register(ChangesMetadata("example.bad", object()), PluginInfo("bad", "polytile-example-bad", "1.0"))
    with pytest.raises(PolytileError, match="added 'example.bad' = <object.*not a JSON value"):
        compile_module(parse_module(KERNEL), "interp", label="k")
