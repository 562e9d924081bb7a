"""Whole-grid (batched) execution: the same results as the per-program loop, the
fallback decisions, errors naming the right program, and chunking of large grids."""

from __future__ import annotations

import numpy as np
import pytest

import polytile.dialects  # noqa: F401  (registers the core dialects)
import polytile.language as pl
from polytile import config
from polytile.interpreter import (
    BATCHED_RULES,
    RULES,
    InterpreterError,
    plan_kernel,
    register_batched_rule,
    register_rule,
    run_kernel,
)
from polytile.interpreter.executor import find_kernel
from polytile.ir import parse_module, verify
from polytile.runtime import jit

MODES = ("per_program", "auto")


def both_modes(launch, *arrays, capsys=None):
    """Run ``launch(*copies)`` in each mode on fresh copies of ``arrays``; check that the
    arrays (and the printed output) come out identical; return the batched run's arrays."""
    outcomes = {}
    for mode in MODES:
        copies = [a.copy() for a in arrays]
        with config.override(interpreter_mode=mode):
            launch(*copies)
        printed = capsys.readouterr().out if capsys is not None else ""
        outcomes[mode] = (copies, printed)
    (expected, expected_out), (got, got_out) = outcomes["per_program"], outcomes["auto"]
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(g, e)
    assert got_out == expected_out
    return got


def plan_of(kernel, *args, **meta):
    module = kernel.lower(*args, **meta)
    return plan_kernel(module, find_kernel(module, kernel.__name__))


# --------------------------------------------------------------------------------------
# Both modes agree


@jit(noinline=True)
def doubled_sum(x_ptr, start):
    return pl.sum(pl.load(x_ptr + start + pl.arange(0, 16)) * 2.0, axis=0)


@jit
def divergent_kernel(x_ptr, out_ptr, sums_ptr, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    offs = pid * BLOCK + pl.arange(0, BLOCK)
    x = pl.load(x_ptr + offs)
    if pid % 3 == 0:
        y = pl.cumsum(x, axis=0)
        s = pl.sum(x, axis=0)
    elif pid % 3 == 1:
        y = x * 2.0
        s = doubled_sum(x_ptr, pid * BLOCK)  # a noinline call on part of the batch
    else:
        y = x - 1.0
        s = pl.max(x, axis=0)
    pl.store(out_ptr + offs, y)
    pl.store(sums_ptr + pid, s)


def test_divergent_if_with_scans_reductions_and_calls():
    x = np.random.default_rng(0).integers(-50, 50, 7 * 16).astype(np.float32)  # sums exact in any order
    out, sums = both_modes(lambda x, o, s: divergent_kernel[(7,)](x, o, s, BLOCK=16),
                           x, np.zeros_like(x), np.zeros(7, np.float32))[1:]
    rows = x.reshape(7, 16)
    np.testing.assert_array_equal(out.reshape(7, 16)[3], np.cumsum(rows[3]))
    np.testing.assert_array_equal(sums[[0, 1, 2]], [rows[0].sum(), 2 * rows[1].sum(), rows[2].max()])
    assert plan_of(divergent_kernel, x, out, sums, BLOCK=16).batched


@jit
def loops_kernel(x_ptr, out_ptr, steps_ptr, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    offs = pl.arange(0, BLOCK)
    acc = pl.zeros((BLOCK,), pl.float32)
    for k in range(0, pid + 1):  # a trip count per program
        acc += pl.load(x_ptr + k * BLOCK + offs)
    for k in range(pid, pid + 3):  # a start per program, one trip count
        acc += k
    n = pid * 7 + 1
    steps = 0
    while n != 1:  # Collatz: a different number of iterations in each program
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    pl.store(out_ptr + pid * BLOCK + offs, acc)
    pl.store(steps_ptr + pid, steps)


def _collatz_steps(n):
    steps = 0
    while n != 1:
        n, steps = (n // 2 if n % 2 == 0 else 3 * n + 1), steps + 1
    return steps


def test_for_and_while_with_per_program_trip_counts():
    grid = 6
    x = np.arange(grid * 8, dtype=np.float32)
    out, steps = both_modes(lambda x, o, s: loops_kernel[(grid,)](x, o, s, BLOCK=8),
                            x, np.zeros_like(x), np.zeros(grid, np.int32))[1:]
    expected = np.cumsum(x.reshape(grid, 8), axis=0) + (3 * np.arange(grid) + 3)[:, None]
    np.testing.assert_array_equal(out.reshape(grid, 8), expected)
    np.testing.assert_array_equal(steps, [_collatz_steps(7 * p + 1) for p in range(grid)])


@jit
def early_return_kernel(out_ptr, n, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    if pid * BLOCK >= n:
        return
    offs = pid * BLOCK + pl.arange(0, BLOCK)
    pl.store(out_ptr + offs, offs * 2, mask=offs < n)
    if pid % 2 == 1:
        return
    pl.store(out_ptr + offs, offs * 3, mask=offs < n)


def test_early_return():
    out = both_modes(lambda o: early_return_kernel[(6,)](o, 37, BLOCK=8), np.full(40, -1, np.int32))[0]
    offs = np.arange(37)
    np.testing.assert_array_equal(out[:37], np.where((offs // 8) % 2 == 1, 2 * offs, 3 * offs))
    assert (out[37:] == -1).all()


@jit
def atomics_kernel(counter_ptr, tickets_ptr, slots_ptr, olds_ptr, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    offs = pl.arange(0, BLOCK)
    ticket = pl.atomic_add(counter_ptr, 1)
    pl.store(tickets_ptr + pid, ticket)
    old = pl.atomic_xchg(slots_ptr + offs % 3, pid * 100 + offs)
    pl.store(olds_ptr + pid * BLOCK + offs, old)
    if pid % 2 == 0:
        # A chain that only a sequential order completes: program 2k finds k.
        prev = pl.atomic_cas(counter_ptr + 1, pid // 2, pid // 2 + 1)
        pl.store(tickets_ptr + 16 + pid, prev)


def test_atomics_return_what_a_sequential_order_gives():
    grid, block = 7, 8
    counter, tickets, slots, olds = both_modes(
        lambda c, t, s, o: atomics_kernel[(grid,)](c, t, s, o, BLOCK=block),
        np.zeros(2, np.int32), np.full(32, -1, np.int32), np.zeros(3, np.int32), np.zeros(grid * block, np.int32))
    np.testing.assert_array_equal(tickets[:grid], np.arange(grid))
    np.testing.assert_array_equal(tickets[16:16 + grid:2], np.arange(4))
    assert counter.tolist() == [grid, 4]
    np.testing.assert_array_equal(slots, [600 + 6, 600 + 7, 600 + 5])


@jit
def blocked_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    pid_m, pid_n = pl.program_id(0), pl.program_id(1)
    a = pl.make_block_ptr(a_ptr, (M, K), (K, 1), (pid_m * BM, 0), (BM, BK), (1, 0))
    b = pl.make_block_ptr(b_ptr, (K, N), (N, 1), (0, pid_n * BN), (BK, BN), (1, 0))
    acc = pl.zeros((BM, BN), pl.float32)
    for k in range(0, K, BK):
        acc = pl.dot(pl.load(a, boundary_check=(0, 1)), pl.load(b, boundary_check=(0, 1)), acc)
        a = pl.advance(a, (0, BK))
        b = pl.advance(b, (BK, 0))
    if (pid_m + pid_n) % 2 == 0:
        acc = pl.dot(acc, pl.load(pl.make_block_ptr(b_ptr, (K, N), (N, 1), (0, 0), (BN, BN), (1, 0)),
                                  boundary_check=(0, 1)))
    c = pl.make_block_ptr(c_ptr, (M, N), (N, 1), (pid_m * BM, pid_n * BN), (BM, BN), (1, 0))
    pl.store(c, acc, boundary_check=(0, 1))


def test_block_pointers_and_dot_in_a_divergent_branch():
    rng = np.random.default_rng(1)
    m, n, k = 40, 36, 24
    a = rng.integers(-3, 4, (m, k)).astype(np.float32)
    b = rng.integers(-3, 4, (k, n)).astype(np.float32)
    c = both_modes(lambda a, b, c: blocked_matmul_kernel[(3, 3)](a, b, c, m, n, k, BM=16, BN=16, BK=16),
                   a, b, np.zeros((m, n), np.float32))[2]
    np.testing.assert_array_equal(c[16:32, :16], (a @ b)[16:32, :16])  # (1, 0): odd, not squared


@jit
def print_kernel(x_ptr, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    x = pl.load(x_ptr + pl.arange(0, BLOCK))
    pl.device_print("all", pid)
    if pid % 2 == 1:
        pl.device_print("odd", x + pid)


def test_device_print_keeps_program_order(capsys):
    both_modes(lambda x: print_kernel[(4,)](x, BLOCK=2), np.array([5, 6], np.int32), capsys=capsys)
    print_kernel[(4,)](np.array([5, 6], np.int32), BLOCK=2)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == ["pid (0, 0, 0) all 0", "pid (1, 0, 0) all 1", "pid (1, 0, 0) idx (0) odd 6",
                         "pid (1, 0, 0) idx (1) odd 7"]


# --------------------------------------------------------------------------------------
# Fallback decisions

SPIN_LOCK = """
func.func @locked_increment(%lock: ptr<i32>, %count: ptr<i32>, %order: ptr<i32>) attributes {kernel = true} {
  %pid = tile.program_id {axis = 0} : i32
  %zero = arith.constant {value = 0} : i32
  %one = arith.constant {value = 1} : i32
  %spin = scf.while %one : i32 {
  ^bb0(%held: i32):
    %taken = arith.cmpi %held, %zero {predicate = "ne"} : i1
    scf.condition %taken, %held
  } {
  ^bb0(%unused: i32):
    %seen = tile.atomic_cas %lock, %zero, %one : i32
    scf.yield %seen
  }
  %n = tile.load %count : i32
  %p = tile.addptr %order, %n : ptr<i32>
  tile.store %p, %pid
  %n1 = arith.addi %n, %one : i32
  tile.store %count, %n1
  %released = tile.atomic_rmw %lock, %zero {kind = "xchg"} : i32
  func.return
}
"""


def test_a_spin_lock_runs_program_by_program_and_completes():
    module = parse_module(SPIN_LOCK)
    verify(module)
    plan = plan_kernel(module, find_kernel(module, "locked_increment"))
    assert not plan.batched
    assert "'scf.while'" in plan.reason and "'tile.atomic_cas'" in plan.reason
    assert plan.reason.endswith("which may wait for another program")
    lock, count, order = np.zeros(1, np.int32), np.zeros(1, np.int32), np.full(5, -1, np.int32)
    run_kernel(module, "locked_increment", (5,), [lock, count, order], mode="auto")
    assert count[0] == 5 and lock[0] == 0
    np.testing.assert_array_equal(order, np.arange(5))


PLUGIN_OP = """
func.func @frobbed(%out: ptr<f32>) attributes {kernel = true} {
  %pid = tile.program_id {axis = 0} : i32
  %f = arith.sitofp %pid : f32
  %e = testbatch.frob %f : f32 loc("plug.py":3:1)
  %p = tile.addptr %out, %pid : ptr<f32>
  tile.store %p, %e
  func.return
}
"""

from polytile.ir.constraints import AnyType  # noqa: E402
from polytile.ir.opdef import Operand, Result, define_op  # noqa: E402
from polytile.ir.operation import Operation  # noqa: E402


@define_op
class FrobOp(Operation):
    """A plugin op of this test."""

    name = "testbatch.frob"
    source = Operand(AnyType)
    result = Result(AnyType)


@pytest.fixture
def frob_rules():
    yield
    RULES.pop(FrobOp, None)
    BATCHED_RULES.pop(FrobOp, None)


def test_a_plugin_op_with_only_a_per_program_rule_runs_program_by_program(frob_rules):
    seen = []

    @register_rule(FrobOp)
    def frob(op, operands, ctx):
        seen.append(ctx.program_id[0])
        return operands[0] * 10

    module = parse_module(PLUGIN_OP)
    plan = plan_kernel(module, find_kernel(module, "frobbed"))
    assert not plan.batched and plan.reason.startswith("'testbatch.frob' (at plug.py:3:1) has no batched rule")
    out = np.zeros(4, np.float32)
    run_kernel(module, "frobbed", (4,), [out], mode="auto")
    np.testing.assert_array_equal(out, [0, 10, 20, 30])
    assert seen == [0, 1, 2, 3]


def test_a_batched_rule_makes_the_kernel_batched_and_register_rule_drops_it(frob_rules):
    calls = []
    register_rule(FrobOp, lambda op, operands, ctx: operands[0] * 10)

    @register_batched_rule(FrobOp)
    def frob_batched(op, operands, ctx):
        calls.append(ctx.size)
        return operands[0] * 10

    module = parse_module(PLUGIN_OP)
    kernel = find_kernel(module, "frobbed")
    assert plan_kernel(module, kernel).batched
    out = np.zeros(4, np.float32)
    run_kernel(module, "frobbed", (4,), [out], mode="auto")
    np.testing.assert_array_equal(out, [0, 10, 20, 30])
    assert calls == [4]
    register_rule(FrobOp, lambda op, operands, ctx: operands[0] + 1)  # a new meaning: the batched rule goes
    assert FrobOp not in BATCHED_RULES and not plan_kernel(module, kernel).batched


def test_a_batched_rule_giving_a_wrong_shape_is_an_internal_error(frob_rules):
    register_rule(FrobOp, lambda op, operands, ctx: operands[0])
    register_batched_rule(FrobOp, lambda op, operands, ctx: np.zeros((2, 3), np.float32))
    with pytest.raises(InterpreterError, match=r"'testbatch.frob' internal error: its batched rule gave an array "
                                               r"of shape \(2, 3\) for f32 in a batch of 4 programs"):
        run_kernel(parse_module(PLUGIN_OP), "frobbed", (4,), [np.zeros(4, np.float32)], mode="auto")


# --------------------------------------------------------------------------------------
# Errors in batched mode name the program and the element

OUT_OF_BOUNDS = """
func.func @oob(%x: ptr<f32>, %out: ptr<f32>, %limit: i32) attributes {kernel = true} {
  %pid = tile.program_id {axis = 0} : i32
  %c = arith.constant {value = 64} : i32
  %start = arith.muli %pid, %c : i32
  %r = tile.arange {end = 64, start = 0} : tile<64xi32>
  %s = tile.splat %start : tile<64xi32>
  %offs = arith.addi %s, %r : tile<64xi32>
  %lim = arith.constant {value = 2} : i32
  %late = arith.cmpi %pid, %lim {predicate = "sge"} : i1
  %v = scf.if %late : tile<64xf32> {
    %xp = tile.splat %x : tile<64xptr<f32>>
    %xo = tile.addptr %xp, %offs : tile<64xptr<f32>>
    %loaded = tile.load %xo : tile<64xf32> loc("kernels/oob.py":12:9)
    scf.yield %loaded
  } {
    %zero = arith.constant {value = 0.0} : tile<64xf32>
    scf.yield %zero
  }
  %op = tile.splat %out : tile<64xptr<f32>>
  %oo = tile.addptr %op, %offs : tile<64xptr<f32>>
  tile.store %oo, %v
  func.return
}
"""


@pytest.mark.parametrize("mode", MODES)
def test_out_of_bounds_in_a_branch_names_the_first_failing_program_and_element(mode):
    x = np.zeros(64 * 3 + 5, np.float32)
    with pytest.raises(InterpreterError) as info:
        run_kernel(parse_module(OUT_OF_BOUNDS), "oob", (5,), [x, np.zeros(64 * 5, np.float32), 0], mode=mode)
    assert info.value.program_id == (3, 0, 0)
    assert str(info.value) == ("kernels/oob.py:12:9: error: kernel 'oob', program (3, 0, 0): 'tile.load' accesses "
                               "index 197, out of bounds of argument 'x' (197 elements of float32) (at element 5 "
                               "of the pointer tile)")


DIVIDE = """
func.func @divide(%out: ptr<i32>) attributes {kernel = true} {
  %pid = tile.program_id {axis = 0} : i32
  %r = tile.arange {end = 8, start = 0} : tile<8xi32>
  %c3 = arith.constant {value = 3} : i32
  %k = arith.subi %pid, %c3 : i32
  %ks = tile.splat %k : tile<8xi32>
  %d = arith.subi %r, %ks : tile<8xi32>
  %q = arith.divsi %r, %d : tile<8xi32> loc("div.py":4:10)
  %op = tile.splat %out : tile<8xptr<i32>>
  %pid8 = arith.constant {value = 8} : i32
  %base = arith.muli %pid, %pid8 : i32
  %bs = tile.splat %base : tile<8xi32>
  %offs = arith.addi %bs, %r : tile<8xi32>
  %oo = tile.addptr %op, %offs : tile<8xptr<i32>>
  tile.store %oo, %q
  func.return
}
"""


@pytest.mark.parametrize("mode", MODES)
def test_division_by_zero_names_the_program_and_the_element(mode):
    # Program p divides by r - (p - 3): zero at element p - 3, first in program 3.
    with pytest.raises(InterpreterError) as info:
        run_kernel(parse_module(DIVIDE), "divide", (6,), [np.zeros(48, np.int32)], mode=mode)
    assert str(info.value) == ("div.py:4:10: error: kernel 'divide', program (3, 0, 0): 'arith.divsi' integer "
                               "division by zero (at element 0 of the divisor)")


@jit
def assert_kernel(x_ptr, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    x = pl.load(x_ptr + pid * BLOCK + pl.arange(0, BLOCK))
    pl.device_print("x", pid)
    pl.device_assert(x >= 0, "x must not be negative")


@pytest.mark.parametrize("mode", MODES)
def test_device_assert_reports_the_first_failing_program(mode, capsys):
    x = np.zeros(4 * 4, np.int32)
    x[2 * 4 + 3] = -1
    x[3 * 4 + 1] = -1
    with config.override(interpreter_mode=mode), pytest.raises(InterpreterError) as info:
        assert_kernel[(4,)](x, BLOCK=4)
    assert info.value.program_id == (2, 0, 0)
    assert "device assertion failed at element 3: x must not be negative" in str(info.value)
    # Output up to the failing program is printed, in program order.
    assert capsys.readouterr().out.splitlines() == ["pid (0, 0, 0) x 0", "pid (1, 0, 0) x 1", "pid (2, 0, 0) x 2"]


# --------------------------------------------------------------------------------------
# Large grids run in chunks


@pytest.mark.parametrize("batch_elements", [1, 40, 100, 1 << 20])
def test_chunks_of_any_size_give_the_same_results(batch_elements):
    grid = 9
    x = np.arange(grid * 8 + 8, dtype=np.float32)
    expected_out, expected_steps = np.zeros_like(x), np.zeros(grid, np.int32)
    loops_kernel[(grid,)](x, expected_out, expected_steps, BLOCK=8)
    out, steps = np.zeros_like(x), np.zeros(grid, np.int32)
    with config.override(interpreter_mode="auto", interpreter_batch_elements=batch_elements):
        loops_kernel[(grid,)](x, out, steps, BLOCK=8)
    np.testing.assert_array_equal(out, expected_out)
    np.testing.assert_array_equal(steps, expected_steps)


def test_a_3d_grid_in_chunks_numbers_programs_axis_0_fastest():
    text = """
func.func @ids(%out: ptr<i32>) attributes {kernel = true} {
  %x = tile.program_id {axis = 0} : i32
  %y = tile.program_id {axis = 1} : i32
  %z = tile.program_id {axis = 2} : i32
  %nx = tile.num_programs {axis = 0} : i32
  %ny = tile.num_programs {axis = 1} : i32
  %zy = arith.muli %z, %ny : i32
  %zyy = arith.addi %zy, %y : i32
  %row = arith.muli %zyy, %nx : i32
  %lin = arith.addi %row, %x : i32
  %c100 = arith.constant {value = 100} : i32
  %c10 = arith.constant {value = 10} : i32
  %a = arith.muli %z, %c100 : i32
  %b = arith.muli %y, %c10 : i32
  %ab = arith.addi %a, %b : i32
  %v = arith.addi %ab, %x : i32
  %p = tile.addptr %out, %lin : ptr<i32>
  tile.store %p, %v
  func.return
}
"""
    out = np.zeros(4 * 3 * 2, np.int32)
    run_kernel(parse_module(text), "ids", (4, 3, 2), [out], mode="auto", batch_elements=5)
    z, y, x = np.meshgrid(np.arange(2), np.arange(3), np.arange(4), indexing="ij")
    np.testing.assert_array_equal(out, (100 * z + 10 * y + x).reshape(-1))


def test_bad_mode_and_batch_size_are_argument_errors():
    module = parse_module(DIVIDE)
    with pytest.raises(InterpreterError, match=r"kernel 'divide': mode must be one of 'auto', 'per_program', "
                                               r"got 'fast'"):
        run_kernel(module, "divide", (1,), [np.zeros(8, np.int32)], mode="fast")
    with pytest.raises(InterpreterError, match="batch_elements must be a positive integer, got 0"):
        run_kernel(module, "divide", (1,), [np.zeros(8, np.int32)], batch_elements=0)
