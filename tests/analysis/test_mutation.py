"""Mutation analysis: which pointer arguments a kernel may write."""

import numpy as np

import polytile.language as pl
from polytile.analysis.mutation import mutated_arguments
from polytile.ir import parse_module
from polytile.runtime import jit


def _mutated(text: str) -> list[str]:
    return mutated_arguments(parse_module(text))


def test_store_through_derived_pointers():
    text = """
    func.func @k(%x: ptr<f32>, %y: ptr<f32>, %n: i32) attributes {kernel = true} {
      %offs = tile.arange {end = 16, start = 0} : tile<16xi32>
      %0 = tile.splat %x : tile<16xptr<f32>>
      %1 = tile.addptr %0, %offs : tile<16xptr<f32>>
      %v = tile.load %1 : tile<16xf32>
      %2 = tile.splat %y : tile<16xptr<f32>>
      %3 = tile.addptr %2, %offs : tile<16xptr<f32>>
      tile.store %3, %v
      func.return
    }
    """
    assert _mutated(text) == ["y"]


def test_loop_carried_and_if_yielded_pointers():
    text = """
    func.func @k(%x: ptr<f32>, %y: ptr<f32>, %z: ptr<f32>, %n: i32) attributes {kernel = true} {
      %0 = arith.constant {value = 0} : i32
      %1 = arith.constant {value = 1} : i32
      %p = scf.for %0, %n, %1, %x : ptr<f32> {
      ^bb0(%i: i32, %p_1: ptr<f32>):
        %p_2 = tile.addptr %p_1, %1 : ptr<f32>
        scf.yield %p_2
      }
      %c = arith.cmpi %n, %0 {predicate = "sgt"} : i1
      %q = scf.if %c : ptr<f32> {
        scf.yield %p
      } {
        scf.yield %y
      }
      %v = arith.constant {value = 1.0} : f32
      tile.store %q, %v
      func.return
    }
    """
    assert _mutated(text) == ["x", "y"]


def test_select_and_atomics():
    text = """
    func.func @k(%a: ptr<i32>, %b: ptr<i32>, %c: ptr<i32>, %d: ptr<i32>, %f: i1) attributes {kernel = true} {
      %s = arith.select %f, %a, %b : ptr<i32>
      %one = arith.constant {value = 1} : i32
      %old = tile.atomic_rmw %s, %one {kind = "add"} : i32
      %x = tile.atomic_cas %c, %one, %old : i32
      %y = tile.load %d : i32
      func.return
    }
    """
    assert _mutated(text) == ["a", "b", "c"]


def test_pointer_of_unknown_origin_means_every_pointer():
    text = """
    func.func @k(%a: ptr<f32>, %b: ptr<f32>, %addr: i64) attributes {kernel = true} {
      %p = arith.inttoptr %addr : ptr<f32>
      %v = arith.constant {value = 1.0} : f32
      tile.store %p, %v
      func.return
    }
    """
    assert _mutated(text) == ["a", "b"]


def test_ptrtoint_round_trip_keeps_the_origin():
    text = """
    func.func @k(%a: ptr<f32>, %b: ptr<f32>) attributes {kernel = true} {
      %i = arith.ptrtoint %a : i64
      %p = arith.inttoptr %i : ptr<f32>
      %v = arith.constant {value = 1.0} : f32
      tile.store %p, %v
      func.return
    }
    """
    assert _mutated(text) == ["a"]


def test_noinline_calls_map_callee_parameters_to_caller_arguments():
    text = """
    func.func @inner(%p: ptr<f32>, %q: ptr<f32>) attributes {noinline = true} {
      %v = tile.load %q : f32
      tile.store %p, %v
      func.return
    }
    func.func @outer(%p: ptr<f32>, %q: ptr<f32>) -> ptr<f32> attributes {noinline = true} {
      func.call %q, %p {callee = @inner}
      func.return %p
    }
    func.func @k(%a: ptr<f32>, %b: ptr<f32>, %c: ptr<f32>) attributes {kernel = true} {
      %r = func.call %a, %b {callee = @outer} : ptr<f32>
      %v = arith.constant {value = 1.0} : f32
      tile.store %r, %v
      func.return
    }
    """
    # outer writes its q (b) through inner's p, and returns its p (a), which k writes.
    assert _mutated(text) == ["a", "b"]


def test_no_writes_at_all():
    text = """
    func.func @k(%a: ptr<f32>, %n: i32) attributes {kernel = true} {
      %v = tile.load %a : f32
      func.return
    }
    """
    assert _mutated(text) == []


@jit(noinline=True)
def _store_one(p, v):
    pl.store(p, v)


@jit
def _inline_helper(p, offs):
    pl.store(p + offs, pl.load(p + offs) * 2)


@jit
def _kernel(x_ptr, y_ptr, z_ptr, w_ptr, n, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    x = pl.load(x_ptr + offs)
    _store_one(z_ptr, 1.0)
    _inline_helper(w_ptr, offs)
    pl.store(y_ptr + offs, x)


def test_jit_function_mutated_args_through_inlined_and_noinline_calls():
    a = np.zeros(16, np.float32)
    assert _kernel.mutated_args(a, a, a, a, 16, BLOCK=16) == ["y_ptr", "z_ptr", "w_ptr"]


def test_integer_offsets_and_select_conditions_are_not_origins():
    text = """
    func.func @k(%a: ptr<f32>, %b: ptr<f32>, %n: i32, %f: i1) attributes {kernel = true} {
      %p = tile.addptr %a, %n : ptr<f32>
      %q = arith.select %f, %p, %p : ptr<f32>
      %v = arith.constant {value = 1.0} : f32
      tile.store %q, %v
      func.return
    }
    """
    assert _mutated(text) == ["a"]
