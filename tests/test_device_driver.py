"""The vendor-neutral driver base (polytile.device_driver), run against a toy runtime with
no vendor behind it: what a GPU backend's driver gets from the core, whatever its vendor.

The NVIDIA and AMD drivers run the same code against fakes of their bindings in
tests/backends/nvidia/test_driver.py and tests/backends/amd/test_launcher.py.
"""

from __future__ import annotations

import enum
import types

import pytest

from polytile.backend import BackendUnavailable
from polytile.device_driver import Driver, Function, Module, error_name
from polytile.errors import DriverError, DriverOutOfResourcesError, LaunchError, OutOfResourcesError


class Status(enum.IntEnum):
    OK = 0
    BAD_VALUE = 1
    NO_RESOURCES = 2
    UNKNOWN_MEMORY = 3


class ToyError(DriverError):
    runtime = "Toy runtime"
    hints = {"BAD_VALUE": "pass a good one"}


class ToyOutOfResources(ToyError, DriverOutOfResourcesError):
    resource = "toy registers"


class ToyDriver(Driver):
    device_word = "toy device"
    visible_devices = "TOY_DEVICES limits them"
    runtime_library = "Toy runtime"
    without_runtime = "toy kernels compile without it"
    error_type = ToyError
    out_of_resources = {"NO_RESOURCES": ToyOutOfResources}
    init_call = "toyInit"
    device_count_call = "toyDeviceCount"
    error_string_call = "toyErrorString"
    module_load_call = "toyLoad"
    get_function_call = "toyGetFunction"
    pointer_call = "toyPointerDevice"
    unknown_pointer_status = "UNKNOWN_MEMORY"

    def __init__(self, bindings=None):
        super().__init__(bindings)
        self.current = 0
        self.imports = 0

    def import_bindings(self):
        self.imports += 1
        return toy_bindings()

    def current_device(self):
        return self.current

    def make_current(self, device):
        self.check_device_index(device)
        self.current = device

    def read_properties(self, bindings, device):
        bindings.calls.append(f"properties({device})")
        return {"index": device}

    def query_pointer(self, bindings, address):
        return (Status.OK, address >> 32) if address >= 1 << 32 else (Status.UNKNOWN_MEMORY, None)


def toy_bindings(devices=2, init=Status.OK):
    calls = []

    def toy_get_function(module, name):
        calls.append(f"function({name.decode()})")
        return (Status.OK, f"{module}/{name.decode()}") if name != b"missing" else (Status.BAD_VALUE, None)

    return types.SimpleNamespace(
        calls=calls,
        toyInit=lambda flags: calls.append("init") or (init,),
        toyDeviceCount=lambda: (Status.OK, devices),
        toyErrorString=lambda err: (Status.OK, f"{Status(err).name.lower()} explained".encode()),
        toyLoad=lambda image: (Status.OK, f"module({image.decode()})") if image != b"bad" else (Status.BAD_VALUE,),
        toyGetFunction=toy_get_function)


@pytest.fixture
def toy():
    return ToyDriver()


def test_bindings_are_imported_on_first_use_once(toy):
    assert toy.imports == 0 and toy.bindings is None
    assert toy.initialize() is toy.load_bindings() is toy.bindings
    toy.initialize()
    assert toy.imports == 1 and toy.bindings.calls == ["init"]


def test_a_failed_call_names_the_call_kernel_device_and_hint(toy):
    assert toy.check((Status.OK, 7), "toyCall") == 7
    assert toy.check((Status.OK, 7, 8), "toyCall") == (7, 8)
    assert toy.check((Status.OK,), "toyCall") is None
    assert toy.check(Status.OK, "toyCall") is None  # a bare status, as some bindings return
    with pytest.raises(ToyError) as info:
        toy.check((Status.BAD_VALUE, None), "toyCall", "k", 1)
    assert str(info.value) == ("kernel 'k': Toy runtime call toyCall failed on device 1 with BAD_VALUE "
                               "(bad_value explained): pass a good one")
    assert (info.value.call, info.value.error, info.value.kernel, info.value.device) == ("toyCall", "BAD_VALUE", "k", 1)


def test_an_out_of_resources_status_is_an_error_the_autotuner_drops(toy):
    with pytest.raises(ToyOutOfResources) as info:
        toy.check((Status.NO_RESOURCES,), "toyLaunch", "k", 0)
    error = info.value
    assert isinstance(error, ToyError) and isinstance(error, OutOfResourcesError) and isinstance(error, LaunchError)
    assert (error.kernel, error.resource, error.need, error.limit) == ("k", "toy registers", 0, 0)
    assert str(error).startswith("kernel 'k': Toy runtime call toyLaunch failed on device 0 with NO_RESOURCES")


def test_a_missing_runtime_library_makes_the_backend_unavailable():
    def init(flags):
        raise OSError("libtoy.so: cannot open shared object file")

    bindings = toy_bindings()
    bindings.toyInit = init
    with pytest.raises(BackendUnavailable, match="^Toy runtime not found: libtoy.so: cannot open shared object file; "
                                                 "toy kernels compile without it$"):
        ToyDriver(bindings).initialize()


def test_a_failing_init_is_a_driver_error(toy):
    with pytest.raises(ToyError, match="toyInit failed with BAD_VALUE"):
        ToyDriver(toy_bindings(init=Status.BAD_VALUE)).initialize()


def test_device_indices_are_checked_and_properties_read_once(toy):
    assert toy.device_properties(1) == {"index": 1}
    assert toy.device_properties(1) == {"index": 1}
    assert toy.bindings.calls.count("properties(1)") == 1
    with pytest.raises(LaunchError, match=r"^there is no toy device 2: this process sees 2 \(devices 0, 1; "
                                          r"TOY_DEVICES limits them\)$"):
        toy.device_properties(2)
    with pytest.raises(LaunchError, match=r"sees 0 \(devices none;"):
        ToyDriver(toy_bindings(devices=0)).device_properties(0)


def test_pointers_the_runtime_does_not_know_have_no_device(toy):
    assert toy.device_of_pointer(3 << 32) == 3
    assert toy.device_of_pointer(0x1000) is None


def test_a_module_loads_on_a_device_and_looks_each_function_up_once(toy):
    module = toy.load_module(b"image", device=1, name="k")
    assert isinstance(module, Module) and (module.handle, module.device, toy.current) == ("module(image)", 1, 1)
    function = module.function("k")
    assert isinstance(function, Function)
    assert module.function("k") is function and toy.bindings.calls.count("function(k)") == 1
    assert (function.handle, function.device, function.driver) == ("module(image)/k", 1, toy)
    assert repr(function) == "<polytile.device_driver.Function 'k' on device 1>"
    with pytest.raises(ToyError, match=r"^kernel 'missing': Toy runtime call toyGetFunction\('missing'\) failed on "
                                       r"device 1 with BAD_VALUE"):
        module.function("missing")
    with pytest.raises(ToyError, match="^kernel 'k': Toy runtime call toyLoad failed on device 0 with BAD_VALUE"):
        toy.load_module(b"bad", device=0, name="k")


def test_error_names_of_enum_members_and_plain_values():
    assert error_name(Status.BAD_VALUE) == "BAD_VALUE"
    assert error_name(5) == "5"
