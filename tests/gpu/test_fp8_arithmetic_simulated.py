"""Arithmetic on 8-bit floats, lowered for NVIDIA targets (each operand converted to f32,
the result rounded once to the type: sm_90's cvt instructions, sm_80's integer code) and
run on the CTA simulator against the interpreter's emulation, bit for bit
(tests/language/test_dtypes.py runs the same kernel on every target)."""

from __future__ import annotations

import numpy as np
import pytest

import polytile.language as pl
from polytile import reinterpret
from polytile.compiler import compile_module
from polytile.dialects.emulated_floats import EMULATED_FLOATS

from .language_tests import language_tests
from .llvm_cta import run_kernel

pytest.importorskip("polytile_nvidia")

test_dtypes = language_tests("test_dtypes")


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("dt, kind", [(pl.float8e4nv, "f8e4m3"), (pl.float8e5, "f8e5m2")], ids=["e4m3", "e5m2"])
def test_fp8_arithmetic_on_the_simulator(arch, dt, kind):
    x, y = test_dtypes.fp8_operands(EMULATED_FLOATS[kind], 5)
    expected = np.zeros(16, np.uint8)
    test_dtypes.fp8_arith_kernel[(1,)](*(reinterpret(a, dt) for a in (x, y, expected)), DT=dt, target="interp")
    out = np.zeros(16, np.uint8)
    module = test_dtypes.fp8_arith_kernel.lower(*(reinterpret(a, dt) for a in (x, y, out)), DT=dt)
    run_kernel(compile_module(module, f"nvidia:{arch}", num_warps=1).context.artifacts, [x, y, out], 1)
    np.testing.assert_array_equal(out, expected)
