"""Pointer parameters annotated ``pl.const`` (Triton's ``tl.const``): read through on every
target, never written through, and a type of their own where branches meet (the errors
carry Triton's words, which ported tests look for)."""

from __future__ import annotations

import numpy as np
import pytest

import polytile.language as pl
from polytile.errors import CompilationError
from polytile.runtime import jit


@jit
def pick(a, b, choose_b):
    if choose_b:
        return b
    return a


@jit
def const_kernel(in_ptr: pl.const, out, c_out: pl.const, choose_const, n, BLOCK: pl.constexpr, MODE: pl.constexpr):
    offsets = pl.arange(0, BLOCK)
    mask = offsets < n
    val = pl.load(in_ptr + offsets, mask=mask)  # reading through a const pointer
    if MODE == "direct":
        final_out = out
    elif MODE == "const":
        final_out = c_out
    elif MODE == "ternary":
        final_out = c_out if choose_const else out
    elif MODE == "call":
        final_out = pick(out, c_out, choose_const)
    else:
        if choose_const:
            final_out = c_out
        else:
            final_out = out
    pl.store(final_out + offsets, val, mask=mask)


def test_const_pointers_are_read(target):
    x = np.arange(100, dtype=np.float32)
    out = np.zeros(100, np.float32)
    const_kernel[(1,)](x, out, out, False, 100, BLOCK=128, MODE="direct", target=target)
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("mode, message", [
    ("const", r"Cannot store to a constant pointer: pl.store writes through a pointer made from a parameter "
              r"annotated pl.const"),
    ("ternary", r"Ternary expression with dynamic condition has inconsistent type: the conditional expression is "
                r"const_pointer<fp32> on one path and pointer<fp32> on the other"),
    ("call", r"Inconsistent return types: the return value is const_pointer<fp32> on one path and pointer<fp32>"),
    ("if", r"Mismatched type for final_out: 'final_out' is const_pointer<fp32> on one path and pointer<fp32>"),
])
def test_writing_through_const_pointers_is_refused(mode, message):
    x, out = np.zeros(128, np.float32), np.zeros(128, np.float32)
    with pytest.raises(CompilationError, match=message) as info:
        const_kernel[(1,)](x, out, out, True, 128, BLOCK=128, MODE=mode)
    assert info.value.error_message.startswith(message.split(":")[0])  # Triton's attribute


@jit
def const_atomic_kernel(x_ptr: pl.const):
    pl.atomic_add(x_ptr, 1.0)


@jit
def const_scalar_kernel(n: pl.const):
    pass


def test_atomics_and_non_pointers():
    with pytest.raises(CompilationError, match=r"Cannot store to a constant pointer: pl.atomic_add writes"):
        const_atomic_kernel[(1,)](np.zeros(1, np.float32))
    with pytest.raises(CompilationError, match=r"parameter 'n' is annotated pl.const, which marks pointers a kernel "
                                               r"only reads through, but it is passed int32"):
        const_scalar_kernel[(1,)](3)
