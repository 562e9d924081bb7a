"""Every hook spec is documented, keyword-only in use, and known to pluggy."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pluggy
import pytest

from polytile.plugins import PROJECT_NAME, hookspecs

SPECS = sorted(name for name, obj in vars(hookspecs).items()
               if name.startswith("polytile_") and callable(obj))

EXPECTED = {
    "polytile_register_backends": ["registry"],
    "polytile_register_dialects": ["registry"],
    "polytile_register_passes": ["registry"],
    "polytile_register_builtins": ["registry"],
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


@pytest.mark.parametrize("name", SPECS)
def test_every_hookspec_documents_its_arguments_and_has_an_example(name):
    doc = inspect.getdoc(getattr(hookspecs, name))
    assert doc, f"{name} has no docstring"
    for argument in EXPECTED[name]:
        assert f":param {argument}:" in doc, f"{name} does not document '{argument}'"
    assert ":return:" in doc
    assert "Called " in doc, f"{name} does not say when it is called"
    assert "Example::" in doc
    example = textwrap.dedent(doc.split("Example::", 1)[1])
    assert "@hookimpl" in example and f"def {name}(" in example
    compile(example, f"<example of {name}>", "exec")  # the example is valid Python


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
