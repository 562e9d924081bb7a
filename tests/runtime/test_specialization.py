"""Specialization on 16-byte divisibility and == 1; do_not_specialize; argument types."""

import numpy as np
import pytest

import polytile.language as pl
from polytile.runtime import LaunchError, jit


def _kernel():
    @jit
    def k(out_ptr, n):
        pl.store(out_ptr, n * 1.0)

    return k


def _hints(module):
    kernel = next(op for op in module.body.block if op.attributes.get("kernel"))
    return kernel.attributes.get("pt.divisibility"), kernel.attributes.get("pt.equal_to_1")


def test_integers_specialize_on_divisibility_and_one():
    k = _kernel()
    out = np.zeros(4, np.float32)
    k[(1,)](out, 32)
    k[(1,)](out, 48)           # also divisible by 16: the same kernel
    assert k.compile_count == 1
    k[(1,)](out, 7)
    assert k.compile_count == 2
    k[(1,)](out, 1)
    assert k.compile_count == 3 and out[0] == 1
    assert _hints(k.lower(out, 1))[1] == (False, True)
    assert _hints(k.lower(out, 32))[0][1] == 16
    assert _hints(k.lower(out[1:], 7)) == (None, None)  # nothing known: no attributes


def test_pointers_specialize_on_alignment():
    k = _kernel()
    buffer = np.zeros(64, np.float32)
    aligned = buffer[(-buffer.ctypes.data // 4) % 4:][:8]    # starts on a 16-byte boundary
    assert aligned.ctypes.data % 16 == 0
    k[(1,)](aligned, 3)
    k[(1,)](aligned[1:], 3)                                  # 4 bytes further: not aligned
    assert k.compile_count == 2
    assert _hints(k.lower(aligned, 3))[0] == (16, 1)


def test_do_not_specialize():
    @jit(do_not_specialize=["n"])
    def k(out_ptr, n):
        pl.store(out_ptr, n * 1.0)

    out = np.zeros(4, np.float32)
    for n in (1, 16, 7):
        k[(1,)](out, n)
    assert k.compile_count == 1 and out[0] == 7

    @jit(do_not_specialize=[1])
    def by_position(out_ptr, n):
        pl.store(out_ptr, n * 1.0)

    assert by_position.do_not_specialize == {"n"}
    with pytest.raises(LaunchError, match="'m', which is not a parameter"):
        jit(do_not_specialize=["m"])(by_position.fn)
