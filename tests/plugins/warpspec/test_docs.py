"""docs/warpspec.md: its kernel runs on the interpreter (unspecialised, saying why) and
compiles for every backend's pipeline: split on sm_90a, unspecialised with a reason on
sm_80 and AMD."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

from polytile.compiler import compile_module

pytest.importorskip("polytile_tma")
pytest.importorskip("polytile_warpspec")

from polytile.tools.tensor_descriptor import TensorDescriptor  # noqa: E402


@pytest.fixture
def doc_kernel(tmp_path, monkeypatch):
    """The kernel of docs/warpspec.md's python block, imported from a file of its own
    (the compiler reads a kernel's source)."""
    import importlib

    text = (pathlib.Path(__file__).parents[3] / "docs" / "warpspec.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/warpspec.md should have one python block"
    (tmp_path / "warpspec_doc.py").write_text(blocks[0])
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module("warpspec_doc").matmul


def _arrays(m=96, n=80, k=72):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32)
    return a, b, np.zeros((m, n), np.float32)


def test_the_doc_kernel_runs_on_the_interpreter(doc_kernel):
    matmul = doc_kernel
    a, b, c = _arrays()
    descriptors = [TensorDescriptor.from_tensor(x, block) for x, block in ((a, [32, 16]), (b, [32, 16]), (c, [32, 32]))]
    matmul[(3, 3)](*descriptors, 96, 80, 72, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, target="interp")
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target, specialised", [("nvidia:sm_90a", True), ("nvidia:sm_80", False),
                                                  ("amd:gfx942", False)])
def test_the_doc_kernel_compiles_for_every_backend(doc_kernel, target, specialised):
    pytest.importorskip("polytile_nvidia" if target.startswith("nvidia") else "polytile_amd")
    matmul = doc_kernel
    a = np.zeros((256, 256), np.float16)
    descriptors = [TensorDescriptor.from_tensor(a, block) for block in ([128, 64], [128, 64], [128, 128])]
    module = matmul.lower(*descriptors, 256, 256, 256, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64)
    entries = compile_module(module, target, num_warps=8, num_stages=3).metadata["warp_specialize"]
    assert [e["specialised"] for e in entries] == [specialised], entries
    assert specialised or "warp specialization needs them" in entries[0]["why"]
