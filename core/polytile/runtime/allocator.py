"""``polytile.set_allocator``: where kernels get their global scratch at launch.

A kernel may need device memory of its own for one launch (see
:mod:`polytile.gpu.global_scratch`): a tensor map that ``pl.make_tensor_descriptor``
builds on Hopper, say.  As in Triton, the user provides it::

    def alloc(size: int, alignment: int, stream):
        return torch.empty(size, dtype=torch.int8, device="cuda")

    polytile.set_allocator(alloc)

The allocator is called once per launch of such a kernel with the bytes the whole grid
needs, the alignment they need, and the stream a launcher was given (``kernel[grid](...)``
gives None: it launches on the caller's stream, PyTorch's current one when an argument is
a torch tensor).  It returns a
device array (anything a pointer argument accepts: a torch tensor, a CuPy array, an
object with ``__cuda_array_interface__``) of at least ``size`` bytes at an address that
is a multiple of ``alignment``; it must stay valid until the kernel has run on that
stream, which PyTorch's caching allocator guarantees for the launch's stream.  Kernels
that need no scratch never call it.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from ..errors import LaunchError

#: ``alloc(size, alignment, stream) -> device array``, or None (none set).
_allocator: Callable[[int, int, Any], Any] | None = None

_EXAMPLE = ("polytile.set_allocator(lambda size, alignment, stream: "
            "torch.empty(size, dtype=torch.int8, device='cuda'))")


def set_allocator(allocator: Callable[[int, int, Any], Any] | None) -> None:
    """Set the function that gives kernels their global scratch at launch (Triton's
    ``triton.set_allocator``): ``allocator(size, alignment, stream)`` returns a device
    array of at least ``size`` bytes, aligned to ``alignment``.  None unsets it."""
    global _allocator
    if allocator is not None and not callable(allocator):
        raise TypeError(f"polytile.set_allocator takes a function (size, alignment, stream) -> device array, "
                        f"or None; got {type(allocator).__name__}")
    _allocator = allocator


def get_allocator() -> Callable[[int, int, Any], Any] | None:
    """The allocator :func:`set_allocator` set, or None."""
    return _allocator


def allocate(kernel: str, needs: str, bytes_per_program: int, alignment: int, programs: int,
             stream: Any = None) -> tuple[Any, int]:
    """The launch's global scratch for ``programs`` programs: ``(memory, address)`` from
    the allocator, checked (a LaunchError naming ``kernel`` otherwise).  The native
    dispatcher calls it too (through :func:`scratch_allocation`)."""
    allocator = _allocator
    if allocator is None:
        raise LaunchError(f"kernel '{kernel}' needs {bytes_per_program} bytes of global scratch memory per "
                          f"program (for {needs}) and no allocator is set; set one before launching it: "
                          f"{_EXAMPLE}")
    size = bytes_per_program * programs
    memory = allocator(size, alignment, stream)
    address = _address(memory, kernel, size)
    if address % alignment:
        raise LaunchError(f"kernel '{kernel}': the allocator set with polytile.set_allocator returned memory "
                          f"at 0x{address:x}, which is not a multiple of the {alignment} bytes it asked for")
    return memory, address


def scratch_allocation(kernel: str, bytes_per_program: int, alignment: int, users: list) -> Any:
    """``allocation(programs) -> (memory, address)`` for one compiled kernel."""
    return functools.partial(allocate, kernel, "; ".join(users) or "its global scratch", bytes_per_program,
                             alignment)


def scratch_launcher(launcher: Any, kernel: str, bytes_per_program: int, alignment: int, users: list) -> Any:
    """``launcher(grid, args, stream=None)`` wrapped to pass the launch's global scratch
    (``bytes_per_program`` for each program of the grid) as the kernel's last parameter."""
    allocation = scratch_allocation(kernel, bytes_per_program, alignment, users)

    def launch(grid: Any, args: Any, stream: Any = None) -> None:
        gx, gy, gz = grid
        programs = gx * gy * gz
        memory = allocation(programs, stream)[0] if programs > 0 else None
        if stream is None:
            launcher(grid, [*args, memory])
        else:
            launcher(grid, [*args, memory], stream)

    launch.allocation = allocation  # type: ignore[attr-defined]  (what a native dispatcher calls)
    return launch


def _address(memory: Any, kernel: str, size: int) -> int:
    """The device address of what the allocator returned, checked for size where the
    object says it."""
    data_ptr = getattr(memory, "data_ptr", None)
    if callable(data_ptr):
        nbytes = getattr(memory, "nbytes", None)
        if isinstance(nbytes, int) and nbytes < size:
            raise LaunchError(f"kernel '{kernel}': the allocator set with polytile.set_allocator returned "
                              f"{nbytes} bytes where {size} were asked for")
        return int(data_ptr())
    interface = getattr(memory, "__cuda_array_interface__", None)
    if isinstance(interface, dict) and "data" in interface:
        return int(interface["data"][0])
    raise LaunchError(f"kernel '{kernel}': the allocator set with polytile.set_allocator returned "
                      f"{type(memory).__name__}; it must return a device array (a torch tensor, say: {_EXAMPLE})")


__all__ = ["allocate", "get_allocator", "scratch_allocation", "scratch_launcher", "set_allocator"]
