"""Every hook spec is documented, keyword-only in use, known to pluggy, and its example runs."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pluggy
import pytest

from polytile.backend import BackendOptions
from polytile.passes import Pass
from polytile.passes.pipeline import Pipeline, Stage
from polytile.plugins import PROJECT_NAME, hookspecs
from polytile.plugins.manager import LOADED, PluginManager
from polytile.plugins.registry import Registry
from polytile.target import Target

SPECS = sorted(name for name, obj in vars(hookspecs).items()
               if name.startswith("polytile_") and callable(obj))

EXPECTED = {
    "polytile_register_backends": ["registry"],
    "polytile_register_dialects": ["registry"],
    "polytile_register_passes": ["registry"],
    "polytile_register_builtins": ["registry"],
    "polytile_register_settings": ["registry"],
    "polytile_configure_pipeline": ["pipeline", "target", "options"],
    "polytile_cache_key": ["target", "options"],
    "polytile_adapt_argument": ["value", "target"],
    "polytile_compile_metadata": ["kernel_name", "target", "metadata"],
}


def test_the_specs_are_exactly_the_documented_hooks():
    assert SPECS == sorted(EXPECTED)
    for name, arguments in EXPECTED.items():
        assert list(inspect.signature(getattr(hookspecs, name)).parameters) == arguments, name
    assert set(hookspecs.REGISTRATION_HOOKS) == {n for n in EXPECTED if n.startswith("polytile_register_")}


def example_of(name: str) -> str:
    doc = inspect.getdoc(getattr(hookspecs, name))
    return textwrap.dedent(doc.split("Example::", 1)[1])


@pytest.mark.parametrize("name", SPECS)
def test_every_hookspec_documents_its_arguments_and_has_an_example(name):
    doc = inspect.getdoc(getattr(hookspecs, name))
    assert doc, f"{name} has no docstring"
    for argument in EXPECTED[name]:
        assert f":param {argument}:" in doc, f"{name} does not document '{argument}'"
    assert ":return:" in doc
    assert "Called " in doc, f"{name} does not say when it is called"
    assert "Example::" in doc
    example = example_of(name)
    assert "@hookimpl" in example and f"def {name}(" in example
    # Settings are read through polytile.config, never straight from the environment.
    assert "os.environ" not in example and "getenv" not in example


# -- every example runs, as a plugin, through the real plugin manager ----------------------


def fake_module(monkeypatch, name: str, **attributes) -> types.ModuleType:
    """A stand-in for a module of a plugin distribution that the examples import."""
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    monkeypatch.setitem(sys.modules, name, module)
    parent, _, child = name.rpartition(".")
    if parent:
        # Undone after the test: the real package may be installed (polytile-tma is), and
        # a stand-in left on it would shadow its own submodule.
        monkeypatch.setattr(sys.modules.get(parent) or fake_module(monkeypatch, parent), child, module, raising=False)
    return module


def load_example(name: str, monkeypatch) -> PluginManager:
    """The example of hook ``name``, executed as a plugin module and loaded by a manager."""
    module = types.ModuleType(f"example_{name}")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # dataclasses look their module up
    exec(compile(example_of(name), f"<example of {name}>", "exec"), module.__dict__)

    class EntryPoint:
        group, value = "polytile.plugins", module.__name__
        dist = types.SimpleNamespace(name="polytile-example", version="1.0")

        def __init__(self):
            self.name = name

        def load(self):
            return module

    manager = PluginManager(entry_points=[EntryPoint()], builtins=[], disabled=())
    [record] = [r for r in manager.plugins() if r.distribution == "polytile-example"]
    assert record.status == LOADED, record.reason
    return manager


def check_register_backends(monkeypatch):
    manager = load_example("polytile_register_backends", monkeypatch)
    backend, target = manager.backends.resolve("amd:gfx942")
    assert (backend.name, str(target)) == ("amd", "amd:gfx942")
    assert manager.backends.owner_of("amd").distribution == "polytile-example"


def check_register_dialects(monkeypatch):
    from polytile.ir.registry import IRRegistry

    load, store = (type(n, (), {"name": f"tma.{n.lower()}"}) for n in ("DescriptorLoad", "DescriptorStore"))
    descriptor = type("TensorDescriptorType", (), {"type_name": "tma.descriptor"})
    fake_module(monkeypatch, "polytile_tma.ops", DescriptorLoad=load, DescriptorStore=store)
    fake_module(monkeypatch, "polytile_tma.types", TensorDescriptorType=descriptor)
    registry = IRRegistry()
    registry.on_miss = None
    load_example("polytile_register_dialects", monkeypatch).run_registration("polytile_register_dialects", registry)
    assert registry.op("tma.descriptorload") is load and registry.type("tma.descriptor") is descriptor
    assert registry.dialects.owner_of("tma").distribution == "polytile-example"


def check_register_settings(monkeypatch):
    from polytile.config import SETTINGS, Config
    from polytile.plugins.settings import SettingRegistry

    registry = SettingRegistry(SETTINGS)
    load_example("polytile_register_settings", monkeypatch).run_registration("polytile_register_settings", registry)
    assert registry.owner_of("lds_report").distribution == "polytile-example"
    # Read like a core setting, from its environment variable.
    cfg = Config({"lds_report": registry.get("lds_report")})
    monkeypatch.setenv("POLYTILE_LDS_REPORT", "1")
    assert cfg.get("lds_report") is True


def check_register_passes(monkeypatch):
    from polytile.ir import parse_module
    from polytile.passes import PassContext
    from polytile.passes.registry import PassRegistry

    registry = PassRegistry()
    load_example("polytile_register_passes", monkeypatch).run_registration("polytile_register_passes", registry)
    size_lds = registry.create("lds-size", {"budget-bytes": "32768"})
    assert size_lds.budget_bytes == 32768
    context = PassContext()
    assert size_lds.run(parse_module("func.func @k() {\n  func.return\n}\n"), context).preserves_all
    assert context.statistics == {"lds-size.runs": 1}


def check_register_builtins(monkeypatch):
    from dataclasses import dataclass

    from polytile.ir import DialectType
    from polytile.language.core import builtin, tensor
    from polytile.language.extensions import BuiltinRegistry

    @builtin
    def make_tensor_descriptor(base, shape, strides, block_shape):
        """pl.make_tensor_descriptor"""

    class tensor_descriptor(tensor):
        __slots__ = ()

    @dataclass(frozen=True)
    class TensorDescType(DialectType):
        type_name = "example.desc"

    fake_module(monkeypatch, "polytile_tma.language", make_tensor_descriptor=make_tensor_descriptor,
                tensor_descriptor=tensor_descriptor)
    fake_module(monkeypatch, "polytile_tma.types", TensorDescType=TensorDescType)
    registry = BuiltinRegistry()
    load_example("polytile_register_builtins", monkeypatch).run_registration("polytile_register_builtins", registry)
    assert registry.functions.get("make_tensor_descriptor") is make_tensor_descriptor
    assert registry.value_classes.get("example.desc") is tensor_descriptor


def check_configure_pipeline(monkeypatch):
    def make_pass(class_name, pass_name, **options):
        namespace = {"__annotations__": {"name": ClassVar[str], **{k: type(v) for k, v in options.items()}},
                     "name": pass_name, "run": lambda self, module, context: None, **options}
        return dataclass(type(class_name, (Pass,), namespace))

    lowering = make_pass("TMALowering", "tma-lowering")
    pipelined = make_pass("TMAPipelineLoops", "tma-pipeline-loops", num_stages=2)
    fake_module(monkeypatch, "polytile_tma.passes", TMALowering=lowering, TMAPipelineLoops=pipelined)
    cse, loads = make_pass("CSE", "cse"), make_pass("PipelineLoops", "pipeline-loops")
    manager = load_example("polytile_configure_pipeline", monkeypatch)

    def configured(target):
        pipeline = Pipeline([Stage("tile", [cse()]), Stage("distribute", [loads()])])
        manager.call_hook("polytile_configure_pipeline", pipeline=pipeline, target=target,
                          options=BackendOptions(num_stages=4))
        return str(pipeline)

    assert configured(Target("nvidia", "sm_90a")) == (
        "tile(cse,tma-lowering),distribute(tma-pipeline-loops{num-stages=4})")
    assert configured(Target("amd", "gfx942")) == "tile(cse),distribute(pipeline-loops)"


def check_cache_key(monkeypatch):
    manager = load_example("polytile_cache_key", monkeypatch)
    options = BackendOptions()
    assert "polytile-example:polytile_cache_key: lds-budget=65536" in manager.cache_key_components(
        Target("amd", "gfx942"), options)
    assert manager.call_hook("polytile_cache_key", target=Target("nvidia", "sm_90"), options=options) == []


def check_adapt_argument(monkeypatch):
    from polytile.runtime.adapters import ArgumentAdapter

    class TensorDescriptor:
        pass

    adapter = ArgumentAdapter()
    fake_module(monkeypatch, "polytile_tma.host", TensorDescriptor=TensorDescriptor)
    fake_module(monkeypatch, "polytile_tma.arguments", ADAPTER=adapter)
    manager = load_example("polytile_adapt_argument", monkeypatch)
    assert manager.call_hook("polytile_adapt_argument", value=TensorDescriptor(), target=None) is adapter
    assert manager.call_hook("polytile_adapt_argument", value=object(), target=None) is None


def check_compile_metadata(monkeypatch):
    fake_module(monkeypatch, "polytile_lds.budget", lds_budget=lambda arch: {"gfx942": 65536}[arch])
    manager = load_example("polytile_compile_metadata", monkeypatch)
    metadata: dict = {"num_warps": 4}
    manager.call_hook("polytile_compile_metadata", kernel_name="matmul", target=Target("amd", "gfx942"),
                      metadata=metadata)
    assert metadata == {"num_warps": 4, "lds.budget_bytes": 65536}
    manager.call_hook("polytile_compile_metadata", kernel_name="matmul", target=Target("interp"), metadata=metadata)
    assert metadata == {"num_warps": 4, "lds.budget_bytes": 65536}


CHECKS = {
    "polytile_register_backends": check_register_backends,
    "polytile_register_dialects": check_register_dialects,
    "polytile_register_passes": check_register_passes,
    "polytile_register_builtins": check_register_builtins,
    "polytile_register_settings": check_register_settings,
    "polytile_configure_pipeline": check_configure_pipeline,
    "polytile_cache_key": check_cache_key,
    "polytile_adapt_argument": check_adapt_argument,
    "polytile_compile_metadata": check_compile_metadata,
}


def test_every_example_has_a_check():
    assert sorted(CHECKS) == SPECS


@pytest.mark.parametrize("name", SPECS)
def test_every_example_works_as_a_plugin(name, monkeypatch):
    CHECKS[name](monkeypatch)


def test_pluggy_knows_every_spec_and_only_adapt_argument_is_firstresult():
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    for name in SPECS:
        caller = getattr(pm.hook, name)
        assert caller.spec is not None
        assert bool(caller.spec.opts.get("firstresult")) == (name == "polytile_adapt_argument"), name


def test_importing_polytile_loads_neither_pluggy_plugins_nor_the_manager():
    core = Path(__file__).resolve().parents[2] / "core"
    code = "import sys, polytile; print(sorted(m for m in sys.modules if m.startswith('polytile.plugins')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={"PYTHONPATH": str(core)})
    assert result.stdout.strip() == "[]"
