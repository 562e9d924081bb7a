"""The interpreter: kernels written as IR text, run with NumPy, compared to NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import polytile.dialects  # noqa: F401  (registers the core dialects)
from polytile.errors import PolytileError, SourceLocation
from polytile.interpreter import (
    RULES,
    InterpreterArgumentError,
    InterpreterError,
    InterpreterUnsupportedError,
    register_rule,
    run_kernel,
)
from polytile.ir import parse_module, verify


def compile_ir(text: str):
    module = parse_module(text)
    verify(module)
    return module


def run(text: str, name: str, grid, args, **kwargs):
    run_kernel(compile_ir(text), name, grid, args, **kwargs)


# --------------------------------------------------------------------------------------
# Vector add with a mask

VECTOR_ADD = """
func.func @add_kernel(%x: ptr<f32>, %y: ptr<f32>, %out: ptr<f32>, %n: i32) attributes {kernel = true} {
  %pid = tile.program_id {axis = 0} : i32
  %c = arith.constant {value = 256} : i32
  %start = arith.muli %pid, %c : i32
  %r = tile.arange {end = 256, start = 0} : tile<256xi32>
  %s = tile.splat %start : tile<256xi32>
  %offs = arith.addi %s, %r : tile<256xi32>
  %ns = tile.splat %n : tile<256xi32>
  %mask = arith.cmpi %offs, %ns {predicate = "slt"} : tile<256xi1>
  %xp = tile.splat %x : tile<256xptr<f32>>
  %xo = tile.addptr %xp, %offs : tile<256xptr<f32>>
  %xv = tile.load %xo mask(%mask) : tile<256xf32>
  %yp = tile.splat %y : tile<256xptr<f32>>
  %yo = tile.addptr %yp, %offs : tile<256xptr<f32>>
  %yv = tile.load %yo mask(%mask) {cache = ".cg"} : tile<256xf32>
  %sum = arith.addf %xv, %yv : tile<256xf32>
  %op = tile.splat %out : tile<256xptr<f32>>
  %oo = tile.addptr %op, %offs : tile<256xptr<f32>>
  tile.store %oo, %sum mask(%mask)
  func.return
}
"""


def test_vector_add_with_mask():
    n = 1000  # not a multiple of the block: the last program's tail is masked off
    rng = np.random.default_rng(0)
    x = rng.random(n, dtype=np.float32)
    y = rng.random(n, dtype=np.float32)
    out = np.zeros(n, dtype=np.float32)
    run(VECTOR_ADD, "add_kernel", (4,), [x, y, out, n])
    np.testing.assert_array_equal(out, x + y)


def test_vector_add_accepts_numpy_scalars_and_an_int_grid():
    n = 300
    x = np.arange(n, dtype=np.float32)
    out = np.zeros(n, dtype=np.float32)
    run(VECTOR_ADD, "add_kernel", 2, [x, x, out, np.int32(n)])
    np.testing.assert_array_equal(out, 2 * x)


def test_masked_lanes_are_never_accessed_even_beyond_the_array():
    # Only 10 elements exist; without the mask, lanes 10.. would be out of bounds.
    x = np.ones(10, dtype=np.float32)
    out = np.zeros(10, dtype=np.float32)
    run(VECTOR_ADD, "add_kernel", (1,), [x, x, out, 10])
    np.testing.assert_array_equal(out, np.full(10, 2, np.float32))


# --------------------------------------------------------------------------------------
# Program ids and num_programs in a 3-D grid

GRID_IDS = """
func.func @ids(%out: ptr<i32>) attributes {kernel = true} {
  %x = tile.program_id {axis = 0} : i32
  %y = tile.program_id {axis = 1} : i32
  %z = tile.program_id {axis = 2} : i32
  %nx = tile.num_programs {axis = 0} : i32
  %ny = tile.num_programs {axis = 1} : i32
  %nz = tile.num_programs {axis = 2} : i32
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
  %total = arith.muli %nx, %ny : i32
  %total3 = arith.muli %total, %nz : i32
  %c1000 = arith.constant {value = 1000} : i32
  %t = arith.muli %total3, %c1000 : i32
  %value = arith.addi %v, %t : i32
  %p = tile.addptr %out, %lin : ptr<i32>
  tile.store %p, %value
  func.return
}
"""


def test_program_id_and_num_programs_in_a_3d_grid():
    out = np.zeros(2 * 3 * 4, dtype=np.int32)
    run(GRID_IDS, "ids", (4, 3, 2), [out])
    z, y, x = np.meshgrid(np.arange(2), np.arange(3), np.arange(4), indexing="ij")
    expected = (100 * z + 10 * y + x + 24000).reshape(-1)
    np.testing.assert_array_equal(out, expected)


def test_an_empty_grid_runs_nothing():
    out = np.zeros(4, dtype=np.int32)
    run(GRID_IDS, "ids", (0, 1), [out])
    assert not out.any()


# --------------------------------------------------------------------------------------
# Reductions over rows of a 2-D tile

ROW_REDUCE = """
func.func @row_reduce(%x: ptr<{T}>, %out: ptr<{T}>) attributes {{kernel = true}} {{
  %rows = tile.arange {{end = 4, start = 0}} : tile<4xi32>
  %cols = tile.arange {{end = 8, start = 0}} : tile<8xi32>
  %r2 = tile.expand_dims %rows {{axis = 1}} : tile<4x1xi32>
  %c2 = tile.expand_dims %cols {{axis = 0}} : tile<1x8xi32>
  %eight = arith.constant {{value = 8}} : tile<4x1xi32>
  %rs = arith.muli %r2, %eight : tile<4x1xi32>
  %rb = tile.broadcast %rs : tile<4x8xi32>
  %cb = tile.broadcast %c2 : tile<4x8xi32>
  %offs = arith.addi %rb, %cb : tile<4x8xi32>
  %xp = tile.splat %x : tile<4x8xptr<{T}>>
  %xo = tile.addptr %xp, %offs : tile<4x8xptr<{T}>>
  %v = tile.load %xo : tile<4x8x{T}>
  %red = tile.reduce %v {{axis = 1}} : tile<4x{T}> {{
  ^bb0(%a: {T}, %b: {T}):
    %c = {COMBINE} %a, %b : {T}
    tile.reduce_return %c
  }}
  %op = tile.splat %out : tile<4xptr<{T}>>
  %oo = tile.addptr %op, %rows : tile<4xptr<{T}>>
  tile.store %oo, %red
  func.return
}}
"""


@pytest.mark.parametrize("combine, reference", [
    ("arith.addf", lambda x: x.sum(axis=1)),
    ("arith.maxnumf", lambda x: x.max(axis=1)),
    ("arith.minnumf", lambda x: x.min(axis=1)),
])
def test_float_row_reduction(combine, reference):
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    out = np.zeros(4, dtype=np.float32)
    run(ROW_REDUCE.format(T="f32", COMBINE=combine), "row_reduce", (1,), [x, out])
    np.testing.assert_allclose(out, reference(x), rtol=1e-6)


def test_integer_row_sum_wraps_exactly():
    x = np.full((4, 8), 2**30, dtype=np.int32)
    x[1] = np.arange(8)
    out = np.zeros(4, dtype=np.int32)
    run(ROW_REDUCE.format(T="i32", COMBINE="arith.addi"), "row_reduce", (1,), [x, out])
    np.testing.assert_array_equal(out, x.sum(axis=1, dtype=np.int32))  # 8 * 2**30 wraps to 0


def test_reduction_along_axis_0_of_an_odd_length():
    text = ROW_REDUCE.format(T="f32", COMBINE="arith.addf").replace(
        "%red = tile.reduce %v {axis = 1}", "%red = tile.reduce %t {axis = 0}").replace(
        "  %red", "  %t = tile.trans %v {order = [1, 0]} : tile<8x4xf32>\n  %red", 1)
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    out = np.zeros(4, dtype=np.float32)
    run(text, "row_reduce", (1,), [x, out])
    np.testing.assert_array_equal(out, x.sum(axis=1))


ARGMAX = """
func.func @argmax(%x: ptr<f32>, %out: ptr<i32>, %best: ptr<f32>) attributes {kernel = true} {
  %r = tile.arange {end = 7, start = 0} : tile<7xi32>
  %xp = tile.splat %x : tile<7xptr<f32>>
  %xo = tile.addptr %xp, %r : tile<7xptr<f32>>
  %v = tile.load %xo : tile<7xf32>
  %m, %i = tile.reduce %v, %r {axis = 0} : f32, i32 {
  ^bb0(%av: f32, %ai: i32, %bv: f32, %bi: i32):
    %gt = arith.cmpf %bv, %av {predicate = "ogt"} : i1
    %eq = arith.cmpf %bv, %av {predicate = "oeq"} : i1
    %lt = arith.cmpi %bi, %ai {predicate = "slt"} : i1
    %tie = arith.andi %eq, %lt : i1
    %take = arith.ori %gt, %tie : i1
    %nv = arith.select %take, %bv, %av : f32
    %ni = arith.select %take, %bi, %ai : i32
    tile.reduce_return %nv, %ni
  }
  tile.store %out, %i
  tile.store %best, %m
  func.return
}
"""


def test_reduction_with_two_operands_to_a_scalar():
    x = np.array([1, 5, 3, 5, -2, 0, 4], dtype=np.float32)
    out = np.zeros(1, dtype=np.int32)
    best = np.zeros(1, dtype=np.float32)
    run(ARGMAX, "argmax", (1,), [x, out, best])
    assert out[0] == 1 and best[0] == 5


# --------------------------------------------------------------------------------------
# scf.for, scf.if, scf.while, func.call

LOOP_SUM = """
func.func @column_sums(%x: ptr<f32>, %out: ptr<f32>, %n: i32) attributes {kernel = true} {
  %r = tile.arange {end = 16, start = 0} : tile<16xi32>
  %zero = arith.constant {value = 0.0} : tile<16xf32>
  %c0 = arith.constant {value = 0} : i32
  %c16 = arith.constant {value = 16} : i32
  %xp = tile.splat %x : tile<16xptr<f32>>
  %ns = tile.splat %n : tile<16xi32>
  %acc = scf.for %c0, %n, %c16, %zero : tile<16xf32> {
  ^bb0(%k: i32, %a: tile<16xf32>):
    %ks = tile.splat %k : tile<16xi32>
    %offs = arith.addi %ks, %r : tile<16xi32>
    %mask = arith.cmpi %offs, %ns {predicate = "slt"} : tile<16xi1>
    %p = tile.addptr %xp, %offs : tile<16xptr<f32>>
    %v = tile.load %p mask(%mask) : tile<16xf32>
    %next = arith.addf %a, %v : tile<16xf32>
    scf.yield %next
  }
  %op = tile.splat %out : tile<16xptr<f32>>
  %oo = tile.addptr %op, %r : tile<16xptr<f32>>
  tile.store %oo, %acc
  func.return
}
"""


def test_scf_for_accumulates_loop_carried_tiles():
    n = 100  # 6 full chunks of 16 and a masked tail of 4
    x = np.arange(n, dtype=np.float32)
    out = np.zeros(16, dtype=np.float32)
    run(LOOP_SUM, "column_sums", (1,), [x, out, n])
    padded = np.zeros(112, dtype=np.float32)
    padded[:n] = x
    np.testing.assert_array_equal(out, padded.reshape(7, 16).sum(axis=0))


def test_scf_for_with_an_empty_range_yields_its_initial_values():
    out = np.full(16, 7, dtype=np.float32)
    run(LOOP_SUM, "column_sums", (1,), [np.zeros(1, np.float32), out, 0])
    np.testing.assert_array_equal(out, np.zeros(16, np.float32))


IF_ON_PID = """
func.func @branchy(%out: ptr<f32>, %flags: ptr<i32>) attributes {kernel = true} {
  %pid = tile.program_id {axis = 0} : i32
  %c0 = arith.constant {value = 0} : i32
  %first = arith.cmpi %pid, %c0 {predicate = "eq"} : i1
  %v = scf.if %first : f32 {
    %one = arith.constant {value = 1.5} : f32
    %seven = arith.constant {value = 7} : i32
    tile.store %flags, %seven
    scf.yield %one
  } {
    %f = arith.sitofp %pid : f32
    scf.yield %f
  }
  %p = tile.addptr %out, %pid : ptr<f32>
  tile.store %p, %v
  func.return
}
"""


def test_scf_if_on_program_id():
    out = np.zeros(4, dtype=np.float32)
    flags = np.zeros(1, dtype=np.int32)
    run(IF_ON_PID, "branchy", (4,), [out, flags])
    np.testing.assert_array_equal(out, [1.5, 1, 2, 3])
    assert flags[0] == 7


WHILE_AND_CALL = """
func.func @double(%v: i32) -> i32 attributes {noinline = true} {
  %two = arith.constant {value = 2} : i32
  %r = arith.muli %v, %two : i32
  func.return %r
}
func.func @first_power_above(%out: ptr<i32>, %limit: i32) attributes {kernel = true} {
  %one = arith.constant {value = 1} : i32
  %r = scf.while %one : i32 {
  ^bb0(%i: i32):
    %go = arith.cmpi %i, %limit {predicate = "sle"} : i1
    scf.condition %go, %i
  } {
  ^bb0(%j: i32):
    %next = func.call %j {callee = @double} : i32
    scf.yield %next
  }
  tile.store %out, %r
  func.return
}
"""


@pytest.mark.parametrize("limit, expected", [(0, 1), (1, 2), (100, 128), (128, 256)])
def test_scf_while_and_a_noinline_call(limit, expected):
    out = np.zeros(1, dtype=np.int32)
    run(WHILE_AND_CALL, "first_power_above", (1,), [out, limit])
    assert out[0] == expected


# --------------------------------------------------------------------------------------
# dot

DOT = """
func.func @matmul(%a: ptr<{A}>, %b: ptr<{A}>, %c: ptr<f32>) attributes {{kernel = true}} {{
  %m = tile.arange {{end = 16, start = 0}} : tile<16xi32>
  %k = tile.arange {{end = 8, start = 0}} : tile<8xi32>
  %n = tile.arange {{end = 32, start = 0}} : tile<32xi32>
  %m1 = tile.expand_dims %m {{axis = 1}} : tile<16x1xi32>
  %k0 = tile.expand_dims %k {{axis = 0}} : tile<1x8xi32>
  %k1 = tile.expand_dims %k {{axis = 1}} : tile<8x1xi32>
  %n0 = tile.expand_dims %n {{axis = 0}} : tile<1x32xi32>
  %s8 = arith.constant {{value = 8}} : tile<16x1xi32>
  %s32 = arith.constant {{value = 32}} : tile<8x1xi32>
  %s32m = arith.constant {{value = 32}} : tile<16x1xi32>
  %ar = arith.muli %m1, %s8 : tile<16x1xi32>
  %arb = tile.broadcast %ar : tile<16x8xi32>
  %acb = tile.broadcast %k0 : tile<16x8xi32>
  %aoff = arith.addi %arb, %acb : tile<16x8xi32>
  %br = arith.muli %k1, %s32 : tile<8x1xi32>
  %brb = tile.broadcast %br : tile<8x32xi32>
  %bcb = tile.broadcast %n0 : tile<8x32xi32>
  %boff = arith.addi %brb, %bcb : tile<8x32xi32>
  %cr = arith.muli %m1, %s32m : tile<16x1xi32>
  %crb = tile.broadcast %cr : tile<16x32xi32>
  %ccb = tile.broadcast %n0 : tile<16x32xi32>
  %coff = arith.addi %crb, %ccb : tile<16x32xi32>
  %ap = tile.splat %a : tile<16x8xptr<{A}>>
  %ao = tile.addptr %ap, %aoff : tile<16x8xptr<{A}>>
  %av = tile.load %ao : tile<16x8x{A}>
  %bp = tile.splat %b : tile<8x32xptr<{A}>>
  %bo = tile.addptr %bp, %boff : tile<8x32xptr<{A}>>
  %bv = tile.load %bo : tile<8x32x{A}>
  %cp = tile.splat %c : tile<16x32xptr<f32>>
  %co = tile.addptr %cp, %coff : tile<16x32xptr<f32>>
  %acc = tile.load %co : tile<16x32xf32>
  %d = tile.dot %av, %bv, %acc : tile<16x32xf32>
  tile.store %co, %d
  func.return
}}
"""


@pytest.mark.parametrize("element, dtype", [("f32", np.float32), ("f16", np.float16)])
def test_dot_matches_numpy_matmul(element, dtype):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((16, 8)).astype(dtype)
    b = rng.standard_normal((8, 32)).astype(dtype)
    c = rng.standard_normal((16, 32)).astype(np.float32)
    expected = a.astype(np.float32) @ b.astype(np.float32) + c
    run(DOT.format(A=element), "matmul", (1,), [a, b, c])
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------------------
# Atomics and duplicate addresses

HISTOGRAM = """
func.func @histogram(%data: ptr<i32>, %hist: ptr<i32>, %old: ptr<i32>, %n: i32) attributes {kernel = true} {
  %pid = tile.program_id {axis = 0} : i32
  %c = arith.constant {value = 64} : i32
  %start = arith.muli %pid, %c : i32
  %r = tile.arange {end = 64, start = 0} : tile<64xi32>
  %s = tile.splat %start : tile<64xi32>
  %offs = arith.addi %s, %r : tile<64xi32>
  %ns = tile.splat %n : tile<64xi32>
  %mask = arith.cmpi %offs, %ns {predicate = "slt"} : tile<64xi1>
  %dp = tile.splat %data : tile<64xptr<i32>>
  %do = tile.addptr %dp, %offs : tile<64xptr<i32>>
  %bins = tile.load %do mask(%mask) : tile<64xi32>
  %hp = tile.splat %hist : tile<64xptr<i32>>
  %ho = tile.addptr %hp, %bins : tile<64xptr<i32>>
  %ones = arith.constant {value = 1} : tile<64xi32>
  %before = tile.atomic_rmw %ho, %ones mask(%mask) {kind = "add"} : tile<64xi32>
  %op = tile.splat %old : tile<64xptr<i32>>
  %oo = tile.addptr %op, %offs : tile<64xptr<i32>>
  tile.store %oo, %before mask(%mask)
  func.return
}
"""


def test_atomic_add_histogram_counts_every_duplicate_lane():
    n = 200
    data = np.random.default_rng(3).integers(0, 10, n).astype(np.int32)
    hist = np.zeros(10, dtype=np.int32)
    old = np.full(n, -1, dtype=np.int32)
    run(HISTOGRAM, "histogram", (4,), [data, hist, old, n])
    np.testing.assert_array_equal(hist, np.bincount(data, minlength=10))
    # Lanes are serialized in order: each lane saw the count of the lanes before it.
    for bin_ in range(10):
        np.testing.assert_array_equal(old[data == bin_], np.arange((data == bin_).sum()))


ATOMIC_KIND = """
func.func @atomic(%p: ptr<{T}>, %vals: ptr<{T}>, %olds: ptr<{T}>) attributes {{kernel = true}} {{
  %r = tile.arange {{end = 6, start = 0}} : tile<6xi32>
  %two = arith.constant {{value = 2}} : tile<6xi32>
  %slot = arith.remsi %r, %two : tile<6xi32>
  %pp = tile.splat %p : tile<6xptr<{T}>>
  %po = tile.addptr %pp, %slot : tile<6xptr<{T}>>
  %vp = tile.splat %vals : tile<6xptr<{T}>>
  %vo = tile.addptr %vp, %r : tile<6xptr<{T}>>
  %v = tile.load %vo : tile<6x{T}>
  %old = tile.atomic_rmw %po, %v {{kind = "{KIND}"}} : tile<6x{T}>
  %op = tile.splat %olds : tile<6xptr<{T}>>
  %oo = tile.addptr %op, %r : tile<6xptr<{T}>>
  tile.store %oo, %old
  func.return
}}
"""


@pytest.mark.parametrize("kind, element, dtype, fn", [
    ("fadd", "f32", np.float32, np.add),
    ("max", "i32", np.int32, np.maximum),
    ("min", "f32", np.float32, np.minimum),
    ("umax", "u32", np.uint32, np.maximum),
    ("xor", "i32", np.int32, np.bitwise_xor),
    ("xchg", "i32", np.int32, lambda old, new: new),
])
def test_atomic_rmw_kinds_serialize_lanes(kind, element, dtype, fn):
    vals = np.array([3, -1, 7, 2, 5, 9] if dtype != np.uint32 else [3, 1, 7, 2, 5, 9]).astype(dtype)
    memory = np.array([4, 0], dtype=dtype)
    olds = np.zeros(6, dtype=dtype)
    expected_memory = memory.copy()
    expected_olds = np.zeros(6, dtype=dtype)
    for lane in range(6):
        slot = lane % 2
        expected_olds[lane] = expected_memory[slot]
        expected_memory[slot] = fn(expected_memory[slot], vals[lane])
    run(ATOMIC_KIND.format(T=element, KIND=kind), "atomic", (1,), [memory, vals, olds])
    np.testing.assert_array_equal(memory, expected_memory)
    np.testing.assert_array_equal(olds, expected_olds)


ATOMIC_CAS = """
func.func @lock(%lock: ptr<i32>, %got: ptr<i32>) attributes {kernel = true} {
  %pid = tile.program_id {axis = 0} : i32
  %zero = arith.constant {value = 0} : i32
  %one = arith.constant {value = 1} : i32
  %id = arith.addi %pid, %one : i32
  %old = tile.atomic_cas %lock, %zero, %id : i32
  %p = tile.addptr %got, %pid : ptr<i32>
  tile.store %p, %old
  func.return
}
"""


def test_atomic_cas_only_the_first_program_takes_the_lock():
    lock = np.zeros(1, dtype=np.int32)
    got = np.full(3, -1, dtype=np.int32)
    run(ATOMIC_CAS, "lock", (3,), [lock, got])
    assert lock[0] == 1
    np.testing.assert_array_equal(got, [0, 1, 1])


STORE_SAME_ADDRESS = """
func.func @collide(%out: ptr<i32>) attributes {kernel = true} {
  %r = tile.arange {end = 8, start = 0} : tile<8xi32>
  %zero = arith.constant {value = 0} : tile<8xi32>
  %p = tile.splat %out : tile<8xptr<i32>>
  %po = tile.addptr %p, %zero : tile<8xptr<i32>>
  tile.store %po, %r
  func.return
}
"""


def test_plain_stores_to_one_address_keep_one_value():
    out = np.full(2, -1, dtype=np.int32)
    run(STORE_SAME_ADDRESS, "collide", (1,), [out])
    assert out[0] in range(8) and out[1] == -1


# --------------------------------------------------------------------------------------
# Casts and integer semantics

CASTS = """
func.func @casts(%f: ptr<f32>, %i: ptr<i32>, %h: ptr<f16>, %b: ptr<i8>, %bits: ptr<i32>, %back: ptr<f32>, %wide: ptr<i64>) attributes {kernel = true} {
  %r = tile.arange {end = 6, start = 0} : tile<6xi32>
  %fp = tile.splat %f : tile<6xptr<f32>>
  %fo = tile.addptr %fp, %r : tile<6xptr<f32>>
  %fv = tile.load %fo : tile<6xf32>
  %toint = arith.fptosi %fv : tile<6xi32>
  %ip = tile.splat %i : tile<6xptr<i32>>
  %io = tile.addptr %ip, %r : tile<6xptr<i32>>
  tile.store %io, %toint
  %half = arith.truncf %fv : tile<6xf16>
  %hp = tile.splat %h : tile<6xptr<f16>>
  %ho = tile.addptr %hp, %r : tile<6xptr<f16>>
  tile.store %ho, %half
  %big = arith.constant {value = 300} : tile<6xi32>
  %shifted = arith.addi %r, %big : tile<6xi32>
  %byte = arith.trunci %shifted : tile<6xi8>
  %bp = tile.splat %b : tile<6xptr<i8>>
  %bo = tile.addptr %bp, %r : tile<6xptr<i8>>
  tile.store %bo, %byte
  %asbits = arith.bitcast %fv : tile<6xi32>
  %sp = tile.splat %bits : tile<6xptr<i32>>
  %so = tile.addptr %sp, %r : tile<6xptr<i32>>
  tile.store %so, %asbits
  %ext = arith.extf %half : tile<6xf32>
  %xp = tile.splat %back : tile<6xptr<f32>>
  %xo = tile.addptr %xp, %r : tile<6xptr<f32>>
  tile.store %xo, %ext
  %three = arith.constant {value = 3} : tile<6xi32>
  %odd = arith.cmpi %r, %three {predicate = "sge"} : tile<6xi1>
  %sx = arith.extsi %odd : tile<6xi64>
  %wp = tile.splat %wide : tile<6xptr<i64>>
  %wo = tile.addptr %wp, %r : tile<6xptr<i64>>
  tile.store %wo, %sx
  func.return
}
"""


def test_casts():
    f = np.array([1.7, -2.5, 3.0, 1000.1, -0.4, 65504.0], dtype=np.float32)
    i = np.zeros(6, np.int32)
    h = np.zeros(6, np.float16)
    b = np.zeros(6, np.int8)
    bits = np.zeros(6, np.int32)
    back = np.zeros(6, np.float32)
    wide = np.zeros(6, np.int64)
    run(CASTS, "casts", (1,), [f, i, h, b, bits, back, wide])
    np.testing.assert_array_equal(i, np.trunc(f).astype(np.int32))
    np.testing.assert_array_equal(h, f.astype(np.float16))
    np.testing.assert_array_equal(b, (np.arange(6) + 300).astype(np.int8))
    np.testing.assert_array_equal(bits, f.view(np.int32))
    np.testing.assert_array_equal(back, f.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(wide, [0, 0, 0, -1, -1, -1])  # sign-extending i1 true gives -1


INT_OPS = """
func.func @int_ops(%x: ptr<{T}>, %y: ptr<{T}>, %out: ptr<{T}>) attributes {{kernel = true}} {{
  %r = tile.arange {{end = 8, start = 0}} : tile<8xi32>
  %xp = tile.splat %x : tile<8xptr<{T}>>
  %xo = tile.addptr %xp, %r : tile<8xptr<{T}>>
  %a = tile.load %xo : tile<8x{T}>
  %yp = tile.splat %y : tile<8xptr<{T}>>
  %yo = tile.addptr %yp, %r : tile<8xptr<{T}>>
  %b = tile.load %yo : tile<8x{T}>
  %v = arith.{OP} %a, %b : tile<8x{T}>
  %op = tile.splat %out : tile<8xptr<{T}>>
  %oo = tile.addptr %op, %r : tile<8xptr<{T}>>
  tile.store %oo, %v
  func.return
}}
"""


def _c_div(a, b):
    """C division (toward zero) in Python integers."""
    return np.array([abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1) for x, y in zip(a.tolist(), b.tolist())])


@pytest.mark.parametrize("op, element, dtype, reference", [
    ("addi", "i8", np.int8, lambda a, b: (a.astype(np.int64) + b).astype(np.int8)),
    ("muli", "i32", np.int32, lambda a, b: (a.astype(np.int64) * b).astype(np.int32)),
    ("subi", "u8", np.uint8, lambda a, b: (a.astype(np.int64) - b).astype(np.uint8)),
    ("divsi", "i32", np.int32, lambda a, b: _c_div(a, b).astype(np.int64).astype(np.int32)),
    ("remsi", "i32", np.int32, lambda a, b: (a - _c_div(a, b) * b).astype(np.int64).astype(np.int32)),
    ("divsi", "i8", np.int8, lambda a, b: _c_div(a, b).astype(np.int64).astype(np.int8)),
    ("divui", "u16", np.uint16, lambda a, b: a // b),
    ("maxsi", "i16", np.int16, np.maximum),
])
def test_integer_ops_wrap_and_round_toward_zero(op, element, dtype, reference):
    rng = np.random.default_rng(4)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, 8, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, 8, endpoint=True).astype(dtype)
    b[b == 0] = 3
    if info.min < 0:
        a[:4], b[:4] = [-7, 7, -7, info.min], [2, -2, -2, -1]  # signs differ; INT_MIN / -1 wraps
    out = np.zeros(8, dtype=dtype)
    run(INT_OPS.format(T=element, OP=op), "int_ops", (1,), [a, b, out])
    np.testing.assert_array_equal(out, reference(a, b))


def test_float_division_by_zero_is_ieee_and_silent(recwarn):
    a = np.array([1, -1, 0, 2, 3, 4, 5, 6], dtype=np.float32)
    b = np.array([0, 0, 0, 1, 1, 1, 1, 1], dtype=np.float32)
    out = np.zeros(8, dtype=np.float32)
    run(INT_OPS.format(T="f32", OP="divf"), "int_ops", (1,), [a, b, out])
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2])
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


# --------------------------------------------------------------------------------------
# Errors

OUT_OF_BOUNDS = """
func.func @oob(%x: ptr<f32>, %out: ptr<f32>) attributes {kernel = true} {
  %pid = tile.program_id {axis = 0} : i32
  %c = arith.constant {value = 64} : i32
  %start = arith.muli %pid, %c : i32
  %r = tile.arange {end = 64, start = 0} : tile<64xi32>
  %s = tile.splat %start : tile<64xi32>
  %offs = arith.addi %s, %r : tile<64xi32>
  %xp = tile.splat %x : tile<64xptr<f32>>
  %xo = tile.addptr %xp, %offs : tile<64xptr<f32>>
  %v = tile.load %xo : tile<64xf32> loc("kernels/oob.py":12:9)
  %op = tile.splat %out : tile<64xptr<f32>>
  %oo = tile.addptr %op, %offs : tile<64xptr<f32>>
  tile.store %oo, %v loc("kernels/oob.py":13:5)
  func.return
}
"""


def test_out_of_bounds_load_names_kernel_location_program_and_index():
    x = np.zeros(100, dtype=np.float32)
    out = np.zeros(128, dtype=np.float32)
    with pytest.raises(InterpreterError) as info:
        run(OUT_OF_BOUNDS, "oob", (2,), [x, out])
    error = info.value
    assert isinstance(error, PolytileError)
    assert error.location == SourceLocation("kernels/oob.py", 12, 9)
    assert error.program_id == (1, 0, 0)
    assert error.kernel == "oob" and error.op_name == "tile.load"
    message = str(error)
    assert message.startswith("kernels/oob.py:12:9: error: kernel 'oob', program (1, 0, 0): 'tile.load' ")
    assert "index 100" in message and "argument 'x' (100 elements of float32)" in message
    assert "element 36" in message
    # Program 0 ran completely before program 1 failed.
    assert not out[:64].any()


def test_out_of_bounds_store_and_negative_index():
    x = np.zeros(128, dtype=np.float32)
    out = np.zeros(100, dtype=np.float32)
    with pytest.raises(InterpreterError, match=r"oob.py:13:5: .*'tile.store' accesses index 100, out of bounds of "
                                                r"argument 'out' \(100 elements of float32\)"):
        run(OUT_OF_BOUNDS, "oob", (2,), [x, out])
    negative = OUT_OF_BOUNDS.replace("%offs = arith.addi %s, %r", "%offs = arith.subi %s, %r")
    with pytest.raises(InterpreterError, match=r"index -1, out of bounds of argument 'x'"):
        run(negative, "oob", (1,), [x, out])


def test_without_bounds_check_out_of_bounds_lanes_are_skipped():
    x = np.arange(100, dtype=np.float32)
    out = np.zeros(100, dtype=np.float32)
    run(OUT_OF_BOUNDS, "oob", (2,), [x, out], bounds_check=False)
    np.testing.assert_array_equal(out, x)


MISALIGNED = """
func.func @misaligned(%x: ptr<f32>, %out: ptr<f32>) attributes {kernel = true} {
  %a = arith.ptrtoint %x : i64
  %two = arith.constant {value = 2} : i64
  %b = arith.addi %a, %two : i64
  %p = arith.inttoptr %b : ptr<f32>
  %v = tile.load %p : f32
  tile.store %out, %v
  func.return
}
"""


def test_misaligned_and_null_pointers():
    x = np.zeros(4, dtype=np.float32)
    out = np.zeros(1, dtype=np.float32)
    with pytest.raises(InterpreterError, match="byte offset 2 of argument 'x' .* not aligned to the 4-byte"):
        run(MISALIGNED, "misaligned", (1,), [x, out])
    with pytest.raises(InterpreterError, match="accesses the null pointer"):
        run(VECTOR_ADD, "add_kernel", (1,), [None, x, out, 1])


def test_store_to_a_read_only_array():
    x = np.ones(10, dtype=np.float32)
    out = np.zeros(10, dtype=np.float32)
    out.flags.writeable = False
    with pytest.raises(InterpreterError, match="writes argument 'out' .* which is read-only"):
        run(VECTOR_ADD, "add_kernel", (1,), [x, x, out, 10])


@pytest.mark.parametrize("args, pattern", [
    ([np.zeros(4, np.float64), np.zeros(4, np.float32), np.zeros(4, np.float32), 4],
     r"kernel 'add_kernel': argument 'x' \(parameter 0, of type ptr<f32>\) expects a NumPy array of float32 "
     r"\(the interpreter maps ptr<f32> to float32\), got an array of float64 with shape \(4,\)"),
    ([np.zeros(4, np.float32)] * 3 + [np.array([4])],
     r"argument 'n' \(parameter 3, of type i32\) expects an integer scalar \(i32\), got an array of int64"),
    ([np.zeros(4, np.float32)] * 3 + [4.0], r"argument 'n' .* expects an integer scalar \(i32\), got float 4.0"),
    ([np.zeros(4, np.float32)] * 3 + [2**31], r"argument 'n' .* expects an integer in \[-2147483648, 2147483647\]"),
    ([[1.0, 2.0]] + [np.zeros(4, np.float32)] * 2 + [4], r"argument 'x' .* expects a NumPy array of float32, got list"),
    ([np.ndarray((4,), np.float32, np.zeros(32, np.uint8), strides=(6,))] + [np.zeros(4, np.float32)] * 2 + [4],
     r"argument 'x' .* expects a NumPy array of float32 whose strides are whole elements \(its strides \(6,\)"),
    ([np.zeros(4, np.float32)] * 3, r"kernel 'add_kernel': takes 4 arguments \(x: ptr<f32>, y: ptr<f32>, "
                                    r"out: ptr<f32>, n: i32\), got 3"),
])
def test_bad_arguments_name_the_kernel_and_the_parameter(args, pattern):
    with pytest.raises(InterpreterArgumentError, match=pattern) as info:
        run(VECTOR_ADD, "add_kernel", (1,), args)
    assert isinstance(info.value, TypeError)


@pytest.mark.parametrize("element, bits", [("bf16", "uint16"), ("f8e4m3", "uint8"), ("f8e5m2", "uint8")])
def test_bf16_and_fp8_pointers_take_arrays_of_their_bits(element, bits):
    # NumPy has no such dtypes: memory holds the bits (tests/interpreter/test_emulated_floats.py).
    text = f"func.func @k(%x: ptr<{element}>) attributes {{kernel = true}} {{\n  func.return\n}}"
    run(text, "k", (1,), [np.zeros(4, bits)])
    with pytest.raises(InterpreterArgumentError, match=rf"kernel 'k': argument 'x' \(parameter 0, of type "
                                                       rf"ptr<{element}>\) expects a NumPy array of {element}'s bits "
                                                       rf"\({bits}\), or one viewed as {element} with "
                                                       rf"polytile.reinterpret, got"):
        run(text, "k", (1,), [np.zeros(4, np.float32)])


@pytest.mark.parametrize("grid", [(), (1, 2, 3, 4), (-1,), (1.5,), "x"])
def test_bad_grids(grid):
    with pytest.raises(InterpreterArgumentError, match="the grid must be a tuple of 1 to 3 non-negative integers"):
        run(GRID_IDS, "ids", grid, [np.zeros(4, np.int32)])


def test_unknown_kernel_and_non_kernel_functions():
    with pytest.raises(InterpreterArgumentError, match=r"no function '@nope' \(its kernels: 'first_power_above'\)"):
        run(WHILE_AND_CALL, "nope", (1,), [])
    with pytest.raises(InterpreterArgumentError, match="'@double' is not a kernel"):
        run(WHILE_AND_CALL, "double", (1,), [3])


def test_integer_division_by_zero_is_an_error():
    a = np.arange(8, dtype=np.int32)
    b = np.ones(8, dtype=np.int32)
    b[5] = 0
    out = np.zeros(8, dtype=np.int32)
    text = INT_OPS.format(T="i32", OP="divsi").replace(
        "%v = arith.divsi %a, %b : tile<8xi32>", '%v = arith.divsi %a, %b : tile<8xi32> loc("k.py":4:10)')
    with pytest.raises(InterpreterError, match=r"k.py:4:10: error: kernel 'int_ops', program \(0, 0, 0\): "
                                               r"'arith.divsi' integer division by zero \(at element 5"):
        run(text, "int_ops", (1,), [a, b, out])
    with pytest.raises(InterpreterError, match="'arith.remui' integer division by zero"):
        run(INT_OPS.format(T="u32", OP="remui"), "int_ops", (1,),
            [a.astype(np.uint32), b.astype(np.uint32), out.astype(np.uint32)])


def test_out_of_range_shift_is_an_error():
    a = np.ones(8, dtype=np.int32)
    b = np.full(8, 32, dtype=np.int32)
    with pytest.raises(InterpreterError, match="'arith.shli' shifts by .* at least the bit width"):
        run(INT_OPS.format(T="i32", OP="shli"), "int_ops", (1,), [a, b, np.zeros(8, np.int32)])


# --------------------------------------------------------------------------------------
# Unsupported ops, and rules added by a plugin

from polytile.ir.constraints import AnyType, FloatLike  # noqa: E402
from polytile.ir.opdef import Elementwise, Operand, Pure, Result, define_op  # noqa: E402
from polytile.ir.operation import Operation  # noqa: E402


@define_op
class FrobOp(Operation):
    """A test op the interpreter knows nothing about."""

    name = "testinterp.frob"
    source = Operand(AnyType)
    result = Result(AnyType)


@define_op
class TwiceOp(Operation):
    """A test elementwise op with NumPy semantics: needs no rule."""

    name = "testinterp.twice"
    source = Operand(FloatLike)
    result = Result(FloatLike)
    traits = (Pure, Elementwise)
    semantics = staticmethod(lambda a: a * 2)


PLUGIN_OPS = """
func.func @plugin_ops(%out: ptr<f32>) attributes {kernel = true} {
  %c = arith.constant {value = 1.5} : f32
  %d = testinterp.twice %c : f32
  %e = testinterp.frob %d : f32 loc("plug.py":7:3)
  tile.store %out, %e
  func.return
}
"""


def test_unsupported_op_is_named_with_its_location():
    with pytest.raises(InterpreterUnsupportedError) as info:
        run(PLUGIN_OPS, "plugin_ops", (1,), [np.zeros(1, np.float32)])
    message = str(info.value)
    assert message.startswith("plug.py:7:3: error: kernel 'plugin_ops', program (0, 0, 0): 'testinterp.frob' ")
    assert "is not supported by the interpreter" in message and "register_rule" in message


def test_register_rule_extends_the_interpreter():
    out = np.zeros(1, dtype=np.float32)
    register_rule(FrobOp, lambda op, operands, ctx: operands[0] + ctx.program_id[0] + 1)
    try:
        run(PLUGIN_OPS, "plugin_ops", (1,), [out])
    finally:
        del RULES[FrobOp]
    assert out[0] == 4.0  # twice(1.5) + 0 + 1


def test_a_rule_failing_unexpectedly_is_reported_with_the_op():
    @register_rule(FrobOp)
    def broken(op, operands, ctx):
        raise ValueError("boom")

    try:
        with pytest.raises(InterpreterError, match=r"plug.py:7:3: .*'testinterp.frob' failed in the interpreter: "
                                                   r"ValueError: boom"):
            run(PLUGIN_OPS, "plugin_ops", (1,), [np.zeros(1, np.float32)])
    finally:
        del RULES[FrobOp]


def test_register_rule_rejects_non_op_classes():
    with pytest.raises(TypeError):
        register_rule(int, lambda *a: None)


def test_signed_division_of_i1_wraps_like_a_one_bit_register():
    # true is -1 as a signed i1: -1 / -1 = 1 (low bit: true), -1 % -1 = 0.
    text = """\
func.func @k(%out: ptr<i8>) attributes {kernel = true} {
  %t = arith.constant {value = true} : i1
  %d = arith.divsi %t, %t : i1
  %r = arith.remsi %t, %t : i1
  %de = arith.extui %d : i8
  %re = arith.extui %r : i8
  %one = arith.constant {value = 1} : i32
  %p1 = tile.addptr %out, %one : ptr<i8>
  tile.store %out, %de
  tile.store %p1, %re
  func.return
}
"""
    out = np.zeros(2, dtype=np.int8)
    run_kernel(parse_module(text), "k", (1,), [out])
    assert out.tolist() == [1, 0]
