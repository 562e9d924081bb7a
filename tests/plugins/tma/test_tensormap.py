"""Tensor maps (``polytile_tma.tensormap``): what is asked of cuTensorMapEncodeTiled, the
cache, and the checks made before asking.

Without a GPU the driver call is a fake that records its arguments and answers
recognizable bytes; the test marked ``gpu`` encodes real maps.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from polytile_tma import tensormap
from polytile_tma.tensormap import TensorMapError, encode_tensor_map

from tests.backends.nvidia.fake_cuda import nvidia_gpu  # noqa: F401  (a fixture)


class FakeCalls:
    """The driver's calls as far as the encoder's error path asks them."""

    def cuGetErrorString(self, err):  # noqa: N802 - the driver's name
        return 0, b"invalid argument"


class Refused(int):
    name = "CUDA_ERROR_INVALID_VALUE"


class FakeEncoder:
    """cuTensorMapEncodeTiled as tensor_map_encoder answers it: records each call and
    answers 128 bytes made from the address (or the result it is told to give)."""

    def __init__(self):
        self.calls = []
        self.result = 0

    def __call__(self, *args):
        self.calls.append(args)
        if self.result:
            return Refused(self.result), b""
        address = args[2]
        return 0, address.to_bytes(8, "little") * 16


@pytest.fixture
def encoder(monkeypatch):
    fake = FakeEncoder()
    monkeypatch.setattr(tensormap, "_encoder", (fake, FakeCalls()))
    monkeypatch.setattr(tensormap, "_MAPS", {})
    return fake


def test_the_driver_gets_the_innermost_dimension_first_and_strides_in_bytes(encoder):
    tensor_map = encode_tensor_map(0x10000, "f16", (4, 256, 512), (256 * 520, 520, 1), (1, 64, 64), 128, "zero")
    assert tensor_map == (0x10000).to_bytes(8, "little") * 16
    (call,) = encoder.calls
    data_type, rank, address, dims, strides, box, element_strides, interleave, swizzle, l2, fill = call
    assert (data_type, rank, address) == (6, 3, 0x10000)  # CU_TENSOR_MAP_DATA_TYPE_FLOAT16
    assert tuple(dims) == (512, 256, 4)
    assert tuple(strides) == (520 * 2, 256 * 520 * 2)  # dimensions 1 and 2, in bytes
    assert tuple(box) == (64, 64, 1)
    assert tuple(element_strides) == (1, 1, 1)
    # No interleave; CU_TENSOR_MAP_SWIZZLE_128B; L2 promotion 128B (Triton's); zero fill.
    assert (interleave, swizzle, l2, fill) == (0, 3, 2, 0)


@pytest.mark.parametrize("element, data_type", [
    ("f16", 6), ("bf16", 9), ("f32", 7), ("f64", 8), ("i8", 0), ("u8", 0), ("f8e4m3", 0), ("f8e5m2", 0),
    ("i16", 1), ("u16", 1), ("i32", 3), ("u32", 2), ("i64", 5), ("u64", 4),
])
def test_each_element_type_has_its_data_type(encoder, element, data_type):
    size = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i16": 2, "u16": 2, "i32": 4, "u32": 4, "i64": 8,
            "u64": 8}.get(element, 1)
    encode_tensor_map(0x20000, element, (64, 64), (64, 1), (8, 16 // size), 0, "zero")
    assert encoder.calls[-1][0] == data_type
    assert tuple(encoder.calls[-1][4]) == (64 * size,)


@pytest.mark.parametrize("swizzle, value", [(0, 0), (32, 1), (64, 2), (128, 3)])
def test_swizzle_bytes_give_the_drivers_swizzle(encoder, swizzle, value):
    encode_tensor_map(0x20000, "f16", (64, 64), (64, 1), (8, 16), swizzle, "zero")
    assert encoder.calls[-1][8] == value


def test_nan_padding_asks_for_the_nan_fill(encoder):
    encode_tensor_map(0x20000, "f32", (64, 64), (64, 1), (8, 16), 64, "nan")
    assert encoder.calls[-1][10] == 1  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA


def test_a_rank_1_map_has_no_strides(encoder):
    encode_tensor_map(0x20000, "f32", (1000,), (1,), (64,), 0, "zero")
    assert (encoder.calls[-1][1], tuple(encoder.calls[-1][3]), tuple(encoder.calls[-1][4])) == (1, (1000,), ())


def test_maps_are_cached_by_everything_including_the_address(encoder):
    args = ("bf16", (128, 128), (128, 1), (64, 64), 128, "zero")
    first = encode_tensor_map(0x40000, *args)
    assert encode_tensor_map(0x40000, *args) is first
    assert len(encoder.calls) == 1
    moved = encode_tensor_map(0x80000, *args)  # the same shape elsewhere: another map
    assert moved != first and len(encoder.calls) == 2
    # Any other field misses too.
    encode_tensor_map(0x40000, "bf16", (128, 128), (128, 1), (64, 32), 128, "zero")
    encode_tensor_map(0x40000, "bf16", (128, 128), (128, 1), (64, 64), 128, "nan")
    assert len(encoder.calls) == 4
    # Lists and NumPy integers name the same map as tuples of ints.
    np = pytest.importorskip("numpy")
    assert encode_tensor_map(np.int64(0x40000), "bf16", [128, np.int32(128)], [128, 1], [64, 64], 128, "zero") \
        is first
    assert len(encoder.calls) == 4


def test_the_cache_is_bounded(encoder, monkeypatch):
    monkeypatch.setattr(tensormap, "_MAX_CACHED", 3)
    for address in range(0x1000, 0x1000 + 16 * 5, 16):
        encode_tensor_map(address, "f32", (64,), (1,), (16,), 0, "zero")
    assert 1 <= len(tensormap._MAPS) <= 3


@pytest.mark.parametrize("args, rule", [
    ((0x10008, "f16", (64, 64), (64, 1), (16, 16), 0, "zero"), r"the address must be a multiple of 16 bytes"),
    ((0x10000, "f16", (64, 64), (64, 1), (16, 300), 0, "zero"), r"box\[1\] = 300: each box extent must be 1 to 256"),
    ((0x10000, "f16", (64, 64), (64, 1), (0, 16), 0, "zero"), r"box\[0\] = 0: each box extent must be 1 to 256"),
    ((0x10000, "f16", (64, 64), (64, 1), (16, 4), 0, "zero"),
     r"box\[-1\] = 4 f16 elements = 8 bytes: the innermost box extent must be a multiple of 16 bytes"),
    ((0x10000, "f16", (64, 128), (128, 1), (16, 128), 128, "zero"),
     r"with swizzle 128, the innermost box extent must be at most 128 bytes \(64 elements\)"),
    ((0x10000, "f16", (64, 64), (60, 1), (16, 16), 0, "zero"),
     r"strides\[0\] = 60 elements = 120 bytes: every stride but the last must be a multiple of 16 bytes "
     r"\(8 f16 elements\)"),
    ((0x10000, "f16", (64, 64), (1, 64), (16, 16), 0, "zero"), r"the last stride is 64: the innermost dimension must"),
    ((0x10000, "f16", (64, 64), (64, 1, 1), (16, 16), 0, "zero"), r"one entry per dimension \(2\)"),
    ((0x10000, "f16", (2,) * 6, (1,) * 6, (1,) * 6, 0, "zero"), r"a tensor map has 1 to 5 dimensions, not 6"),
    ((0x10000, "f16", (64, 0), (64, 1), (16, 16), 0, "zero"), r"shape\[1\] = 0: each extent must be 1 to 2\*\*32"),
    ((0x10000, "f16", (64, 64), (64, 1), (16, 16), 16, "zero"), r"swizzle 16 is not 0, 32, 64 or 128 \(bytes\)"),
    ((0x10000, "f16", (64, 64), (64, 1), (16, 16), 0, "inf"), r"padding 'inf' is not one of 'zero' or 'nan'"),
    ((0x10000, "i1", (64, 64), (64, 1), (16, 16), 0, "zero"), r"element type 'i1' has no tensor map"),
    ((0x10000, "f16", (64, 64.0), (64, 1), (16, 16), 0, "zero"), r"shape must be a sequence of integers"),
])
def test_what_the_driver_would_refuse_is_explained_first(encoder, args, rule):
    with pytest.raises(TensorMapError, match=rule):
        encode_tensor_map(*args)
    assert not encoder.calls


def test_the_explanation_lists_the_values_asked_for(encoder):
    with pytest.raises(TensorMapError) as info:
        encode_tensor_map(0x10000, "f16", (64, 64), (64, 1), (16, 4), 32, "zero")
    assert str(info.value).endswith("asked for element f16, shape (64, 64), strides (64, 1) (elements), box (16, 4), "
                                    "swizzle 32, padding 'zero', address 0x10000")


@pytest.mark.parametrize("element", ["i32", "u8", "i64", "f8e4m3", "f8e5m2"])
def test_nan_padding_of_non_float_elements_is_refused(encoder, element):
    with pytest.raises(TensorMapError, match=rf"padding 'nan' needs floating-point elements .*; {element} elements"):
        encode_tensor_map(0x10000, element, (64, 64), (64, 1), (16, 16), 0, "nan")
    assert not encoder.calls


def test_a_driver_refusal_names_the_error_and_the_values(encoder):
    encoder.result = 1
    with pytest.raises(TensorMapError) as info:
        encode_tensor_map(0x10000, "f32", (64, 64), (64, 1), (16, 16), 64, "zero")
    assert str(info.value) == ("cuTensorMapEncodeTiled refused the tensor map: CUDA_ERROR_INVALID_VALUE (invalid "
                               "argument); asked for element f32, shape (64, 64), strides (64, 1) (elements), box "
                               "(16, 16), swizzle 64, padding 'zero', address 0x10000")
    assert not tensormap._MAPS  # nothing cached for a refusal
    assert isinstance(info.value, ValueError)


def test_importing_it_imports_neither_the_nvidia_backend_nor_cuda_bindings():
    code = ("import sys, polytile_tma.tensormap; "
            "print([m for m in sys.modules if m.startswith(('polytile_nvidia', 'cuda'))])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- on a GPU ----------------------------------------------------------------------------


@pytest.mark.gpu
def test_real_maps_are_128_bytes_and_depend_on_the_address(nvidia_gpu, monkeypatch):  # noqa: F811
    from polytile_nvidia import driver

    from tests.backends.nvidia.fake_cuda import DeviceBuffer

    if int("".join(c for c in nvidia_gpu.target.arch[3:] if c.isdigit())) < 90:
        pytest.skip(f"tensor maps need a Hopper GPU (sm_90a); the first GPU is {nvidia_gpu.target.arch}")
    monkeypatch.setattr(tensormap, "_MAPS", {})
    driver.activate(0)
    buffer = DeviceBuffer(2 * 256 * 256)
    try:
        address = int(buffer.pointer)
        first = encode_tensor_map(address, "f16", (256, 256), (256, 1), (64, 64), 128, "zero")
        second = encode_tensor_map(address + 256 * 2 * 64, "f16", (128, 256), (256, 1), (64, 64), 128, "zero")
        assert isinstance(first, bytes) and len(first) == len(second) == 128
        assert any(first) and first != second
        nan = encode_tensor_map(address, "f32", (128, 128), (128, 1), (32, 32), 128, "nan")
        assert len(nan) == 128 and nan != first
    finally:
        buffer.free()
