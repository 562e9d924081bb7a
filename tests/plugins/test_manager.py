"""The plugin manager: loading, attribution, failures, hook calls, devices, targets."""

from __future__ import annotations

import logging
import sys
import types
from typing import NamedTuple

import pytest

from polytile.backend import Backend, BackendUnavailable, Device
from polytile.errors import PluginConflictError, PluginError, TargetError, UnknownNameError
from polytile.plugins import hookimpl
from polytile.plugins import manager as manager_module
from polytile.plugins.manager import (
    BUILTIN_PLUGINS,
    DISABLED,
    FAILED,
    LOADED,
    PluginManager,
    discover_entry_points,
    get_plugin_manager,
    reset_plugin_manager,
)
from polytile.plugins.registry import CORE_OWNER, PluginInfo, Registry
from polytile.target import Target

from .fakes import FakeEntryPoint, make_plugin

# -- fakes ------------------------------------------------------------------------------


def make_backend(name, architectures=("a1", "a2"), devices=(), error=None, owner_core=False):
    def active_devices(self):
        if error is not None:
            raise error
        return [Device(Target(name, architectures[0] if architectures else None), d, i) for i, d in enumerate(devices)]

    return type(
        f"{name.title()}Backend",
        (Backend,),
        {
            "name": name,
            "description": f"the {name} backend",
            "architectures": tuple(architectures),
            "default_architecture": architectures[0] if architectures else None,
            "active_devices": active_devices,
        },
    )()


def backend_plugin(*backends, module_name="backend_plugin"):
    def polytile_register_backends(registry):
        for backend in backends:
            registry.register(backend)

    return make_plugin(module_name, polytile_register_backends=polytile_register_backends)


def manager(*entry_points, builtins=(), disabled=()):
    return PluginManager(entry_points=list(entry_points), builtins=list(builtins), disabled=list(disabled))


class PassRegistry(Registry[type]):
    def __init__(self):
        super().__init__("pass")

    def register(self, cls):
        self.add(cls.name, cls)


def make_pass(name):
    return type(name.replace("-", "_"), (), {"name": name})


@pytest.fixture(autouse=True)
def fresh_singleton():
    previous = reset_plugin_manager()
    yield
    reset_plugin_manager(previous)


@pytest.fixture
def fake_config(monkeypatch):
    """A stand-in polytile.config: tests set ``values`` and see ``resolve_target`` calls."""

    class TargetChoice(NamedTuple):  # as polytile.config's
        target: Target
        reason: str

    module = types.ModuleType("polytile.config")
    module.values = {"disabled_plugins": [], "target": None, "strict_plugins": False}
    module.calls = []
    module.TargetChoice = TargetChoice

    def get(name):
        return module.values[name]

    def resolve_target(explicit=None, *, active_devices=None, source="target= argument"):
        module.calls.append(explicit)
        if explicit is not None:
            return TargetChoice(Target.parse(explicit), source)
        if module.values["target"] is not None:
            return TargetChoice(Target.parse(module.values["target"]), "environment variable POLYTILE_TARGET")
        for target, description in active_devices():
            return TargetChoice(target, f"first active device: {description}")
        return TargetChoice(Target("interp"), "no active device")

    module.get, module.resolve_target = get, resolve_target
    import polytile

    monkeypatch.setitem(sys.modules, "polytile.config", module)
    monkeypatch.setattr(polytile, "config", module, raising=False)
    return module


# -- attribution and conflicts ------------------------------------------------------------


def test_entries_are_attributed_to_the_plugin_that_registered_them():
    nvidia = FakeEntryPoint("nvidia", backend_plugin(make_backend("nvidia")), "polytile-nvidia", "polytile.backends")
    amd = FakeEntryPoint("amd", backend_plugin(make_backend("amd"), module_name="amd_plugin"), "polytile-amd",
                         "polytile.backends")
    interp = backend_plugin(make_backend("interp", ()), module_name="core_interp")
    pm = manager(nvidia, amd, builtins=[interp])

    backends = pm.backends
    assert backends.owner_of("nvidia") == PluginInfo("nvidia", "polytile-nvidia", "1.2")
    assert backends.owner_of("amd") == PluginInfo("amd", "polytile-amd", "1.2")
    assert backends.owner_of("interp") is CORE_OWNER
    # The core registers first (it claims its names before any plugin can), then
    # pluggy's order: the last registered plugin first.  The registry keeps that order.
    assert backends.names() == ["interp", "amd", "nvidia"]
    assert [b.name for b in backends.ordered()] == ["amd", "nvidia", "interp"]  # targets: the core's last

    provides = {p.name: p.provides for p in pm.info().plugins}
    assert provides == {"core": {"backend": ["interp"]}, "nvidia": {"backend": ["nvidia"]},
                        "amd": {"backend": ["amd"]}}


def test_two_plugins_claiming_one_backend_name_the_two_distributions():
    first = FakeEntryPoint("nvidia", backend_plugin(make_backend("nvidia")), "polytile-nvidia", "polytile.backends")
    second = FakeEntryPoint("nvidia-fork", backend_plugin(make_backend("nvidia"), module_name="fork"),
                            "nvidia-fork-dist", "polytile.backends")
    pm = manager(first, second)

    with pytest.raises(PluginConflictError) as info:
        pm.backends
    message = str(info.value)
    assert "backend 'nvidia' is registered twice" in message
    assert "distribution 'polytile-nvidia' 1.2" in message
    assert "distribution 'nvidia-fork-dist' 1.2" in message
    assert "disabled_plugins" in message
    # The conflict stays an error: a half-filled registry is never handed out.
    with pytest.raises(PluginConflictError):
        pm.backends
    assert "registered twice" in pm.info().backends_error


# -- import failures ------------------------------------------------------------------------


def test_a_plugin_that_fails_to_import_is_named_when_its_target_is_asked_for(caplog):
    broken = FakeEntryPoint("amd", ModuleNotFoundError("No module named 'hip'"), "polytile-amd", "polytile.backends")
    good = FakeEntryPoint("nvidia", backend_plugin(make_backend("nvidia", ("sm_80", "sm_90a"))), "polytile-nvidia",
                          "polytile.backends")
    with caplog.at_level(logging.WARNING, logger="polytile.plugins"):
        pm = manager(broken, good)
        backend, target = pm.backends.resolve("nvidia:sm_90a")

    assert backend.name == "nvidia" and target == Target("nvidia", "sm_90a")
    with pytest.raises(PluginError) as info:
        pm.backends.resolve("amd:gfx942")
    error = info.value
    assert str(error).startswith(
        "plugin 'amd' (distribution 'polytile-amd' 1.2) failed to load: ModuleNotFoundError: No module named 'hip'"
    )
    assert "disabled_plugins" in str(error)
    assert (error.plugin, error.distribution, error.hook) == ("amd", "polytile-amd", "")
    assert isinstance(error.__cause__, ModuleNotFoundError)
    assert "plugin 'amd' (distribution 'polytile-amd' 1.2) failed to load" in caplog.text

    record = next(r for r in pm.plugins() if r.name == "amd")
    assert record.status == FAILED
    assert record.reason == "ModuleNotFoundError: No module named 'hip'"
    assert "ModuleNotFoundError" in record.traceback
    report = next(p for p in pm.info().plugins if p.name == "amd")
    assert (report.status, report.distribution, report.reason) == (FAILED, "polytile-amd", record.reason)


def test_unknown_backend_lists_installed_ones_with_close_matches():
    pm = manager(FakeEntryPoint("nvidia", backend_plugin(make_backend("nvidia")), "polytile-nvidia"))
    with pytest.raises(UnknownNameError) as info:
        pm.backends.resolve("nvidai:a1")
    assert str(info.value) == "unknown target backend 'nvidai' in target 'nvidai:a1'; did you mean 'nvidia'?"
    with pytest.raises(UnknownNameError, match=r"unknown target backend 'cpu'; known: nvidia"):
        pm.backends.resolve("cpu")


def test_a_plugin_with_a_misspelled_hook_fails_with_a_suggestion():
    plugin = make_plugin("typo", polytile_register_backend=lambda registry: None)
    pm = manager(FakeEntryPoint("typo", plugin, "typo-dist"))
    record = next(r for r in pm.plugins() if r.name == "typo")
    assert record.status == FAILED
    assert record.reason.startswith(
        "implements unknown hook 'polytile_register_backend'; did you mean 'polytile_register_backends'"
    )


def test_a_plugin_with_a_hook_argument_the_spec_lacks_fails_to_load():
    plugin = make_plugin("bad_args", polytile_cache_key=lambda target, flavour: None)
    pm = manager(FakeEntryPoint("bad", plugin, "bad-dist"))
    record = next(r for r in pm.plugins() if r.name == "bad")
    assert record.status == FAILED
    assert record.reason.startswith("its hook implementations do not match polytile's hooks")
    assert "flavour" in record.reason
    assert pm.call_hook("polytile_cache_key", target=Target("interp"), options=None) == []


def test_hook_wrappers_are_refused_by_name():
    module = types.ModuleType("wrapping")

    def polytile_compile_metadata(kernel_name, target, metadata):
        yield

    module.polytile_compile_metadata = hookimpl(wrapper=True)(polytile_compile_metadata)
    pm = manager(FakeEntryPoint("wrap", module, "wrap-dist"))
    record = next(r for r in pm.plugins() if r.name == "wrap")
    assert (record.status, record.reason) == (
        FAILED, "implements hook 'polytile_compile_metadata' as a hook wrapper, which polytile does not support")
    assert pm.pluggy_manager.get_plugin("polytile.plugins:wrap-dist:wrap") is None


def test_one_module_behind_two_entry_points_runs_its_hooks_once():
    module = backend_plugin(make_backend("nvidia"), module_name="both_groups")
    pm = manager(FakeEntryPoint("nvidia", module, "polytile-nvidia", "polytile.backends"),
                 FakeEntryPoint("nvidia-extras", module, "polytile-nvidia"))
    assert pm.backends.names() == ["nvidia"]
    extras = next(r for r in pm.plugins() if r.name == "nvidia-extras")
    assert (extras.status, extras.reason) == (LOADED, "same module as plugin 'nvidia' (distribution 'polytile-nvidia' 1.2)")


# -- failures inside registration hooks -----------------------------------------------------


def test_a_registration_hook_that_raises_is_withdrawn_and_named_with_the_hook(caplog):
    def polytile_register_backends(registry):
        registry.register(make_backend("amd"))
        registry.register(make_backend("amd-extra"))
        raise RuntimeError("ROCm version table is corrupt")

    half = make_plugin("half", polytile_register_backends=polytile_register_backends)
    pm = manager(
        FakeEntryPoint("amd", half, "polytile-amd", "polytile.backends"),
        FakeEntryPoint("nvidia", backend_plugin(make_backend("nvidia")), "polytile-nvidia", "polytile.backends"),
    )
    with caplog.at_level(logging.WARNING, logger="polytile.plugins"):
        names = pm.backends.names()

    assert names == ["nvidia"]  # neither of the two entries registered before the raise
    record = next(r for r in pm.plugins() if r.name == "amd")
    assert (record.status, record.hook) == (FAILED, "polytile_register_backends")
    assert record.reason == "RuntimeError: ROCm version table is corrupt"
    with pytest.raises(PluginError) as info:
        pm.backends.resolve("amd:gfx942")
    assert str(info.value).startswith(
        "plugin 'amd' (distribution 'polytile-amd' 1.2) failed in hook 'polytile_register_backends': "
        "RuntimeError: ROCm version table is corrupt"
    )
    assert (info.value.plugin, info.value.distribution, info.value.hook) == (
        "amd", "polytile-amd", "polytile_register_backends")
    assert "failed in hook 'polytile_register_backends'" in caplog.text


def test_a_failed_plugin_is_withdrawn_from_every_registry_and_its_hooks_stop_running():
    calls = []

    def register_passes(registry):
        registry.register(make_pass("tma-lower"))

    def register_backends(registry):
        raise ValueError("no architectures")

    def cache_key(target, options):
        calls.append("tma")
        return "tma-settings"

    tma = make_plugin("tma", polytile_register_passes=register_passes,
                      polytile_register_backends=register_backends, polytile_cache_key=cache_key)
    other = make_plugin("other", polytile_register_passes=lambda registry: registry.register(make_pass("lds-size")))
    pm = manager(FakeEntryPoint("tma", tma, "polytile-tma"), FakeEntryPoint("lds", other, "polytile-lds"))

    passes = pm.run_registration("polytile_register_passes", PassRegistry())
    assert sorted(passes.names()) == ["lds-size", "tma-lower"]
    pm.backends  # tma's backend hook raises here
    assert passes.names() == ["lds-size"]
    assert pm.call_hook("polytile_cache_key", target=Target("interp"), options=None) == []
    assert calls == []
    assert pm.failure_for("polytile-tma").hook == "polytile_register_backends"
    assert pm.failure_for("lds") is None


def test_registering_a_backend_class_instead_of_an_instance_says_how_to_fix_it():
    cls = type(make_backend("amd"))
    plugin = make_plugin("cls", polytile_register_backends=lambda registry: registry.register(cls))
    pm = manager(FakeEntryPoint("amd", plugin, "polytile-amd"))
    pm.backends
    record = next(r for r in pm.plugins() if r.name == "amd")
    assert record.reason == (
        "TypeError: registry.register() takes a backend instance, got the class AmdBackend; "
        "write registry.register(AmdBackend())"
    )


def test_run_registration_attributes_every_part_of_a_composite_registry():
    class IRLikeRegistry:
        def __init__(self):
            self.ops = Registry("op")
            self.types = Registry("type")

        def register(self, dialect):
            for op in dialect["ops"]:
                self.ops.add(op, object())
            for type_name in dialect["types"]:
                self.types.add(type_name, object())

    def good(registry):
        registry.register({"ops": ["tma.load"], "types": ["tma.descriptor"]})

    def bad(registry):
        registry.register({"ops": ["ws.split"], "types": ["ws.token"]})
        raise KeyError("missing lowering")

    pm = manager(FakeEntryPoint("tma", make_plugin("t", polytile_register_dialects=good), "polytile-tma"),
                 FakeEntryPoint("ws", make_plugin("w", polytile_register_dialects=bad), "polytile-warpspec"))
    ir = IRLikeRegistry()
    assert pm.run_registration("polytile_register_dialects", ir) is ir
    assert ir.ops.names() == ["tma.load"] and ir.types.names() == ["tma.descriptor"]
    assert ir.types.owner_of("tma.descriptor").distribution == "polytile-tma"
    error = pm.failure_for("ws")
    assert str(error).startswith("plugin 'ws' (distribution 'polytile-warpspec' 1.2) failed in hook "
                                 "'polytile_register_dialects': KeyError: 'missing lowering'")
    # A second call for the same registry does not register everything again.
    pm.run_registration("polytile_register_dialects", ir)
    assert ir.ops.names() == ["tma.load"]


def test_run_registration_rejects_other_hooks_and_non_registries():
    pm = manager()
    with pytest.raises(ValueError, match="'polytile_cache_key' is not a registration hook"):
        pm.run_registration("polytile_cache_key", PassRegistry())
    with pytest.raises(TypeError, match="needs a polytile.plugins.registry.Registry.*got dict"):
        pm.run_registration("polytile_register_passes", {})


def test_a_plugin_registered_late_fills_registries_that_were_already_filled():
    pm = manager(FakeEntryPoint("nvidia", backend_plugin(make_backend("nvidia")), "polytile-nvidia"))
    assert pm.backends.names() == ["nvidia"]
    info = PluginInfo("late", "late-dist", "0.3")
    record = pm.register(backend_plugin(make_backend("late"), module_name="late"), info)
    assert record.status == LOADED
    assert pm.backends.names() == ["nvidia", "late"]
    assert pm.backends.owner_of("late") == info


# -- disabled plugins ------------------------------------------------------------------------


def test_disabled_plugins_are_not_imported_and_say_so_when_needed():
    tma = FakeEntryPoint("tma", make_plugin("tma"), "polytile-tma")
    amd = FakeEntryPoint("amd", backend_plugin(make_backend("amd")), "polytile-amd", "polytile.backends")
    lds = FakeEntryPoint("lds", make_plugin("lds"), "polytile-lds")
    pm = manager(tma, amd, lds, disabled=["Polytile_TMA", "amd", "polytile-nope"])

    status = {r.name: (r.status, r.reason) for r in pm.plugins()}
    assert status["tma"] == (DISABLED, "disabled by the setting 'disabled_plugins' (entry 'Polytile_TMA')")
    assert status["amd"] == (DISABLED, "disabled by the setting 'disabled_plugins' (entry 'amd')")
    assert status["lds"] == (LOADED, "")
    assert (tma.loads, amd.loads, lds.loads) == (0, 0, 1)
    assert pm.info().unknown_disabled == ["polytile-nope"]
    with pytest.raises(PluginError) as info:
        pm.backends.resolve("amd:a1")
    assert str(info.value) == (
        "plugin 'amd' (distribution 'polytile-amd' 1.2) is disabled by the setting 'disabled_plugins' "
        "(entry 'amd'); remove that entry to use it"
    )


def test_disabled_plugins_are_read_from_the_configuration(fake_config):
    fake_config.values["disabled_plugins"] = ["polytile-lds"]
    lds = FakeEntryPoint("lds", make_plugin("lds"), "polytile-lds")
    pm = PluginManager(entry_points=[lds], builtins=[])
    assert [(r.name, r.status) for r in pm.plugins()] == [("core", LOADED), ("lds", DISABLED)]
    assert lds.loads == 0


# -- calling hooks ----------------------------------------------------------------------------


def _failing_metadata_plugin(calls):
    def compile_metadata(kernel_name, target, metadata):
        calls.append(kernel_name)
        metadata["lds.half"] = True  # a change made before failing
        raise ValueError(f"cannot describe {kernel_name}")

    return FakeEntryPoint("lds", make_plugin("lds", polytile_compile_metadata=compile_metadata), "polytile-lds")


def test_a_hook_that_raises_disables_its_plugin_with_one_warning_and_the_call_goes_on(caplog):
    calls = []

    def other(kernel_name, target, metadata):
        metadata["other.seen"] = kernel_name

    pm = manager(_failing_metadata_plugin(calls),
                 FakeEntryPoint("other", make_plugin("other", polytile_compile_metadata=other), "polytile-other"))
    metadata = {}
    with caplog.at_level(logging.WARNING, logger="polytile.plugins"):
        pm.call_hook("polytile_compile_metadata", kernel_name="matmul", target=Target("interp"), metadata=metadata)
        pm.call_hook("polytile_compile_metadata", kernel_name="softmax", target=Target("interp"), metadata=metadata)
    assert metadata["other.seen"] == "softmax"  # the other plugin went on both times
    assert calls == ["matmul"]  # disabled for the process: not called again
    warnings = [r.getMessage() for r in caplog.records if r.name == "polytile.plugins"]
    assert len(warnings) == 1, warnings
    assert ("plugin 'lds' (distribution 'polytile-lds' 1.2) failed in hook 'polytile_compile_metadata' and is "
            "disabled for this process: ValueError: cannot describe matmul") in warnings[0]
    record = next(r for r in pm.plugins() if r.name == "lds")
    assert (record.status, record.hook, record.reason) == (FAILED, "polytile_compile_metadata",
                                                           "ValueError: cannot describe matmul")


def test_strict_plugins_makes_a_hook_that_raises_an_error_naming_plugin_distribution_and_hook(fake_config):
    fake_config.values["strict_plugins"] = True
    pm = manager(_failing_metadata_plugin([]))
    with pytest.raises(PluginError) as info:
        pm.call_hook("polytile_compile_metadata", kernel_name="matmul", target=Target("interp"), metadata={})
    error = info.value
    assert str(error) == (
        "plugin 'lds' (distribution 'polytile-lds' 1.2) failed in hook 'polytile_compile_metadata': "
        "ValueError: cannot describe matmul"
    )
    assert (error.plugin, error.distribution, error.hook) == ("lds", "polytile-lds", "polytile_compile_metadata")
    assert isinstance(error.__cause__, ValueError)
    # Strict: the error is per call, the plugin stays loaded.
    assert next(r for r in pm.plugins() if r.name == "lds").status == LOADED


def test_strict_plugins_is_declared_with_its_environment_variable(monkeypatch):
    from polytile import config

    assert config.get("strict_plugins") is False
    monkeypatch.setenv("POLYTILE_STRICT_PLUGINS", "1")
    config.reload()
    assert config.get("strict_plugins") is True


def test_a_mistake_in_the_kernel_from_a_hook_is_not_the_plugin_failing():
    from polytile.errors import CompilationError

    def compile_metadata(kernel_name, target, metadata):
        raise CompilationError(f"kernel '{kernel_name}' asks for too much")

    pm = manager(FakeEntryPoint("lds", make_plugin("lds", polytile_compile_metadata=compile_metadata), "polytile-lds"))
    with pytest.raises(CompilationError, match="asks for too much"):
        pm.call_hook("polytile_compile_metadata", kernel_name="matmul", target=Target("interp"), metadata={})
    assert next(r for r in pm.plugins() if r.name == "lds").status == LOADED


def test_call_hook_passes_only_the_arguments_an_implementation_names_and_collects_results():
    def add_metadata(metadata):
        metadata["lds.bytes"] = 4096

    def key_a(options):
        return f"a-{options}"

    pm = manager(
        FakeEntryPoint("lds", make_plugin("lds", polytile_compile_metadata=add_metadata,
                                          polytile_cache_key=key_a), "polytile-lds"),
        FakeEntryPoint("tma", make_plugin("tma", polytile_cache_key=lambda target, options: None), "polytile-tma"),
    )
    metadata = {}
    assert pm.call_hook("polytile_compile_metadata", kernel_name="k", target=Target("interp"), metadata=metadata) == []
    assert metadata == {"lds.bytes": 4096}
    assert pm.call_hook("polytile_cache_key", target=Target("interp"), options="o") == ["a-o"]


def test_call_hook_rejects_unknown_hooks_and_wrong_arguments():
    pm = manager()
    with pytest.raises(ValueError, match=r"unknown hook 'polytile_cache_keys'; did you mean 'polytile_cache_key'"):
        pm.call_hook("polytile_cache_keys", target=None, options=None)
    with pytest.raises(TypeError, match="missing: options, unexpected: opts"):
        pm.call_hook("polytile_cache_key", target=None, opts=None)
    with pytest.raises(ValueError, match=r"call run_registration\('polytile_register_passes', registry\)"):
        pm.call_hook("polytile_register_passes", registry=None)


def test_firstresult_hook_stops_at_the_first_answer_in_pluggy_order():
    called = []

    def answer(tag, result):
        def polytile_adapt_argument(value, target):
            called.append(tag)
            return result
        return polytile_adapt_argument

    def raising(value, target):
        called.append("late")
        raise AssertionError("must not be called")

    # pluggy calls the last registered plugin first.
    pm = manager(
        FakeEntryPoint("late", make_plugin("late", polytile_adapt_argument=raising), "d-late"),
        FakeEntryPoint("second", make_plugin("second", polytile_adapt_argument=answer("second", ("ptr", 7))), "d-2"),
        FakeEntryPoint("first", make_plugin("first", polytile_adapt_argument=answer("first", None)), "d-1"),
    )
    assert pm.call_hook("polytile_adapt_argument", value=object(), target=Target("interp")) == ("ptr", 7)
    assert called == ["first", "second"]

    called.clear()
    nobody = manager(FakeEntryPoint("first", make_plugin("first", polytile_adapt_argument=answer("first", None)), "d"))
    assert nobody.call_hook("polytile_adapt_argument", value=1, target=Target("interp")) is None
    assert called == ["first"]


def test_tryfirst_is_respected():
    order = []

    def make(tag, **opts):
        def polytile_compile_metadata(kernel_name, target, metadata):
            order.append(tag)
        module = types.ModuleType(tag)
        module.polytile_compile_metadata = hookimpl(**opts)(polytile_compile_metadata)
        return module

    pm = manager(FakeEntryPoint("a", make("a", tryfirst=True), "d-a"), FakeEntryPoint("b", make("b"), "d-b"))
    pm.call_hook("polytile_compile_metadata", kernel_name="k", target=Target("interp"), metadata={})
    assert order == ["a", "b"]


def test_cache_key_components_name_every_loaded_plugin_and_its_strings():
    pm = manager(
        FakeEntryPoint("lds", make_plugin("lds", polytile_cache_key=lambda target, options: f"budget={options}"),
                       "polytile-lds"),
        FakeEntryPoint("amd", ImportError("broken"), "polytile-amd"),
        FakeEntryPoint("tma", make_plugin("tma"), "polytile-tma"),
        disabled=["tma"],
    )
    assert pm.cache_key_components(Target("amd", "gfx942"), 64) == [
        "polytile-lds:lds: budget=64",
        "polytile-lds:lds==1.2",
        "polytile==0.1.0",
    ]



def test_a_cache_key_hook_that_fails_leaves_its_plugin_out_of_the_key(caplog):
    def failing(target, options):
        raise OSError("table missing")

    broken = manager(FakeEntryPoint("broken", make_plugin("broken", polytile_cache_key=failing), "broken-d"),
                     FakeEntryPoint("bad", make_plugin("bad", polytile_cache_key=lambda target, options: 3), "bad-d"))
    with caplog.at_level(logging.WARNING, logger="polytile.plugins"):
        # Disabled: neither is in the key, so no kernel made without them is keyed as made with them.
        assert broken.cache_key_components(Target("interp"), None) == ["polytile==0.1.0"]
    text = caplog.text
    assert "plugin 'broken' (distribution 'broken-d' 1.2) failed in hook 'polytile_cache_key'" in text
    assert "OSError: table missing" in text
    assert "TypeError: it returned int from hook 'polytile_cache_key'; it must return a string or None" in text

    from polytile import config

    bad = manager(FakeEntryPoint("bad", make_plugin("bad", polytile_cache_key=lambda target, options: 3), "bad-d"))
    with config.override(strict_plugins=True), pytest.raises(
            PluginError, match="returned int from hook 'polytile_cache_key'; it must return a string"):
        bad.cache_key_components(Target("interp"), None)


# -- builtins -----------------------------------------------------------------------------------


def test_builtin_plugin_list_starts_with_the_core_modules():
    assert BUILTIN_PLUGINS[:2] == ["polytile.interpreter.plugin", "polytile.passes.builtin"]


def test_missing_builtin_modules_are_skipped_and_present_ones_owned_by_the_core(monkeypatch):
    module = backend_plugin(make_backend("interp", ()), module_name="polytile_test_builtin_ok")
    monkeypatch.setitem(sys.modules, "polytile_test_builtin_ok", module)
    pm = manager(builtins=["polytile_test_no_such_module", "polytile_test_builtin_ok"])
    assert pm.backends.owner_of("interp") is CORE_OWNER
    core = pm.plugins()[0]
    assert (core.name, core.distribution, core.value) == ("core", "polytile", "polytile_test_builtin_ok")


def test_a_builtin_module_with_a_broken_import_is_a_plugin_error(monkeypatch, tmp_path):
    (tmp_path / "polytile_test_builtin_broken.py").write_text("import polytile_test_dependency_that_is_missing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    pm = manager(builtins=["polytile_test_builtin_broken"])
    with pytest.raises(PluginError) as info:
        pm.plugins()
    assert str(info.value).startswith(
        "polytile's builtin plugin module 'polytile_test_builtin_broken' failed to import: "
        "ModuleNotFoundError: No module named 'polytile_test_dependency_that_is_missing'"
    )
    # Every later use reports the same error instead of loading half of the plugins again.
    with pytest.raises(PluginError, match="polytile_test_builtin_broken"):
        pm.backends


def test_a_core_hook_that_raises_is_reported_at_once_as_a_polytile_bug():
    def polytile_register_passes(registry):
        raise RuntimeError("bad pass table")

    pm = manager(builtins=[make_plugin("polytile_core_passes", polytile_register_passes=polytile_register_passes)])
    with pytest.raises(PluginError, match=r"polytile's own hook 'polytile_register_passes' failed: "
                                          r"RuntimeError: bad pass table; this is a bug in polytile"):
        pm.run_registration("polytile_register_passes", PassRegistry())


# -- devices and targets ----------------------------------------------------------------------


def device_manager():
    interp = backend_plugin(make_backend("interp", (), devices=["NumPy interpreter"]), module_name="interp_plugin")
    return manager(
        FakeEntryPoint("nvidia", backend_plugin(make_backend("nvidia", ("sm_90a",),
                                                             error=BackendUnavailable("libcuda.so not found"))),
                       "polytile-nvidia", "polytile.backends"),
        FakeEntryPoint("amd", backend_plugin(make_backend("amd", ("gfx942",), devices=["MI300X", "MI300X"]),
                                             module_name="amd_plugin"), "polytile-amd", "polytile.backends"),
        FakeEntryPoint("weird", backend_plugin(make_backend("weird", ("w1",), error=RuntimeError("driver crashed")),
                                               module_name="weird_plugin"), "weird-dist", "polytile.backends"),
        builtins=[interp],
    )


def test_active_devices_survive_unavailable_and_crashing_backends(caplog):
    pm = device_manager()
    with caplog.at_level(logging.WARNING, logger="polytile.plugins"):
        devices = pm.backends.active_devices()
    # Hardware backends first, in registration order, the core's interpreter last.
    assert [(str(d.target), d.name, d.index) for d in devices] == [
        ("amd:gfx942", "MI300X", 0), ("amd:gfx942", "MI300X", 1), ("interp", "NumPy interpreter", 0)]
    assert pm.backends.probe("nvidia").reason == "libcuda.so not found"
    assert not pm.backends.probe("nvidia").failed
    weird = pm.backends.probe("weird")
    assert weird.failed and weird.reason == "looking for devices failed: RuntimeError: driver crashed"
    record = next(r for r in pm.plugins() if r.name == "weird")
    assert record.status == LOADED  # it can still compile
    assert record.problems == ["backend 'weird': looking for devices failed: RuntimeError: driver crashed"]
    assert "driver crashed" in caplog.text

    report = {b.name: b for b in pm.info().backends}
    assert report["nvidia"].no_device_reason == "libcuda.so not found" and report["nvidia"].devices == []
    assert report["amd"].devices == ["MI300X (device 0, amd:gfx942)", "MI300X (device 1, amd:gfx942)"]
    assert report["weird"].probe_failed


def test_choose_target_takes_the_first_device_and_validates_the_choice(fake_config):
    pm = device_manager()
    choice = pm.choose_target()
    assert choice.target == Target("amd", "gfx942")
    assert choice.reason == "first active device: MI300X (device 0, amd:gfx942)"

    # An explicit backend alone is completed with the backend's default architecture.
    assert pm.choose_target("nvidia").target == Target("nvidia", "sm_90a")
    assert fake_config.calls == [None, "nvidia"]

    fake_config.values["target"] = "amd:gfx90a"
    with pytest.raises(TargetError, match="backend 'amd' has no architecture 'gfx90a'.*the target came from"):
        pm.choose_target()
    fake_config.values["target"] = "nvdia:sm_90a"
    with pytest.raises(UnknownNameError) as info:
        pm.choose_target()
    assert str(info.value) == ("unknown target backend 'nvdia' in target 'nvdia:sm_90a' "
                               "(from environment variable POLYTILE_TARGET); did you mean 'nvidia'?")


def test_choose_target_names_the_broken_plugin_of_the_requested_backend(fake_config):
    pm = manager(FakeEntryPoint("amd", ImportError("libamdhip64.so: cannot open shared object file"),
                                "polytile-amd", "polytile.backends"))
    with pytest.raises(PluginError) as info:
        pm.choose_target("amd:gfx942")
    assert "plugin 'amd' (distribution 'polytile-amd' 1.2) failed to load: ImportError: libamdhip64.so" in str(
        info.value)

    report = pm.info()
    assert report.target == ""
    assert report.target_error == "unknown target backend 'interp' (from no active device)"


def test_info_shows_the_chosen_target_and_why(fake_config):
    report = device_manager().info()
    assert (report.target, report.target_reason) == ("amd:gfx942", "first active device: MI300X (device 0, amd:gfx942)")
    assert [p.name for p in report.plugins] == ["core", "nvidia", "amd", "weird"]
    assert report.plugins[0].provides == {"backend": ["interp"]}
    assert report.plugins[3].problems == ["backend 'weird': looking for devices failed: RuntimeError: driver crashed"]


def test_choose_target_with_the_real_configuration(monkeypatch, tmp_path):
    config = pytest.importorskip("polytile.config")
    monkeypatch.delenv("POLYTILE_TARGET", raising=False)
    monkeypatch.chdir(tmp_path)
    config.reload()
    try:
        pm = device_manager()
        choice = pm.choose_target()
        assert choice.target == Target("amd", "gfx942")
        assert "MI300X (device 0, amd:gfx942)" in choice.reason
        assert pm.choose_target("nvidia").target == Target("nvidia", "sm_90a")
    finally:
        config.reload()


# -- discovery and the process-wide manager -----------------------------------------------------


def test_discovery_orders_by_group_and_name_and_drops_duplicates(monkeypatch, tmp_path):
    from .test_distributions import install

    first, second = tmp_path / "first", tmp_path / "second"
    install(first, "polytile-nvidia", "1.0", {"polytile.backends": {"nvidia": "polytile_nvidia.plugin"}})
    install(first, "polytile-amd", "1.0", {"polytile.backends": {"amd": "polytile_amd.plugin"}})
    # The same distribution again further down sys.path, its name spelled differently.
    install(second, "Polytile_AMD", "0.9", {"polytile.backends": {"amd": "polytile_amd.plugin"}})
    install(second, "polytile-tma", "1.0", {"polytile.plugins": {"tma": "polytile_tma.plugin"}})
    monkeypatch.setattr(sys, "path", [str(first), str(second)])
    assert [(ep.group, ep.name, ep.dist.version) for ep in discover_entry_points()] == [
        ("polytile.backends", "amd", "1.0"), ("polytile.backends", "nvidia", "1.0"), ("polytile.plugins", "tma", "1.0")]


def test_get_plugin_manager_is_a_lazy_singleton():
    first = get_plugin_manager()
    assert get_plugin_manager() is first
    assert first._loaded is False  # nothing is imported before first use
    previous = reset_plugin_manager()
    assert previous is first
    assert get_plugin_manager() is not first
    mine = manager()
    reset_plugin_manager(mine)
    assert get_plugin_manager() is mine
    assert manager_module._manager is mine


def test_choose_target_falls_back_to_the_interpreter_when_no_backend_has_a_device(fake_config):
    pm = manager(
        FakeEntryPoint("weird", backend_plugin(make_backend("weird", ("w1",), error=RuntimeError("boom"))),
                       "weird-dist", "polytile.backends"),
        builtins=[backend_plugin(make_backend("interp", ()), module_name="interp_only")],
    )
    choice = pm.choose_target()
    assert (choice.target, choice.reason) == (Target("interp"), "no active device")
    with pytest.raises(TargetError, match="takes no architecture"):
        pm.choose_target("interp:x86")
