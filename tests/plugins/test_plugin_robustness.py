"""Plugins cannot corrupt a compile (issue 21): a plugin pass that breaks the IR is caught
by the verifier by default and named; a plugin whose hook raises is disabled with one
warning and the compile goes on (``strict_plugins`` raises instead); a plugin cannot take
a name of the core's."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile import config
from polytile.compiler import compile_module
from polytile.demo import VECTOR_ADD
from polytile.dialects.arith import AddIOp
from polytile.errors import PassFailure, PluginError, VerificationError
from polytile.ir import Builder, parse_module
from polytile.passes import Pass
from polytile.gpu.plugin import gpu_pass_classes
from polytile.passes.builtin import core_pass_classes
from polytile.errors import InvalidIRError
from polytile.passes.registry import pass_registry, reset_pass_registry
from polytile.plugins import hookimpl
from polytile.plugins.manager import FAILED, get_plugin_manager, reset_plugin_manager
from polytile.plugins.registry import CORE_OWNER, PluginInfo

DANGLER = PluginInfo("dangler", "polytile-dangler", "0.3")


@dataclass
class Dangle(Pass):
    """Breaks the IR: the first arith.addi gets an operand defined after it ("after") or
    by an op that is in no block at all ("nowhere")."""

    name: ClassVar[str] = "dangle"
    where: str = "after"

    def run(self, module, context):
        op = next(op for op in module.walk() if op.name == "arith.addi")
        if self.where == "after":
            value = Builder.after(op).create(AddIOp, op.operands[0], op.operands[1]).result
        else:
            value = AddIOp(operands=[op.operands[0], op.operands[1]],
                                       result_types=[op.operands[0].type]).result
        op.set_operand(1, value)
        return None


@pytest.fixture
def plugins():
    """A fresh plugin manager and pass registry; the test registers its plugin into them."""
    reset_plugin_manager()
    reset_pass_registry()
    yield get_plugin_manager()
    reset_plugin_manager()
    reset_pass_registry()


def dangler_plugin(registered: bool, where: str = "after"):
    class Plugin:
        @staticmethod
        @hookimpl
        def polytile_register_passes(registry):
            if registered:
                registry.register(Dangle)

        @staticmethod
        @hookimpl
        def polytile_configure_pipeline(pipeline, target, options):
            pipeline.insert_after("tile/cse", Dangle(where=where))

    return Plugin


# -- 1. the verifier after every plugin pass --------------------------------------------


@pytest.mark.parametrize("registered", [True, False], ids=["registered-pass", "inserted-only"])
@pytest.mark.parametrize("where", ["after", "nowhere"])
@pytest.mark.parametrize("verify_each", [False, True])
def test_a_plugin_pass_that_leaves_a_dangling_value_is_named_by_default(plugins, registered, where, verify_each):
    plugins.register(dangler_plugin(registered, where), DANGLER)
    with config.override(verify_each=verify_each), pytest.raises(InvalidIRError) as info:
        compile_module(parse_module(VECTOR_ADD, "vector_add.ir", locate=True), "interp", label="add_kernel")
    error = info.value
    message = str(error)
    # An internal error of the pass, naming the plugin and its distribution: never the
    # user's mistake at the kernel's line.
    assert message.startswith("internal compiler error: pass 'dangle' (stage 'tile') of plugin 'dangler' "
                              "(distribution 'polytile-dangler' 0.3) left invalid IR: 'arith.addi' op: "), message
    assert "the kernel is not at fault" in message and "POLYTILE_DISABLE_PLUGINS=dangler" in message
    assert (error.pass_name, error.stage, error.plugin, error.distribution) == (
        "dangle", "tile", "dangler", "polytile-dangler")
    assert isinstance(error, PassFailure) and isinstance(error, VerificationError)


def test_a_launch_through_a_broken_plugin_pass_is_an_internal_error_not_a_wrong_result(plugins):
    plugins.register(dangler_plugin(True), DANGLER)

    @pt.jit
    def add_one(x, out, n, BLOCK: pl.constexpr):
        offsets = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
        mask = offsets < n
        pl.store(out + offsets, pl.load(x + offsets, mask=mask) + 1, mask=mask)

    x = np.arange(8, dtype=np.int32)
    out = np.zeros(8, dtype=np.int32)
    with config.override(verify_each=False, cache=False), pytest.raises(InvalidIRError) as info:
        add_one[(1,)](x, out, 8, BLOCK=8, target="interp")
    assert str(info.value).startswith("internal compiler error: pass 'dangle'")
    assert not out.any()  # nothing ran


def test_core_passes_are_not_verified_by_default_but_plugin_passes_are(plugins, monkeypatch):
    from polytile.passes import manager as manager_module

    @dataclass
    class Nothing(Pass):
        name: ClassVar[str] = "nothing-much"

        def run(self, module, context):
            return None

    class Plugin:
        @staticmethod
        @hookimpl
        def polytile_configure_pipeline(pipeline, target, options):
            pipeline.insert_after("tile/dce", Nothing())

    plugins.register(Plugin, PluginInfo("quiet", "polytile-quiet", "1.0"))
    verified = []
    monkeypatch.setattr(manager_module, "_verify_after", lambda module, pass_, stage: verified.append(pass_.name))
    with config.override(verify_each=False):
        compile_module(parse_module(VECTOR_ADD), "interp")
    # Every plugin pass is checked after it runs (the installed plugins' too: polytile-tma's
    # descriptor lowering, say), and no core pass is.
    assert "nothing-much" in verified
    assert not set(verified) & {"inline", "canonicalize", "cse", "licm", "dce"}


@dataclass
class Idle(Pass):
    name: ClassVar[str] = "idle"

    def run(self, module, context):
        return None


@pytest.mark.parametrize("before", [["dangle"], ["idle", "dangle", "idle"]])
def test_ir_broken_before_a_plugin_pass_is_not_blamed_on_the_plugin(plugins, before):
    """Passes that are not verified by default (the core's; here unregistered ones) run
    before a plugin's pass: the IR is checked before the plugin's pass, so the plugin is
    not blamed for what it was given."""
    from polytile.passes.manager import PassManager
    from polytile.passes.pipeline import Pipeline, Stage

    make = {"dangle": Dangle, "idle": Idle}
    plugin_pass = Idle()
    pipeline = Pipeline([Stage("tile", [make[name]() for name in before] + [plugin_pass])])
    pipeline.attribute(plugin_pass, DANGLER)
    with pytest.raises(InvalidIRError) as info:
        PassManager(pipeline, []).run(parse_module(VECTOR_ADD))
    error = info.value
    assert error.plugin == "" and error.pass_name == before[-1]
    message = str(error)
    assert "of plugin 'dangler' (distribution 'polytile-dangler' 0.3), which is not at fault" in message
    if len(before) == 1:
        assert message.startswith("internal compiler error: pass 'dangle' (stage 'tile') of code outside any "
                                  "plugin left invalid IR: 'arith.addi' op: ")
    else:
        assert message.startswith("internal compiler error: one of the passes tile/idle, tile/dangle, tile/idle "
                                  "of code outside any plugin left invalid IR")
        assert "POLYTILE_VERIFY_EACH=1 verifies after every pass" in message


# -- 3. a failing hook ------------------------------------------------------------------


def half_done_plugin(calls):
    class Plugin:
        @staticmethod
        @hookimpl
        def polytile_configure_pipeline(pipeline, target, options):
            calls.append(target)
            pipeline.insert_after("tile/cse", Dangle())  # undone: the hook fails after it
            pipeline.insert_after("tile/no-such-pass", Dangle())

    return Plugin


def test_a_hook_that_raises_disables_the_plugin_with_one_warning_and_the_compile_goes_on(plugins, caplog):
    calls = []
    plugins.register(half_done_plugin(calls), PluginInfo("halfway", "polytile-halfway", "2.0"))
    with caplog.at_level(logging.WARNING, logger="polytile.plugins"):
        first = compile_module(parse_module(VECTOR_ADD), "interp")
        second = compile_module(parse_module(VECTOR_ADD), "interp")
    for result in (first, second):
        assert "dangle" not in str(result.pipeline)  # its half-made edit was undone
    assert len(calls) == 1  # disabled for the process
    messages = [r.getMessage() for r in caplog.records if r.name == "polytile.plugins"]
    assert len(messages) == 1, messages
    assert messages[0].startswith("plugin 'halfway' (distribution 'polytile-halfway' 2.0) failed in hook "
                                  "'polytile_configure_pipeline' and is disabled for this process: "
                                  "UnknownNameError: unknown pipeline anchor 'tile/no-such-pass'")
    record = next(r for r in plugins.plugins() if r.name == "halfway")
    assert record.status == FAILED and record.hook == "polytile_configure_pipeline"


def test_strict_plugins_raises_for_a_hook_that_raises(plugins):
    plugins.register(half_done_plugin([]), PluginInfo("halfway", "polytile-halfway", "2.0"))
    with config.override(strict_plugins=True), pytest.raises(PluginError) as info:
        compile_module(parse_module(VECTOR_ADD), "interp")
    assert str(info.value).startswith("plugin 'halfway' (distribution 'polytile-halfway' 2.0) failed in hook "
                                      "'polytile_configure_pipeline': UnknownNameError")
    assert (info.value.plugin, info.value.distribution) == ("halfway", "polytile-halfway")


# -- 4. a plugin cannot take a core pass's name -----------------------------------------


@dataclass
class FakeCSE(Pass):
    name: ClassVar[str] = "cse"

    def run(self, module, context):
        return None


class TakesCSE:
    @staticmethod
    @hookimpl
    def polytile_register_passes(registry):
        registry.register(FakeCSE)


def test_a_plugin_registering_a_core_pass_name_is_disabled_and_the_core_passes_stay(plugins, caplog, capsys):
    from polytile.cli import main

    plugins.register(TakesCSE, PluginInfo("thief", "polytile-thief", "0.1"))
    with caplog.at_level(logging.WARNING, logger="polytile.plugins"):
        registry = pass_registry()
        assert main(["passes"]) == 0
    core_names = sorted(cls.name for cls in core_pass_classes() + gpu_pass_classes())
    assert all(registry.owner_of(name) == CORE_OWNER for name in core_names)
    assert registry.get("cse") is not FakeCSE
    lines = capsys.readouterr().out.splitlines()
    listed = [line.split()[0] for line in lines if line and not line[0].isspace()]
    assert set(core_names) <= set(listed) and listed.count("cse") == 1
    assert lines[lines.index(next(line for line in lines if line.startswith("cse "))) + 1].split() == [
        "from", "polytile", CORE_OWNER.version]
    messages = [r.getMessage() for r in caplog.records if r.name == "polytile.plugins"]
    assert len(messages) == 1
    assert ("plugin 'thief' (distribution 'polytile-thief' 0.1) failed in hook 'polytile_register_passes' and is "
            "disabled for this process: it registers pass 'cse', which polytile itself provides (plugin 'core' "
            "(distribution 'polytile'") in messages[0]


def test_a_plugin_registering_a_core_pass_name_fails_when_the_registry_is_built_first(caplog):
    """The usual order: the registry is filled when the plugins load (the plugin's hook
    runs before the core's in pluggy's order; the core still claims its names first)."""
    from tests.plugins.fakes import FakeEntryPoint

    from polytile.plugins.manager import PluginManager

    manager = PluginManager(entry_points=[FakeEntryPoint("thief", TakesCSE, "polytile-thief")], disabled=())
    reset_plugin_manager(manager)
    reset_pass_registry()
    registry = pass_registry()
    assert registry.owner_of("cse") == CORE_OWNER and registry.get("cse") is not FakeCSE
    assert set(registry.names()) == {cls.name for cls in core_pass_classes() + gpu_pass_classes()}  # no backend here
    record = next(r for r in manager.plugins() if r.name == "thief")
    assert record.status == FAILED and "pass 'cse', which polytile itself provides" in record.reason


def test_strict_plugins_makes_taking_a_core_pass_name_an_error_naming_both(plugins):
    from tests.plugins.fakes import FakeEntryPoint

    from polytile.plugins.manager import PluginManager

    reset_plugin_manager(PluginManager(entry_points=[FakeEntryPoint("thief", TakesCSE, "polytile-thief")],
                                       disabled=()))
    reset_pass_registry()
    with config.override(strict_plugins=True), pytest.raises(PluginError) as info:
        pass_registry()
    message = str(info.value)
    assert "plugin 'thief' (distribution 'polytile-thief' 1.2)" in message
    assert "pass 'cse', which polytile itself provides (plugin 'core' (distribution 'polytile'" in message


def test_a_metadata_hook_that_raises_has_its_additions_taken_back(plugins, caplog):
    class Broken:
        @staticmethod
        @hookimpl
        def polytile_compile_metadata(kernel_name, target, metadata):
            metadata["broken.half"] = 1
            raise RuntimeError("no budget table")

    class Fine:
        @staticmethod
        @hookimpl
        def polytile_compile_metadata(kernel_name, target, metadata):
            metadata["fine.kernel"] = kernel_name

    plugins.register(Fine, PluginInfo("fine", "polytile-fine", "1.0"))
    plugins.register(Broken, PluginInfo("broken", "polytile-broken", "1.0"))
    with caplog.at_level(logging.WARNING, logger="polytile.plugins"):
        result = compile_module(parse_module(VECTOR_ADD), "interp", label="add_kernel")
    assert result.metadata.get("fine.kernel") == "add_kernel"
    assert "broken.half" not in result.metadata
    messages = [r.getMessage() for r in caplog.records if r.name == "polytile.plugins"]
    assert len(messages) == 1 and "plugin 'broken' (distribution 'polytile-broken' 1.0) failed in hook " \
        "'polytile_compile_metadata' and is disabled for this process: RuntimeError: no budget table" in messages[0]


# -- the plugins installed with polytile work under strict_plugins ---------------------


def test_every_installed_plugin_loads_and_compiles_under_strict_plugins(plugins, caplog):
    """The suite runs with strict_plugins off, as users do (the tests above need the
    tolerant default).  This is the CI guard instead: every installed plugin (the
    backends, polytile-lds, ...) loads, registers and takes part in a compile for every
    backend without failing, with strict_plugins on and no warning."""
    from tests.toolchains import ptxas_or_skip

    ptxas_or_skip()
    with caplog.at_level(logging.WARNING, logger="polytile.plugins"), config.override(strict_plugins=True):
        assert [r.info.describe() for r in plugins.plugins() if r.status == FAILED] == []
        pass_registry()
        for target in ("interp", "nvidia:sm_90a", "amd:gfx942"):
            compile_module(parse_module(VECTOR_ADD), target)
    assert [r.getMessage() for r in caplog.records if r.name == "polytile.plugins"] == []


def make_scale_kernel():
    """A new ``@jit`` function each call: only the disk cache can serve its first launch."""
    @pt.jit
    def scale(x, out, n, BLOCK: pl.constexpr):
        offsets = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
        mask = offsets < n
        pl.store(out + offsets, pl.load(x + offsets, mask=mask) * 2, mask=mask)

    return scale


def stored_entries(folder):
    """The disk cache's entries under ``folder`` (a compile's lock files aside)."""
    return [p for p in (folder / "kernels").rglob("*") if p.is_file()]


def test_a_kernel_compiled_while_a_plugin_failed_is_not_stored_in_the_disk_cache(plugins, tmp_path, caplog):
    """The on-disk cache key names every loaded plugin, and is taken before the compile:
    a kernel made without a plugin that failed during its compile must not be stored
    under it (a later process, where the plugin works, would load code made without it)."""

    make_kernel, stored = make_scale_kernel, stored_entries
    x = np.arange(8, dtype=np.int32)
    plugins.register(half_done_plugin([]), PluginInfo("halfway", "polytile-halfway", "2.0"))
    out = np.zeros(8, dtype=np.int32)
    with config.override(cache_dir=str(tmp_path / "failed")), caplog.at_level(logging.WARNING):
        make_kernel()[(1,)](x, out, 8, BLOCK=8, target="interp")
    assert (out == 2 * x).all()  # the compile went on without the plugin
    assert stored(tmp_path / "failed") == []
    # The same kernel, the plugin now disabled from the start: stored as usual.
    out[:] = 0
    with config.override(cache_dir=str(tmp_path / "after")):
        make_kernel()[(1,)](x, out, 8, BLOCK=8, target="interp")
    assert (out == 2 * x).all() and stored(tmp_path / "after")


def failing_registration_plugin():
    class Plugin:
        @staticmethod
        @hookimpl
        def polytile_register_passes(registry):
            raise ModuleNotFoundError("No module named 'polytile_missing_backend'")

    return Plugin


def test_a_plugin_that_fails_to_register_its_passes_does_not_turn_the_disk_cache_off(plugins, tmp_path, caplog):
    """A plugin that cannot load in this process (an optional plugin whose backend is not
    installed) fails at registration, before the first kernel's key is taken: the key
    leaves it out and the kernel is stored, and a later process reads it back."""
    from polytile.passes.registry import reset_pass_registry

    make_kernel, stored = make_scale_kernel, stored_entries
    x = np.arange(8, dtype=np.int32)
    plugins.register(failing_registration_plugin(), PluginInfo("unloadable", "polytile-unloadable", "1.0"))
    reset_pass_registry()  # the next compile runs the registrations, this plugin's failing
    out = np.zeros(8, dtype=np.int32)
    with config.override(cache_dir=str(tmp_path)), caplog.at_level(logging.WARNING):
        first = make_kernel()
        first[(1,)](x, out, 8, BLOCK=8, target="interp")
        assert (out == 2 * x).all() and stored(tmp_path)
        assert any("unloadable" in r.getMessage() for r in caplog.records if r.name == "polytile.plugins")
        again = make_kernel()  # a new function object: only the disk can serve it
        out[:] = 0
        again[(1,)](x, out, 8, BLOCK=8, target="interp")
    assert (out == 2 * x).all() and again.disk_hits == 1 and again.compile_count == 0


def test_a_plugin_pass_with_nothing_to_do_is_neither_run_nor_checked(plugins, monkeypatch):
    from polytile.passes import manager as manager_module

    ran = []

    @dataclass
    class OnlyForLoops(Pass):
        name: ClassVar[str] = "only-for-loops"

        def applies_to(self, module):
            return any(op.name == "scf.for" for op in module.walk())

        def run(self, module, context):
            ran.append(True)
            return None

    class Plugin:
        @staticmethod
        @hookimpl
        def polytile_configure_pipeline(pipeline, target, options):
            pipeline.insert_after("tile/inline", OnlyForLoops())

    plugins.register(Plugin, PluginInfo("loops", "polytile-loops", "1.0"))
    checked = []
    monkeypatch.setattr(manager_module, "_verify_after", lambda module, pass_, stage: checked.append(pass_.name))
    monkeypatch.setattr(manager_module, "_verify_before",
                        lambda module, pass_, stage, owner, unchecked: checked.append("before " + pass_.name))
    with config.override(verify_each=False):
        result = compile_module(parse_module(VECTOR_ADD), "interp")  # no loop
    assert not ran and "only-for-loops" not in checked and "before only-for-loops" not in checked
    assert "only-for-loops" in str(result.pipeline)  # in the pipeline all the same
