"""What a plugin registers while its module is imported belongs to the plugin.

``define_op`` registers an op class when the class statement runs, which for a plugin is
when the manager imports it (``ep.load()``), outside any hook.  These entry points define
ops in ``load()`` the way a plugin module does at import time.
"""

from __future__ import annotations

import pytest

import polytile.dialects  # noqa: F401  (the core's ops, for the redefinition test)
from polytile.errors import PluginConflictError, PluginError, UnknownNameError
from polytile.ir.opdef import define_op
from polytile.ir.operation import Operation
from polytile.ir.registry import IR_REGISTRY
from polytile.plugins import manager as manager_module
from polytile.plugins.manager import DISABLED, FAILED, LOADED, PluginManager
from polytile.plugins.registry import CORE_OWNER

from .fakes import FakeEntryPoint, make_plugin

DISTRIBUTIONS = ("dist-a", "dist-b", "dist-broken")


@pytest.fixture(autouse=True)
def clean_ir_registry():
    """Take the test plugins' ops out of the process-wide IR registry again."""
    yield
    for info in [i for i in manager_module._IMPORTED if i.distribution in DISTRIBUTIONS]:
        del manager_module._IMPORTED[info]
    for part in (IR_REGISTRY.ops, IR_REGISTRY.types, IR_REGISTRY.attributes, IR_REGISTRY.dialects):
        for _, _, owner in part.items():
            if owner.distribution in DISTRIBUTIONS:
                part.remove_owned_by(owner)


def op_class(name: str, module: str) -> type:
    """An op class as a plugin module would define it (each module its own class)."""
    return type(name.title().replace(".", ""), (Operation,), {"name": name, "__module__": module})


def importing(*op_names: str, module: str, fail: BaseException | None = None):
    """An entry point target: "importing" it defines the ops, then maybe raises."""

    def load():
        for op_name in op_names:
            define_op(op_class(op_name, module))
        if fail is not None:
            raise fail
        return make_plugin(module)

    return load


def manager(*entry_points, disabled=()):
    return PluginManager(entry_points=list(entry_points), builtins=[], disabled=list(disabled))


def test_ops_defined_at_import_belong_to_the_plugin():
    pm = manager(FakeEntryPoint("a", importing("foo.bar", "foo.baz", module="dist_a.ops"), "dist-a"))
    [record] = [r for r in pm.plugins() if r.name == "a"]
    assert record.status == LOADED
    for name in ("foo.bar", "foo.baz"):
        owner = IR_REGISTRY.ops.owner_of(name)
        assert (owner.name, owner.distribution, owner.version) == ("a", "dist-a", "1.2")
    assert IR_REGISTRY.ops.owner_of("arith.addi") == CORE_OWNER


def test_two_plugins_defining_one_op_name_both_distributions():
    pm = manager(FakeEntryPoint("a", importing("foo.bar", module="dist_a.ops"), "dist-a"),
                 FakeEntryPoint("b", importing("foo.bar", module="dist_b.ops"), "dist-b"))
    with pytest.raises(PluginConflictError) as info:
        pm.plugins()
    assert str(info.value) == (
        "op 'foo.bar' is registered twice: by plugin 'a' (distribution 'dist-a' 1.2) and by plugin 'b' "
        "(distribution 'dist-b' 1.2); uninstall or disable one of them (setting 'disabled_plugins')"
    )
    assert (info.value.plugin, info.value.distribution) == ("b", "dist-b")
    # A hard error, as in a registration hook: every later use says it again.
    with pytest.raises(PluginConflictError):
        pm.backends
    assert IR_REGISTRY.ops.owner_of("foo.bar").distribution == "dist-a"


def test_redefining_a_core_op_disables_the_plugin_naming_the_core_and_the_plugin():
    pm = manager(FakeEntryPoint("b", importing("arith.addi", module="dist_b.ops"), "dist-b"))
    record = next(r for r in pm.plugins() if r.name == "b")
    assert record.status == FAILED
    assert record.reason.startswith("it registers op 'arith.addi', which polytile itself provides (plugin 'core' "
                                    "(distribution 'polytile' ")
    assert "plugin 'b' (distribution 'dist-b' 1.2) failed to load" in str(record.error)
    assert IR_REGISTRY.ops.owner_of("arith.addi") == CORE_OWNER


def test_redefining_a_core_op_is_an_error_with_strict_plugins():
    from polytile import config

    pm = manager(FakeEntryPoint("b", importing("arith.addi", module="dist_b.ops"), "dist-b"))
    with config.override(strict_plugins=True), pytest.raises(PluginError, match=r"it registers op 'arith.addi', "
                                                                                 r"which polytile itself provides"):
        pm.plugins()
    assert IR_REGISTRY.ops.owner_of("arith.addi") == CORE_OWNER


def test_info_shows_an_import_time_conflict_instead_of_raising():
    pm = manager(FakeEntryPoint("a", importing("foo.bar", module="dist_a.ops"), "dist-a"),
                 FakeEntryPoint("b", importing("foo.bar", module="dist_b.ops"), "dist-b"))
    report = pm.info()
    assert "op 'foo.bar' is registered twice" in report.load_error
    assert [(p.name, p.status) for p in report.plugins] == [("core", LOADED), ("a", LOADED), ("b", FAILED)]


def test_a_plugin_that_fails_at_import_has_its_ops_removed():
    pm = manager(FakeEntryPoint("broken", importing("foo.half", module="dist_broken.ops", fail=ImportError("no numpy")),
                                "dist-broken"),
                 FakeEntryPoint("a", importing("foo.bar", module="dist_a.ops"), "dist-a"))
    status = {r.name: (r.status, r.reason) for r in pm.plugins()}
    assert status["broken"] == (FAILED, "ImportError: no numpy")
    assert status["a"] == (LOADED, "")
    assert "foo.half" not in IR_REGISTRY.ops and "foo.bar" in IR_REGISTRY.ops


def test_a_plugin_that_fails_in_a_hook_loses_its_import_time_ops_too():
    def load():
        define_op(op_class("foo.bar", "dist_a.ops"))

        def polytile_register_passes(registry):
            raise RuntimeError("boom")

        return make_plugin("dist_a.plugin", polytile_register_passes=polytile_register_passes)

    from polytile.passes.registry import PassRegistry

    pm = manager(FakeEntryPoint("a", load, "dist-a"))
    pm.run_registration("polytile_register_passes", PassRegistry())
    assert [r.status for r in pm.plugins() if r.name == "a"] == [FAILED]
    assert "foo.bar" not in IR_REGISTRY.ops
    with pytest.raises(UnknownNameError):
        IR_REGISTRY.ops.get("foo.bar")


def test_a_core_module_imported_by_a_plugin_still_registers_as_the_core():
    # The first import of a core module can happen inside a plugin's import; what that
    # module's own top-level code registers is the core's.
    source = "define_op(op_class('foo.core_op', __name__))\n"

    def load():
        exec(compile(source, "<polytile.fake_dialect>", "exec"),
             {"__name__": "polytile.fake_dialect", "define_op": define_op, "op_class": op_class})
        define_op(op_class("foo.bar", "dist_a.ops"))
        return make_plugin("dist_a.plugin")

    try:
        manager(FakeEntryPoint("a", load, "dist-a")).plugins()
        assert IR_REGISTRY.ops.owner_of("foo.core_op") == CORE_OWNER
        assert IR_REGISTRY.ops.owner_of("foo.bar").distribution == "dist-a"
    finally:
        # Owned by the core, so remove_owned_by() would take every core op with it.
        IR_REGISTRY.ops._entries.pop("foo.core_op", None)


def test_disabling_removes_import_time_ops_and_enabling_puts_them_back():
    ep = FakeEntryPoint("a", importing("foo.bar", module="dist_a.ops"), "dist-a")
    first = manager(ep)
    first.plugins()
    op = IR_REGISTRY.ops.get("foo.bar")
    # A later manager with the plugin disabled: the module stays imported, its ops go.
    assert [r.status for r in manager(ep, disabled=["dist-a"]).plugins() if r.name == "a"] == [DISABLED]
    assert "foo.bar" not in IR_REGISTRY.ops
    # Enabled again: the module is not imported again (load returns the cached module).
    cached = FakeEntryPoint("a", make_plugin("dist_a.plugin"), "dist-a")
    manager(cached).plugins()
    assert IR_REGISTRY.ops.get("foo.bar") is op
    assert IR_REGISTRY.ops.owner_of("foo.bar").distribution == "dist-a"


def test_a_failed_plugin_error_names_it_when_its_op_is_missing():
    pm = manager(FakeEntryPoint("broken", importing("foo.half", module="dist_broken.ops", fail=ValueError("bad")),
                                "dist-broken"))
    error = pm.failure_for("broken")
    assert isinstance(error, PluginError)
    assert "plugin 'broken' (distribution 'dist-broken' 1.2) failed to load: ValueError: bad" in str(error)


def test_a_core_dialect_imported_inside_a_plugins_hook_is_the_cores():
    # polytile.dialects.gpu is imported on first need, which may be a plugin's hook body
    # (inside owned_by that plugin): its ops and dialect are still the core's.
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import sys
        import polytile.language
        from polytile.ir.registry import IR_REGISTRY
        from polytile.plugins.registry import CORE_OWNER, PluginInfo
        assert "polytile.dialects.gpu" not in sys.modules, "the language imported the gpu dialect"
        plugin = PluginInfo("someplugin", "some-dist", "1.0")
        with IR_REGISTRY.ops.owned_by(plugin), IR_REGISTRY.dialects.owned_by(plugin):
            from polytile.dialects import gpu
            IR_REGISTRY.ops.add("someplugin.op", object())  # the plugin's own stays its own
        assert IR_REGISTRY.ops.owner_of("gpu.convert_layout") == CORE_OWNER
        assert IR_REGISTRY.dialects.owner_of("gpu") == CORE_OWNER
        assert IR_REGISTRY.ops.owner_of("someplugin.op") == plugin
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr
