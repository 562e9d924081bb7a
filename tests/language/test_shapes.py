"""join / split / cat, view, broadcast, permute and indexing with None and ':' against NumPy."""

import numpy as np
import pytest

import polytile.language as pl
from polytile.errors import CompilationError
from polytile.runtime import jit


@jit
def join_split_kernel(a_ptr, b_ptr, joined_ptr, back_ptr, N: pl.constexpr):
    offs = pl.arange(0, N)
    a = pl.load(a_ptr + offs)
    b = pl.load(b_ptr + offs)
    j = pl.join(a, b)  # [N, 2]
    pl.store(joined_ptr + offs[:, None] * 2 + pl.arange(0, 2)[None, :], j)
    x, y = pl.split(j)
    pl.store(back_ptr + offs, x - y)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.float16, np.float32, np.float64])
def test_join_split(target, dtype):
    n = 16
    a = np.arange(n).astype(dtype)
    b = (np.arange(n) * 3 % 7).astype(dtype)
    joined = np.zeros((n, 2), dtype=dtype)
    back = np.zeros(n, dtype=dtype)
    join_split_kernel[(1,)](a, b, joined, back, N=n, target=target)
    np.testing.assert_array_equal(joined, np.stack([a, b], axis=-1))
    np.testing.assert_array_equal(back, a - b)


@jit
def join_2d_kernel(a_ptr, out_ptr, s_ptr):
    r = pl.arange(0, 4)[:, None] * 8 + pl.arange(0, 8)[None, :]
    a = pl.load(a_ptr + r)
    j = pl.join(a, 1.5)  # the scalar broadcasts, the int tile promotes to fp32
    pl.store(out_ptr + r[:, :, None] * 2 + pl.arange(0, 2)[None, None, :], j)
    s = pl.join(pl.load(a_ptr), pl.load(a_ptr + 1))  # two scalars: shape [2]
    lo, hi = s.split()  # and back to scalars
    pl.store(s_ptr + pl.arange(0, 2), s.to(pl.float32))
    pl.store(s_ptr + 2, (hi - lo).to(pl.float32))


def test_join_broadcasts_and_scalars(target):
    a = np.arange(32, dtype=np.int32).reshape(4, 8)
    out = np.zeros((4, 8, 2), dtype=np.float32)
    s = np.zeros(3, dtype=np.float32)
    join_2d_kernel[(1,)](a, out, s, target=target)
    np.testing.assert_array_equal(out, np.stack([a, np.full_like(a, 1.5, dtype=np.float32)], -1))
    assert s.tolist() == [0.0, 1.0, 1.0]


@jit
def cat_kernel(a_ptr, b_ptr, out_ptr, total_ptr, N: pl.constexpr):
    offs = pl.arange(0, N)
    c = pl.cat(pl.load(a_ptr + offs), pl.load(b_ptr + offs), can_reorder=True)
    pl.store(out_ptr + pl.arange(0, 2 * N), c)
    pl.store(total_ptr, pl.sum(c, axis=0))


def test_cat(target):
    a, b = np.arange(8, dtype=np.float32), np.arange(8, dtype=np.float32) + 100
    out, total = np.zeros(16, np.float32), np.zeros(1, np.float32)
    cat_kernel[(1,)](a, b, out, total, N=8, target=target)
    # The order is unspecified (as Triton); the multiset of elements is not.
    np.testing.assert_array_equal(np.sort(out), np.concatenate([a, b]))
    assert total[0] == a.sum() + b.sum()


@jit
def views_kernel(x_ptr, out_ptr, M: pl.constexpr, N: pl.constexpr):
    r = pl.arange(0, M)[:, None] * N + pl.arange(0, N)[None, :]
    x = pl.load(x_ptr + r)
    v = pl.view(x, (N, M))  # same elements, another shape
    p = pl.permute(pl.reshape(x, (M, N, 1)), (2, 1, 0))  # [1, N, M]
    a, b = pl.broadcast(x[:, :, None], pl.zeros((1, 1, 2), pl.float32))
    out_r = pl.arange(0, N)[:, None] * M + pl.arange(0, M)[None, :]
    pl.store(out_ptr + out_r, v)
    pl.store(out_ptr + M * N + out_r[None, :, :], p)
    pl.store(out_ptr + 2 * M * N + r[:, :, None] * 2 + pl.arange(0, 2)[None, None, :], a + b)


def test_view_permute_broadcast_and_indexing(target):
    m, n = 4, 8
    x = np.arange(m * n, dtype=np.float32).reshape(m, n)
    out = np.zeros(4 * m * n, dtype=np.float32)
    views_kernel[(1,)](x, out, M=m, N=n, target=target)
    np.testing.assert_array_equal(out[:m * n], x.reshape(n, m).ravel())
    np.testing.assert_array_equal(out[m * n:2 * m * n], x.T.ravel())
    np.testing.assert_array_equal(out[2 * m * n:], np.repeat(x[:, :, None], 2, axis=2).ravel())


@pytest.mark.parametrize("body, message", [
    ("pl.cat(x, x)", "pl.cat may reorder the elements of its result; pass can_reorder=True"),
    ("pl.cat(x[:, None], x[:, None], can_reorder=True)", "pl.cat needs 1-D tensors, got shapes [4, 1] and [4, 1]"),
    ("pl.split(x)", "pl.split needs a tensor whose last dimension is 2, got shape [4]"),
])
def test_shape_errors(body, message, tmp_path):
    import importlib.util

    path = tmp_path / "bad_shape.py"
    path.write_text("import polytile.language as pl\nfrom polytile.runtime import jit\n\n@jit\n"
                    f"def bad(x_ptr):\n    x = pl.load(x_ptr + pl.arange(0, 4))\n    {body}\n")
    spec = importlib.util.spec_from_file_location("bad_shape", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(CompilationError) as info:
        module.bad.lower(np.zeros(4, np.float32))
    assert message in str(info.value) and "bad_shape.py:7" in str(info.value)


@jit
def interleave_kernel(x_ptr, y_ptr, out_ptr, pair_ptr, n, ROWS: pl.constexpr, COLS: pl.constexpr):
    pl.assume(n > 0)  # Triton's tl.assume: a hint on GPUs, checked on the interpreter
    rows = pl.arange(0, ROWS)[:, None]
    grid = rows * COLS + pl.arange(0, COLS)[None, :]
    z = pl.interleave(pl.load(x_ptr + grid), pl.load(y_ptr + grid))
    pl.assume(z == z)
    pl.store(out_ptr + rows * (2 * COLS) + pl.arange(0, 2 * COLS)[None, :], z)
    pl.store(pair_ptr + pl.arange(0, 2), pl.interleave(n, n + 1))  # scalars: shape [2]


def test_interleave_and_assume(target):
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    y = -x - 0.5
    out = np.zeros((4, 16), np.float32)
    pair = np.zeros(2, np.int32)
    interleave_kernel[(1,)](x, y, out, pair, 5, ROWS=4, COLS=8, target=target)
    np.testing.assert_array_equal(out, np.stack([x, y], -1).reshape(4, 16))
    assert pair.tolist() == [5, 6]


@pytest.mark.parametrize("cond, message", [("1.5", "pl.assume needs a boolean condition"),
                                           ("x", "pl.assume needs a boolean condition"),
                                           ("False", r"pl.assume\(False\): the condition is false")])
def test_assume_needs_a_true_boolean(cond, message, tmp_path):
    import importlib.util

    path = tmp_path / "assume_bad.py"
    path.write_text("import polytile.language as pl\nfrom polytile.runtime import jit\n\n@jit\n"
                    "def bad(x_ptr):\n    x = pl.load(x_ptr + pl.arange(0, 4))\n"
                    f"    pl.assume({cond})\n    pl.store(x_ptr + pl.arange(0, 4), x)\n")
    spec = importlib.util.spec_from_file_location("assume_bad", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(CompilationError, match=message):
        module.bad[(1,)](np.zeros(4, np.float32), target="interp")


@jit
def ravel_kernel(x_ptr, out_ptr, M: pl.constexpr, N: pl.constexpr):
    tile = pl.load(x_ptr + pl.arange(0, M)[:, None] * N + pl.arange(0, N)[None, :])
    pl.store(out_ptr + pl.arange(0, M * N), pl.ravel(pl.trans(tile)))


def test_ravel_is_row_major(target):
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    out = np.zeros(32, np.float32)
    ravel_kernel[(1,)](x, out, M=4, N=8, target=target)
    np.testing.assert_array_equal(out, x.T.ravel())


@jit
def triton_index_kernel(z_ptr, x_ptr):
    # Triton's indexing: position i adds a dimension at i where it is None, ':' keeps what
    # is there, and a ':' past the last dimension keeps nothing (a scalar pointer indexed
    # [None, None, :] is 1 x 1, as Triton's test_reduce stores a keep_dims sum).
    x = pl.load(x_ptr + pl.arange(0, 4))
    total = pl.sum(x[:, None], axis=None, keep_dims=True)
    pl.store(z_ptr[None, None, :], total)


def test_indexing_follows_triton(target):
    x = np.arange(4, dtype=np.float32)
    z = np.zeros(1, np.float32)
    triton_index_kernel[(1,)](z, x, target=target)
    assert z[0] == 6


@jit
def bad_index_kernel(x_ptr, WHAT: pl.constexpr):
    x = pl.load(x_ptr + pl.arange(0, 4))
    if WHAT == "past the end":
        x[:, :, None]
    else:
        pl.store(x_ptr + pl.arange(0, 4)[:, None] + pl.arange(0, 4)[None, :], x)


@pytest.mark.parametrize("what, message", [
    ("past the end", r"None at position 2 of the index adds a dimension past the end of a tensor of rank 1"),
    ("store rank", r"pl.store: the value's shape \[4\] has another rank than the pointers' \[4, 4\]"),
])
def test_indexing_and_store_rank_mistakes(what, message):
    with pytest.raises(CompilationError, match=message):
        bad_index_kernel[(1,)](np.zeros(16, np.float32), WHAT=what)


@jit
def assume_kernel(out_ptr, N: pl.constexpr, BLOCK_N: pl.constexpr):
    # Triton's test_assume: every program has at least BLOCK_N elements left, so the
    # else branch cannot run.
    current_size = N - pl.program_id(0) * BLOCK_N
    pl.assume(current_size >= BLOCK_N)
    if current_size >= 128:
        pl.store(out_ptr + pl.program_id(0), current_size)
    else:
        pl.store(out_ptr + pl.program_id(0), current_size + 101024)


def test_a_false_assumption_is_found_on_the_interpreter():
    out = np.zeros(9, np.int32)
    assume_kernel[(8,)](out, N=1024, BLOCK_N=128, target="interp")
    assert out[:8].tolist() == [1024 - 128 * i for i in range(8)]
    # The ninth program has none left: on a GPU the compiler relies on the promise.
    with pytest.raises(Exception, match=r"program \(8, 0, 0\).*pl.assume: the condition is false; on a GPU the "
                                        r"compiler relies on it"):
        assume_kernel[(9,)](out, N=1024, BLOCK_N=128, target="interp")


@jit
def assume_tile_kernel(x_ptr, n):
    offs = pl.arange(0, 8)
    pl.assume(offs < n)
    pl.store(x_ptr + offs, offs)


def test_a_false_assumption_on_a_tile_names_the_element():
    with pytest.raises(Exception, match=r"pl.assume: the condition is false at element 5"):
        assume_tile_kernel[(1,)](np.zeros(8, np.int32), 5, target="interp")


@pytest.mark.parametrize("target_name", ["nvidia:sm_90a", "nvidia:sm_80", "amd:gfx942", "amd:gfx1100"])
def test_gpus_rely_on_the_assumption(target_name):
    pytest.importorskip("polytile_amd" if target_name.startswith("amd") else "polytile_nvidia")
    from polytile.compiler import compile_module

    artifacts = compile_module(assume_kernel.lower(np.zeros(8, np.int32), N=1024, BLOCK_N=128),
                               target_name).context.artifacts
    assert "llvm.assume" in artifacts["llvm_ir"]
    machine_code = artifacts["ptx"] if "ptx" in artifacts else artifacts["amdgcn"].resolve()
    assert "101024" not in machine_code  # the branch the assumption rules out is gone
