"""Kernels and calls: @pt.jit, @pt.jit(noinline=True), nested jit functions, constexpr
parameters and annotations, kernel[grid] with a tuple or a callable, run-time control
flow, and the host helpers pt.autotune / pt.heuristics / pt.Config / pt.cdiv /
pt.next_power_of_2."""

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl


@pt.jit
def square(x):
    return x * x


@pt.jit
def sum_of_squares(x, y):
    return square(x) + square(y)  # a jit function calling a jit function


@pt.jit(noinline=True)
def clamp_scalar(v, lo, hi):
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


@pt.jit
def calls_kernel(x_ptr, out_ptr, n, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    offs = pid * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    x = pl.load(x_ptr + offs, mask=mask)
    pl.store(out_ptr + offs, sum_of_squares(x, x + 1), mask=mask)
    pl.store(out_ptr + n + pid, clamp_scalar(pl.load(x_ptr + pid * BLOCK), 2, 5))


@pytest.mark.parametrize("n", [40, 64])
def test_nested_and_noinline_calls(target, n):
    x = np.arange(n, dtype=np.int32) % 9
    programs = pt.cdiv(n, 16)
    out = np.zeros(n + programs, np.int32)
    calls_kernel[(programs,)](x, out, n, BLOCK=16, target=target)
    np.testing.assert_array_equal(out[:n], x * x + (x + 1) * (x + 1))
    np.testing.assert_array_equal(out[n:], np.clip(x[::16], 2, 5))
    text = str(calls_kernel.lower(x, out, n, BLOCK=16))
    assert "{callee = @clamp_scalar}" in text and "noinline = true" in text  # it stayed a function


@pt.jit
def constexpr_kernel(out_ptr, SCALE: pl.constexpr, FLAG: pl.constexpr, NAME: pl.constexpr, SHAPE: pl.constexpr,
                     DT: pl.constexpr):
    x = pl.full(SHAPE, SCALE, DT)
    if FLAG:  # a compile-time branch: only one side is compiled
        x = x * 2
    if NAME == "negate":
        x = -x
    pl.store(out_ptr + pl.arange(0, SHAPE[0]), x)


@pytest.mark.parametrize("flag, name", [(True, "negate"), (False, "keep")])
def test_constexpr_parameters(target, flag, name):
    out = np.zeros(8, np.float32)
    constexpr_kernel[(1,)](out, SCALE=1.5, FLAG=flag, NAME=name, SHAPE=(8,), DT=pl.float32, target=target)
    assert out.tolist() == [1.5 * (2 if flag else 1) * (-1 if name == "negate" else 1)] * 8


BLOCK_GLOBAL = pl.constexpr(8)


@pt.jit
def global_constexpr_kernel(out_ptr):
    pl.store(out_ptr + pl.arange(0, BLOCK_GLOBAL), BLOCK_GLOBAL)


def test_constexpr_global(target):
    out = np.zeros(8, np.int32)
    global_constexpr_kernel[(1,)](out, target=target)
    assert out.tolist() == [8] * 8


@pt.jit
def control_kernel(x_ptr, out_ptr, n):
    # Run-time if/else, while, for with a run-time bound, and an early return.
    v = pl.load(x_ptr + pl.program_id(0))
    if v < 0:
        pl.store(out_ptr + pl.program_id(0), -1)
        return
    steps = 0
    while v != 1 and steps < n:
        if v % 2 == 0:
            v = v // 2
        else:
            v = 3 * v + 1
        steps += 1
    total = 0
    for i in range(steps):
        total += i
    pl.store(out_ptr + pl.program_id(0), steps * 1000 + total)


def _collatz(v, limit):
    steps = 0
    while v != 1 and steps < limit:
        v = v // 2 if v % 2 == 0 else 3 * v + 1
        steps += 1
    return steps


def test_run_time_control_flow(target):
    x = np.array([6, 7, -3, 1, 27], np.int32)
    out = np.zeros(5, np.int32)
    control_kernel[(5,)](x, out, 50, target=target)
    expected = [-1 if v < 0 else _collatz(v, 50) * 1000 + sum(range(_collatz(v, 50))) for v in x]
    assert out.tolist() == expected


@pt.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    pl.store(out_ptr + offs, pl.load(x_ptr + offs, mask=mask) + pl.load(y_ptr + offs, mask=mask), mask=mask)


@pytest.mark.parametrize("grid_kind", ["tuple", "callable"])
def test_grid_tuple_or_callable(target, grid_kind):
    n = 100
    x, y = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
    out = np.zeros(n, np.float32)
    seen = []

    def grid(meta):
        seen.append(dict(meta))
        return (pt.cdiv(n, meta["BLOCK"]),)

    add_kernel[(pt.cdiv(n, 32),) if grid_kind == "tuple" else grid](x, y, out, n, BLOCK=32, target=target)
    np.testing.assert_array_equal(out, x + y)
    if grid_kind == "callable":
        assert seen and seen[0]["BLOCK"] == 32 and seen[0]["n"] == n  # the grid sees every argument by name


@pt.autotune(configs=[pt.Config({"BLOCK": 16}), pt.Config({"BLOCK": 64}, num_warps=2)], key=["n"])
@pt.jit
def tuned_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    pl.store(out_ptr + offs, pl.load(x_ptr + offs, mask=mask) + pl.load(y_ptr + offs, mask=mask), mask=mask)


@pytest.mark.parametrize("n", [50, 128])
def test_autotune_and_config(target, n):
    x, y = np.arange(n, dtype=np.float32), np.full(n, 2, np.float32)
    out = np.zeros(n, np.float32)
    tuned_add_kernel[lambda meta: (pt.cdiv(n, meta["BLOCK"]),)](x, y, out, n, target=target)
    np.testing.assert_array_equal(out, x + y)
    assert tuned_add_kernel.best_config.kwargs["BLOCK"] in (16, 64)
    assert pt.Config({"BLOCK": 16}) == pt.Config({"BLOCK": 16}) and "BLOCK: 16" in repr(pt.Config({"BLOCK": 16}))


@pt.heuristics({"BLOCK": lambda args: pt.next_power_of_2(args["n"]), "EVEN": lambda args: args["n"] % 2 == 0})
@pt.jit
def heuristic_kernel(x_ptr, out_ptr, n, BLOCK: pl.constexpr, EVEN: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    mask = offs < n
    pl.store(out_ptr + offs, pl.load(x_ptr + offs, mask=mask) * (2 if EVEN else 3), mask=mask)


@pytest.mark.parametrize("n", [5, 16])
def test_heuristics(target, n):
    x = np.arange(n, dtype=np.int32)
    out = np.zeros(n, np.int32)
    heuristic_kernel[(1,)](x, out, n, target=target)
    np.testing.assert_array_equal(out, x * (2 if n % 2 == 0 else 3))


def test_host_helpers():
    assert [pt.cdiv(a, 4) for a in (0, 1, 4, 5, 17)] == [0, 1, 1, 2, 5]
    assert [pt.next_power_of_2(a) for a in (0, 1, 2, 3, 17, 64, 65)] == [1, 1, 2, 4, 32, 64, 128]


# -- break and continue (Triton refuses both; polytile runs them as Python does) --------------


@pt.jit
def skip_negatives_kernel(x_ptr, out_ptr, n):
    acc = 0
    for i in range(n):
        v = pl.load(x_ptr + i)
        if v < 0:
            continue
        acc += v
    pl.store(out_ptr, acc)


@pt.jit
def sum_until_negative_kernel(x_ptr, out_ptr, n, STEP: pl.constexpr):
    acc = 0
    count = 0
    start = 0 if STEP > 0 else n - 1
    stop = n if STEP > 0 else -1
    for i in range(start, stop, STEP):
        v = pl.load(x_ptr + i)
        if v < 0:
            break
        acc += v
        count += 1
    pl.store(out_ptr, acc)
    pl.store(out_ptr + 1, count)


@pt.jit
def first_negative_kernel(x_ptr, out_ptr):
    i = 0
    while True:  # ended by its break
        if pl.load(x_ptr + i) < 0:
            break
        i += 1
    pl.store(out_ptr, i)


@pt.jit
def while_continue_kernel(x_ptr, out_ptr, n):
    i = 0
    acc = 0
    while i < n:
        v = pl.load(x_ptr + i)
        i += 1
        if v % 2 == 0:
            continue
        acc += v
    pl.store(out_ptr, acc)


@pt.jit
def unrolled_break_kernel(x_ptr, out_ptr, LIMIT: pl.constexpr):
    acc = 0
    for i in pl.static_range(8):
        if i == LIMIT:
            break  # at compile time: the copies after it are not generated
        if pl.load(x_ptr + i) < 0:
            break  # at run time: the later copies run under a flag
        acc += pl.load(x_ptr + i)
    pl.store(out_ptr, acc)


@pt.jit
def nested_jumps_kernel(x_ptr, out_ptr, n):
    acc = 0
    for i in range(n):
        for j in range(n):
            if j > i:
                break  # ends the inner loop only
            elif (i + j) % 2 == 1:
                continue
            acc += pl.load(x_ptr + i * n + j)
        if acc > 1000:
            break
    pl.store(out_ptr, acc)


def _sum_until_negative(x, indices):
    acc = count = 0
    for i in indices:
        if x[i] < 0:
            break
        acc, count = acc + x[i], count + 1
    return [acc, count]


@pytest.mark.parametrize("values", [[1, 2, 3, -1, 5, 6, 7, 8], [4, 5, 6, 7, 8, 9, 10, 11]])
def test_break_and_continue(target, values):
    x = np.array(values, np.int32)
    out = np.zeros(2, np.int32)
    skip_negatives_kernel[(1,)](x, out, 8, target=target)
    assert out[0] == x[x >= 0].sum()
    for step, indices in ((1, range(8)), (-1, range(7, -1, -1)), (3, range(0, 8, 3))):
        out[:] = 0
        sum_until_negative_kernel[(1,)](x, out, 8, STEP=step, target=target)
        assert out.tolist() == _sum_until_negative(x, indices), step
    if (x < 0).any():
        first_negative_kernel[(1,)](x, out, target=target)
        assert out[0] == int(np.argmax(x < 0))
    while_continue_kernel[(1,)](x, out, 8, target=target)
    assert out[0] == x[x % 2 != 0].sum()
    for limit in (3, 8):
        unrolled_break_kernel[(1,)](x, out, LIMIT=limit, target=target)
        assert out[0] == _sum_until_negative(x, range(limit))[0], limit


@pytest.mark.parametrize("n", [1, 4, 7])
def test_nested_break_and_continue(target, n):
    x = np.arange(n * n, dtype=np.int32)
    out = np.zeros(1, np.int32)
    nested_jumps_kernel[(1,)](x, out, n, target=target)
    acc = 0
    for i in range(n):
        for j in range(n):
            if j > i:
                break
            elif (i + j) % 2 == 1:
                continue
            acc += x[i * n + j]
        if acc > 1000:
            break
    assert out[0] == acc


@pt.jit
def counted_condition_kernel(x_ptr, count_ptr):
    i = 0
    while pl.atomic_add(count_ptr, 1) < 100:  # a condition with an effect
        if pl.load(x_ptr + i) < 0:
            break
        i += 1
    pl.store(count_ptr + 1, i)


def test_a_while_condition_is_not_evaluated_again_after_break(target):
    x = np.array([1, 2, -1, 4, 5, 6, 7, 8], np.int32)
    count = np.zeros(2, np.int32)
    counted_condition_kernel[(1,)](x, count, target=target)
    assert count.tolist() == [3, 2]  # Python evaluates the condition three times


@pt.jit
def run_time_step_kernel(out_ptr, start, stop, step, LIMIT: pl.constexpr):
    count = 0
    last = -1
    for i in range(start, stop, step):
        if count == LIMIT:
            break
        last = i
        count += 1
    pl.store(out_ptr, count)
    pl.store(out_ptr + 1, last)


@pytest.mark.parametrize("start, stop, step", [(0, 10, 3), (10, 0, -3), (0, 4, -1), (5, 5, 1),
                                               (2147483000, 2147483647, 1000), (-5, 7, 2)])
def test_a_loop_that_can_break_counts_as_range_does(target, start, stop, step):
    out = np.zeros(2, np.int32)
    run_time_step_kernel[(1,)](out, start, stop, step, LIMIT=100, target=target)
    values = list(range(start, stop, step))
    assert out.tolist() == [len(values), values[-1] if values else -1]
    run_time_step_kernel[(1,)](out, start, stop, step, LIMIT=1, target=target)
    assert out.tolist() == [min(1, len(values)), values[0] if values else -1]


@pt.jit
def defined_after_continue_kernel(x_ptr, out_ptr, n):
    acc = 0
    for i in range(n):
        v = pl.load(x_ptr + i)
        if v < 0:
            continue
        else:
            w = v * 2  # defined only where the loop goes on, as Python allows
        acc += w
    pl.store(out_ptr, acc)


def test_a_name_defined_on_the_branch_that_goes_on_stays_defined(target):
    x = np.array([1, -2, 3, -4, 5], np.int32)
    out = np.zeros(1, np.int32)
    defined_after_continue_kernel[(1,)](x, out, 5, target=target)
    assert out[0] == 2 * (1 + 3 + 5)


@pt.jit
def pipelined_continue_kernel(x_ptr, out_ptr, n):
    acc = 0.0
    for i in pl.range(n, num_stages=3):
        v = pl.load(x_ptr + i)
        if v < 0:
            continue
        acc += v
    pl.store(out_ptr, acc)


def test_continue_in_a_pipelined_loop_is_refused():
    with pytest.raises(pt.CompilationError, match="a loop that can 'continue' runs the rest of its body under a "
                                                  "condition, which cannot be software-pipelined: remove pl.range's "
                                                  "num_stages or the 'continue'"):
        pipelined_continue_kernel[(1,)](np.zeros(4, np.float32), np.zeros(1, np.float32), 4)
