"""Grids at launch: what is not an integer, or too large, is refused on every target,
never truncated (a float grid used to launch int(n / BLOCK) programs, silently)."""

import numpy as np
import pytest

import polytile.language as pl
from polytile.runtime import LaunchError, jit


@jit
def fill(out_ptr, n, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    pl.store(out_ptr + offs, 1.0, mask=offs < n)


def test_a_float_grid_from_a_callable_is_an_error_not_a_truncation():
    out = np.zeros(3000, np.float32)
    with pytest.raises(LaunchError, match=r"kernel 'fill': grid \(2\.9296875,\): axis 0 must be an integer"):
        fill[lambda meta: (out.size / meta["BLOCK"],)](out, out.size, BLOCK=1024, target="interp")
    assert not out.any()   # nothing ran
    fill[lambda meta: (-(-out.size // meta["BLOCK"]),)](out, out.size, BLOCK=1024, target="interp")
    assert out.all()


@pytest.mark.parametrize("grid", [(-0.5,), (True,), ("3",), (1.0,)])
def test_grids_that_are_not_integers_launch_nothing(grid):
    out = np.zeros(8, np.float32)
    with pytest.raises(LaunchError, match="axis 0 must be an integer"):
        fill[grid](out, 8, BLOCK=8, target="interp")
    assert not out.any()


def test_the_interpreter_keeps_the_gpu_grid_limits():
    """(2**31,) used to run on the interpreter for ever; every target refuses it now."""
    out = np.zeros(8, np.float32)
    with pytest.raises(LaunchError, match=r"axis 0 has 2147483648 programs, more than the 2147483647"):
        fill[(2**31,)](out, 8, BLOCK=8, target="interp")
    with pytest.raises(LaunchError, match=r"axis 1 has 65536 programs, more than the 65535"):
        fill[(1, 65536)](out, 8, BLOCK=8, target="interp")


def test_numpy_integers_are_grid_entries():
    out = np.zeros(16, np.float32)
    fill[(np.int64(2),)](out, 16, BLOCK=8, target="interp")
    assert out.all()


def test_an_argument_given_by_position_and_by_keyword_is_a_launch_error():
    """It used to be Python's own TypeError ('fill() got multiple values for argument')."""
    out = np.zeros(8, np.float32)
    with pytest.raises(LaunchError, match=r"'fill': argument 'n' is given twice, by position \(argument 2 of the "
                                          r"call\) and by keyword \(n=\.\.\.\); pass it once"):
        fill[(1,)](out, 8, n=8, BLOCK=8, target="interp")
    with pytest.raises(LaunchError, match="argument 'BLOCK' is given twice"):
        fill.run(out, 8, 8, BLOCK=8, grid=(1,), target="interp")


def test_a_type_error_inside_a_grid_function_is_not_taken_for_a_binding_error():
    out = np.zeros(8, np.float32)
    with pytest.raises(TypeError, match="unsupported operand") as info:
        fill[lambda meta: (meta["BLOCK"] + "x",)](out, 8, BLOCK=8, target="interp")
    assert not isinstance(info.value, LaunchError)


@pytest.mark.gpu
def test_on_the_gpu_grids_and_arguments_are_judged_as_on_the_interpreter(cuda_torch):
    """Also once the native dispatcher has plans for the kernel: a float grid and an
    argument given twice go to the Python path, which refuses them, launching nothing."""
    torch = cuda_torch
    out = torch.zeros(64, dtype=torch.float32, device="cuda")
    for _ in range(3):  # the dispatcher plans these calls
        fill[(8,)](out, 64, BLOCK=8)
        fill[lambda meta: (pt_cdiv(64, meta["BLOCK"]),)](out, 64, BLOCK=8)
    torch.cuda.synchronize()
    assert bool(out.eq(1).all())
    out.zero_()
    for grid in [(8.0,), (True,), lambda meta: (64 / meta["BLOCK"],), (2**31,), (1, 65536)]:
        with pytest.raises(LaunchError, match="axis"):
            fill[grid](out, 64, BLOCK=8)
    with pytest.raises(LaunchError, match="argument 'n' is given twice"):
        fill[(8,)](out, 64, n=64, BLOCK=8)
    torch.cuda.synchronize()
    assert not bool(out.any())


def pt_cdiv(a: int, b: int) -> int:
    return -(-a // b)
