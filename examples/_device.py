"""Where the examples keep their arrays: on the GPU when polytile's target is one, else NumPy.

Each example makes its inputs and its reference with NumPy.  The function that launches
the kernel moves the inputs with :func:`device`, allocates outputs with :func:`empty` and
:func:`zeros`, and returns :func:`host` of the result, so the same example runs on the
interpreter (NumPy arrays, any machine) and on a GPU (torch tensors: polytile launches
on anything with ``__cuda_array_interface__`` or DLPack; the examples use torch).

The target is chosen as for any launch (``POLYTILE_TARGET``, ``polytile.config``, the
first GPU found, else the interpreter; ``polytile info`` says which and why).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def on_gpu() -> bool:
    """Whether launches without a ``target=`` run on a GPU here."""
    from polytile.plugins.manager import get_plugin_manager

    return get_plugin_manager().choose_target().target.backend != "interp"


def _torch() -> Any:
    from polytile.plugins.manager import get_plugin_manager

    choice = get_plugin_manager().choose_target()
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        why = "torch is not installed" if torch is None else "torch sees no GPU here"
        raise SystemExit(f"polytile's target is {choice.target} ({choice.reason}), and the examples put their arrays "
                         f"on the GPU with torch, but {why}: run the example on the interpreter with "
                         "POLYTILE_TARGET=interp, or on a machine with that GPU and torch") from None
    return torch


def device(array: np.ndarray) -> Any:
    """``array`` where the kernels run: itself on the interpreter, a copy on the GPU."""
    if not on_gpu():
        return array
    return _torch().from_numpy(np.ascontiguousarray(array)).to("cuda")


def empty(shape: Any, dtype: Any) -> Any:
    """An uninitialized array where the kernels run."""
    return device(np.empty(shape, dtype)) if on_gpu() else np.empty(shape, dtype)


def zeros(shape: Any, dtype: Any) -> Any:
    """A zeroed array where the kernels run."""
    return device(np.zeros(shape, dtype))


def host(value: Any) -> np.ndarray:
    """``value`` as a NumPy array (copied back from the GPU, after the kernels finished)."""
    return value if isinstance(value, np.ndarray) else value.cpu().numpy()
