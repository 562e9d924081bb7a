"""The backend contract as a test suite: what every backend, in-tree or third-party, must do.

polytile's own tests run it over every installed backend (``tests/backends/test_contract.py``);
a backend distribution runs it against itself in its own tests (docs/plugins.md, "Testing
a backend against the contract")::

    import pytest
    from polytile.backend_tests import BackendContract, ContractCase
    from polytile_mygpu import MyGpuBackend

    class TestMyGpuContract(BackendContract):
        @pytest.fixture
        def case(self):
            return ContractCase(MyGpuBackend(), plugin="polytile_mygpu.plugin",
                                vendor_modules=("mygpu_sdk",))

:class:`BackendContract` holds the tests; pytest collects them from the subclass (the
base's name does not start with ``Test``, so importing it runs nothing).  They take one
fixture, ``case``: a :class:`ContractCase` holding the backend and what is expected of it.
Everything a case leaves out is derived from the backend itself (its architectures, its
options class), so ``ContractCase(MyGpuBackend())`` alone runs the whole suite; the
fields say more where a backend wants the suite to hold it to more (the exact messages
of its option checks, the modules it must not import before a launch).

The suite checks: targets (every architecture resolves, a target without one or with an
unknown one is refused with the choices or a close match, another backend's target is
refused); options (typed, immutable, defaults, unknown names with close matches, values
of the wrong type or out of range refused, num_warps a power of two); devices (a list of
this backend's devices or :class:`~polytile.backend.BackendUnavailable` with a short
reason, never another exception; missing vendor bindings said so); versions (strings,
for the cache key); packaging (the plugin module registers the backend; importing it and
resolving targets loads no vendor module); and a kernel that compiles for every
architecture, runs on the host device or, marked ``gpu``, on an active device, and is
refused, naming the argument, host memory where it runs on a device.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import types
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pytest

from . import language as pl
from .backend import Backend, BackendOptions, BackendUnavailable, Device
from .errors import ConfigError, TargetError, UnknownNameError
from .runtime.jit import jit
from .target import Target


@dataclass
class ContractCase:
    """One backend and what the contract suite expects of it; every field but
    ``backend`` may be left out (derived from the backend, or not checked)."""

    backend: Backend
    #: The architectures it must list, in this order (default: those it lists).
    architectures: Sequence[str] | None = None
    #: Its ``default_architecture`` (default ``...``: not checked).
    default_architecture: Any = ...
    #: Its options class (default: not checked beyond being a frozen dataclass derived
    #: from BackendOptions).
    options_class: type | None = None
    #: ``(misspelt architecture, the one the error must suggest)`` pairs (default: each
    #: architecture with an "x" appended, suggesting itself).
    architecture_typos: Sequence[tuple[str, str]] | None = None
    #: A target of another backend, which this one must refuse.
    foreign_target: str = "other-backend"
    #: Option values the defaults must have, and options given with the values they
    #: must parse to (``{"num_warps": 8}``; default: num_warps 8 and num_stages 2).
    default_options: Mapping[str, Any] = field(default_factory=dict)
    parsed_options: Mapping[str, Any] | None = None
    #: ``(misspelt option, the one the error must suggest)`` pairs (default: each option
    #: name less its last letter).
    option_typos: Sequence[tuple[str, str]] | None = None
    #: Options of other backends, unknown to this one (``{"waves_per_eu": 2}``).
    foreign_options: Mapping[str, Any] = field(default_factory=dict)
    #: ``(options, what the error must say)`` for values of the wrong type (default: a
    #: string for each integer option, 1 for each boolean one).
    wrong_types: Sequence[tuple[Mapping[str, Any], str]] | None = None
    #: ``(options, what the ConfigError must say)`` for values of the right type that the
    #: backend refuses (out of range, unsupported).
    refused_options: Sequence[tuple[Mapping[str, Any], str]] = (({"num_stages": 0}, "'num_stages'"),)
    #: num_warps values it must refuse (the error naming the value) and accept.
    bad_num_warps: Sequence[int] = (0, -4, 3, 6)
    good_num_warps: Sequence[int] = (1, 2, 4, 8)
    #: How its BackendUnavailable reasons may begin, where it has no device (default:
    #: any text, not checked).
    unavailable_reasons: Sequence[str] = ()
    #: The vendor modules to hide and how the reason must then begin
    #: (``(("hip",), "hip-python is not installed")``); None: not checked.
    missing_bindings: tuple[Sequence[str], str] | None = None
    #: The module with its ``polytile_register_backends`` hook (default:
    #: ``<its top-level package>.plugin``).
    plugin: str | None = None
    #: Top-level modules that importing the backend and resolving its targets must not
    #: load (``("cuda", "llvmlite")``).
    vendor_modules: Sequence[str] = ()
    #: Whether asking its versions must not load them either (False where a version comes
    #: from a vendor module: NVIDIA's assembler, from nvJitLink).
    versions_without_vendor_modules: bool = True
    #: Tells a compile failure that means "a tool this machine lacks" (the reason to skip
    #: with), from a real failure (None).
    missing_tool: Callable[[BaseException], str | None] = lambda error: None

    def __post_init__(self) -> None:
        backend = self.backend
        if self.architectures is None:
            self.architectures = tuple(backend.architectures)
        if self.architecture_typos is None:
            self.architecture_typos = [(f"{arch}x", arch) for arch in self.architectures]
        names = [f.name for f in dataclasses.fields(backend.options_class)]
        if self.option_typos is None:
            self.option_typos = [(name[:-1], name) for name in names if name[:-1] not in names]
        if self.parsed_options is None:
            self.parsed_options = {"num_warps": 8, "num_stages": 2}
        if self.wrong_types is None:
            kinds = {f.name: f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
                     for f in dataclasses.fields(backend.options_class)}
            self.wrong_types = [({name: "1"}, f"'{name}' of backend '{backend.name}' must be an integer")
                                for name, kind in kinds.items() if kind == "int"]
            self.wrong_types += [({name: 1}, f"'{name}' of backend '{backend.name}' must be True or False")
                                 for name, kind in kinds.items() if kind == "bool"]
        if self.plugin is None:
            self.plugin = f"{type(backend).__module__.split('.')[0]}.plugin"

    def target(self, arch: str | None = None) -> Target:
        return Target(self.backend.name, arch)

    def targets(self) -> list[Target]:
        """One target per architecture (the backend's name alone where it has none)."""
        return [self.target(arch) for arch in self.architectures] or [self.target()]

    def __str__(self) -> str:
        return self.backend.name


def installed_cases(known: Mapping[str, Callable[[Backend], ContractCase]] = {}) -> list[ContractCase]:
    """A case for every backend installed and enabled here: ``known[name](backend)`` where
    the caller has one for it, else ``ContractCase(backend)``."""
    from .plugins.manager import get_plugin_manager

    return [known.get(backend.name, ContractCase)(backend) for backend in get_plugin_manager().backends.ordered()]


def _import_root(module: str) -> str:
    """The sys.path directory that ``module`` (its top-level package or module) is imported from."""
    path = Path(import_module(module.split(".")[0]).__file__)
    return str(path.parents[1] if path.name == "__init__.py" else path.parent)


@jit
def contract_add(x, y, out, n, BLOCK: pl.constexpr):
    """A vector add: the smallest kernel that reads, computes and writes."""
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    pl.store(out + offs, pl.load(x + offs, mask=mask) + pl.load(y + offs, mask=mask), mask=mask)


class BackendContract:
    """The contract tests; subclass as ``Test...`` and give it a ``case`` fixture."""

    # -- identity and targets -----------------------------------------------------------------

    def test_identity(self, case):
        backend = case.backend
        assert backend.name and ":" not in backend.name
        assert backend.description
        assert tuple(backend.architectures) == tuple(case.architectures)
        if case.default_architecture is not ...:
            assert backend.default_architecture == case.default_architecture
        assert issubclass(backend.options_class, BackendOptions) and dataclasses.is_dataclass(backend.options_class)
        if case.options_class is not None:
            assert backend.options_class is case.options_class

    def test_every_architecture_resolves(self, case):
        for arch in case.architectures:
            assert case.backend.resolve_target(Target.parse(f"{case.backend.name}:{arch}")) == case.target(arch)

    def test_a_target_without_architecture_resolves_or_lists_the_choices(self, case):
        backend = case.backend
        if not case.architectures:
            assert backend.resolve_target(Target.parse(backend.name)) == case.target()
            with pytest.raises(TargetError, match=f"backend '{backend.name}' takes no architecture"):
                backend.resolve_target(case.target("x"))
            return
        if backend.default_architecture is not None:
            assert backend.resolve_target(Target.parse(backend.name)) == case.target(backend.default_architecture)
            return
        with pytest.raises(TargetError) as info:
            backend.resolve_target(Target.parse(backend.name))
        message = str(info.value)
        assert "names no architecture" in message
        for arch in case.architectures:
            assert f"'{backend.name}:{arch}'" in message

    def test_an_unknown_architecture_suggests_close_matches(self, case):
        for arch, suggestion in case.architecture_typos:
            with pytest.raises(TargetError) as info:
                case.backend.resolve_target(case.target(arch))
            message = str(info.value)
            assert f"backend '{case.backend.name}' has no architecture '{arch}'" in message
            assert f"'{suggestion}'" in message
            assert "did you mean" in message

    def test_another_backends_target_is_refused(self, case):
        with pytest.raises(TargetError, match=f"cannot compile for target '{case.foreign_target}'"):
            case.backend.resolve_target(Target.parse(case.foreign_target))

    # -- options -------------------------------------------------------------------------------

    def test_default_options(self, case):
        options = case.backend.parse_options({})
        assert options == case.backend.options_class()
        for name, value in case.default_options.items():
            assert getattr(options, name) == value, name

    def test_options_are_parsed(self, case):
        options = case.backend.parse_options(dict(case.parsed_options))
        assert isinstance(options, case.backend.options_class)
        for name, value in case.parsed_options.items():
            assert getattr(options, name) == value, name

    def test_options_are_immutable(self, case):
        with pytest.raises(dataclasses.FrozenInstanceError):
            case.backend.parse_options({}).num_warps = 8

    def test_an_unknown_option_suggests_close_matches(self, case):
        for name, suggestion in case.option_typos:
            with pytest.raises(UnknownNameError) as info:
                case.backend.parse_options({name: 1})
            assert f"option for backend '{case.backend.name}'" in str(info.value)
            assert f"'{suggestion}'" in str(info.value)

    def test_another_backends_options_are_unknown_here(self, case):
        for name, value in case.foreign_options.items():
            with pytest.raises(UnknownNameError, match=name):
                case.backend.parse_options({name: value})

    def test_an_option_of_the_wrong_type_is_refused(self, case):
        for options, fragment in case.wrong_types:
            with pytest.raises(ConfigError) as info:
                case.backend.parse_options(dict(options))
            assert fragment in str(info.value), (options, str(info.value))

    def test_refused_option_values(self, case):
        for options, fragment in case.refused_options:
            with pytest.raises(ConfigError) as info:
                case.backend.parse_options(dict(options))
            assert fragment in str(info.value), (options, str(info.value))

    def test_num_warps_is_a_power_of_two(self, case):
        for num_warps in case.bad_num_warps:
            with pytest.raises(ConfigError, match="num_warps") as info:
                case.backend.parse_options({"num_warps": num_warps})
            assert str(num_warps) in str(info.value)
        for num_warps in case.good_num_warps:
            assert case.backend.parse_options({"num_warps": num_warps}).num_warps == num_warps

    # -- devices, versions -------------------------------------------------------------------------

    def test_active_devices_are_a_list_or_a_clear_reason(self, case):
        backend = case.backend
        try:
            devices = backend.active_devices()
        except BackendUnavailable as exc:
            message = str(exc)
            assert message and "Traceback" not in message
            if case.unavailable_reasons:
                assert message.startswith(tuple(case.unavailable_reasons)), message
        else:
            assert isinstance(devices, list)
            for device in devices:
                assert isinstance(device, Device)
                assert device.target.backend == backend.name
                assert device.target.arch in (case.architectures or (None,)), device

    def test_the_host_device_is_for_backends_that_launch_without_hardware(self, case):
        host = case.backend.host_device()
        if host is not None:
            assert isinstance(host, Device) and host.target.backend == case.backend.name
            assert case.backend.can_launch()

    def test_a_backend_that_launches_on_a_device_says_how_to_wait_for_it(self, case):
        # The autotuner times trials up to Backend.synchronize(); the default waits for
        # nothing, which is right only where a launch returns when its kernel is done.
        from polytile.backend import Backend

        backend = case.backend
        if not backend.can_launch() or backend.host_device() is not None:
            pytest.skip(f"backend '{backend.name}' " + ("runs kernels on the host" if backend.can_launch()
                                                        else "launches nothing"))
        assert type(backend).synchronize is not Backend.synchronize, (
            f"backend '{backend.name}' launches kernels on a device but does not override Backend.synchronize(): "
            "the autotuner would time its launches, not its kernels")

    def test_missing_vendor_bindings_are_said_so(self, case, monkeypatch):
        if case.missing_bindings is None:
            pytest.skip(f"the case of backend '{case.backend.name}' names no vendor bindings")
        modules, reason = case.missing_bindings
        for module in modules:
            monkeypatch.setitem(sys.modules, module, None)
        with pytest.raises(BackendUnavailable) as info:
            case.backend.active_devices()
        assert str(info.value).startswith(reason), str(info.value)

    def test_versions_are_strings(self, case):
        versions = case.backend.versions()
        assert all(isinstance(key, str) and isinstance(value, str) and value for key, value in versions.items()), \
            versions

    # -- packaging ---------------------------------------------------------------------------

    def test_the_plugin_registers_the_backend(self, case):
        registered: list = []
        import_module(case.plugin).polytile_register_backends(registry=types.SimpleNamespace(
            register=registered.append))
        assert len(registered) == 1 and type(registered[0]) is type(case.backend)

    def test_importing_it_loads_no_vendor_module(self, case):
        cls = type(case.backend)
        code = (
            f"import sys, polytile, {cls.__module__}, {case.plugin}\n"
            f"backend = {cls.__module__}.{cls.__qualname__}()\n"
            f"for target in {[str(t) for t in case.targets()]!r}:\n"
            "    backend.resolve_target(polytile.Target.parse(target))\n"
            f"{'backend.versions()' if case.versions_without_vendor_modules else ''}\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {tuple(case.vendor_modules)!r}))\n"
        )
        roots = {_import_root(name) for name in ("polytile", cls.__module__, case.plugin)}
        path = os.pathsep.join([*sorted(roots), os.environ.get("PYTHONPATH", "")])
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                env={**os.environ, "PYTHONPATH": path})
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "[]"

    # -- a kernel ----------------------------------------------------------------------------

    def test_a_kernel_compiles_for_every_architecture(self, case):
        import numpy as np

        from .compiler import compile_module

        x = np.zeros(256, np.float32)
        for target in case.targets():
            try:
                result = compile_module(contract_add.lower(x, x, x, 256, BLOCK=128), str(target))
            except Exception as exc:  # noqa: BLE001 - a missing tool skips; anything else fails
                reason = case.missing_tool(exc)
                if reason is None:
                    raise
                pytest.skip(f"{target}: {reason}")
            assert result.target == target
            assert type(result.backend) is type(case.backend)
            assert all(isinstance(value, bytes) and value for value in result.binaries.values())

    def test_a_kernel_runs_on_the_host_device(self, case):
        if case.backend.host_device() is None:
            pytest.skip(f"backend '{case.backend.name}' has no host device")
        import numpy as np

        x, y = np.arange(300, dtype=np.float32), np.full(300, 0.5, np.float32)
        out = np.zeros_like(x)
        contract_add[(3,)](x, y, out, 300, BLOCK=128, target=str(case.target()))
        assert np.array_equal(out, x + y)
        contract_add[(0,)](x, y, np.zeros_like(x), 300, BLOCK=128, target=str(case.target()))  # launches nothing
        assert np.array_equal(out, x + y)

    def test_host_memory_is_refused_naming_the_kernel_and_argument(self, case):
        backend = case.backend
        if backend.host_device() is not None or not backend.can_launch():
            pytest.skip(f"backend '{backend.name}' " + ("runs kernels on the host" if backend.can_launch()
                                                        else "compiles but does not launch"))
        import numpy as np

        from .errors import LaunchError

        x = np.zeros(16, np.float32)
        with pytest.raises(LaunchError) as info:
            contract_add[(1,)](x, x, x, 16, BLOCK=16, target=str(case.targets()[-1]))
        assert "kernel 'contract_add'" in str(info.value) and "argument 'x'" in str(info.value), str(info.value)

    @pytest.mark.gpu
    def test_a_kernel_runs_on_an_active_device(self, case):
        try:
            devices = case.backend.active_devices()
        except BackendUnavailable as exc:
            pytest.skip(f"backend '{case.backend.name}' has no device: {exc}")
        if not devices:
            pytest.skip(f"backend '{case.backend.name}' has no device")
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("torch cannot use the GPU")
        x = torch.arange(300, dtype=torch.float32, device="cuda")
        y = torch.full((300,), 0.5, dtype=torch.float32, device="cuda")
        out = torch.zeros_like(x)
        contract_add[(3,)](x, y, out, 300, BLOCK=128, target=str(devices[0].target))
        torch.cuda.synchronize()
        assert torch.equal(out, x + y)
        contract_add[(0,)](x, y, torch.zeros_like(x), 300, BLOCK=128, target=str(devices[0].target))  # nothing
        torch.cuda.synchronize()
        assert torch.equal(out, x + y)


__all__ = ["BackendContract", "ContractCase", "installed_cases"]
