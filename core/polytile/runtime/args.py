"""Kernel arguments from other array libraries, as NumPy arrays sharing their memory.

The interpreter writes results into the arrays it is given, so every conversion here
must be a *view* of the caller's buffer, never a copy: a copy would silently drop the
kernel's output.  Accepted:

* NumPy arrays (as they are);
* torch tensors on the CPU (``tensor.numpy()``, a view); torch is never imported here,
  a tensor is recognised by its type's module, so torch stays optional;
* anything with ``__array_interface__`` (``np.asarray`` views it);
* anything with ``__dlpack__`` (``np.from_dlpack`` views it).

An argument that cannot be viewed (a tensor on a GPU, a non-contiguous tensor) is a
:class:`LaunchError` saying what to do.
"""

from __future__ import annotations

from typing import Any


def is_torch_tensor(value: Any) -> bool:
    # By the type's module, not isinstance: importing torch costs seconds and it is optional.
    cls = type(value)
    return cls.__module__.split(".", 1)[0] == "torch" and hasattr(value, "data_ptr")


def as_writable_array(kernel: str, name: str, value: Any, error: Any) -> Any:
    """``value`` as a NumPy array sharing its memory, or None if it is not array-like."""
    import numpy as np

    if isinstance(value, np.ndarray):
        array = value
    elif is_torch_tensor(value):
        array = _from_torch(kernel, name, value, error)
    elif hasattr(value, "__array_interface__"):
        array = np.asarray(value)
    elif hasattr(value, "__dlpack__"):
        try:
            array = np.from_dlpack(value)
        except (BufferError, TypeError, ValueError, RuntimeError) as exc:
            raise error(f"kernel '{kernel}': argument '{name}' ({type(value).__name__}) cannot be viewed as a "
                        f"host array through DLPack ({exc}); the interpreter needs host memory") from None
    else:
        return None
    # A read-only array is fine if the kernel only reads it; the interpreter names the
    # argument if the kernel writes it.
    return array


def _from_torch(kernel: str, name: str, tensor: Any, error: Any) -> Any:
    device = getattr(tensor, "device", None)
    if device is not None and getattr(device, "type", "cpu") != "cpu":
        raise error(f"kernel '{kernel}': argument '{name}' is a torch tensor on '{device}'; the interpreter runs "
                    "on the CPU: pass tensor.cpu() and copy the result back, or choose a GPU target")
    if hasattr(tensor, "is_contiguous") and not tensor.is_contiguous():
        raise error(f"kernel '{kernel}': argument '{name}' is a non-contiguous torch tensor; kernels address "
                    "memory as contiguous, and a contiguous copy would not receive the kernel's writes: pass "
                    "tensor.contiguous() and read the result from that")
    if getattr(tensor, "requires_grad", False):
        tensor = tensor.detach()  # same memory; .numpy() refuses tensors that need a gradient
    try:
        return tensor.numpy()
    except (RuntimeError, TypeError) as exc:
        raise error(f"kernel '{kernel}': argument '{name}' (a torch tensor) cannot be viewed as a NumPy "
                    f"array: {exc}") from None


def data_pointer(array: Any) -> int:
    """The address of an array's first element (for the 16-byte divisibility key)."""
    return array.__array_interface__["data"][0]
