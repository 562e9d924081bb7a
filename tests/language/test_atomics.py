"""Atomics against NumPy: every program of the grid hits the same addresses, so a lost
update or a wrong old value shows."""

import itertools

import numpy as np
import pytest

import polytile.language as pl
from polytile.errors import CompilationError
from polytile.runtime import jit


@jit
def rmw_kernel(ptr, val_ptr, old_ptr, n, OP: pl.constexpr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    mask = offs < n
    v = pl.load(val_ptr + pl.program_id(0) * BLOCK + offs, mask=mask)
    if OP == "add":
        old = pl.atomic_add(ptr + offs, v, mask=mask)
    elif OP == "max":
        old = pl.atomic_max(ptr + offs, v, mask=mask, sem="relaxed")
    elif OP == "min":
        old = pl.atomic_min(ptr + offs, v, mask=mask, scope="cta")
    elif OP == "and":
        old = pl.atomic_and(ptr + offs, v, mask=mask)
    elif OP == "or":
        old = pl.atomic_or(ptr + offs, v, mask=mask, sem="acquire")
    elif OP == "xor":
        old = pl.atomic_xor(ptr + offs, v, mask=mask, sem="release", scope="sys")
    else:
        old = pl.atomic_xchg(ptr + offs, v, mask=mask)
    pl.store(old_ptr + pl.program_id(0) * BLOCK + offs, old, mask=mask)


REDUCE = {"add": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
          "xor": np.bitwise_xor}


# Bitwise atomics take integers only (a float is a compile error, tested separately).
RMW_CASES = [(dtype, op) for dtype in (np.int32, np.int64, np.uint32, np.float32, np.float64, np.float16)
             for op in ("add", "max", "min", "and", "or", "xor", "xchg")
             if not (np.dtype(dtype).kind == "f" and op in ("and", "or", "xor"))]


@pytest.mark.parametrize("dtype, op", RMW_CASES)
def test_atomic_rmw(target, dtype, op):
    is_float = np.dtype(dtype).kind == "f"
    rng = np.random.default_rng(0)
    programs, n, block = 4, 20, 32
    vals = np.zeros(programs * block, dtype=dtype)
    if is_float:
        vals[:] = rng.integers(-8, 8, vals.size)  # small integers: float sums are exact in any order
    else:
        vals[:] = rng.integers(0, 1000, vals.size)
    init = (np.arange(n) % 7).astype(dtype)
    mem, old = init.copy(), np.zeros_like(vals)
    rmw_kernel[(programs,)](mem, vals, old, n, OP=op, BLOCK=block, target=target)
    per_program = vals.reshape(programs, block)[:, :n]
    if op != "xchg":  # for xchg, the order the olds reveal decides the final value (below)
        np.testing.assert_array_equal(mem, REDUCE[op].reduce(np.vstack([init, per_program]), axis=0))
    # Each program saw the memory some order of its predecessors left: on the interpreter
    # that order is program order; on a GPU any order is possible, element by element.
    olds = old.reshape(programs, block)[:, :n]
    for element in range(n):
        assert any(_olds_follow(order, init[element], per_program[:, element], olds[:, element], op)
                   and (op != "xchg" or mem[element] == per_program[order[-1], element])
                   for order in itertools.permutations(range(programs))), (element, olds[:, element])
    if target == "interp":  # programs run in program order there
        assert _olds_follow(range(programs), None, per_program, olds, op, init=init)
        if op == "xchg":
            np.testing.assert_array_equal(mem, per_program[-1])


def _olds_follow(order, start, values, olds, op, init=None):
    """Whether ``olds[p]`` is what program ``p`` reads when the programs run in ``order``."""
    current = init.copy() if init is not None else start
    for p in order:
        if not np.array_equal(olds[p], current):
            return False
        current = values[p] if op == "xchg" else REDUCE[op](current, values[p])
    return True

@jit
def contended_add_kernel(ptr, BLOCK: pl.constexpr):
    # Every lane of every program adds into element 0: no update may be lost.
    offs = pl.arange(0, BLOCK)
    pl.atomic_add(ptr + offs * 0, 1)
    pl.atomic_add(ptr + 1, 2.5)  # a scalar atomic, and a float literal into an f32 pointee


def test_contended_atomics_lose_nothing(target):
    mem = np.zeros(2, dtype=np.float32)
    contended_add_kernel[(3,)](mem, BLOCK=64, target=target)
    assert mem.tolist() == [192.0, 7.5]


@jit
def cas_kernel(lock_ptr, out_ptr, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    # Only the first program finds 0 and takes the slot; the others see its id + 1.
    old = pl.atomic_cas(lock_ptr, 0, pid + 1)
    offs = pl.arange(0, BLOCK)
    seen = pl.atomic_cas(lock_ptr + offs * 0 + 1, offs, offs + 100)
    pl.store(out_ptr + pid, old)
    pl.store(out_ptr + 8 + pid * BLOCK + offs, seen)


def test_atomic_cas(target):
    lock = np.zeros(2, dtype=np.int32)
    lock[1] = 3
    out = np.full(8 + 3 * 4, -1, dtype=np.int32)
    cas_kernel[(3,)](lock, out, BLOCK=4, target=target)
    # In any order: one program finds 0 and swaps in its id + 1, which the others see.
    first = out[:3].tolist().index(0)
    assert sorted(out[:3].tolist()) == [0, first + 1, first + 1] and lock[0] == first + 1
    # Only lane 3 (comparing with 3) ever swaps, once: it saw 3; every other lane saw 3 or 103.
    seen = out[8:].reshape(3, 4)
    assert lock[1] == 103 and set(seen.ravel().tolist()) <= {3, 103}
    assert (seen[:, 3] == 3).sum() == 1
    if target == "interp":
        # Programs, and the lanes of a program, run in order on the interpreter.
        assert out[:3].tolist() == [0, 1, 1]
        assert seen.tolist() == [[3, 3, 3, 3], [103] * 4, [103] * 4]


@jit
def float_cas_kernel(ptr):
    pl.atomic_cas(ptr, 1.5, 2.0)


def test_atomic_cas_on_floats(target):
    mem = np.array([1.5], dtype=np.float32)
    float_cas_kernel[(1,)](mem, target=target)
    assert mem[0] == 2.0


@jit
def float_minmax_kernel(ptr, val_ptr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    v = pl.load(val_ptr + offs)
    pl.atomic_max(ptr + offs * 0, v)
    pl.atomic_min(ptr + offs * 0 + 1, v)


def test_float_atomic_max_min_with_negative_values(target):
    vals = np.array([-3.5, -1.0, -7.25, -2.0], dtype=np.float32)
    mem = np.array([-100.0, 100.0], dtype=np.float32)
    float_minmax_kernel[(1,)](mem, vals, BLOCK=4, target=target)
    assert mem.tolist() == [-1.0, -7.25]


def test_atomic_ir_kinds():
    @jit
    def kinds(f_ptr, u_ptr):
        pl.atomic_add(f_ptr, 1.0, sem="relaxed", scope="cta")
        pl.atomic_max(u_ptr, 1)
        pl.atomic_min(u_ptr, 1)

    text = str(kinds.lower(np.zeros(1, np.float32), np.zeros(1, np.uint32)))
    assert 'kind = "fadd", scope = "cta", sem = "relaxed"' in text
    assert 'kind = "umax"' in text and 'kind = "umin"' in text


@pytest.mark.parametrize("body, message", [
    ("pl.atomic_and(f_ptr, 1.0)", "pl.atomic_and needs integers, got fp32"),
    ("pl.atomic_add(f_ptr, 1.0, sem='seq_cst')", "unknown sem 'seq_cst'"),
    ("pl.atomic_add(f_ptr, 1.0, scope='grid')", "unknown scope 'grid'"),
    ("pl.atomic_add(n, 1)", "pl.atomic_add needs a pointer"),
])
def test_atomic_errors(body, message, tmp_path):
    import importlib.util

    path = tmp_path / "bad_atomic.py"
    path.write_text("import polytile.language as pl\nfrom polytile.runtime import jit\n\n@jit\n"
                    f"def bad(f_ptr, n):\n    {body}\n")
    spec = importlib.util.spec_from_file_location("bad_atomic", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(CompilationError) as info:
        module.bad[(1,)](np.zeros(1, np.float32), 3, target="interp")
    assert message in str(info.value)
    assert "bad_atomic.py:6" in str(info.value) and "^" in str(info.value)
