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
def doc_module(tmp_path, monkeypatch):
    """docs/warpspec.md's python blocks (the later ones continue the first), imported from
    a file of their own (the compiler reads a kernel's source)."""
    import importlib
    import sys

    text = (pathlib.Path(__file__).parents[3] / "docs" / "warpspec.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 3, "docs/warpspec.md should have three python blocks"
    (tmp_path / "warpspec_doc.py").write_text("\n\n".join(blocks))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "warpspec_doc", raising=False)
    return importlib.import_module("warpspec_doc")


@pytest.fixture
def doc_kernel(doc_module):
    return doc_module.matmul


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


def test_the_doc_persistent_kernel_runs_on_the_interpreter(doc_module):
    a, b, c = _arrays()
    descriptors = [TensorDescriptor.from_tensor(x, block) for x, block in ((a, [32, 16]), (b, [32, 16]), (c, [32, 32]))]
    doc_module.persistent_matmul[(4,)](*descriptors, 96, 80, 72, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, NUM_SMS=4,
                                       target="interp")
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target, specialised", [("nvidia:sm_90a", True), ("nvidia:sm_80", False),
                                                  ("amd:gfx942", False)])
@pytest.mark.parametrize("num_warps", [4, 8])
def test_the_doc_persistent_kernel_compiles_for_every_backend(doc_module, target, specialised, num_warps):
    pytest.importorskip("polytile_nvidia" if target.startswith("nvidia") else "polytile_amd")
    a = np.zeros((512, 512), np.float16)
    bn = 64 * num_warps // 2
    descriptors = [TensorDescriptor.from_tensor(a, block) for block in ([128, 64], [bn, 64], [128, bn])]
    module = doc_module.persistent_matmul.lower(*descriptors, 512, 512, 512, BLOCK_M=128, BLOCK_N=bn, BLOCK_K=64,
                                                NUM_SMS=132)
    entries = compile_module(module, target, num_warps=num_warps, num_stages=3).metadata["warp_specialize"]
    assert [e["specialised"] for e in entries] == [specialised], entries
    assert specialised or "warp specialization needs them" in entries[0]["why"]


def test_the_doc_autotuned_kernel_runs_on_the_interpreter_with_every_config(doc_module):
    a, b, c = _arrays()
    descriptors = [TensorDescriptor.from_tensor(x, block) for x, block in ((a, [32, 16]), (b, [32, 16]), (c, [32, 32]))]
    tuned = doc_module.tuned_matmul
    tuned[(3, 3)](*descriptors, 96, 80, 72, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, target="interp")
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-4, atol=1e-4)
    assert len(tuned.configs) == 3 and tuned.best_config in tuned.configs


@pytest.mark.parametrize("target, specialised", [("nvidia:sm_90a", True), ("nvidia:sm_80", False),
                                                  ("amd:gfx942", False)])
@pytest.mark.parametrize("config", [0, 1, 2])
def test_the_doc_autotune_configs_compile_for_every_backend(doc_module, target, specialised, config):
    pytest.importorskip("polytile_nvidia" if target.startswith("nvidia") else "polytile_amd")
    tuned = doc_module.tuned_matmul
    chosen = tuned.configs[config]
    a = np.zeros((256, 256), np.float16)
    descriptors = [TensorDescriptor.from_tensor(a, block) for block in ([128, 64], [128, 64], [128, 128])]
    module = tuned.fn.lower(*descriptors, 256, 256, 256, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, **chosen.kwargs)
    result = compile_module(module, target, num_warps=chosen.num_warps, num_stages=chosen.num_stages)
    entries = result.metadata.get("warp_specialize", [])
    ws = chosen.kwargs["WS"]
    if not ws:
        assert entries == []
        return
    assert [e["specialised"] for e in entries] == [specialised], entries
    if specialised:
        ptx = result.artifacts["ptx"]
        producer = ws.producer_registers or 40
        assert entries[0]["producer_registers"] == producer
        assert f"setmaxnreg.dec.sync.aligned.u32 {producer};" in ptx
        if ws.consumer_registers:
            assert f"setmaxnreg.inc.sync.aligned.u32 {ws.consumer_registers};" in ptx
