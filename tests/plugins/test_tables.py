"""Tables keyed by op class own their entries: what a plugin registers in the GPU lowering
tables, the interpreter's rules or LICM's loops leaves with it, and the core's entry it
had replaced comes back."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from polytile.dialects import scf, tile
from polytile.errors import PluginConflictError
from polytile.gpu.layout_rules import LAYOUT_RULES
from polytile.gpu.lowering import LOWERINGS
from polytile.interpreter import RULES
from polytile.interpreter.executor import BATCHED_RULES, batched_rule_for, rule_for, rules_version
from polytile.passes.licm import LOOP_BODIES
from polytile.plugins.manager import DISABLED, LOADED, PluginManager, reset_plugin_manager
from polytile.plugins.registry import CORE_OWNER, PluginInfo
from polytile.plugins.tables import OwnedTable

from .fakes import FakeEntryPoint

PLUGIN = PluginInfo("frob", "polytile-frob", "1.0")
OTHER = PluginInfo("other", "polytile-other", "1.0")


def test_a_plugins_entry_stands_over_the_cores_until_it_is_withdrawn():
    table = OwnedTable("rule")
    changes = []
    table.on_change(lambda: changes.append(table.version))
    core, mine = object(), object()
    table.add(int, core, CORE_OWNER)
    table.add(int, mine, PLUGIN)
    assert table[int] is mine and table.get(int) is mine and table.owner_of(int) == PLUGIN
    assert table.remove_owned_by(PLUGIN) == [int]
    assert table[int] is core and table.owner_of(int) == CORE_OWNER
    assert changes == [1, 2, 3]  # every change is seen: caches built on the table are remade
    table.add(int, mine, PLUGIN)
    table.add(int, core, CORE_OWNER)  # the core's, registered again, stays under the plugin's
    assert table[int] is mine
    assert table.pop(int) is mine and table[int] is core
    assert table.pop(str, None) is None and str not in table and table.get(str) is None


def test_two_plugins_taking_one_key_is_a_conflict_naming_both():
    table = OwnedTable("GPU lowering")
    table.add(tile.ArangeOp, object(), PLUGIN)
    with pytest.raises(PluginConflictError) as info:
        table.add(tile.ArangeOp, object(), OTHER)
    assert str(info.value).startswith("GPU lowering of 'tile.arange' is registered twice: by plugin 'frob' "
                                      "(distribution 'polytile-frob' 1.0) and by plugin 'other'")


PLUGIN_SOURCE = '''
from polytile.dialects import scf, tile
from polytile.gpu.layout_rules import register_layout_rule
from polytile.gpu.lowering import register_lowering
from polytile.interpreter import register_rule
from polytile.passes.licm import register_loop
from polytile.plugins import hookimpl


@register_rule(tile.ArangeOp)
def frob_arange_rule(op, operands, ctx):
    raise AssertionError("not run")


@register_lowering(tile.ArangeOp)
def frob_arange_lowering(op, operands, ctx):
    raise AssertionError("not run")


register_loop(scf.WhileOp)  # the core has it too: the plugin's entry stands over it


@hookimpl
def polytile_cache_key(target, options):
    # A registration while a hook runs belongs to the plugin too.
    register_layout_rule(tile.ArangeOp)(frob_layout_rule)
    return None


def frob_layout_rule(op, groups):
    raise AssertionError("not run")
'''

LAZY_SOURCE = '''
from polytile.dialects import tile
from polytile.gpu.allocation import register_scratch


@register_scratch(tile.ArangeOp)
def frob_scratch(op, target, num_warps):
    return 0
'''


@pytest.fixture
def frob_package(tmp_path, monkeypatch):
    package = tmp_path / "polytile_frob_test"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "plugin.py").write_text(textwrap.dedent(PLUGIN_SOURCE))
    (package / "lazy.py").write_text(textwrap.dedent(LAZY_SOURCE))
    monkeypatch.syspath_prepend(str(tmp_path))
    previous = reset_plugin_manager()
    yield
    for name in [m for m in sys.modules if m.startswith("polytile_frob_test")]:
        del sys.modules[name]
    # Withdraw whatever the test left (a manager with the plugin disabled does that).
    PluginManager(entry_points=[_entry_point()], disabled=["polytile-frob"]).plugins()
    reset_plugin_manager(previous)


def _entry_point():
    return FakeEntryPoint("frob", lambda: importlib.import_module("polytile_frob_test.plugin"), "polytile-frob",
                          value="polytile_frob_test.plugin")


def test_what_a_plugin_registers_leaves_with_it_and_the_cores_comes_back(frob_package):
    core_rule, core_lowering, core_loop = RULES[tile.ArangeOp], LOWERINGS[tile.ArangeOp], LOOP_BODIES[scf.WhileOp]
    core_layout = LAYOUT_RULES.get(tile.ArangeOp)
    from polytile.gpu.allocation import SCRATCH_BYTES

    core_scratch = SCRATCH_BYTES.get(tile.ArangeOp)
    before = rules_version()

    loaded = PluginManager(entry_points=[_entry_point()])
    assert [r.status for r in loaded.plugins() if r.name == "frob"] == [LOADED]
    plugin = sys.modules["polytile_frob_test.plugin"]
    # At import: the interpreter rule, the GPU lowering, the LICM loop.
    assert RULES[tile.ArangeOp] is plugin.frob_arange_rule and RULES.owner_of(tile.ArangeOp).name == "frob"
    assert LOWERINGS[tile.ArangeOp] is plugin.frob_arange_lowering
    assert LOOP_BODIES.owner_of(scf.WhileOp).distribution == "polytile-frob"
    assert rules_version() != before
    # The interpreter uses it, and no batched rule of the core's meaning.
    op = tile.ArangeOp.__new__(tile.ArangeOp)
    assert rule_for(op) is plugin.frob_arange_rule and batched_rule_for(op) is None
    # In a hook: the layout rule.
    loaded.cache_key_components(None, None)
    assert LAYOUT_RULES[tile.ArangeOp] is plugin.frob_layout_rule
    # In a module of the plugin imported later (lazily, in a pass, say): its scratch.
    lazy = importlib.import_module("polytile_frob_test.lazy")
    assert SCRATCH_BYTES[tile.ArangeOp] is lazy.frob_scratch
    assert SCRATCH_BYTES.owner_of(tile.ArangeOp).name == "frob"

    disabled = PluginManager(entry_points=[_entry_point()], disabled=["polytile-frob"])
    assert [r.status for r in disabled.plugins() if r.name == "frob"] == [DISABLED]
    assert RULES[tile.ArangeOp] is core_rule and LOWERINGS[tile.ArangeOp] is core_lowering
    assert LOOP_BODIES[scf.WhileOp] is core_loop and LOOP_BODIES.owner_of(scf.WhileOp) == CORE_OWNER
    assert LAYOUT_RULES.get(tile.ArangeOp) is core_layout and SCRATCH_BYTES.get(tile.ArangeOp) is core_scratch
    assert rule_for(op) is core_rule and batched_rule_for(op) is BATCHED_RULES.get(tile.ArangeOp)

    # Enabled again in a later manager: what its modules registered is back.
    PluginManager(entry_points=[_entry_point()]).plugins()
    assert RULES[tile.ArangeOp] is plugin.frob_arange_rule and SCRATCH_BYTES[tile.ArangeOp] is lazy.frob_scratch


def test_a_plugin_that_fails_to_load_leaves_nothing_behind(frob_package, tmp_path):
    core_rule = RULES[tile.ArangeOp]
    (tmp_path / "polytile_frob_test" / "plugin.py").write_text(
        textwrap.dedent(PLUGIN_SOURCE) + "\nraise RuntimeError('half imported')\n")
    broken = PluginManager(entry_points=[_entry_point()])
    assert [r.reason for r in broken.plugins() if r.name == "frob"] == ["RuntimeError: half imported"]
    assert RULES[tile.ArangeOp] is core_rule and LOWERINGS.owner_of(tile.ArangeOp) == CORE_OWNER


def test_a_plugins_batched_rule_speeds_up_a_core_op_and_leaves_with_it():
    """Over the core's per-program rule, a plugin's batched rule is used (it only makes the
    core op faster); over a plugin's per-program rule, only that plugin's batched rule."""
    from polytile.interpreter.executor import batched_rule_for

    op = tile.ArangeOp.__new__(tile.ArangeOp)
    core_batched = batched_rule_for(op)
    fast = object()
    BATCHED_RULES.add(tile.ArangeOp, fast, PLUGIN)
    try:
        assert batched_rule_for(op) is fast
        mine = object()
        RULES.add(tile.ArangeOp, mine, OTHER)  # another meaning of the op, with no batched rule of its own
        assert batched_rule_for(op) is None
        RULES.remove(tile.ArangeOp, OTHER)
        assert batched_rule_for(op) is fast
    finally:
        BATCHED_RULES.remove_owned_by(PLUGIN)
    assert batched_rule_for(op) is core_batched


def test_registering_the_same_entry_again_changes_nothing():
    table = OwnedTable("rule")
    seen = []
    table.on_change(lambda: seen.append(table.version))
    entry = object()
    table.add(int, entry, PLUGIN)
    table.add(int, entry, PLUGIN)  # a hook that registers on every compile
    assert seen == [1] and table[int] is entry


def test_a_module_belongs_to_the_plugin_of_its_longest_claimed_package(monkeypatch):
    from polytile.plugins import registry

    monkeypatch.setattr(registry, "_PACKAGE_OWNERS", {})
    registry.claim_package("ns.foo", PLUGIN)
    registry.claim_package("ns.bar", OTHER)
    registry.claim_package("polytile.gpu", OTHER)  # the core's packages are never a plugin's
    assert registry._package_owner("ns.foo.lowering") == PLUGIN
    assert registry._package_owner("ns.bar") == OTHER
    assert registry._package_owner("ns.baz") is None and registry._package_owner("polytile.gpu.x") is None
    registry.claim_package("ns.foo", OTHER)  # two plugins in one package: neither is named
    assert registry._package_owner("ns.foo.lowering") is None


# --------------------------------------------------------------------------------------
# The core's entries come from the providers a table declares, imported on its first read


PROVIDED_TABLE = '''
from polytile.plugins.tables import OwnedTable

TABLE = OwnedTable("thing", providers=("polytile_provided_test.entries", "polytile_provided_test.more"))
'''

PROVIDED_ENTRIES = '''
import time

from polytile_provided_test.table import TABLE

TABLE.add("first", "the core's first")
time.sleep({delay})  # another thread reads meanwhile
TABLE.add("second", "the core's second")
'''


@pytest.fixture
def provided_package(tmp_path, monkeypatch):
    """A package whose table's entries are in two provider modules (``delay``: seconds
    between the first module's two registrations)."""
    package = tmp_path / "polytile_provided_test"

    def make(delay: float = 0.0, more: str = "TABLE.add('third', 'the core\\'s third')"):
        package.mkdir(exist_ok=True)
        (package / "__init__.py").write_text("")
        (package / "table.py").write_text(PROVIDED_TABLE)
        (package / "entries.py").write_text(PROVIDED_ENTRIES.format(delay=delay))
        (package / "more.py").write_text(f"from polytile_provided_test.table import TABLE\n\n{more}\n")
        importlib.invalidate_caches()
        return importlib.import_module("polytile_provided_test.table").TABLE

    monkeypatch.syspath_prepend(str(tmp_path))
    yield make
    for name in [m for m in sys.modules if m.startswith("polytile_provided_test")]:
        del sys.modules[name]


def test_a_table_imports_its_providers_on_its_first_read(provided_package):
    table = provided_package()
    assert table.providers == ("polytile_provided_test.entries", "polytile_provided_test.more")
    table.add("first", "the plugin's", PLUGIN)  # a plugin registering first fills nothing
    assert "polytile_provided_test.entries" not in sys.modules
    assert table["first"] == "the plugin's"  # the first read: the providers are imported
    assert table.get("second") == "the core's second" and table.get("third") == "the core's third"
    assert table.owner_of("second") == CORE_OWNER
    assert table.remove_owned_by(PLUGIN) == ["first"]  # the plugin's stood over the core's
    assert table["first"] == "the core's first" and table.owner_of("first") == CORE_OWNER


@pytest.mark.parametrize("read", [lambda table: table.get("third"), lambda table: table["third"],
                                  lambda table: "third" in table, lambda table: len(table), list,
                                  lambda table: table.entries(), lambda table: table.find("third")])
def test_every_read_sees_the_providers_entries(provided_package, read):
    table = provided_package()
    read(table)
    assert table.keys() == ["first", "second", "third"] and table.get("first") == "the core's first"


def test_a_provider_that_fails_is_imported_again_on_the_next_read(provided_package):
    table = provided_package(more="raise RuntimeError('half installed')")
    with pytest.raises(RuntimeError, match="half installed"):
        table.get("third")
    provided_package()  # mended
    assert table.get("third") == "the core's third" and table.get("first") == "the core's first"


def test_a_read_in_another_thread_waits_for_the_providers(monkeypatch):
    import threading
    import time

    table: OwnedTable = OwnedTable("thing", providers=("polytile_provided_test.entries",))
    started = threading.Event()

    def slow_import(name):  # the provider registers one entry, then takes its time
        started.set()
        table.add("first", "the core's first", CORE_OWNER)
        time.sleep(0.3)
        table.add("second", "the core's second", CORE_OWNER)
        return None

    monkeypatch.setattr(importlib, "import_module", slow_import)
    reader = threading.Thread(target=table.get, args=("first",))
    reader.start()
    assert started.wait(5)
    assert table.get("second") == "the core's second"  # not None: it waited
    reader.join()


REGISTRATIONS = '''
import importlib, json, pkgutil, sys

from polytile.plugins import registry, tables

made, registered = {}, {}
init, add = tables.OwnedTable.__init__, tables.OwnedTable.add


def recording_init(self, *args, **kwargs):
    init(self, *args, **kwargs)
    made[id(self)] = (self.kind, sys._getframe(1).f_globals["__name__"], list(self.providers))


def recording_add(self, name, obj, owner=None):
    module = registry._importing_module()
    if module.startswith("polytile."):
        registered.setdefault(id(self), set()).add(module)
    return add(self, name, obj, owner)


tables.OwnedTable.__init__, tables.OwnedTable.add = recording_init, recording_add
before = set(sys.modules)
for package in ("polytile.gpu", "polytile.interpreter", "polytile.passes", "polytile.analysis"):
    for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
        importlib.import_module(info.name)
print(json.dumps([(*made[key], sorted(modules)) for key, modules in registered.items() if key in made]))
'''


def test_the_cores_tables_declare_every_core_module_that_registers_in_them():
    """A core module that registers entries at import is a declared provider of the table
    (or defines it): otherwise its entries would be missing unless something imported it
    for that, which is what the providers replace."""
    import json
    import subprocess

    done = subprocess.run([sys.executable, "-c", REGISTRATIONS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    undeclared = [f"{kind} (defined in {home}): {', '.join(sorted(set(modules) - set(providers) - {home}))}"
                  for kind, home, providers, modules in json.loads(done.stdout)
                  if set(modules) - set(providers) - {home}]
    assert not undeclared, "tables filled by modules they do not name as providers:\n  " + "\n  ".join(undeclared)


def test_importing_the_executor_or_the_lowering_imports_no_rule_or_lowering_module():
    """Nothing imports the rule or lowering modules to fill the tables; the first read of
    a table does, and finds the core's entries, owned by the core."""
    import subprocess

    code = textwrap.dedent('''
        import sys
        from polytile.interpreter.executor import BATCHED_RULES, RULES
        from polytile.gpu.allocation import SCRATCH_BYTES
        from polytile.gpu.lowering import LOWERINGS, lower_module
        from polytile.plugins.registry import CORE_OWNER
        from polytile.dialects import tile
        def loaded(*names):
            return [name for name in names if name in sys.modules]
        rules = ["polytile.interpreter.rules" + s for s in ("", "_shape", "_debug", "_block", "_batched", "_batched_flow")]
        lowerings = ["polytile.gpu.lowering." + name for name in ("atomics", "reduce", "scan", "shapes", "tiles", "dot")]
        assert not loaded(*rules, *lowerings), loaded(*rules, *lowerings)
        assert RULES.get(tile.ArangeOp) is sys.modules["polytile.interpreter.rules"].arange_rule
        assert RULES.owner_of(tile.ArangeOp) == CORE_OWNER and not loaded(*rules[4:])
        assert BATCHED_RULES.get(tile.DotOp) is sys.modules["polytile.interpreter.rules"].dot_rule
        assert SCRATCH_BYTES.get(tile.ReduceOp) is not None and LOWERINGS.get(tile.ReduceOp) is not None
        assert LOWERINGS.owner_of(tile.ReduceOp) == CORE_OWNER and not loaded("polytile_nvidia", "polytile_amd")
    ''')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_batched_rules_survive_being_imported_before_the_per_program_rules():
    """Registering a per-program rule drops its owner's batched rule for the class (a new
    meaning); a batched-rule module imported before the per-program rules loads those
    first, so the core's batched rules survive."""
    import subprocess

    code = textwrap.dedent('''
        import polytile.interpreter.rules_batched
        from polytile.interpreter.executor import BATCHED_RULES
        from polytile.dialects import tile
        assert BATCHED_RULES.get(tile.DotOp) is not None and BATCHED_RULES.get(tile.ArangeOp) is not None
    ''')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_backends_units_are_its_own_and_leave_with_it():
    """The NVIDIA and AMD backends register their matrix (and NVIDIA's async-copy and
    mbarrier) units where they build their GpuTarget; the units are the backend's, so a
    manager that disables the backend takes them away, and one that enables it puts
    them back."""
    import subprocess

    code = textwrap.dedent('''
        from polytile.gpu.lowering.async_copy import ASYNC_COPY_UNITS
        from polytile.gpu.lowering.dot import MATRIX_UNITS
        from polytile.gpu.lowering.mbarrier import BARRIER_UNITS
        from polytile.plugins.manager import PluginManager, get_plugin_manager
        from polytile.target import Target

        backends = get_plugin_manager().backends
        backends.get("nvidia").gpu_target(Target.parse("nvidia:sm_90a"))
        backends.get("amd").gpu_target(Target.parse("amd:gfx942"))
        tables = {"NVIDIA": (MATRIX_UNITS, ASYNC_COPY_UNITS, BARRIER_UNITS), "AMD": (MATRIX_UNITS,)}
        owners = {(name, table.kind): table.owner_of(name).distribution for name in tables for table in tables[name]}
        assert owners == {("NVIDIA", "matrix unit"): "polytile-nvidia", ("NVIDIA", "async copy unit"): "polytile-nvidia",
                          ("NVIDIA", "mbarrier unit"): "polytile-nvidia", ("AMD", "matrix unit"): "polytile-amd"}, owners
        PluginManager(disabled=["polytile-nvidia"]).plugins()
        assert all("NVIDIA" not in table for table in tables["NVIDIA"]) and "AMD" in MATRIX_UNITS
        PluginManager().plugins()
        assert all("NVIDIA" in table for table in tables["NVIDIA"])
    ''')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
