"""Every example compiles to an HSACO for every AMD architecture, through the runtime
(``kernel[grid](...)`` with the target set), with launching replaced by a recorder:
there is no AMD GPU here."""

from __future__ import annotations


import pytest

import polytile.gpu.lowering.atomics  # noqa: F401  (these register their lowerings; module.py will
import polytile.gpu.lowering.reduce  # noqa: F401   import them at integration)
import polytile.gpu.lowering.scan  # noqa: F401
from polytile import config
from polytile_amd import AmdBackend
from polytile_amd.codeobject import read_code_object

from tests.examples.loading import keep_arrays_on_the_host, load_example

from .kernels import ARCHS, WAVEFRONT

COMPILING = ["vector_add", "softmax", "layer_norm", "matmul", "cumsum", "histogram", "persistent_matmul", "flash_attention"]
def run_example(name, arch, monkeypatch):
    launched = []

    def record(self, *, compiled, kernel_name, params, options):
        launched.append((kernel_name, compiled, params))
        return lambda grid, args: None

    monkeypatch.setattr(AmdBackend, "make_launcher", record)
    keep_arrays_on_the_host(monkeypatch)
    module = load_example(name, f"amd_example_{name}")
    with config.override(target=f"amd:{arch}", cache=False):
        module.main()
    return launched


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", COMPILING)
def test_example_compiles_to_a_code_object(name, arch, monkeypatch, capsys):
    launched = run_example(name, arch, monkeypatch)
    assert launched
    for kernel_name, compiled, params in launched:
        kernel = read_code_object(compiled.binaries["hsaco"]).kernel(kernel_name)
        assert kernel.wavefront_size == WAVEFRONT[arch]
        assert len(kernel.explicit_arguments) == len(params)
        assert kernel.group_segment_fixed_size == compiled.metadata["shared_bytes"]
        assert compiled.metadata["amd_code_object"]["symbol"] == f"{kernel_name}.kd"
