"""Host tensor descriptors (polytile_tma.host.TensorDescriptor): Triton 3.6's class and
rules, on NumPy arrays and array-like objects, with the reason of every rule in its message."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest

from polytile.errors import LaunchError, PolytileError
from polytile.runtime import jit
from polytile_tma.host import TensorDescriptor


def aligned(shape, dtype=np.float16, offset=0):
    """A zeroed array whose first element lies ``offset`` bytes past a 64-byte boundary:
    alignment tests must not depend on where the allocator puts memory."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.zeros(nbytes + 64 + offset, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    return raw[start:start + nbytes].view(dtype).reshape(shape)


class DeviceArray:
    """An array of another library: data_ptr(), dtype, shape and stride() in elements, as
    torch's tensors have them (over NumPy memory here)."""

    def __init__(self, array, dtype):
        self.array = array
        self.dtype = dtype
        self.shape = array.shape

    def data_ptr(self):
        return self.array.ctypes.data

    def stride(self):
        return tuple(s // self.array.itemsize for s in self.array.strides)


class TorchDtypeLike:
    """Prints as torch's dtypes do (``torch.float8_e4m3fn``) and has no ``name``."""

    def __init__(self, name):
        self.text = f"torch.{name}"

    def __str__(self):
        return self.text


def build(shape, strides, block_shape, dtype=np.float16, padding="zero", offset=0):
    """A descriptor of a fresh aligned array large enough for ``shape`` and ``strides``."""
    extent = 1 + sum((n - 1) * abs(s) for n, s in zip(shape, strides) if n > 0)
    base = aligned((max(extent, 1),), dtype, offset)
    return TensorDescriptor(base, shape, strides, block_shape, padding)


# -- construction -------------------------------------------------------------------------


@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_from_tensor_numpy_every_rank(rank):
    shape = (2,) * (rank - 1) + (32,)
    array = aligned(shape, np.float32)
    block = [1] * (rank - 1) + [8]
    desc = TensorDescriptor.from_tensor(array, block_shape=block)
    assert desc.rank == rank
    assert tuple(desc.shape) == shape
    # NumPy's byte strides, in elements: C order of (2, ..., 2, 32) f32.
    assert tuple(desc.strides) == tuple(int(np.prod(shape[i + 1:])) for i in range(rank))
    assert desc.block_shape == block
    assert desc.padding == "zero"
    assert desc.element == "f32"
    assert desc.element_bytes == 4
    assert desc.address == array.ctypes.data
    assert desc.problems() == []


def test_fields_are_triton_s_and_kept_as_given():
    assert [f.name for f in dataclasses.fields(TensorDescriptor)] == ["base", "shape", "strides", "block_shape",
                                                                       "padding"]
    array = aligned((4, 32))
    desc = TensorDescriptor(array, [4, 32], [32, 1], [2, 16])  # positional, as in Triton
    assert desc.base is array
    assert desc.shape == [4, 32] and desc.strides == [32, 1] and desc.block_shape == [2, 16]
    assert desc.padding == "zero"
    assert TensorDescriptor(array, [4, 32], [32, 1], [2, 16], "nan").padding == "nan"


def test_a_view_of_part_of_the_base_is_described():
    # shape and strides need not be the base's: the first 3 rows of a 4 x 32 array.
    array = aligned((4, 32))
    desc = TensorDescriptor(array, [3, 32], [32, 1], [4, 16])
    assert desc.problems() == []


def test_numpy_integer_entries_are_accepted():
    array = aligned((4, 32))
    desc = TensorDescriptor(array, [np.int64(4), np.int32(32)], (np.int64(32), 1), [np.int64(2), 16])
    assert desc.problems() == []


def test_from_tensor_converts_numpy_byte_strides_to_elements():
    array = aligned((4, 64), np.float32)[:, :32]
    assert array.strides == (256, 4)
    desc = TensorDescriptor.from_tensor(array, [2, 16])
    assert tuple(desc.shape) == (4, 32)
    assert desc.strides == (64, 1)


def test_from_tensor_refuses_numpy_strides_that_are_not_whole_elements():
    buffer = aligned((64,), np.float32)
    array = np.lib.stride_tricks.as_strided(buffer, shape=(2, 4), strides=(18, 4))
    with pytest.raises(ValueError, match=r"not whole elements of 4 bytes \(strides\[0\] = 18 bytes\)"):
        TensorDescriptor.from_tensor(array, [2, 4])


def test_array_like_object_with_data_ptr_dtype_shape_stride():
    memory = aligned((8, 64), np.uint16)
    array = DeviceArray(memory, "bfloat16")
    desc = TensorDescriptor.from_tensor(array, [8, 64])
    assert desc.strides == (64, 1)  # stride() is in elements already
    assert desc.element == "bf16"
    assert desc.element_bytes == 2
    assert desc.address == memory.ctypes.data


# -- bases refused --------------------------------------------------------------------------


@pytest.mark.parametrize("base", [[1.0, 2.0], 3, "tensor"])
def test_other_bases_are_refused_with_what_is_accepted(base):
    expected = r"must be a torch tensor, a NumPy array, or an object with data_ptr\(\), dtype, shape and stride\(\)"
    with pytest.raises(TypeError, match=r"^TensorDescriptor: base is a builtins\.\w+, but .*" + expected):
        TensorDescriptor(base, [2], [1], [2])
    with pytest.raises(TypeError, match=r"^TensorDescriptor\.from_tensor: base is a builtins\.\w+"):
        TensorDescriptor.from_tensor(base, [2])


def test_unknown_element_type_is_refused_by_name():
    with pytest.raises(TypeError, match=r"base holds complex64 elements, which polytile has no element type for"):
        TensorDescriptor.from_tensor(aligned((4, 16), np.complex64), [4, 16])


def test_non_native_byte_order_is_refused():
    array = aligned((4, 16), np.float32).view(np.dtype(np.float32).newbyteorder())
    with pytest.raises(TypeError, match=r"non-native byte order"):
        TensorDescriptor.from_tensor(array, [4, 16])


# -- each rule broken once --------------------------------------------------------------------


def test_base_not_16_byte_aligned():
    array = aligned((4, 32), np.float16, offset=2)
    with pytest.raises(ValueError, match=rf"base is not 16-byte aligned \(address {array.ctypes.data:#x}\): "
                                         r"TMA reads and writes global memory from 16-byte-aligned addresses"):
        TensorDescriptor(array, [4, 32], [32, 1], [2, 16])


def test_stride_not_a_multiple_of_16_bytes():
    with pytest.raises(ValueError, match=r"strides\[0\] = 20 elements of 2 bytes is 40 bytes, not a multiple of 16: "
                                         r"TMA needs every stride but the last to be a multiple of 16 bytes"):
        build([4, 20], [20, 1], [4, 16])


def test_stride_rule_counts_bytes_not_elements():
    # 4 float32 elements are 16 bytes: fine, where 4 float16 elements (8 bytes) are not.
    assert build([4, 4], [4, 1], [4, 4], np.float32).problems() == []
    with pytest.raises(ValueError, match=r"strides\[0\] = 4 elements of 2 bytes is 8 bytes"):
        build([4, 4], [4, 1], [4, 4], np.float16)


def test_last_dimension_not_contiguous():
    with pytest.raises(ValueError, match=r"the last stride \(strides\[1\]\) is 2, not 1: the last dimension must be "
                                         r"contiguous, because TMA copies it as one run of elements"):
        build([8, 8], [16, 2], [8, 8])


def test_shape_not_positive():
    with pytest.raises(ValueError, match=r"shape\[0\] = 0 is not positive: a descriptor describes a tensor with at "
                                         r"least one element in each dimension"):
        TensorDescriptor(aligned((4, 16)), [0, 16], [16, 1], [4, 16])


@pytest.mark.parametrize("bad", [48, 0, -4])
def test_block_shape_not_a_power_of_two(bad):
    with pytest.raises(ValueError, match=rf"block_shape\[1\] = {bad} is not a power of two: a block is a tile, "
                                         r"and tiles have power-of-two dimensions"):
        build([4, 64], [64, 1], [4, bad])


def test_block_with_too_many_elements():
    with pytest.raises(ValueError, match=r"block_shape \(2048, 1024\) holds 2097152 elements, more than the "
                                         r"1048576 \(2\*\*20\) a tile may hold"):
        build([4, 64], [64, 1], [2048, 1024])
    assert build([4, 64], [64, 1], [1024, 1024]).problems() == []  # 2**20 exactly is allowed


def test_block_entry_not_an_integer():
    with pytest.raises(ValueError, match=r"block_shape\[1\] = 16\.0 is not an integer"):
        build([4, 64], [64, 1], [4, 16.0])


def test_shape_not_a_sequence():
    with pytest.raises(ValueError, match=r"shape = 16 is not a sequence of integers \(one per dimension\)"):
        TensorDescriptor(aligned((16,)), 16, [1], [16])


@pytest.mark.parametrize("field, entries, message", [
    ("strides", [1], r"strides has 1 entry but shape has 2 entries: a descriptor needs one per dimension"),
    ("block_shape", [4, 4, 4], r"block_shape has 3 entries but shape has 2 entries"),
])
def test_rank_mismatch(field, entries, message):
    fields = {"shape": [4, 16], "strides": [16, 1], "block_shape": [4, 16], field: entries}
    with pytest.raises(ValueError, match=message):
        TensorDescriptor(aligned((4, 16)), **fields)


def test_rank_0_is_refused():
    with pytest.raises(ValueError, match=r"the rank is 0 \(shape \(\)\), but a tensor descriptor has 1 to 5 "
                                         r"dimensions: TMA describes tensors of rank 1 to 5"):
        TensorDescriptor(aligned((1,)), [], [], [])
    scalar = aligned((1,), np.float32).reshape(())
    with pytest.raises(ValueError, match=r"the rank is 0"):
        TensorDescriptor.from_tensor(scalar, [])


def test_rank_6_is_refused():
    array = aligned((2, 2, 2, 2, 2, 16), np.float32)
    with pytest.raises(ValueError, match=r"the rank is 6 \(shape \(2, 2, 2, 2, 2, 16\)\), but a tensor descriptor "
                                         r"has 1 to 5 dimensions"):
        TensorDescriptor.from_tensor(array, [1, 1, 1, 1, 1, 16])


def test_padding_value_not_zero_or_nan():
    with pytest.raises(ValueError, match=r"padding = 'inf' is neither 'zero' nor 'nan'"):
        build([4, 16], [16, 1], [4, 16], padding="inf")


def test_padding_nan_on_integers_is_refused():
    with pytest.raises(ValueError, match=r"padding = 'nan' needs floating-point elements, but base holds i32: "
                                         r"reads outside an integer tensor cannot give NaN"):
        TensorDescriptor.from_tensor(aligned((4, 16), np.int32), [4, 16], padding="nan")


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_padding_nan_on_floats_is_accepted(dtype):
    desc = TensorDescriptor.from_tensor(aligned((4, 16), dtype), [4, 16], padding="nan")
    assert desc.padding == "nan"


def test_every_broken_rule_is_listed_in_one_error():
    array = aligned((8, 64), np.float16, offset=4)
    with pytest.raises(ValueError) as caught:
        TensorDescriptor(array, [4, 20], [20, 2], [4, 48], padding="nan?")
    message = str(caught.value)
    assert message.startswith("TensorDescriptor: ")
    problems = message[len("TensorDescriptor: "):].split("; ")
    assert [p.split(" ")[0] for p in problems] == ["base", "strides[0]", "the", "block_shape[1]", "padding"]


# -- element names ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype, element, size", [
    (np.bool_, "i1", 1), (np.int8, "i8", 1), (np.int16, "i16", 2), (np.int32, "i32", 4), (np.int64, "i64", 8),
    (np.uint8, "u8", 1), (np.uint16, "u16", 2), (np.uint32, "u32", 4), (np.uint64, "u64", 8),
    (np.float16, "f16", 2), (np.float32, "f32", 4), (np.float64, "f64", 8),
])
def test_element_of_numpy_dtypes(dtype, element, size):
    desc = TensorDescriptor.from_tensor(aligned((4, 64), dtype), [4, 64])
    assert desc.element == element
    assert desc.element_bytes == size


@pytest.mark.parametrize("dtype, element", [
    ("bfloat16", "bf16"), ("float8_e4m3fn", "f8e4m3"), ("float8_e5m2", "f8e5m2"),  # ml_dtypes' NumPy names
    (TorchDtypeLike("bfloat16"), "bf16"), (TorchDtypeLike("float8_e5m2"), "f8e5m2"),  # torch's, printed
    (TorchDtypeLike("uint8"), "u8"),
    ("f16", "f16"),  # polytile's own spelling
])
def test_element_of_other_dtype_spellings(dtype, element):
    desc = TensorDescriptor.from_tensor(DeviceArray(aligned((4, 64), np.uint8), dtype), [4, 64])
    assert desc.element == element


def test_element_of_a_polytile_language_dtype():
    import polytile.language as pl

    desc = TensorDescriptor.from_tensor(DeviceArray(aligned((4, 64)), pl.float16), [4, 64])
    assert desc.element == "f16"


def test_element_of_an_unknown_dtype_names_it():
    desc = TensorDescriptor.from_tensor(aligned((4, 64), np.float32), [4, 64])
    desc.base = DeviceArray(aligned((4, 64), np.float32), TorchDtypeLike("complex32"))
    with pytest.raises(TypeError, match=r"base holds complex32 elements, which polytile has no element type for"):
        _ = desc.element


# -- torch tensors, recognised by their type's module ---------------------------------------------


def _torch_like(name, address):
    # A class that claims torch's module: this is how host.py tells torch tensors apart
    # without importing torch.
    def data_ptr(self):
        if address is None:
            raise RuntimeError("Cannot access data pointer of Tensor (e.g. FakeTensor)")
        return address

    cls = type(name, (), {"__module__": "torch._subclasses.fake_tensor" if address is None else "torch",
                          "data_ptr": data_ptr, "dtype": TorchDtypeLike("float16"), "shape": (4, 64),
                          "stride": lambda self: (64, 1)})
    return cls()


def test_torch_tensor_alignment_is_checked_by_the_constructor_and_by_the_launch_after_from_tensor():
    unaligned = _torch_like("Tensor", 0x1008)
    with pytest.raises(ValueError, match=r"base is not 16-byte aligned \(address 0x1008\)"):
        TensorDescriptor(unaligned, [4, 64], [64, 1], [4, 64])
    # from_tensor leaves the address to the launch (which reads it anyway): the first
    # call (Python's path, which then learns the type) and later ones (the C core's) alike.
    for _ in range(2):
        desc = TensorDescriptor.from_tensor(unaligned, [4, 64])
        assert desc.problems(address=False) == []
        with pytest.raises(LaunchError, match=r"argument 'a_desc' \(a TensorDescriptor\): base is not 16-byte "
                                              r"aligned \(address 0x1008\)"):
            desc.check_for_launch("matmul", "a_desc")
    # A tensor type the C core knows with a dtype it has not seen: the C core hands the
    # checks to Python, which leaves the address to the launch as well.
    type(unaligned).dtype = TorchDtypeLike("bfloat16")
    desc = TensorDescriptor.from_tensor(unaligned, [4, 64])
    with pytest.raises(LaunchError, match=r"base is not 16-byte aligned \(address 0x1008\)"):
        desc.check_for_launch("matmul", "a_desc")
    # copy.copy, pickle and dataclasses.replace build through the constructor: it checks.
    with pytest.raises(ValueError, match=r"base is not 16-byte aligned"):
        dataclasses.replace(desc)
    assert TensorDescriptor.from_tensor(_torch_like("Tensor", 0x1000), [4, 64]).address == 0x1000


def test_a_launch_names_the_unaligned_view_from_tensor_described():
    torch = pytest.importorskip("torch")
    t = torch.arange(256, dtype=torch.float16)
    desc = TensorDescriptor.from_tensor(t[1:129], [64])
    with pytest.raises(LaunchError, match=r"kernel 'descriptor_copy': argument 'src' \(a TensorDescriptor\): base "
                                          r"is not 16-byte aligned"):
        descriptor_copy[(1,)](desc, TensorDescriptor.from_tensor(t[128:], [64]), target="interp")


@jit
def descriptor_copy(src, dst):
    dst.store([0], src.load([0]))


def test_torch_compile_fake_tensors_skip_the_address_check_as_in_triton():
    desc = TensorDescriptor.from_tensor(_torch_like("FakeTensor", None), [4, 64])
    assert desc.element == "f16"
    with pytest.raises(TypeError, match=r"base is a torch FakeTensor, which has no memory address"):
        _ = desc.address


# -- checks at launch -----------------------------------------------------------------------------


def test_check_for_launch_passes_a_valid_descriptor():
    desc = TensorDescriptor.from_tensor(aligned((4, 64)), [4, 64])
    assert desc.check_for_launch("matmul", "a_desc") is None


def test_check_for_launch_names_kernel_and_argument():
    desc = TensorDescriptor.from_tensor(aligned((4, 64)), [4, 64])
    desc.block_shape = [4, 48]  # a dataclass can be changed after it was checked
    with pytest.raises(LaunchError) as caught:
        desc.check_for_launch("matmul", "a_desc")
    assert str(caught.value) == ("kernel 'matmul': argument 'a_desc' (a TensorDescriptor): block_shape[1] = 48 is "
                                 "not a power of two: a block is a tile, and tiles have power-of-two dimensions")
    assert isinstance(caught.value, PolytileError)


def test_check_for_launch_lists_every_problem_and_catches_a_replaced_base():
    desc = TensorDescriptor.from_tensor(aligned((4, 64)), [4, 64])
    desc.base = [0.0] * 256
    desc.padding = "inf"
    expected = r"^kernel 'k': argument 'd' \(a TensorDescriptor\): base is a builtins\.list, but .*; padding = 'inf'"
    with pytest.raises(LaunchError, match=expected):
        desc.check_for_launch("k", "d")


def test_problems_read_the_fields_as_they_are_now():
    desc = TensorDescriptor.from_tensor(aligned((4, 64)), [4, 64])
    desc.strides = (64, 2)
    assert desc.problems() == [("the last stride (strides[1]) is 2, not 1: the last dimension must be contiguous, "
                                "because TMA copies it as one run of elements")]
    desc.strides = (64, 1)
    assert desc.problems() == []


def test_importing_host_imports_neither_torch_numpy_nor_polytile():
    code = ("import sys, polytile_tma.host; "
            "print(sorted(m for m in ('torch', 'numpy', 'polytile') if m in sys.modules))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "[]"


# -- the launch cache: reused only while nothing it came from changed ---------------------------


class _MovableTensor:
    """A torch-like tensor whose address and dtype can change (torch's ``tensor.data = ...``)."""

    shape = (4, 64)

    def data_ptr(self):
        return self.address

    def stride(self):
        return (64, 1)


_MovableTensor.__module__ = "torch"
_DTYPES = {}


def _movable_torch_like(address, dtype="float16"):
    tensor = _MovableTensor()
    # One dtype object per name, as torch's dtypes are singletons.
    tensor.address, tensor.dtype = address, _DTYPES.setdefault(dtype, TorchDtypeLike(dtype))
    return tensor


def test_a_relaunched_descriptor_reuses_its_answer_until_something_changes():
    from polytile_tma.host import BROKEN, NATIVE, key_and_parts

    base = _movable_torch_like(0x1000)
    desc = TensorDescriptor.from_tensor(base, [4, 64])
    first = key_and_parts(desc)
    assert first == (("f16", (4, 64), "zero", (False, True), (True,)), (base, 4, 64, 64))
    if NATIVE.startswith("C"):
        assert key_and_parts(desc) is first  # kept, not computed again
    # A list field changed in place (no attribute was set): seen.
    desc.block_shape[0] = 2
    assert key_and_parts(desc)[0][1] == (2, 64)
    desc.block_shape.append(1)
    assert key_and_parts(desc) == (BROKEN, ())
    desc.block_shape.pop()
    # A field assigned.
    desc.shape = (4, 48)
    assert key_and_parts(desc)[1] == (base, 4, 48, 64)
    desc.padding = "nan"
    assert key_and_parts(desc)[0][2] == "nan"
    # The same base object moved to an address that breaks the rules, or to other elements.
    base.address = 0x1008
    assert key_and_parts(desc) == (BROKEN, ())
    base.address = 0x2000
    assert key_and_parts(desc)[0][0] == "f16"
    base.dtype = _DTYPES.setdefault("float32", TorchDtypeLike("float32"))
    assert key_and_parts(desc)[0][0] == "f32"
    # Another base.
    other = _movable_torch_like(0x3000)
    desc.base = other
    assert key_and_parts(desc)[1][0] is other


def test_a_copy_shares_the_fields_and_sees_their_changes():
    import copy
    import pickle

    from polytile_tma.host import key_and_parts

    original = TensorDescriptor.from_tensor(_movable_torch_like(0x1000), [4, 64])
    key_and_parts(original)
    twin = copy.copy(original)
    assert twin == original and twin.block_shape is original.block_shape
    twin.block_shape[0] = 2
    assert key_and_parts(original)[0][1] == (2, 64) and key_and_parts(twin)[0][1] == (2, 64)
    array = aligned((4, 64))
    again = pickle.loads(pickle.dumps(TensorDescriptor.from_tensor(array, [4, 64], padding="nan")))
    assert (again.shape, again.strides, again.block_shape, again.padding) == ((4, 64), (64, 1), [4, 64], "nan")
    # A copy is checked again as it is built.
    broken = copy.copy(original)
    with pytest.raises(ValueError, match=r"block_shape\[0\] = 3 is not a power of two"):
        copy.copy(dataclasses.replace(broken, block_shape=[3, 64]))


def test_fields_cannot_be_deleted_and_other_attributes_can_be_set():
    desc = TensorDescriptor.from_tensor(aligned((4, 64)), [4, 64])
    with pytest.raises(AttributeError, match=r"shape"):
        del desc.shape
    desc.note = "mine"  # a dataclass takes any attribute; so does this one
    assert desc.note == "mine"


CASES = [  # shape, strides, block, padding, dtype
    ((64, 64), (64, 1), [16, 16], "zero", "float16"), ((64, 64), [64, 2], [16, 16], "zero", "float16"),
    ((64, 64), (60, 1), (16, 16), "zero", "float16"), ([64, 0], (64, 1), [16, 16], "zero", "float16"),
    ((64, 64), (64, 1), [16, 24], "zero", "float16"), ((64, 64), (64, 1), [16, 16], "nan", "float16"),
    ((64, 64), (64, 1), [16, 16], "nan", "int32"), ((64, 64), (64, 1), [16, 16], "inf", "float16"),
    ((64,), (1,), [2048], "zero", "float32"), ((64, 64), (64, 1), [16], "zero", "float16"),
    ((3, 5, 7), (40, 8, 1), [1, 2, 8], "zero", "float16"), ((3, 5, 7), (36, 8, 1), [1, 2, 8], "zero", "int8"),
    ((2, 2, 2, 2, 8), (128, 64, 32, 16, 1), [1, 1, 1, 2, 8], "zero", "float32"),
    ((2,) * 6, (1,) * 6, [1] * 6, "zero", "float16"), ((64, 64), (64, 1), [1 << 20, 2], "zero", "float16"),
    ((2**40, 64), (64, 1), [16, 16], "zero", "float16"), ((64, 64), (-64, 1), [16, 16], "zero", "float16"),
    ((64, 64), (64, 1), [16, True], "zero", "float16"), ((64, 64), (64, 1.0), [16, 16], "zero", "float16"),
]


@pytest.mark.parametrize("address", [0x1000, 0x1008])
@pytest.mark.parametrize("shape, strides, block, padding, dtype", CASES)
def test_the_c_answer_is_the_python_answer(shape, strides, block, padding, dtype, address):
    from polytile_tma.host import launch_answer, key_and_parts

    from polytile_tma.host import BROKEN, NATIVE

    base = _movable_torch_like(address, dtype)
    TensorDescriptor(base, (4, 64), (64, 1), [4, 64]) if address % 16 == 0 else None  # the dtype is known
    desc = TensorDescriptor.from_tensor(_movable_torch_like(0x1000), [4, 64])
    desc.base, desc.shape, desc.strides, desc.block_shape, desc.padding = base, shape, strides, block, padding
    answer = key_and_parts(desc)
    assert answer == launch_answer(desc)
    plain = all(type(v) is int for v in (*shape, *strides, *block))
    if NATIVE.startswith("C") and answer[0] is not BROKEN and plain:
        assert key_and_parts(desc) is answer  # the C path answered, and kept it
    # Built with these fields: the same checks as the Python path (it raises what it finds).
    try:
        made = TensorDescriptor(base, shape, strides, block, padding)
    except ValueError as error:
        assert str(error) == "TensorDescriptor: " + "; ".join(desc.problems())
    else:
        assert desc.problems() == [] and key_and_parts(made) == launch_answer(made)


def test_without_the_c_module_descriptors_work_the_same_in_python(tmp_path):
    code = """if True:
        import sys
        sys.modules["polytile_tma._descriptor"] = None  # as if it could not be built
        import numpy as np
        import polytile as pt, polytile.language as pl
        from polytile_tma import host
        from polytile_tma.host import TensorDescriptor
        assert host.NATIVE.startswith("not built") and host.key_and_parts is host.launch_answer, host.NATIVE

        @pt.jit
        def add_one(src, dst, B: pl.constexpr):
            dst.store([pl.program_id(0) * B, 0], src.load([pl.program_id(0) * B, 0]) + 1)

        x = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)
        y = np.zeros_like(x)
        add_one[(4,)](TensorDescriptor.from_tensor(x, [16, 16]), TensorDescriptor(y, [64, 16], [16, 1], [16, 16]),
                      B=16, target="interp")
        assert (y == x + 1).all()
        try:
            TensorDescriptor(y, [64, 16], [16, 2], [16, 16])
        except ValueError as error:
            print(error)
    """
    script = tmp_path / "without_c.py"  # @jit reads its kernel's source from a file
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "the last stride (strides[1]) is 2, not 1" in out.stdout
