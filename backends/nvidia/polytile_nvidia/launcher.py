"""Launching a compiled NVIDIA kernel: ``launcher(grid, args)``.

A :class:`Launcher` is built once per compiled specialization from the cubin, the
kernel's run-time parameters and its launch configuration.  Everything that can be
decided then is: the argument layout (:class:`~.arguments.ArgumentPacker`), the block
size, the shared memory.  The module is loaded on a device the first time the kernel
runs there, and dynamic shared memory above 48 KB is opted in at that moment.

Per launch: the arguments are packed in place, the device is the one holding the
pointer arguments (else the current one), that device's primary context is made current
if it is not, and the kernel goes on the caller's stream: PyTorch's current stream when
an argument is a torch tensor, else the legacy default stream (0), unless ``stream=``
names one.
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

from polytile.ir.types import Type
from polytile.runtime.args import torch_current_stream
from polytile.runtime.jit import LaunchError

from . import driver
from .arguments import ANY_DEVICE, ArgumentPacker

#: Grid limits of every supported architecture (sm_80 to sm_90a).
MAX_GRID = (2**31 - 1, 65535, 65535)
_WARP_SIZE = 32


class Launcher:
    """Launches one compiled kernel; call it as ``launcher((gx, gy, gz), args)``.

    ``image`` is the cubin (or PTX text); ``parameters`` are the run-time parameters as
    ``(name, IR type)`` pairs in order; ``shared`` is the dynamic shared memory per block
    in bytes.  Calls are thread-safe.
    """

    def __init__(self, image: bytes | str, kernel_name: str, parameters: Sequence[tuple[str, Type]], *,
                 num_warps: int, shared: int = 0):
        if num_warps < 1 or num_warps * _WARP_SIZE > 1024:
            raise LaunchError(f"kernel '{kernel_name}': num_warps={num_warps} gives a block of "
                              f"{num_warps * _WARP_SIZE} threads; a block holds 32 to 1024 threads")
        self.image = image
        self.kernel_name = kernel_name
        self.num_warps = num_warps
        self.block = num_warps * _WARP_SIZE
        self.shared = shared
        self.packer = ArgumentPacker(kernel_name, parameters)
        self._params = self.packer.params_address
        #: device -> (context as int, context, CUfunction); filled on first launch there.
        self._loaded: dict[int, tuple[int, Any, Any]] = {}
        self._functions: dict[int, driver.Function] = {}
        self._lock = threading.Lock()

    def __call__(self, grid: tuple[int, int, int], args: Sequence[Any], stream: int | None = None) -> None:
        gx, gy, gz = grid
        if not (0 < gx <= MAX_GRID[0] and 0 < gy <= MAX_GRID[1] and 0 < gz <= MAX_GRID[2]):
            if self._grid_is_empty(grid):
                return
        with self._lock:
            device, torch = self.packer.pack(args)
            if device == ANY_DEVICE:
                device = driver.current_device()
            loaded = self._loaded.get(device)
            if loaded is None:
                loaded = self._load(device)
            context_id, context, function = loaded
            cuda = driver._state.bindings
            err, current = cuda.cuCtxGetCurrent()
            if err or int(current) != context_id:
                driver.check(cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent", self.kernel_name, device)
            if stream is None:
                stream = torch_current_stream(device) if torch else 0
            (err,) = cuda.cuLaunchKernel(function, gx, gy, gz, self.block, 1, 1, self.shared, stream, self._params, 0)
            if err:
                driver.raise_error(err, "cuLaunchKernel", self.kernel_name, device)

    def function(self, device: int = 0) -> driver.Function:
        """The kernel as loaded on ``device`` (loading it there if needed): registers,
        spills and static shared memory are its attributes."""
        with self._lock:
            if device not in self._functions:
                self._load(device)
            return self._functions[device]

    def _load(self, device: int) -> tuple[int, Any, Any]:
        module = driver.load_module(self.image, device=device, name=self.kernel_name)
        function = module.function(self.kernel_name)
        function.check_block_size(self.block)
        if self.shared:
            function.set_dynamic_shared_memory(self.shared)
        context = driver.primary_context(device)
        loaded = (int(context), context, function.handle)
        self._functions[device] = function
        self._loaded[device] = loaded
        return loaded

    def _grid_is_empty(self, grid: tuple[int, int, int]) -> bool:
        """True for a grid with a zero (nothing to launch); an error for a bad one."""
        for axis, (size, limit) in enumerate(zip(grid, MAX_GRID)):
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise LaunchError(f"kernel '{self.kernel_name}': grid {tuple(grid)}: axis {axis} must be a "
                                  f"non-negative integer, got {size!r}")
            if size > limit:
                raise LaunchError(f"kernel '{self.kernel_name}': grid {tuple(grid)}: axis {axis} has {size} blocks, "
                                  f"more than the {limit} CUDA allows; use bigger blocks or loop inside the kernel")
        return 0 in grid

    def __repr__(self) -> str:
        return (f"<polytile_nvidia.Launcher '{self.kernel_name}': {len(self.packer.names)} arguments, "
                f"{self.block} threads, {self.shared} bytes of dynamic shared memory>")
