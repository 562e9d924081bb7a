"""The host side: ``@jit`` kernels, launching, and Triton's host helpers.

``import polytile.runtime as rt`` (or, once re-exported, ``import polytile as pt``)::

    @jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: pl.constexpr):
        ...

    add_kernel[(cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
"""

from __future__ import annotations

from ..errors import LaunchError
from .allocator import set_allocator
from .autotune import Autotuner, Config, Heuristics, autotune, heuristics
from .devices import device_properties
from .jit import CompiledKernel, JITFunction, jit
from .reinterpret import TensorWrapper, reinterpret


def cdiv(x: int, div: int) -> int:
    """``ceil(x / div)`` for positive integers."""
    return (x + div - 1) // div


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for n <= 1)."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


__all__ = ["Autotuner", "CompiledKernel", "Config", "Heuristics", "JITFunction", "LaunchError", "autotune", "cdiv",
           "set_allocator",
           "device_properties", "heuristics", "jit", "next_power_of_2", "reinterpret", "TensorWrapper"]
