"""Triton programs that use tensor descriptors, ported by changing their imports and
nothing else: ``triton_descriptor_matmuls.py`` (the descriptor matmuls of Triton's
tutorial 09, written against Triton's API) on the interpreter, with NumPy arrays.
(``test_gpu_bulk.py`` runs it on a Hopper GPU beside Triton itself, with torch tensors.)"""

from __future__ import annotations

import functools
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

SOURCE = Path(__file__).resolve().parents[3] / "bench" / "triton_descriptor_matmuls.py"

#: Triton's import lines and polytile's: the whole port.
IMPORTS = {"import triton\n": "import polytile as triton\n",
           "import triton.language as tl\n": "import polytile.language as tl\n",
           "from triton.tools.tensor_descriptor import TensorDescriptor\n":
               "from polytile.tools.tensor_descriptor import TensorDescriptor\n"}


@functools.cache
def ported() -> ModuleType:
    """The file run by polytile: its import lines changed, nothing else (its line numbers,
    and so the kernel sources polytile reads from it, are the file's)."""
    source = SOURCE.read_text()
    for line, replacement in IMPORTS.items():
        assert source.count(line) == 1, f"{SOURCE.name} should have the line {line!r} once"
        source = source.replace(line, replacement)
    assert "triton" not in source.replace("import polytile as triton", "").replace("triton.", "").replace(
        "polytile.tools.tensor_descriptor", ""), "a use of Triton the port would not change"
    module = ModuleType("triton_descriptor_matmuls_on_polytile")
    module.__file__ = str(SOURCE)
    exec(compile(source, str(SOURCE), "exec"), module.__dict__)  # noqa: S102 - our own file
    return module


def _operands(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    return a, b, np.full((m, n), np.nan, np.float16)


def _expected(a, b):
    return a.astype(np.float32) @ b.astype(np.float32).T


#: Every edge tile partial (M, N and K not multiples of the blocks); 4 tiles for 3 programs.
SHAPE = (200, 136, 104)


def test_the_host_descriptor_matmul_runs_on_the_interpreter():
    a, b, c = _operands(*SHAPE)
    ported().matmul_tma(a, b, c, target="interp")
    np.testing.assert_allclose(c, _expected(a, b), atol=0.1, rtol=0.02)


@pytest.mark.parametrize("flatten", [True, False])
def test_the_persistent_descriptor_matmul_runs_on_the_interpreter(flatten):
    # The autotuner tries both epilogues (whole, subtiled) with the dummy blocks set by its hook.
    a, b, c = _operands(*SHAPE)
    ported().matmul_tma_persistent(a, b, c, 3, flatten=flatten, target="interp")
    np.testing.assert_allclose(c, _expected(a, b), atol=0.1, rtol=0.02)


def test_the_device_descriptor_matmul_runs_on_the_interpreter():
    a, b, c = _operands(*SHAPE)
    ported().matmul_descriptor_persistent(a, b, c, 3, lambda size, alignment, stream: np.empty(size, np.int8),
                                          target="interp")
    np.testing.assert_allclose(c, _expected(a, b), atol=0.1, rtol=0.02)


def test_warp_specialize_is_taken_and_computes_the_same():
    # Warp specialization is the polytile-warpspec plugin's (not built yet): the hint is
    # accepted, as Triton accepts it on GPUs without it, and the loop runs as written.
    a, b, c = _operands(*SHAPE)
    ported().matmul_tma(a, b, c, warp_specialize=True, target="interp")
    np.testing.assert_allclose(c, _expected(a, b), atol=0.1, rtol=0.02)
