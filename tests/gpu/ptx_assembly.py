"""Giving the PTX a test generated to ptxas, as the NVIDIA backend itself does.

The ptxas is the one the backend would run (``polytile_nvidia.toolkit.find_ptxas``: the
setting, ``cuda_home``, the nvidia-cuda-nvcc wheel that ``./dev setup`` installs, PATH,
``/usr/local/cuda*``), not only one on PATH: a ptxas in the wheel alone must not turn
these checks into skips.  A refusal fails the test with polytile's own error, which names
the assembler's messages and quotes the offending PTX lines.
"""

from __future__ import annotations

from tests.toolchains import ptxas_or_skip

_CUBIN_MAGIC = b"\x7fELF"


def assembles(ptx: str, arch: str, kernel_name: str = "kernel") -> bytes:
    """Assemble ``ptx`` for ``arch`` (``"sm_90a"``) with ptxas and return the cubin; skip
    the calling test, visibly and saying why, where the backend finds no ptxas."""
    from polytile_nvidia import assemble

    ptxas_or_skip()
    cubin = assemble.ptx_to_cubin(ptx, arch, kernel_name=kernel_name, assembler="ptxas")
    assert cubin[:4] == _CUBIN_MAGIC, f"ptxas made no ELF file of the PTX for {arch}"
    return cubin
