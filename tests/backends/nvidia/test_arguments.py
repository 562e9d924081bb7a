"""Argument packing for cuLaunchKernel: layout, pointer extraction, device choice, errors.

All of it runs without a GPU: pointer arguments are fakes with the attributes torch,
CuPy, the CUDA array interface and DLPack provide.
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass

import numpy as np
import pytest

from polytile.ir import types as t
from polytile.ir.types import DialectType
from polytile.runtime.jit import LaunchError
from polytile_nvidia import arguments
from polytile_nvidia.arguments import ANY_DEVICE, ArgumentPacker, ParameterKind, dlpack_data_pointer

from .fake_cuda import FakeGpu, Kernel, fake_driver, native_module, use_native_launcher  # noqa: F401


class FakeTorchDevice:
    def __init__(self, type_: str, index: int | None):
        self.type = type_
        self.index = index

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"


def _torch_class():
    # Recognised by its module, as real tensors are: torch itself is never imported.
    cls = type("Tensor", (), {
        "__module__": "torch",
        "__init__": lambda self, address, device: setattr(self, "_a", (address, device)),
        "data_ptr": lambda self: self._a[0],
        "is_cuda": property(lambda self: self._a[1] is not None),
        "device": property(lambda self: FakeTorchDevice("cuda", self._a[1]) if self._a[1] is not None
                           else FakeTorchDevice("cpu", None)),
        "get_device": lambda self: -1 if self._a[1] is None else self._a[1],
    })
    return cls


Tensor = _torch_class()


class CaiArray:
    def __init__(self, address: int):
        self.address = address

    @property
    def __cuda_array_interface__(self):
        return {"shape": (4,), "typestr": "<f4", "data": (self.address, False), "version": 3}


CupyArray = type("ndarray", (), {
    "__module__": "cupy._core.core",
    "__init__": lambda self, address, device: setattr(self, "_a", (address, device)),
    "data": property(lambda self: type("MemoryPointer", (), {"ptr": self._a[0]})()),
    "device": property(lambda self: type("Device", (), {"id": self._a[1]})()),
})


class DlpackArray:
    """Wraps a NumPy array, but claims to live on ``device``: the capsule is real."""

    def __init__(self, array: np.ndarray, device: tuple[int, int]):
        self.array = array
        self.device = device

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()


def packer(*types, device_of_pointer=None, kernel="k"):
    params = [(f"a{i}", type_) for i, type_ in enumerate(types)]
    return ArgumentPacker(kernel, params, device_of_pointer=device_of_pointer)


def arguments_seen_by_driver(p: ArgumentPacker) -> list[bytes]:
    """Follow kernelParams as cuLaunchKernel does: pointer array -> each argument's bytes."""
    pointers = (ctypes.c_void_p * len(p.kinds)).from_address(p.params_address)
    return [ctypes.string_at(pointers[i], kind.size) for i, kind in enumerate(p.kinds)]


F32_PTR = t.PointerType(t.f32)


# -- layout ----------------------------------------------------------------------------


def test_layout_aligns_each_value_naturally():
    p = packer(t.i8, F32_PTR, t.f16, t.i32, t.f64, t.i1, t.u16)
    assert p.offsets == (0, 8, 16, 20, 24, 32, 34)
    assert p.size == 36
    assert [k.size for k in p.kinds] == [1, 8, 2, 4, 8, 1, 2]


def test_scalars_are_packed_little_endian_at_their_offsets():
    p = packer(t.i8, t.i16, t.i32, t.i64, t.u8, t.u16, t.u32, t.u64, t.f32, t.f64, t.f16, t.i1)
    p.pack([-1, -2, -3, -4, 255, 65535, 2**32 - 1, 2**64 - 1, 1.5, -2.25, 0.5, True])
    expected = [struct.pack("<b", -1), struct.pack("<h", -2), struct.pack("<i", -3), struct.pack("<q", -4),
                b"\xff", b"\xff\xff", b"\xff" * 4, b"\xff" * 8, struct.pack("<f", 1.5), struct.pack("<d", -2.25),
                np.float16(0.5).tobytes(), b"\x01"]
    assert arguments_seen_by_driver(p) == expected
    for offset, value in zip(p.offsets, expected):
        assert p.packed_bytes()[offset:offset + len(value)] == value


def test_numpy_scalars_are_accepted():
    p = packer(t.i32, t.f32, t.i64, t.i1)
    p.pack([np.int32(7), np.float32(2.5), np.int64(-9), np.True_])
    assert arguments_seen_by_driver(p) == [struct.pack("<i", 7), struct.pack("<f", 2.5), struct.pack("<q", -9), b"\x01"]


@pytest.mark.parametrize("value, bits", [(1.0, 0x3F80), (-2.0, 0xC000), (1.00390625, 0x3F80), (1.01171875, 0x3F82),
                                         (float("inf"), 0x7F80), (float("nan"), 0x7FC0)])
def test_bf16_rounds_to_nearest_even(value, bits):
    p = packer(t.bf16)
    p.pack([value])
    assert arguments_seen_by_driver(p) == [struct.pack("<H", bits)]


def test_the_argument_storage_is_reused_across_launches():
    p = packer(F32_PTR, t.i32)
    address = p.params_address
    p.pack([Tensor(0x1000, 0), 1])
    p.pack([Tensor(0x2000, 0), 2])
    assert p.params_address == address
    assert arguments_seen_by_driver(p) == [struct.pack("<Q", 0x2000), struct.pack("<i", 2)]


def test_no_parameters():
    p = packer()
    assert p.params_address == 0
    assert p.pack([]) == (ANY_DEVICE, False)


# -- pointers --------------------------------------------------------------------------


def test_torch_tensor_gives_address_and_device():
    p = packer(F32_PTR, F32_PTR)
    assert p.pack([Tensor(0xABC0, 1), Tensor(0xDEF0, 1)]) == (1, True)
    assert arguments_seen_by_driver(p) == [struct.pack("<Q", 0xABC0), struct.pack("<Q", 0xDEF0)]


def test_cupy_array_gives_address_and_device():
    p = packer(F32_PTR)
    assert p.pack([CupyArray(0x7000, 2)]) == (2, False)
    assert arguments_seen_by_driver(p) == [struct.pack("<Q", 0x7000)]


def test_cuda_array_interface_asks_the_driver_where_memory_lives():
    asked = []

    def device_of_pointer(address):
        asked.append(address)
        return 3

    p = packer(F32_PTR, device_of_pointer=device_of_pointer)
    assert p.pack([CaiArray(0x9000)]) == (3, False)
    assert asked == [0x9000]
    assert arguments_seen_by_driver(p) == [struct.pack("<Q", 0x9000)]


def test_cuda_array_interface_on_host_memory_is_an_error():
    p = packer(F32_PTR, device_of_pointer=lambda address: None, kernel="add")
    with pytest.raises(LaunchError, match=r"kernel 'add': argument 'a0' points to 0x9000, which is not GPU memory"):
        p.pack([CaiArray(0x9000)])


def test_instance_level_cuda_array_interface_is_read():
    holder = type("Holder", (), {})()
    holder.__cuda_array_interface__ = {"data": (0x4400, False), "shape": (1,), "typestr": "<f4", "version": 3}
    p = packer(F32_PTR, device_of_pointer=lambda address: 0)
    assert p.pack([holder]) == (0, False)
    assert arguments_seen_by_driver(p) == [struct.pack("<Q", 0x4400)]


def test_dlpack_pointer_is_read_from_the_capsule():
    array = np.arange(8, dtype=np.float32)
    assert dlpack_data_pointer(array.__dlpack__()) == array.ctypes.data
    assert dlpack_data_pointer(array[3:].__dlpack__()) == array.ctypes.data + 12


def test_dlpack_array_on_a_cuda_device():
    array = np.arange(4, dtype=np.float32)
    p = packer(F32_PTR)
    assert p.pack([DlpackArray(array, (2, 1))]) == (1, False)
    assert arguments_seen_by_driver(p) == [struct.pack("<Q", array.ctypes.data)]


def test_dlpack_array_on_the_cpu_is_an_error():
    p = packer(F32_PTR, kernel="add")
    with pytest.raises(LaunchError, match=r"kernel 'add': argument 'a0' \(DlpackArray\) lives on the CPU"):
        p.pack([DlpackArray(np.zeros(4), (1, 0))])


def test_none_is_a_null_pointer_on_any_device():
    p = packer(F32_PTR, F32_PTR)
    assert p.pack([None, Tensor(0x10, 4)]) == (4, True)
    assert arguments_seen_by_driver(p)[0] == b"\0" * 8


def test_cpu_torch_tensor_is_an_error_naming_kernel_and_argument():
    p = ArgumentPacker("add_kernel", [("x_ptr", F32_PTR), ("n", t.i32)])
    with pytest.raises(LaunchError) as info:
        p.pack([Tensor(0x10, None), 4])
    assert str(info.value) == ("kernel 'add_kernel': argument 'x_ptr' is a torch tensor on 'cpu'; a GPU kernel needs "
                               "GPU memory: pass tensor.cuda()")


def test_numpy_array_is_an_error():
    p = ArgumentPacker("add_kernel", [("x_ptr", F32_PTR)])
    with pytest.raises(LaunchError, match=r"argument 'x_ptr' is a NumPy array, in host memory; .*torch.as_tensor"):
        p.pack([np.zeros(3)])


def test_a_number_for_a_pointer_is_an_error():
    p = ArgumentPacker("add_kernel", [("x_ptr", F32_PTR)])
    with pytest.raises(LaunchError, match=r"argument 'x_ptr' is int 12345, but the parameter is a pointer"):
        p.pack([12345])


def test_arguments_on_two_devices_are_an_error():
    p = ArgumentPacker("add_kernel", [("x", F32_PTR), ("y", F32_PTR)])
    with pytest.raises(LaunchError) as info:
        p.pack([Tensor(0x10, 0), Tensor(0x20, 1)])
    assert "argument 'y' is on cuda:1, but argument 'x' is on cuda:0" in str(info.value)


# -- scalar errors ---------------------------------------------------------------------


@pytest.mark.parametrize("type_, value, takes", [
    (t.i32, 2**31, "an integer from -2147483648 to 2147483647"),
    (t.u8, -1, "an integer from 0 to 255"),
    (t.i64, 2**63, "an integer from -9223372036854775808 to 9223372036854775807"),
    (t.i32, 1.5, "an integer from -2147483648 to 2147483647"),
    (t.f16, 1e6, "a number of magnitude at most 65504"),
    (t.f32, 1e39, "a number of magnitude at most 3.40282e+38"),
    (t.f64, "x", "a number"),
    (t.bf16, "x", "a number of magnitude at most 3.40282e+38"),
    (t.i1, 2, "True, False, 0 or 1"),
])
def test_scalar_that_does_not_fit_names_argument_and_type(type_, value, takes):
    p = ArgumentPacker("k", [("x", F32_PTR), ("n", type_)])
    with pytest.raises(LaunchError) as info:
        p.pack([None, value])
    assert str(info.value) == (f"kernel 'k': argument 'n' is {type(value).__name__} {value!r}, but parameter 'n' "
                               f"is {type_}, which takes {takes}")


def test_wrong_argument_count():
    p = ArgumentPacker("k", [("x", F32_PTR), ("n", t.i32)])
    with pytest.raises(LaunchError, match=r"kernel 'k' takes 2 run-time arguments \(x, n\), got 1"):
        p.pack([None])


def test_unsupported_parameter_type_is_refused_when_built():
    with pytest.raises(LaunchError, match=r"kernel 'k': parameter 'v': scalar parameters of type f8e4m3"):
        ArgumentPacker("k", [("v", t.f8e4m3)])
    with pytest.raises(LaunchError, match=r"parameter 't' has type tile<4xf32>, which the NVIDIA launcher cannot pass"):
        ArgumentPacker("k", [("t", t.TileType((4,), t.f32))])


def test_plugins_register_parameter_kinds(monkeypatch):
    class Descriptor(t.TileType):
        pass

    monkeypatch.setitem(arguments.PARAMETER_KINDS, Descriptor,
                        lambda type_: ParameterKind("16s", "16 bytes", convert=lambda value: value.to_bytes(16, "little")))
    p = ArgumentPacker("k", [("d", Descriptor((2,), t.f32)), ("n", t.i32)])
    assert p.offsets == (0, 16)
    p.pack([0x0102, 5])
    assert arguments_seen_by_driver(p) == [(0x0102).to_bytes(16, "little"), struct.pack("<i", 5)]


def test_native_plan_lays_out_what_the_native_launcher_packs():
    p = ArgumentPacker("k", [("flag", t.i1), ("x", t.PointerType(t.f32)), ("n", t.i64), ("h", t.f16)])
    header, slots = struct.unpack_from("<4I", p.native_plan(128, 1024)), p.native_plan(128, 1024)[16:]
    assert header == (128, 1024, p.size, 4)
    assert [struct.unpack_from("<B3xI", slots, 8 * i) for i in range(4)] == [
        (ord("?"), 0), (ord("P"), 8), (ord("q"), 16), (ord("e"), 24)]


def test_parameters_only_python_converts_have_no_native_plan():
    assert ArgumentPacker("k", [("x", t.bf16)]).native_plan(32, 0) is None


# -- parameters passed by value (a TMA tensor map) -----------------------------------------


@dataclass(frozen=True)
class TensorMapLike(DialectType):
    """A type passed by value as 128 opaque bytes, as polytile-tma's tensor map is."""

    type_name = "test.map"
    by_value = (128, 64)


@dataclass(frozen=True)
class SmallBlob(DialectType):
    """A by-value type of a size the native launcher leaves to the Python path."""

    type_name = "test.blob"
    by_value = (24, 8)


MAP = bytes(range(128))


def test_a_by_value_parameter_is_its_bytes_at_an_8_aligned_offset():
    p = packer(t.i8, TensorMapLike(), t.i32, SmallBlob(), t.i16)
    assert p.offsets == (0, 8, 136, 144, 168)
    assert p.size == 170
    p.pack([-1, MAP, 7, bytearray(b"x" * 24), 3])
    assert arguments_seen_by_driver(p) == [b"\xff", MAP, struct.pack("<i", 7), b"x" * 24, struct.pack("<h", 3)]
    assert p.packed_bytes()[8:136] == MAP


@pytest.mark.parametrize("value, shown", [
    (MAP[:127], "bytes of 127 bytes"),
    (MAP + b"\0", "bytes of 129 bytes"),
    (b"", "bytes of 0 bytes"),
    (memoryview(MAP), "memoryview of 128 bytes"),
    (12345, "int 12345"),
    (None, "NoneType None"),
    ("x" * 128, "str '" + "x" * 36 + "..."),
])
def test_a_by_value_argument_that_is_not_exactly_its_bytes_names_kernel_and_parameter(value, shown):
    p = ArgumentPacker("tma_copy", [("src", F32_PTR), ("src_map", TensorMapLike())])
    with pytest.raises(LaunchError) as info:
        p.pack([None, value])
    assert str(info.value) == (f"kernel 'tma_copy': argument 'src_map' is {shown}, but parameter 'src_map' is "
                               f"{TensorMapLike()}, which takes a bytes object of exactly 128 bytes")


def test_a_malformed_by_value_is_refused_when_built():
    @dataclass(frozen=True)
    class Broken(DialectType):
        type_name = "test.broken"
        by_value = (0, 8)

    with pytest.raises(LaunchError, match=r"kernel 'k': parameter 'b': its type's by_value size is 0"):
        ArgumentPacker("k", [("b", Broken())])


def test_a_128_byte_by_value_parameter_is_the_native_launchers_code_m():
    p = ArgumentPacker("k", [("x", F32_PTR), ("map", TensorMapLike()), ("n", t.i32)])
    assert p.native_codes() == ("P", "M", "i")
    slots = p.native_plan(128, 0)[16:]
    assert [struct.unpack_from("<B3xI", slots, 8 * i) for i in range(3)] == [
        (ord("P"), 0), (ord("M"), 8), (ord("i"), 136)]
    # Other sizes are packed by the Python path only.
    assert ArgumentPacker("k", [("b", SmallBlob())]).native_codes() is None


def test_native_and_python_paths_pack_a_tensor_map_alike(fake_driver, native_module, monkeypatch):
    from polytile_nvidia.launcher import Launcher

    use_native_launcher(fake_driver, native_module, monkeypatch)
    fake_driver.gpus = [FakeGpu()]
    fake_driver.images[b"tma image"] = {"k": Kernel((1, 128, 8, 4))}
    launcher = Launcher(b"tma image", "k", [("flag", t.i1), ("map", TensorMapLike()), ("x", F32_PTR), ("n", t.i32)],
                        num_warps=1)
    assert launcher.packer.offsets == (0, 8, 136, 144)
    args = [True, MAP, Tensor(0x1000, 0), 5]
    launcher((1, 1, 1), args)  # the Python path: loads the kernel
    python_packed = fake_driver.launches[-1].arguments
    # Anything but bytes of exactly 128 is the Python path's to take (a bytearray) or to explain.
    launcher((1, 1, 1), [True, bytearray(MAP), Tensor(0x1000, 0), 5])
    assert fake_driver.launches[-1].arguments == python_packed
    launches = len(fake_driver.launches)
    with pytest.raises(LaunchError, match=r"argument 'map' is bytes of 64 bytes, but parameter 'map' is "):
        launcher((1, 1, 1), [True, MAP[:64], Tensor(0x1000, 0), 5])
    assert len(fake_driver.launches) == launches

    def refuse(values):
        raise AssertionError("the launch took the Python path")

    monkeypatch.setattr(launcher.packer, "pack", refuse)
    launcher((1, 1, 1), args)
    assert fake_driver.launches[-1].arguments == python_packed == [b"\x01", MAP, struct.pack("<Q", 0x1000),
                                                                   struct.pack("<i", 5)]
