"""Block pointers (pl.make_block_ptr, pl.advance, pl.load/pl.store with boundary_check)
against NumPy, and the errors a kernel author gets for misusing them."""

import re

import numpy as np
import pytest

import polytile.language as pl
from polytile.errors import CompilationError
from polytile.runtime import jit


@jit
def copy_kernel(x, y, M, N, sxm, sxn, BM: pl.constexpr, BN: pl.constexpr, CHECK: pl.constexpr,
                PAD: pl.constexpr, ORDER: pl.constexpr):
    pm, pn = pl.program_id(0), pl.program_id(1)
    src = pl.make_block_ptr(x, shape=(M, N), strides=(sxm, sxn), offsets=(pm * BM, pn * BN),
                            block_shape=(BM, BN), order=ORDER)
    dst = pl.make_block_ptr(y, (M + BM, N + BN), (N + BN, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    pl.store(dst, pl.load(src, boundary_check=CHECK, padding_option=PAD))


def _tiles(x, bm, bn, check, pad):
    """What copy_kernel writes: x padded to whole blocks (plus one spare block each way)."""
    m, n = x.shape
    out = np.zeros((m + bm, n + bn), x.dtype)
    gm, gn = -(-m // bm), -(-n // bn)
    padded = np.full((gm * bm, gn * bn), np.nan if pad == "nan" else 0, x.dtype)
    padded[:m, :n] = x
    if 0 not in check:
        padded = padded[:m]
    if 1 not in check:
        padded = padded[:, :n]
    out[:padded.shape[0], :padded.shape[1]] = padded
    return out


@pytest.mark.parametrize("check, pad", [((0, 1), "zero"), ((0, 1), "nan"), ((1, 0), ""), ((1,), "zero")])
def test_load_with_boundary_check_at_edges(target, check, pad):
    m, n, bm, bn = 7, 10, 4, 8
    rows = m if 0 in check else 8  # without a row check the rows must be whole blocks
    x = np.arange(rows * n, dtype=np.float32).reshape(rows, n)
    y = np.zeros((rows + bm, n + bn), np.float32)
    copy_kernel[(-(-rows // bm), -(-n // bn))](x, y, rows, n, n, 1, BM=bm, BN=bn, CHECK=check, PAD=pad,
                                               ORDER=(1, 0), target=target)
    np.testing.assert_array_equal(y, _tiles(x, bm, bn, check if check else (), pad))


def test_load_without_boundary_check_inside(target):
    x = np.arange(8 * 16, dtype=np.int32).reshape(8, 16)
    y = np.zeros((12, 24), np.int32)
    copy_kernel[(2, 2)](x, y, 8, 16, 16, 1, BM=4, BN=8, CHECK=(), PAD="", ORDER=(1, 0), target=target)
    np.testing.assert_array_equal(y[:8, :16], x)


def test_transposed_strides_order_0_1(target):
    """A column-major view: the block reads x.T through strides (1, M), order (0, 1)."""
    a = np.arange(6 * 9, dtype=np.float32).reshape(6, 9)  # the memory; the kernel sees a.T (9x6)
    y = np.zeros((9 + 4, 6 + 4), np.float32)
    copy_kernel[(3, 2)](a, y, 9, 6, 1, 9, BM=4, BN=4, CHECK=(0, 1), PAD="zero", ORDER=(0, 1), target=target)
    np.testing.assert_array_equal(y[:9, :6], a.T)
    assert not y[9:].any() and not y[:, 6:].any()


@jit
def store_kernel(y, M, N, BM: pl.constexpr, BN: pl.constexpr):
    pm, pn = pl.program_id(0), pl.program_id(1)
    dst = pl.make_block_ptr(y, (M, N), (N, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    rows = pm * BM + pl.arange(0, BM)[:, None]
    cols = pn * BN + pl.arange(0, BN)[None, :]
    pl.store(dst, rows * 100 + cols, boundary_check=(0, 1))


def test_store_with_boundary_check(target):
    m, n = 5, 13
    guard = np.full(m * n + 64, -1, np.int32)  # spare room after the array: must stay untouched
    store_kernel[(2, 2)](guard, m, n, BM=4, BN=8, target=target)
    expect = (np.arange(m)[:, None] * 100 + np.arange(n)[None, :]).astype(np.int32)
    np.testing.assert_array_equal(guard[:m * n].reshape(m, n), expect)
    assert (guard[m * n:] == -1).all()


@jit
def matmul_kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr,
                  A_ORDER: pl.constexpr):
    pm, pn = pl.program_id(0), pl.program_id(1)
    a_ptr = pl.make_block_ptr(a, (M, K), (sam, sak), (pm * BM, 0), (BM, BK), A_ORDER)
    b_ptr = pl.make_block_ptr(b, (K, N), (sbk, sbn), (0, pn * BN), (BK, BN), (1, 0))
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for _ in range(0, pl.cdiv(K, BK)):
        x = pl.load(a_ptr, boundary_check=(0, 1), padding_option="zero")
        y = pl.load(b_ptr, boundary_check=(0, 1), padding_option="zero")
        acc += pl.dot(x, y)
        a_ptr = pl.advance(a_ptr, (0, BK))
        b_ptr = pl.advance(b_ptr, (BK, 0))
    c_ptr = pl.make_block_ptr(c, (M, N), (N, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    pl.store(c_ptr, acc, boundary_check=(0, 1))


@pytest.mark.parametrize("transposed_a", [False, True])
def test_matmul_advance_in_loop(target, transposed_a):
    m, n, k, bm, bn, bk = 37, 29, 45, 16, 16, 16
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 4, (m, k)).astype(np.float32)
    b = rng.integers(-4, 4, (k, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    if transposed_a:  # A stored column-major: memory holds a.T, strides (1, M)
        mem, strides, order = np.ascontiguousarray(a.T), (1, m), (0, 1)
    else:
        mem, strides, order = a, (k, 1), (1, 0)
    matmul_kernel[(-(-m // bm), -(-n // bn))](mem, b, c, m, n, k, *strides, n, 1, BM=bm, BN=bn, BK=bk,
                                              A_ORDER=order, target=target)
    np.testing.assert_array_equal(c, a @ b)


def test_ir_carries_the_block_pointer_through_the_loop():
    """The block pointers are loop-carried values of the scf.for, and the IR round-trips."""
    from polytile.ir import parse_module, print_ir, types as t, verify
    a = np.zeros((4, 4), np.float32)
    module = matmul_kernel.lower(a, a, a, 4, 4, 4, 4, 1, 4, 1, BM=16, BN=16, BK=16, A_ORDER=(1, 0))
    verify(module)
    loops = [op for op in module.walk() if op.name == "scf.for"]
    assert [str(r.type) for r in loops[0].results if isinstance(r.type, t.BlockPointerType)] == \
        ["block_ptr<16x16xf32>", "block_ptr<16x16xf32>"]
    text = print_ir(module)
    assert "tile.make_block_ptr %a shape(" in text and "tile.advance" in text and "tile.load_block" in text
    assert print_ir(parse_module(text)) == text


# -- errors -----------------------------------------------------------------------------

@jit
def error_kernel(x, WHAT: pl.constexpr):
    p = pl.make_block_ptr(x, (8, 8), (8, 1), (0, 0), (4, 4), (1, 0))
    if WHAT == "dim":
        pl.load(p, boundary_check=(2,))
    elif WHAT == "padding":
        pl.load(p, boundary_check=(0,), padding_option="inf")
    elif WHAT == "shape":
        pl.store(p, pl.zeros((4, 8), dtype=pl.float32))
    elif WHAT == "rank":
        pl.make_block_ptr(x, (8, 8), (8, 1), (0, 0, 0), (4, 4), (1, 0))
    elif WHAT == "order":
        pl.make_block_ptr(x, (8, 8), (8, 1), (0, 0), (4, 4), (1, 1))
    elif WHAT == "advance":
        pl.advance(p, (1,))
    elif WHAT == "mask":
        pl.load(p, mask=True)
    elif WHAT == "plain":
        pl.load(x + pl.arange(0, 4), boundary_check=(0,))


@pytest.mark.parametrize("what, message", [
    ("dim", "boundary_check names dimension 2, but the block has rank 2"),
    ("padding", "unknown padding_option 'inf'"),
    ("shape", "the value has shape [4, 8] but the block pointer's block_shape is [4, 4]"),
    ("rank", "offsets has 3 entries for a block of rank 2"),
    ("order", "order [1, 1] must be a permutation of [0, 1]"),
    ("advance", "pl.advance's offsets has 1 entries for a block of rank 2"),
    ("mask", "takes no mask or other; use boundary_check"),
    ("plain", "boundary_check and padding_option apply to block pointers"),
])
def test_errors_speak_the_users_language(target, what, message):
    x = np.zeros(64, np.float32)
    with pytest.raises(CompilationError, match=re.escape(message)):
        error_kernel[(1,)](x, WHAT=what, target=target)
