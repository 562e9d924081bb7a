"""Every example runs on the GPU and matches NumPy (``python examples/NAME.py`` on a
machine whose target is an NVIDIA GPU): its arrays are torch CUDA tensors there."""

from __future__ import annotations

import sys

import pytest

from polytile import config
from tests.examples.loading import EXAMPLES, load_example

from .fake_cuda import nvidia_gpu, torch_cuda  # noqa: F401


@pytest.mark.gpu
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs_on_the_gpu(name, nvidia_gpu):
    torch_cuda()
    module = load_example(name, f"gpu_example_{name}")
    with config.override(target="nvidia"):
        assert sys.modules["_device"].on_gpu()  # the arrays are on the GPU, the kernels ran there
        assert module.main()
    kernels = [value for value in vars(module).values() if hasattr(value, "cache") and hasattr(value, "_hot")]
    targets = {str(compiled.target) for kernel in kernels for compiled in kernel.cache.values()}
    assert targets and all(target.startswith("nvidia:") for target in targets), targets
