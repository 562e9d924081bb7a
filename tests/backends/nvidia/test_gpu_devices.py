"""On a GPU: polytile.device_properties() says what torch and the driver say."""

from __future__ import annotations

import pytest

import polytile as pt
from polytile import config

from .fake_cuda import nvidia_gpu, torch_cuda  # noqa: F401  (nvidia_gpu is a fixture)

pytestmark = pytest.mark.gpu


def test_the_sm_count_is_torchs(nvidia_gpu):  # noqa: F811
    torch = torch_cuda()
    with config.override(target="nvidia"):
        properties = pt.device_properties(0)
    assert properties["multiprocessor_count"] == torch.cuda.get_device_properties(0).multi_processor_count
    assert properties["warp_size"] == 32 and properties["target"] == str(nvidia_gpu.target)
    assert properties["shared_memory_per_block"] >= 99 * 1024
