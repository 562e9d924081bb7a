"""pl.gather (Triton's tl.gather) on every target's pipeline: both axes, index shapes
that differ from the source's along the axis, several dtypes and index types."""

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.errors import InterpreterError


@pt.jit
def gather_2d_kernel(src_ptr, index_ptr, out_ptr, AXIS: pl.constexpr, SM: pl.constexpr, SN: pl.constexpr,
                     IM: pl.constexpr, IN: pl.constexpr):
    sm, sn = pl.arange(0, SM)[:, None], pl.arange(0, SN)[None, :]
    im, in_ = pl.arange(0, IM)[:, None], pl.arange(0, IN)[None, :]
    src = pl.load(src_ptr + sm * SN + sn)
    index = pl.load(index_ptr + im * IN + in_)
    pl.store(out_ptr + im * IN + in_, pl.gather(src, index, AXIS))


@pt.jit
def gather_1d_kernel(src_ptr, index_ptr, out_ptr, S: pl.constexpr, I: pl.constexpr):
    pid = pl.program_id(0)  # each program its own source, index and result
    src = pl.load(src_ptr + pid * S + pl.arange(0, S))
    index = pl.load(index_ptr + pid * I + pl.arange(0, I))
    pl.store(out_ptr + pid * I + pl.arange(0, I), pl.gather(src, index, axis=-1))


@pytest.mark.parametrize("axis, source, index_shape", [
    (0, (16, 8), (32, 8)), (0, (32, 32), (8, 32)), (1, (16, 8), (16, 64)), (1, (64, 32), (64, 32)), (-1, (4, 16), (4, 2)),
])
@pytest.mark.parametrize("dtype, index_dtype", [(np.float32, np.int32), (np.float16, np.int64), (np.int32, np.int16),
                                                (np.float32, np.uint8)])
def test_gather_2d(target, axis, source, index_shape, dtype, index_dtype):
    rng = np.random.default_rng(7)
    src = (rng.standard_normal(source) * 100).astype(dtype)
    index = rng.integers(0, source[axis], index_shape).astype(index_dtype)
    out = np.zeros(index_shape, dtype)
    gather_2d_kernel[(1,)](src, index, out, AXIS=axis, SM=source[0], SN=source[1], IM=index_shape[0],
                           IN=index_shape[1], target=target)
    np.testing.assert_array_equal(out, np.take_along_axis(src, index.astype(np.int64), axis))


@pytest.mark.parametrize("size, count", [(128, 128), (32, 256), (256, 16), (512, 64)])
def test_gather_1d(target, size, count):
    programs = 3
    src = np.arange(programs * size, dtype=np.float32).reshape(programs, size) * 0.5
    index = np.random.default_rng(3).integers(0, size, (programs, count)).astype(np.int32)
    out = np.zeros((programs, count), np.float32)
    gather_1d_kernel[(programs,)](src, index, out, S=size, I=count, target=target)
    np.testing.assert_array_equal(out, np.take_along_axis(src, index, 1))


def test_an_index_out_of_range_is_reported_by_the_interpreter():
    src, out = np.zeros(32, np.float32), np.zeros(32, np.float32)
    index = np.tile(np.arange(16, dtype=np.int32), 2)
    index[16 + 5] = -1  # program 1's sixth element
    with pytest.raises(InterpreterError, match=r"gather index -1 at position \[5\] is out of range for axis 0 "
                                               r"of size 16") as info:
        gather_1d_kernel[(2,)](src, index, out, S=16, I=16, target="interp")
    assert "program (1, 0, 0)" in str(info.value)


@pt.jit
def bad_gather_kernel(src_ptr, WHICH: pl.constexpr):
    src = pl.load(src_ptr + pl.arange(0, 8)[:, None] * 8 + pl.arange(0, 8)[None, :])
    if WHICH == "float index":
        pl.gather(src, src, 0)
    elif WHICH == "rank":
        pl.gather(src, pl.arange(0, 8), 0)
    elif WHICH == "other dimension":
        pl.gather(src, pl.zeros((8, 4), pl.int32), 0)
    elif WHICH == "axis":
        pl.gather(src, pl.zeros((8, 8), pl.int32), 2)


@pytest.mark.parametrize("which, message", [
    ("float index", "the index must be an integer tensor, got"),
    ("rank", "the index must have the source's rank 2, got shape [8] for a source of shape [8, 8]"),
    ("other dimension", "the index's dimension 1 is 4 but the source's is 8: every dimension but the axis (0) must "
                        "match"),
    ("axis", "axis 2 is out of range for a tensor of rank 2"),
])
def test_bad_gathers_are_named(which, message):
    with pytest.raises(pt.CompilationError) as info:
        bad_gather_kernel[(1,)](np.zeros(64, np.float32), WHICH=which)
    assert message in str(info.value)


@pt.jit
def unsigned_index_kernel(src_ptr, index_ptr, out_ptr, S: pl.constexpr, I: pl.constexpr):
    src = pl.load(src_ptr + pl.arange(0, S))
    index = pl.load(index_ptr + pl.arange(0, I))  # uint8: 200 is 200, not -56
    pl.store(out_ptr + pl.arange(0, I), src.gather(index, 0))


def test_unsigned_narrow_indices_reach_past_128(target):
    src = np.arange(512, dtype=np.float32)
    index = np.array([200, 130, 255, 5, 128, 0, 17, 254], np.uint8)
    out = np.zeros(8, np.float32)
    unsigned_index_kernel[(1,)](src, index, out, S=512, I=8, target=target)
    np.testing.assert_array_equal(out, src[index])
