"""Every example compiles to PTX and a cubin for every NVIDIA architecture, without a GPU:
through the runtime (``kernel[grid](...)`` with the target set), with launching replaced
by a recorder.  The GPU suite runs them for real (``test_gpu_*``)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from polytile import config
from polytile_nvidia import NvidiaBackend

ROOT = Path(__file__).resolve().parents[3]
#: Every example script: one added to examples/ is compiled here without being listed.
EXAMPLES = sorted(path.stem for path in (ROOT / "examples").glob("*.py"))
ARCHS = ["sm_80", "sm_86", "sm_89", "sm_90a"]


def run_example(name: str, arch: str, monkeypatch) -> list:
    launched = []

    def record(self, *, compiled, kernel_name, params, options):
        launched.append((kernel_name, compiled, params))
        return lambda grid, args, stream=None: None

    monkeypatch.setattr(NvidiaBackend, "make_launcher", record)
    spec = importlib.util.spec_from_file_location(f"nvidia_example_{name}", ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with config.override(target=f"nvidia:{arch}", cache=False):
        module.main()  # its check of the results fails: nothing ran; the compilations are the point
    return launched


def test_the_examples_are_found():
    assert {"vector_add", "softmax", "layer_norm", "matmul", "cumsum", "histogram"} <= set(EXAMPLES)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_compiles_to_ptx_and_a_cubin(name, arch, monkeypatch, capsys):
    launched = run_example(name, arch, monkeypatch)
    assert launched, f"example {name} launched nothing"
    for kernel_name, compiled, params in launched:
        ptx = compiled.result.context.artifacts["ptx"]  # cache=False: compiled in this process
        assert f".target {arch}" in ptx
        entry = re.search(rf"\.visible \.entry {kernel_name}\((.*?)\)", ptx, re.S)
        assert entry is not None, f"no .entry {kernel_name} in the PTX"
        assert entry.group(1).count(".param") == len(params)
        cubin = compiled.binaries["cubin"]
        assert cubin[:4] == b"\x7fELF" and kernel_name.encode() in cubin
