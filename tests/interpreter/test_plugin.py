"""The ``interp`` backend: registration as a builtin plugin, and launching through it."""

from __future__ import annotations

import numpy as np
import pytest

from polytile import config
from polytile.backend import Backend
from polytile.interpreter import InterpreterError
from polytile.interpreter.plugin import InterpreterBackend, polytile_register_backends
from polytile.ir import parse_module
from polytile.plugins.backends import BackendRegistry
from polytile.plugins.manager import PluginManager
from polytile.plugins.registry import CORE_OWNER
from polytile.target import Target

COPY = """
func.func @copy(%x: ptr<i32>, %out: ptr<i32>) attributes {kernel = true} {
  %pid = tile.program_id {axis = 0} : i32
  %c4 = arith.constant {value = 4} : i32
  %start = arith.muli %pid, %c4 : i32
  %r = tile.arange {end = 4, start = 0} : tile<4xi32>
  %s = tile.splat %start : tile<4xi32>
  %offs = arith.addi %s, %r : tile<4xi32>
  %xp = tile.splat %x : tile<4xptr<i32>>
  %xo = tile.addptr %xp, %offs : tile<4xptr<i32>>
  %v = tile.load %xo : tile<4xi32>
  %op = tile.splat %out : tile<4xptr<i32>>
  %oo = tile.addptr %op, %offs : tile<4xptr<i32>>
  tile.store %oo, %v
  func.return
}
"""


@pytest.fixture(autouse=True)
def clean_config():
    config.reset()
    yield
    config.reset()


def test_backend_description():
    backend = InterpreterBackend()
    assert isinstance(backend, Backend)
    assert backend.name == "interp"
    assert backend.description == "NumPy interpreter: runs kernels on any machine"
    assert backend.architectures == ()
    assert backend.active_devices() == []
    assert backend.resolve_target(Target("interp")) == Target("interp")


def test_hook_registers_the_backend():
    registry = BackendRegistry()
    polytile_register_backends(registry)
    assert isinstance(registry.get("interp"), InterpreterBackend)


def test_core_loads_it_as_a_builtin_plugin():
    manager = PluginManager(entry_points=[], builtins=["polytile.interpreter.plugin"], disabled=[])
    backend = manager.backends.get("interp")
    assert isinstance(backend, InterpreterBackend)
    assert manager.backends.owner_of("interp") is CORE_OWNER
    assert manager.backends.probe("interp").devices == ()


def test_launch_runs_the_kernel():
    module = parse_module(COPY)
    x = np.arange(8, dtype=np.int32)
    out = np.zeros(8, dtype=np.int32)
    InterpreterBackend().launch(module, "copy", (2,), [x, out])
    np.testing.assert_array_equal(out, x)


def test_launch_follows_the_bounds_check_setting():
    module = parse_module(COPY)
    x = np.arange(6, dtype=np.int32)
    out = np.zeros(6, dtype=np.int32)
    with pytest.raises(InterpreterError, match="index 6, out of bounds of argument 'x'"):
        InterpreterBackend().launch(module, "copy", (2,), [x, out])
    with config.override(interpreter_bounds_check=False):
        InterpreterBackend().launch(module, "copy", (2,), [x, out])
    np.testing.assert_array_equal(out, x)
