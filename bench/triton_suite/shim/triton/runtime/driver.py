"""``triton.runtime.driver``: ``driver.active`` for Triton's test scaffolding, backed by
polytile's configured target (``POLYTILE_TARGET``)."""

from __future__ import annotations

from typing import NamedTuple


class GPUTarget(NamedTuple):
    backend: str
    arch: object
    warp_size: int


def _target():
    from polytile.plugins.manager import get_plugin_manager

    return get_plugin_manager().choose_target(None).target


class _Utils:
    @staticmethod
    def get_device_properties(device: int = 0) -> dict:
        import torch

        properties = torch.cuda.get_device_properties(device)
        return {"multiprocessor_count": properties.multi_processor_count, "max_shared_mem": 232448,
                "warpSize": 32}


class _Active:
    utils = _Utils()

    def get_current_target(self) -> GPUTarget:
        target = _target()
        backend = {"nvidia": "cuda", "amd": "hip"}.get(target.backend, target.backend)
        arch = target.arch
        if backend == "cuda" and arch:
            arch = int("".join(c for c in arch if c.isdigit()))  # sm_90a -> 90, as Triton's
        return GPUTarget(backend, arch, 32 if backend == "cuda" else 64)

    def get_current_device(self) -> int:
        import torch

        return torch.cuda.current_device()

    def get_active_torch_device(self):
        import torch

        return torch.device("cuda", torch.cuda.current_device())


active = _Active()
