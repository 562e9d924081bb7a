"""How a host TensorDescriptor passes to kernels (polytile_tma/arguments.py): its key, its
parts, and the launch cache that must never outlive what it was computed from."""

from __future__ import annotations

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.errors import LaunchError

from polytile_tma.arguments import ADAPTER
from polytile_tma.host import BROKEN
from polytile_tma.host import TensorDescriptor


@pt.jit
def add_one(src, dst, BM: pl.constexpr, BN: pl.constexpr):
    m, n = pl.program_id(0) * BM, pl.program_id(1) * BN
    dst.store([m, n], src.load([m, n]) + 1)


def _descs(rows=32, cols=32):
    x = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    y = np.zeros_like(x)
    return x, y, TensorDescriptor.from_tensor(x, [16, 16]), TensorDescriptor.from_tensor(y, [16, 16])


def test_the_parts_are_the_base_the_shape_and_the_strides_but_the_last():
    x, _, a, _ = _descs(48, 64)
    key = ADAPTER.key(a)
    assert [(p.suffix, str(p.type), p.divisibility) for p in ADAPTER.parts(key)] == [
        ("_base", "ptr<f32>", 16), ("_shape0", "i32", 16), ("_shape1", "i32", 16), ("_stride0", "i64", 16)]
    assert ADAPTER.flatten(a) == (x, 48, 64, 64)
    assert str(ADAPTER.ir_type(key)) == "!tma.desc<tile<16x16xf32>, zero>"


def test_a_field_changed_in_place_changes_the_key_and_the_parts():
    x, _, _, _ = _descs()
    a = TensorDescriptor(x, [32, 32], [32, 1], [16, 16])
    first = ADAPTER.key(a)
    a.shape[0] = 24  # a list changed in place: no __setattr__ sees it
    assert ADAPTER.key(a) != first and ADAPTER.flatten(a)[1] == 24


def test_a_descriptor_whose_element_type_changes_in_place_is_keyed_anew():
    x, _, a, _ = _descs()
    assert ADAPTER.key(a)[0] == "f32"
    x.dtype = np.int32  # the same array object and address, other elements
    assert ADAPTER.key(a)[0] == "i32"


@pytest.mark.parametrize("change", [
    lambda d: setattr(d, "shape", [16.9, 32.5]),   # floats int() would truncate
    lambda d: setattr(d, "strides", (48.5, 1)),
    lambda d: setattr(d, "strides", None),
    lambda d: setattr(d, "strides", [32, 2]),
])
def test_a_descriptor_broken_after_a_launch_never_reuses_its_kernel(change):
    x, y, a, b = _descs()
    add_one[(2, 2)](a, b, BM=16, BN=16, target="interp")
    change(b)
    assert ADAPTER.key(b) is BROKEN
    with pytest.raises(LaunchError, match=r"kernel 'add_one': argument 'dst' \(a TensorDescriptor\): "):
        add_one[(2, 2)](a, b, BM=16, BN=16, target="interp")


def test_numpy_integers_in_the_fields_are_keyed_and_passed_as_ints():
    x, y, a, b = _descs()
    b.shape = [np.int64(32), np.int64(32)]
    assert ADAPTER.key(b) == ADAPTER.key(a)
    add_one[(2, 2)](a, b, BM=16, BN=16, target="interp")
    np.testing.assert_array_equal(y, x + 1)


def test_a_part_named_like_another_parameter_is_a_launch_error():
    @pt.jit
    def clash(src, src_base, BM: pl.constexpr):
        src.store([0, 0], src.load([0, 0]))

    _, y, a, _ = _descs()
    with pytest.raises(LaunchError, match=r"argument 'src' \(a TensorDescriptor\) passes as the kernel parameter "
                                          r"'src_base', which is also the name of a parameter of 'clash'"):
        clash[(1,)](a, y, BM=16, target="interp")


def test_the_quick_validity_check_agrees_with_the_full_one():
    from polytile_tma.host import _describe_base, _plainly_valid

    x = np.zeros((64, 64), np.float16)
    cases = [([64, 64], [64, 1], [16, 16], "zero"), ([64, 64], [64, 2], [16, 16], "zero"),
             ([64, 64], [60, 1], [16, 16], "zero"), ([64, 0], [64, 1], [16, 16], "zero"),
             ([64, 64], [64, 1], [16, 24], "zero"), ([64, 64], [64, 1], [16, 16], "nan"),
             ([64, 64], [64, 1], [16, 16], "inf"), ([64], [1], [2048], "zero"), ([64, 64], [64, 1], [16], "zero")]
    for shape, strides, block, padding in cases:
        desc = TensorDescriptor.__new__(TensorDescriptor)
        desc.base, desc.shape, desc.strides, desc.block_shape, desc.padding = x, shape, strides, block, padding
        assert _plainly_valid(desc, _describe_base(x)) == (not desc.problems()), (shape, strides, block, padding)
