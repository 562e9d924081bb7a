"""pl.dot's accumulator type follows Triton; an out_dtype or acc Triton would silently
ignore is an error naming the operand type and what is allowed.

(Language behaviour: belongs with tests/language once that directory is free to edit.)"""

import numpy as np
import pytest

import polytile.language as pl
from polytile.errors import CompilationError
from polytile.ir import print_ir
from polytile.runtime import jit


@jit
def dot_kernel(a_ptr, b_ptr, c_ptr, OUT: pl.constexpr, ACC: pl.constexpr):
    offs = pl.arange(0, 16)
    a = pl.load(a_ptr + offs[:, None] * 16 + offs[None, :])
    b = pl.load(b_ptr + offs[:, None] * 16 + offs[None, :])
    if ACC is None:
        c = pl.dot(a, b, out_dtype=OUT)
    else:
        c = pl.dot(a, b, acc=pl.zeros((16, 16), ACC), out_dtype=OUT)
    pl.store(c_ptr + offs[:, None] * 16 + offs[None, :], c)


def _lower(dtype, out_dtype=None, acc=None, c_dtype=np.float32):
    a = np.zeros((16, 16), dtype)
    return dot_kernel.lower(a, a, np.zeros((16, 16), c_dtype), out_dtype, acc)


@pytest.mark.parametrize("dtype, out_dtype, acc, expected", [
    (np.int8, None, None, "i32"),
    (np.int8, pl.int32, None, "i32"),
    (np.int8, None, pl.int32, "i32"),
    (np.float16, None, None, "f32"),
    (np.float16, pl.float16, None, "f16"),
    (np.float16, None, pl.float16, "f16"),   # the acc's type, when out_dtype is not given
    (np.float32, pl.float32, None, "f32"),
])
def test_accumulator_types(dtype, out_dtype, acc, expected):
    text = print_ir(_lower(dtype, out_dtype, acc))
    assert "tile.dot" in text and f": tile<16x16x{expected}>" in text.split("tile.dot")[1].splitlines()[0]


@pytest.mark.parametrize("dtype, out_dtype, acc, message", [
    (np.int8, pl.float32, None, "pl.dot of int8 operands cannot accumulate in out_dtype=fp32: int8 operands "
                                "accumulate in int32; pass out_dtype=pl.int32 (or leave it out)"),
    (np.int8, None, pl.float32, "pl.dot of int8 operands cannot accumulate in an acc of fp32"),
    (np.int16, None, None, "pl.dot on integers needs int8 operands (accumulated in int32), got int16"),
    (np.uint8, None, None, "pl.dot on integers needs int8 operands (accumulated in int32), got uint8"),
    (np.float32, pl.int32, None, "pl.dot of fp32 operands cannot accumulate in out_dtype=int32: fp32 operands "
                                 "accumulate in fp32"),
    (np.float16, pl.bfloat16, None, "out_dtype=pl.float32 or pl.float16"),
    (np.float16, pl.float16, pl.float32, "pl.dot: acc is fp32[16, 16] but out_dtype is fp16"),
])
def test_accumulator_errors(dtype, out_dtype, acc, message):
    with pytest.raises(CompilationError) as info:
        _lower(dtype, out_dtype, acc)
    assert message in info.value.message, info.value.message
    assert "pl.dot(a, b" in info.value.source_line


@pytest.mark.parametrize("dtype, out_dtype, accumulated", [
    (np.int8, pl.int8, "i32"), (np.int8, pl.int16, "i32"), (np.float32, pl.float16, "f32"),
])
def test_a_narrower_out_dtype_is_ignored_as_triton_does_with_a_warning(dtype, out_dtype, accumulated):
    # Triton leaves such a dot in its accumulator type (kernels rely on the wide result:
    # acc += pl.dot(a8, b8, out_dtype=pl.int8)); so does polytile, and it says so.
    with pytest.warns(UserWarning, match="is narrower than the accumulator; as in Triton the result stays"):
        text = print_ir(_lower(dtype, out_dtype))
    assert f": tile<16x16x{accumulated}>" in text.split("tile.dot")[1].splitlines()[0]
    rng = np.random.default_rng(1)
    a = rng.integers(-128 if dtype == np.int8 else -4, 128 if dtype == np.int8 else 5, (16, 16)).astype(dtype)
    b = rng.integers(-128 if dtype == np.int8 else -4, 128 if dtype == np.int8 else 5, (16, 16)).astype(dtype)
    c = np.zeros((16, 16), np.int32 if dtype == np.int8 else np.float32)
    with pytest.warns(UserWarning):
        dot_kernel[(1,)](a, b, c, out_dtype, None)
    np.testing.assert_array_equal(c, (a.astype(np.int64) @ b.astype(np.int64)).astype(c.dtype))


def test_bf16_out_dtype_is_refused_as_triton_refuses_it():
    with pytest.raises(CompilationError, match="pl.dot of fp32 operands cannot accumulate in out_dtype=bf16"):
        _lower(np.float32, pl.bfloat16)


def test_int8_dot_runs_in_int32():
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (16, 16)).astype(np.int8)
    b = rng.integers(-128, 128, (16, 16)).astype(np.int8)
    c = np.zeros((16, 16), np.int32)
    dot_kernel[(1,)](a, b, c, None, None)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))
