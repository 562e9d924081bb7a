"""lower-block-pointers: IR text in and out, and the interpreter's result on the lowered
module against the original for random shapes, offsets and boundary checks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.errors import CompilationError
from polytile.interpreter import run_kernel
from polytile.ir import print_ir, verify
from polytile.passes.lower_block_pointers import LowerBlockPointers, lower_block_pointers
from polytile.ir_testing import apply_passes, dedent

COPY = """
    func.func @k(%x: ptr<f32>, %y: ptr<f32>, %n: i32) attributes {kernel = true} {
      %c0 = arith.constant {value = 0} : i32
      %c1 = arith.constant {value = 1} : i32
      %src = tile.make_block_ptr %x shape(%n) strides(%c1) offsets(%c1) {block_shape = [4], order = [0]} : block_ptr<4xf32>
      %v = tile.load_block %src {boundary_check = [0], padding = "zero"} : tile<4xf32>
      %dst = tile.make_block_ptr %y shape(%n) strides(%c1) offsets(%c0) {block_shape = [4], order = [0]} : block_ptr<4xf32>
      %next = tile.advance %dst, %c1 : block_ptr<4xf32>
      tile.store_block %next, %v
      func.return
    }
"""

COPY_LOWERED = """
    func.func @k(%x: ptr<f32>, %y: ptr<f32>, %n: i32) attributes {kernel = true} {
      %c0 = arith.constant {value = 0} : i32
      %c1 = arith.constant {value = 1} : i32
      %0 = tile.arange {end = 4, start = 0} : tile<4xi32>
      %1 = tile.splat %c1 : tile<4xi32>
      %2 = arith.addi %1, %0 : tile<4xi32>
      %3 = tile.splat %c1 : tile<4xi32>
      %4 = arith.muli %2, %3 : tile<4xi32>
      %5 = arith.constant {value = 0} : tile<4xi32>
      %6 = tile.splat %n : tile<4xi32>
      %7 = arith.cmpi %2, %5 {predicate = "sge"} : tile<4xi1>
      %8 = arith.cmpi %2, %6 {predicate = "slt"} : tile<4xi1>
      %9 = arith.andi %7, %8 : tile<4xi1>
      %10 = tile.splat %x : tile<4xptr<f32>>
      %11 = tile.addptr %10, %4 : tile<4xptr<f32>>
      %12 = arith.constant {value = 0.0} : tile<4xf32>
      %13 = tile.load %11 mask(%9) other(%12) : tile<4xf32>
      %14 = arith.addi %c0, %c1 : i32
      %15 = tile.arange {end = 4, start = 0} : tile<4xi32>
      %16 = tile.splat %14 : tile<4xi32>
      %17 = arith.addi %16, %15 : tile<4xi32>
      %18 = tile.splat %c1 : tile<4xi32>
      %19 = arith.muli %17, %18 : tile<4xi32>
      %20 = tile.splat %y : tile<4xptr<f32>>
      %21 = tile.addptr %20, %19 : tile<4xptr<f32>>
      tile.store %21, %13
      func.return
    }
"""


def test_loads_and_stores_become_masked_pointer_accesses():
    assert apply_passes(COPY, LowerBlockPointers()) == dedent(COPY_LOWERED)


def test_a_module_without_block_pointers_is_left_alone():
    text = """
        func.func @k(%x: ptr<f32>) attributes {kernel = true} {
          func.return
        }
    """
    assert apply_passes(text, LowerBlockPointers()) == apply_passes(text)


@pt.jit
def copy_kernel(x, y, M, N, sxm, sxn, om, on, BM: pl.constexpr, BN: pl.constexpr, CHECK: pl.constexpr,
                PAD: pl.constexpr, ORDER: pl.constexpr):
    pm, pn = pl.program_id(0), pl.program_id(1)
    src = pl.make_block_ptr(x, shape=(M, N), strides=(sxm, sxn), offsets=(pm * BM + om, pn * BN + on),
                            block_shape=(BM, BN), order=ORDER)
    dst = pl.make_block_ptr(y, (3 * BM, 3 * BN), (3 * BN, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    pl.store(dst, pl.load(src, boundary_check=CHECK, padding_option=PAD))


def _run_both(kernel, grid, args, **meta):
    """The outputs of the original and of the lowered module, from the same inputs."""
    results = []
    for lower in (False, True):
        module = kernel.lower(*args, **meta)
        if lower:
            assert lower_block_pointers(module)
            verify(module)
            assert "block" not in print_ir(module).replace("tile.load", "")
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        run_kernel(module, kernel.__name__, grid, copies)
        results.append([c for c in copies if isinstance(c, np.ndarray)])
    return results


@pytest.mark.parametrize("seed", range(12))
def test_lowered_copies_match_the_interpreter(seed):
    rng = np.random.default_rng(seed)
    bm, bn = (int(v) for v in rng.choice([1, 2, 4, 8], 2))
    m, n = (int(v) for v in rng.integers(1, 20, 2))
    check = tuple(d for d in (0, 1) if rng.random() < 0.7)
    # Offsets may start before the array or run past it in checked dimensions only.
    om = int(rng.integers(-bm, m)) if 0 in check else int(rng.integers(0, max(m - 2 * bm, 0) + 1))
    on = int(rng.integers(-bn, n)) if 1 in check else int(rng.integers(0, max(n - 2 * bn, 0) + 1))
    grid = (1 if 0 not in check else 2, 1 if 1 not in check else 2)
    if 0 not in check:
        m = max(m, om + grid[0] * bm)
    if 1 not in check:
        n = max(n, on + grid[1] * bn)
    transposed = bool(rng.random() < 0.5)
    x = rng.standard_normal((m, n)).astype(np.float32)
    memory, strides, order = (np.ascontiguousarray(x.T), (1, m), (0, 1)) if transposed else (x, (n, 1), (1, 0))
    y = np.full((3 * bm, 3 * bn), -7.0, np.float32)
    pad = str(rng.choice(["zero", "nan"]))
    original, lowered = _run_both(copy_kernel, grid, (memory, y, m, n, *strides, om, on), BM=bm, BN=bn,
                                  CHECK=check, PAD=pad, ORDER=order)
    np.testing.assert_array_equal(original[1], lowered[1])


@pt.jit
def matmul_kernel(a, b, c, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    pm, pn = pl.program_id(0), pl.program_id(1)
    a_ptr = pl.make_block_ptr(a, (M, K), (K, 1), (pm * BM, 0), (BM, BK), (1, 0))
    b_ptr = pl.make_block_ptr(b, (K, N), (N, 1), (0, pn * BN), (BK, BN), (1, 0))
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for _ in range(0, pl.cdiv(K, BK)):
        acc += pl.dot(pl.load(a_ptr, boundary_check=(0, 1), padding_option="zero"),
                      pl.load(b_ptr, boundary_check=(0, 1), padding_option="zero"))
        a_ptr = pl.advance(a_ptr, (0, BK))
        b_ptr = pl.advance(b_ptr, (BK, 0))
    c_ptr = pl.make_block_ptr(c, (M, N), (N, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    pl.store(c_ptr, acc, boundary_check=(0, 1))


@pytest.mark.parametrize("m, n, k", list(itertools.product([5, 16], [7, 16], [3, 40])))
def test_loop_carried_block_pointers_become_loop_carried_offsets(m, n, k):
    rng = np.random.default_rng(m * n * k)
    a = rng.integers(-4, 4, (m, k)).astype(np.float32)
    b = rng.integers(-4, 4, (k, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    original, lowered = _run_both(matmul_kernel, (-(-m // 16), -(-n // 16)), (a, b, c, m, n, k),
                                  BM=16, BN=16, BK=16)
    np.testing.assert_array_equal(original[2], a @ b)
    np.testing.assert_array_equal(lowered[2], a @ b)


def test_a_block_pointer_through_an_if_is_an_error():
    text = """
        func.func @k(%x: ptr<f32>, %c: i1) attributes {kernel = true} {
          %c1 = arith.constant {value = 1} : i32
          %p = tile.make_block_ptr %x shape(%c1) strides(%c1) offsets(%c1) {block_shape = [4], order = [0]} : block_ptr<4xf32>
          %q = scf.if %c : block_ptr<4xf32> {
            scf.yield %p
          } {
            scf.yield %p
          }
          func.return
        }
    """
    with pytest.raises(CompilationError, match="a block pointer passed through 'scf.if' is not supported"):
        apply_passes(text, LowerBlockPointers())


def test_a_loop_carrying_block_pointers_keeps_its_range_options():
    # Rebuilt with offsets carried instead, the loop keeps pl.range's options (num_stages,
    # loop_unroll_factor, disable_licm, warp_specialize): they were lost once.
    out = apply_passes("""
        func.func @k(%x: ptr<f32>, %n: i32) attributes {kernel = true} {
          %c0 = arith.constant {value = 0} : i32
          %c1 = arith.constant {value = 1} : i32
          %p = tile.make_block_ptr %x shape(%n) strides(%c1) offsets(%c0) {block_shape = [4], order = [0]} : block_ptr<4xf32>
          %q = scf.for %c0, %n, %c1, %p {pt.disable_licm = true, pt.loop_unroll_factor = 4, pt.num_stages = 3} : block_ptr<4xf32> {
          ^bb0(%i: i32, %ptr: block_ptr<4xf32>):
            %next = tile.advance %ptr, %c1 : block_ptr<4xf32>
            scf.yield %next
          }
          func.return
        }
    """, LowerBlockPointers())
    assert "{pt.disable_licm = true, pt.loop_unroll_factor = 4, pt.num_stages = 3}" in out, out
    assert "block_ptr" not in out
