"""Language names and value classes from plugins (``polytile_register_builtins``):
``pl.<name>`` of a plugin, the class wrapping values of a plugin's type, the conflicts,
and the error for a name whose plugin is not installed."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest

import polytile.language as pl
from polytile.errors import CompilationError, PluginConflictError
from polytile.ir import DialectType, types as t
from polytile.language import extensions
from polytile.language.core import builtin, tensor
from polytile.plugins import hookimpl
from polytile.plugins.manager import get_plugin_manager, reset_plugin_manager
from polytile.plugins.registry import PluginInfo
from polytile.runtime import jit


@pytest.fixture
def plugins():
    """A fresh plugin manager and builtin registry; the test registers its plugin."""
    reset_plugin_manager()
    extensions.reset()
    yield get_plugin_manager()
    reset_plugin_manager()
    extensions.reset()


@dataclass(frozen=True)
class BoxType(DialectType):
    type_name = "boxes.box"
    width: int


class box(tensor):
    """What a plugin's value class looks like: extra methods on values of its type."""

    __slots__ = ()

    def doubled_width(self) -> int:
        return 2 * self.handle.type.width


@builtin
def twice(x):
    return x * 2


def boxes_plugin(*functions):
    class Plugin:
        @staticmethod
        @hookimpl
        def polytile_register_builtins(registry):
            for fn in functions:
                registry.register(fn)
            registry.register_value_class(BoxType, box)

    return Plugin


def test_a_plugin_builtin_is_pl_name_inside_kernels(plugins):
    plugins.register(boxes_plugin(twice), PluginInfo("boxes", "polytile-boxes", "1.0"))

    @jit
    def kernel(x, out):
        pl.store(out, pl.twice(pl.load(x)))

    x, out = np.array([21], np.int32), np.zeros(1, np.int32)
    kernel[(1,)](x, out, target="interp")
    assert out[0] == 42
    assert extensions.BUILTINS.functions.owner_of("twice").distribution == "polytile-boxes", extensions.BUILTINS.functions.items()


def test_values_of_a_plugin_type_are_wrapped_in_its_value_class(plugins):
    plugins.register(boxes_plugin(), PluginInfo("boxes", "polytile-boxes", "1.0"))

    class FakeValue:
        type = BoxType(3)

    value = tensor(FakeValue())
    assert type(value) is box and value.doubled_width() == 6
    # A value of any other type stays a plain tensor.

    class Plain:
        type = t.i32

    assert type(tensor(Plain())) is tensor


def test_a_plugin_cannot_take_a_core_name(plugins):
    @builtin
    def load(x):
        return x

    plugins.register(boxes_plugin(load), PluginInfo("boxes", "polytile-boxes", "1.0"))
    with pytest.raises(PluginConflictError, match=r"language builtin 'load' is the core's \(pl.load\); plugin "
                                                  r"'boxes' \(distribution 'polytile-boxes' 1.0\) cannot define it"):
        get_plugin_manager().run_registration("polytile_register_builtins", extensions.BUILTINS)


def test_only_builtins_and_tensor_subclasses_register():
    registry = extensions.BuiltinRegistry()
    with pytest.raises(TypeError, match="is not a language builtin"):
        registry.register(lambda x: x)
    with pytest.raises(TypeError, match="must subclass polytile.language.tensor"):
        registry.register_value_class(BoxType, object)
    with pytest.raises(TypeError, match="takes a DialectType subclass"):
        registry.register_value_class(int, box)


def test_an_unknown_name_says_which_distribution_provides_it(plugins):
    with pytest.raises(AttributeError, match="has no attribute 'no_such_builtin'$"):
        pl.no_such_builtin  # noqa: B018
    message = extensions.missing_name_message("make_tensor_descriptor")
    from importlib import metadata

    try:
        metadata.distribution("polytile-tma")
        assert message.endswith("pl.make_tensor_descriptor comes with the plugin distribution 'polytile-tma', which "
                                "is installed but disabled or failed to load (see `polytile info`; the setting "
                                "disabled_plugins)")
    except metadata.PackageNotFoundError:
        assert message.endswith("pl.make_tensor_descriptor comes with the plugin distribution 'polytile-tma', which "
                                "is not installed (pip install polytile-tma)")


def _run_without_tma(tmp_path, code: str) -> subprocess.CompletedProcess:
    """``code`` run as a script in a fresh process with the TMA plugin disabled (kernels
    need a file: their source is read from it)."""
    import os

    script = tmp_path / "script.py"
    script.write_text(code)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "POLYTILE_DISABLE_PLUGINS": "tma"})


@pytest.mark.parametrize("body, error, expected", [
    ("pl.make_tensor_descriptor(x, [n], [1], [8])", "CompilationError",
     "'polytile.language' has no attribute 'make_tensor_descriptor': pl.make_tensor_descriptor comes with the plugin "
     "distribution 'polytile-tma', which is installed but disabled"),
    ("pl.extra.cuda.experimental_device_tensormap_create2d(x, x, [8, 8], [n, n], x.dtype.element_ty)",
     "CompilationError", "'pl.extra.cuda' has no attribute 'experimental_device_tensormap_create2d': "
     "pl.extra.cuda.experimental_device_tensormap_create2d comes with the plugin distribution 'polytile-tma', which "
     "is installed but disabled"),
    ("pl._experimental_descriptor_load(x, [0, 0], [8, 8], pl.float32)", "CompilationError",
     "pl._experimental_descriptor_load comes with the plugin distribution 'polytile-tma', which is installed but "
     "disabled"),
])
def test_a_kernel_using_descriptors_without_the_plugin_says_to_install_it(tmp_path, body, error, expected):
    # A fresh process with the TMA plugin disabled: as if polytile-tma were not installed.
    code = f"""
import numpy as np
import polytile.language as pl
from polytile.runtime import jit

@jit
def kernel(x, n):
    {body}

try:
    kernel[(1,)](np.zeros(8, np.float32), 8, target="interp")
except Exception as error:
    print(type(error).__name__, error)
"""
    result = _run_without_tma(tmp_path, code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(error), result.stdout
    # Installed here (./dev setup installs it), only disabled: the message says so.
    assert expected in result.stdout, result.stdout


def test_a_host_descriptor_passed_without_the_plugin_names_it(tmp_path):
    code = """
import numpy as np
import polytile.language as pl
from polytile.runtime import jit
from polytile.tools.tensor_descriptor import TensorDescriptor

@jit
def kernel(d):
    d.store([0], d.load([0]))

try:
    kernel[(1,)](TensorDescriptor.from_tensor(np.zeros(64, np.float32), [16]), target="interp")
except Exception as error:
    print(type(error).__name__, error)
"""
    result = _run_without_tma(tmp_path, code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("LaunchError kernel 'kernel': argument 'd' is a polytile_tma.host.TensorDescriptor, "
                                    "from the package of plugin 'tma' (distribution 'polytile-tma'"), result.stdout
    assert "which would pass it to kernels, but that plugin is disabled by the setting 'disabled_plugins' (entry " \
        "'tma')" in result.stdout, result.stdout


UNINSTALLED = """
import sys

# polytile-tma uninstalled: polytile's scan of the installed distributions does not see
# it, and its package cannot be imported.
from polytile.plugins import distributions
everything = distributions.distributions
distributions.distributions = lambda: [d for d in everything() if d.key != "polytile-tma"]
sys.modules["polytile_tma"] = None

import numpy as np
import polytile.language as pl
from polytile.runtime import jit

@jit
def plain(x):
    pl.store(x + pl.arange(0, 8), pl.load(x + pl.arange(0, 8)) + 1)

x = np.zeros(8, np.float32)
plain[(1,)](x, target="interp")
print("plain", x.sum())

@jit
def with_descriptor(x, n):
    pl.make_tensor_descriptor(x, [n], [1], [8])

@jit
def with_workspace(x, n):
    pl.extra.cuda.experimental_device_tensormap_create2d(x, x, [8, 8], [n, n], x.dtype.element_ty)

for kernel in (with_descriptor, with_workspace):
    try:
        kernel[(1,)](x, 8, target="interp")
    except Exception as error:
        print(type(error).__name__, error)
try:
    import polytile.tools.tensor_descriptor
except ModuleNotFoundError as error:
    print("ModuleNotFoundError", error)
"""


def test_uninstalled_other_kernels_run_and_descriptors_say_to_install_the_plugin(tmp_path):
    # Not merely disabled: a fresh process that does not see polytile-tma installed.
    script = tmp_path / "uninstalled.py"
    script.write_text(UNINSTALLED)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "plain 8.0", result.stdout
    install = "which is not installed (pip install polytile-tma)"
    assert lines[1].startswith("CompilationError") and "pl.make_tensor_descriptor comes with the plugin " \
        f"distribution 'polytile-tma', {install}" in lines[1], result.stdout
    assert "'pl.extra.cuda' has no attribute 'experimental_device_tensormap_create2d'" in result.stdout
    assert f"pl.extra.cuda.experimental_device_tensormap_create2d comes with the plugin distribution 'polytile-tma', " \
        f"{install}" in result.stdout
    assert "ModuleNotFoundError No module named 'polytile.tools.tensor_descriptor': no installed distribution " \
        "provides it (it comes with 'polytile-tma': pip install polytile-tma)" in result.stdout


def test_with_the_plugin_disabled_other_kernels_still_run(tmp_path):
    code = """
import numpy as np
import polytile.language as pl
from polytile.runtime import jit

@jit
def kernel(x):
    pl.store(x + pl.arange(0, 8), pl.load(x + pl.arange(0, 8)) + 1)

x = np.zeros(8, np.float32)
kernel[(1,)](x, target="interp")
print(x.sum())
"""
    result = _run_without_tma(tmp_path, code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "8.0"


def test_compilation_errors_are_errors_of_the_kernel(plugins):
    @jit
    def kernel(x):
        pl.no_such_builtin(x)

    with pytest.raises(CompilationError, match="no_such_builtin"):
        kernel[(1,)](np.zeros(1, np.float32), target="interp")
