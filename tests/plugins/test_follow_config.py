"""The process-wide plugin manager follows the setting ``disabled_plugins`` as it changes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from polytile import config
from polytile.backend import Backend
from polytile.errors import ConfigError, PluginError, UnknownNameError
from polytile.ir.opdef import define_op
from polytile.ir.operation import Operation
from polytile.ir.registry import IR_REGISTRY
from polytile.passes import Pass
from polytile.passes.registry import pass_registry, reset_pass_registry
from polytile.plugins import manager as manager_module
from polytile.plugins.manager import DISABLED, LOADED, PluginManager, get_plugin_manager, reset_plugin_manager

from .fakes import FakeEntryPoint, make_plugin


@dataclass
class SizeLDS(Pass):
    name: ClassVar[str] = "lds-size"

    def run(self, module, context):
        return None


class LdsBackend(Backend):
    name = "lds"
    description = "a backend the lds plugin brings along"
    architectures = ("x1",)
    default_architecture = "x1"


def lds_module():
    """What importing polytile_lds.plugin does: define an op, hand back the hooks."""
    op = define_op(type("ScratchOp", (Operation,), {"name": "lds.scratch", "__module__": "polytile_lds.ops"}))

    def polytile_register_passes(registry):
        registry.register(SizeLDS)

    def polytile_register_backends(registry):
        registry.register(LdsBackend())

    module = make_plugin("polytile_lds.plugin", polytile_register_passes=polytile_register_passes,
                         polytile_register_backends=polytile_register_backends)
    module.op = op
    return module


@pytest.fixture
def lds(monkeypatch):
    """polytile-lds installed, and a fresh process-wide manager and pass registry."""
    imported = []

    def load():  # like an import: the module's code runs once, later loads reuse it
        if not imported:
            imported.append(lds_module())
        return imported[0]

    entry_point = FakeEntryPoint("lds", load, "polytile-lds")
    monkeypatch.setattr(manager_module, "discover_entry_points", lambda: [entry_point])
    reset_plugin_manager()
    reset_pass_registry()
    yield imported
    config.reset()
    reset_plugin_manager()
    reset_pass_registry()
    for info in [i for i in manager_module._IMPORTED if i.distribution == "polytile-lds"]:
        del manager_module._IMPORTED[info]
    IR_REGISTRY.ops._entries.pop("lds.scratch", None)


def status(name="lds"):
    return [r.status for r in get_plugin_manager().plugins() if r.name == name]


def test_set_disables_and_enables_a_plugin_in_a_running_program(lds):
    registry = pass_registry()
    assert "lds-size" in registry and status() == [LOADED]
    assert IR_REGISTRY.ops.owner_of("lds.scratch").distribution == "polytile-lds"
    get_plugin_manager().backends.resolve("lds:x1")

    config.set(disabled_plugins=["polytile-lds"])
    # The registry that pass_registry() keeps is updated in place, at once.
    assert pass_registry() is registry
    assert "lds-size" not in registry
    with pytest.raises(UnknownNameError, match="'polytile-lds' 1.2\\) is disabled"):
        registry.create("lds-size")
    assert "lds.scratch" not in IR_REGISTRY.ops  # defined when the module was imported
    assert status() == [DISABLED]
    with pytest.raises(PluginError, match="is disabled by the setting 'disabled_plugins'"):
        get_plugin_manager().backends.resolve("lds:x1")

    config.reset("disabled_plugins")
    assert "lds-size" in registry and registry.owner_of("lds-size").distribution == "polytile-lds"
    assert IR_REGISTRY.ops.get("lds.scratch") is lds[0].op
    assert IR_REGISTRY.ops.owner_of("lds.scratch").distribution == "polytile-lds"
    assert status() == [LOADED]
    get_plugin_manager().backends.resolve("lds:x1")


def test_override_block_disables_for_its_duration(lds):
    registry = pass_registry()
    with config.override(disabled_plugins=["lds"]):
        assert "lds-size" not in registry
    assert "lds-size" in registry


def test_the_environment_is_compared_at_the_next_use(lds, monkeypatch):
    registry = pass_registry()
    first = get_plugin_manager()
    assert get_plugin_manager() is first  # nothing changed: the same manager
    monkeypatch.setenv("POLYTILE_DISABLE_PLUGINS", "polytile-lds")
    assert get_plugin_manager() is not first
    assert status() == [DISABLED] and "lds-size" not in registry
    monkeypatch.delenv("POLYTILE_DISABLE_PLUGINS")
    assert status() == [LOADED] and "lds-size" in registry


def test_a_manager_not_loaded_yet_is_replaced_without_loading(lds):
    first = get_plugin_manager()
    config.set(disabled_plugins=["polytile-lds"])
    second = get_plugin_manager()
    assert second is not first and second._loaded is False and first._loaded is False
    assert status() == [DISABLED]


def test_an_invalid_value_is_reported_by_the_manager(lds, monkeypatch):
    pass_registry()
    monkeypatch.setenv("POLYTILE_DISABLE_PLUGINS", "polytile lds")
    with pytest.raises(ConfigError, match="setting 'disabled_plugins' from environment variable "
                                          "POLYTILE_DISABLE_PLUGINS: 'polytile lds' is not a name"):
        get_plugin_manager()


def test_a_manager_installed_by_hand_is_kept(lds):
    mine = PluginManager(entry_points=[], builtins=[])
    reset_plugin_manager(mine)
    config.set(disabled_plugins=["polytile-lds"])
    assert get_plugin_manager() is mine
