"""The generated entry point: binding, the specialization key, the hot cache."""

import re

import numpy as np
import pytest

import polytile.language as pl
from polytile import config
from polytile.ir import types as t
from polytile.runtime import LaunchError, jit
from polytile.runtime.binder import Unkeyed, constexpr_piece, describe_argument, make_grid3


def _axpy():
    @jit
    def axpy(out_ptr, x_ptr, n, alpha=2.0, BLOCK: pl.constexpr = 16):
        offs = pl.arange(0, BLOCK)
        mask = offs < n
        pl.store(out_ptr + offs, alpha * pl.load(x_ptr + offs, mask=mask), mask=mask)

    return axpy


axpy = _axpy()


def _data():
    return np.zeros(16, np.float32), np.arange(16, dtype=np.float32)


# -- binding ------------------------------------------------------------------------------


def test_positional_keyword_and_default_arguments_bind_as_python_binds_them():
    out, x = _data()
    axpy[(1,)](out, x, 16)
    np.testing.assert_array_equal(out, 2 * x)
    axpy[(1,)](out, x, n=16, alpha=3.0)
    np.testing.assert_array_equal(out, 3 * x)
    axpy[(1,)](x_ptr=x, out_ptr=out, n=8, BLOCK=8, alpha=0.5)
    np.testing.assert_array_equal(out[:8], 0.5 * x[:8])
    axpy.run(out, x, 16, 4.0, grid=(1,))
    np.testing.assert_array_equal(out, 4 * x)


def test_a_default_given_explicitly_is_the_same_specialization():
    @jit
    def k(out_ptr, BLOCK: pl.constexpr = 8):
        pl.store(out_ptr + pl.arange(0, BLOCK), 1.0)

    out = np.zeros(8, np.float32)
    k[(1,)](out)
    k[(1,)](out, 8)
    k[(1,)](out, BLOCK=8)
    assert k.compile_count == 1 and len(k._hot) == 1


def test_binding_errors_name_the_kernel_in_the_runtimes_words():
    out, x = _data()
    with pytest.raises(LaunchError, match="'axpy': missing a required argument: 'n'"):
        axpy[(1,)](out, x)
    with pytest.raises(LaunchError, match="'axpy': missing a required argument: 'x_ptr'"):
        axpy[(1,)](out, n=3)
    with pytest.raises(LaunchError, match="'axpy': too many positional arguments"):
        axpy[(1,)](out, x, 16, 2.0, 16, 99)
    with pytest.raises(LaunchError, match="'axpy': got an unexpected keyword argument 'nn'; did you mean 'n'"):
        axpy[(1,)](out, x, 16, nn=3)
    with pytest.raises(LaunchError, match="'axpy': argument 'out_ptr' is given twice"):
        axpy[(1,)](out, x, 16, out_ptr=out)


def test_parameters_named_like_launch_keywords_are_arguments():
    @jit
    def k(out_ptr, grid, num_warps, target):
        pl.store(out_ptr, grid * 100 + num_warps * 10 + target)

    out = np.zeros(1, np.int32)
    k[(1,)](out, grid=1, num_warps=2, target=3)
    assert out[0] == 123
    k[(1,)](out, 4, 5, 6)
    assert out[0] == 456


def test_parameters_named_like_python_builtins_are_arguments():
    # The generated launcher and argument namer call builtins (type, len, callable, id):
    # parameters of those names must not shadow them (Triton's test_call names one 'type').
    import polytile as pt

    @jit
    def k(out_ptr, type, len, id, callable, int, tuple, MODE: pl.constexpr):
        pl.store(out_ptr, type * 100000 + len * 10000 + id * 1000 + callable * 100 + int * 10 + tuple + MODE)

    for target in (None, "interp"):
        out = np.zeros(1, np.int32)
        k[(1,)](out, 1, 2, 3, 4, 5, 6, MODE=0, target=target)
        assert out[0] == 123456
        k[lambda meta: (meta["len"] - 1,)](out, type=6, len=2, id=4, callable=3, int=2, tuple=1, MODE=0)
        assert out[0] == 624321
    tuned = pt.heuristics({"MODE": lambda args: args["type"] - args["type"]})(k)  # names the arguments
    out = np.zeros(1, np.int32)
    tuned[(1,)](out, 1, 1, 1, 1, 1, 1)
    assert out[0] == 111111
    with pytest.raises(LaunchError, match="too many positional arguments"):
        tuned[(1,)](out, 1, 1, 1, 1, 1, 1, 0, 9)


def test_keyword_only_and_positional_only_parameters():
    @jit
    def k(out_ptr, /, value, *, BLOCK: pl.constexpr):
        pl.store(out_ptr + pl.arange(0, BLOCK), value)

    out = np.zeros(4, np.float32)
    k[(1,)](out, 5.0, BLOCK=4)
    assert (out == 5).all()
    with pytest.raises(LaunchError, match="'k': 'out_ptr' is positional-only: pass it by position"):
        k[(1,)](out_ptr=out, value=1.0, BLOCK=4)


def test_bool_and_int_run_time_arguments_are_different_specializations():
    @jit
    def k(out_ptr, flag):
        pl.store(out_ptr, flag + 1)

    out = np.zeros(1, np.int32)
    k[(1,)](out, True)
    assert out[0] == 2
    k[(1,)](out, 1)
    assert out[0] == 2
    k[(1,)](out, np.bool_(False))
    assert out[0] == 1
    assert k.compile_count == 2     # i1 (bool and np.bool_) and i32


def test_constexpr_values_are_typed_in_the_key():
    @jit
    def k(out_ptr, C: pl.constexpr):
        pl.store(out_ptr, 1.0)

    out = np.zeros(1, np.float32)
    for value in (1, True, 1.0, (1, True), (1, 1), "1"):
        k[(1,)](out, value)
    assert k.compile_count == 6
    for value in (1, True, 1.0, (1, True), (1, 1), "1", pl.constexpr(1)):
        k[(1,)](out, value)
    assert k.compile_count == 6
    assert constexpr_piece(True) != constexpr_piece(1) and constexpr_piece((1, True)) != constexpr_piece((1, 1))


def test_do_not_specialize_keeps_one_hot_entry():
    @jit(do_not_specialize=["n"])
    def k(out_ptr, n):
        pl.store(out_ptr, n)

    out = np.zeros(1, np.int32)
    for n in (1, 16, 7, 32):
        k[(1,)](out, n)
    assert out[0] == 32 and k.compile_count == 1 and len(k._hot) == 1


def test_wrapped_constexprs_and_none_take_the_slow_path_correctly():
    @jit
    def k(out_ptr, bias_ptr, n, BLOCK: pl.constexpr):
        offs = pl.arange(0, BLOCK)
        value = offs * 1.0
        if bias_ptr is not None:
            value = value + pl.load(bias_ptr + offs)
        pl.store(out_ptr + offs, value, mask=offs < n)

    out, bias = np.zeros(8, np.float32), np.ones(8, np.float32)
    k[(1,)](out, None, 8, BLOCK=8)
    np.testing.assert_array_equal(out, np.arange(8))
    k[(1,)](out, bias, 8, BLOCK=8)
    np.testing.assert_array_equal(out, np.arange(8) + 1)
    k[(1,)](out, None, pl.constexpr(8), BLOCK=pl.constexpr(8))   # unwrapped: no new kernel
    np.testing.assert_array_equal(out, np.arange(8))
    assert k.compile_count == 2
    assert len(k._hot) == 2   # a key with a wrapped value is not remembered: it could never hit again


# -- the key ------------------------------------------------------------------------------


def _aligned(n, dtype=np.float32):
    """A new array starting on a 16-byte boundary."""
    buffer = np.zeros(n + 16, dtype)
    start = (-buffer.ctypes.data % 16) // buffer.itemsize
    return buffer[start:start + n]


def test_the_key_changes_with_dtype_alignment_one_and_constexpr_only():
    out, x = _aligned(16), _aligned(16)
    axpy = _axpy()
    fresh = 0
    axpy[(1,)](out, x, 16)
    axpy[(1,)](_aligned(16), _aligned(16), 16)        # new objects, same dtypes and alignment
    axpy[(1,)](out, x, 32)                            # another multiple of 16
    assert axpy.compile_count == fresh + 1 and len(axpy._hot) >= 1
    axpy[(1,)](out[1:], x, 15)                        # unaligned output, n not divisible
    axpy[(1,)](out, x, 1)                             # n == 1
    axpy[(1,)](out, _aligned(16, np.float64), 16)     # dtype
    axpy[(1,)](out, x, 16, BLOCK=8)                   # constexpr
    assert axpy.compile_count == fresh + 5


def test_options_given_or_defaulted_share_one_compilation():
    @jit
    def k(out_ptr):
        pl.store(out_ptr, 1.0)

    out = np.zeros(1, np.float32)
    k[(1,)](out)
    k[(1,)](out, num_warps=4)          # the default, spelled out
    k[(1,)](out, num_stages=3, num_warps=4)
    assert k.compile_count == 1 and len(k.cache) == 1 and len(k._hot) == 3
    k[(1,)](out, num_warps=8)
    assert k.compile_count == 2


def test_a_change_of_the_configured_target_is_seen():
    @jit
    def k(out_ptr):
        pl.store(out_ptr, 1.0)

    out = np.zeros(1, np.float32)
    with config.override(target="interp"):
        k[(1,)](out)
        assert len(k._hot) == 1
    assert len(k._hot) == 0            # the hot key says "configured target": forgotten
    with config.override(target="interp"):
        k[(1,)](out)
    assert k.compile_count == 1        # the kernel itself is kept


def test_unhashable_options_are_explained_not_crashed_on():
    out, x = _data()
    with pytest.raises(Exception, match="num_warps"):
        axpy[(1,)](out, x, 16, num_warps=[4])


# -- probes -------------------------------------------------------------------------------


class CudaArray:
    """A device array known only through __cuda_array_interface__."""

    def __init__(self, typestr, address):
        self.__cuda_array_interface__ = {"typestr": typestr, "data": (address, False), "shape": (4,),
                                         "version": 3}


def test_describe_argument_reads_each_protocol_without_converting():
    assert describe_argument("k", "p", CudaArray("<f4", 4096)) == (t.PointerType(t.f32), "D")
    assert describe_argument("k", "p", CudaArray("<i2", 4100)) == (t.PointerType(t.i16), "")
    assert describe_argument("k", "p", CudaArray("<f4", 4096), specialize=False) == (t.PointerType(t.f32), "")
    assert describe_argument("k", "n", 2**40) == (t.i64, "D")
    assert describe_argument("k", "n", 2**63) == (t.u64, "D")
    assert describe_argument("k", "n", np.int8(1)) == (t.i8, "1")
    assert describe_argument("k", "x", np.float16(1)) == (t.f16, "")
    with pytest.raises(LaunchError, match="kernel 'k': argument 'n' = .* does not fit in 64 bits"):
        describe_argument("k", "n", 2**64)
    for value in (2**64, -2**63 - 1):  # also an OverflowError, as Triton raises
        with pytest.raises(OverflowError, match=f"argument 'n' = {value} does not fit in 64 bits"):
            describe_argument("k", "n", value)
    for value in (2**64 - 1, -2**63):
        describe_argument("k", "n", value)
    with pytest.raises(LaunchError, match="kernel 'k': argument 'p' is an array of complex64"):
        describe_argument("k", "p", np.zeros(2, np.complex64))
    with pytest.raises(LaunchError, match="argument 'p' has NumPy type complex128"):
        describe_argument("k", "p", np.complex128(1))


def test_a_device_array_on_the_interpreter_is_a_clear_error():
    @jit
    def k(ptr):
        pl.store(ptr, 1.0)

    with pytest.raises(LaunchError, match="kernel 'k': argument 'ptr' \\(CudaArray\\) is not in host memory"):
        k[(1,)](CudaArray("<f4", 4096))


def test_unkeyed_pieces_equal_only_themselves():
    a, b = Unkeyed(), Unkeyed()
    assert a == a and a != b and hash(a) != hash(b)


def test_grid3():
    grid3 = make_grid3("k", LaunchError)
    assert grid3((4,)) == (4, 1, 1) and grid3((4, 2)) == (4, 2, 1) and grid3((4, 2, 3)) == (4, 2, 3)
    assert grid3(5) == (5, 1, 1) and grid3([np.int64(2), 3]) == (2, 3, 1) and grid3((0,)) == (0, 1, 1)
    assert grid3((np.uint8(3), np.int32(2))) == (3, 2, 1) and grid3(np.int64(7)) == (7, 1, 1)
    assert grid3((2**31 - 1, 65535, 65535)) == (2**31 - 1, 65535, 65535)
    for bad in ((), (1, 2, 3, 4), "x", None):
        with pytest.raises(LaunchError, match="kernel 'k': the grid must be a tuple of 1 to 3"):
            grid3(bad)


@pytest.mark.parametrize("grid, axis, value", [
    ((1.5, "a"), 0, "1.5"), ((3000 / 1024,), 0, "2.9296875"), ((-0.5,), 0, "-0.5"), ((True,), 0, "True"),
    (("3",), 0, "'3'"), ((4, 2.0), 1, "2.0"), ((np.float32(2),), 0, repr(np.float32(2))), ((1, 1, np.bool_(True)), 2, repr(np.bool_(True))),
    (True, 0, "True"), (2.0, 0, "2.0"),
])
def test_grid3_refuses_what_is_not_an_integer_naming_the_axis(grid, axis, value):
    """A float grid (n / BLOCK) used to be truncated: 2048 of 3000 elements written, no error."""
    with pytest.raises(LaunchError, match=rf"kernel 'k': grid .*: axis {axis} must be an integer, got {re.escape(value)}"):
        make_grid3("k", LaunchError)(grid)


def test_grid3_says_to_use_cdiv_for_a_float():
    with pytest.raises(LaunchError, match=r"use pl.cdiv\(n, BLOCK\)"):
        make_grid3("k", LaunchError)((3000 / 1024,))


@pytest.mark.parametrize("grid, axis", [((-1,), 0), ((2, -3), 1)])
def test_grid3_refuses_negative_counts(grid, axis):
    with pytest.raises(LaunchError, match=f"axis {axis} must be non-negative"):
        make_grid3("k", LaunchError)(grid)


@pytest.mark.parametrize("grid, axis, limit", [
    ((2**31,), 0, 2**31 - 1), ((1, 65536), 1, 65535), ((1, 1, 65536), 2, 65535), ((np.int64(2**40),), 0, 2**31 - 1),
])
def test_grid3_limits_are_the_same_on_every_target(grid, axis, limit):
    """The interpreter used to run (2**31,) for ever; every target now refuses the same grids."""
    with pytest.raises(LaunchError, match=f"axis {axis} has {int(grid[axis])} programs, more than the {limit}"):
        make_grid3("k", LaunchError)(grid)


def test_grid3_takes_a_0d_integer_tensor():
    torch = pytest.importorskip("torch")
    assert make_grid3("k", LaunchError)((torch.tensor(3), 2)) == (3, 2, 1)
    with pytest.raises(LaunchError, match="axis 0 must be an integer"):
        make_grid3("k", LaunchError)((torch.tensor(3.0),))


def test_an_unsupported_argument_is_described_briefly():
    import numpy as np

    import polytile.language as pl
    from polytile.runtime import jit
    from polytile.runtime.jit import LaunchError

    @jit
    def k(x_ptr, BLOCK: pl.constexpr):
        pl.store(x_ptr + pl.arange(0, BLOCK), 1.0)

    with pytest.raises(LaunchError) as info:
        k[(1,)](list(np.zeros(1000, np.float32)), BLOCK=16)
    message = str(info.value)
    assert "argument 'x_ptr' is list [" in message and len(message) < 400 and "..." in message
