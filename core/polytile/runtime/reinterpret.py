"""``polytile.reinterpret(tensor, dtype)``: the same memory, passed to kernels as another
element type (Triton's ``triton.reinterpret`` and ``TensorWrapper``).

torch has no (full) unsigned integer types, so Triton's users hand kernels a signed
tensor seen as unsigned: ``reinterpret(torch.tensor(x.astype(np.int32)), pl.uint32)``.
The kernel's pointer parameter then has the new element type; nothing is copied or
converted.  The wrapped memory is ``base``'s: a torch tensor (CPU or GPU) or a NumPy
array.  A dtype of the same size keeps its shape and strides; one of another size sees
the same (contiguous) bytes as that many elements (``numel`` and ``shape``'s last
dimension scale, where Triton's wrapper keeps the base's shape), as a C cast of the
pointer would.

The wrapper passes to kernels like the tensor it wraps: on a GPU target the backends
read the base (its address, its device, torch's current stream), with the wrapper's
``dtype``; on the interpreter, the array its ``__array_interface__`` describes (a NumPy
view of the same bytes).
"""

from __future__ import annotations

from typing import Any

#: NumPy's type strings of the element types a NumPy view can hold (the interpreter's);
#: bf16 and fp8 as raw integers of their size, which the interpreter then refuses with
#: its own reason (NumPy has no such types).
_TYPESTR = {"int1": "|b1", "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8", "uint8": "|u1",
            "uint16": "<u2", "uint32": "<u4", "uint64": "<u8", "fp16": "<f2", "fp32": "<f4", "fp64": "<f8",
            "bf16": "<u2", "fp8e4nv": "|u1", "fp8e5": "|u1"}


def _language_dtype(dtype: Any) -> Any:
    from ..language import core as lc

    dtype = lc.unwrap(dtype)
    if not isinstance(dtype, lc.dtype):
        raise TypeError(f"reinterpret needs a polytile.language dtype such as pl.uint32, got {dtype!r}")
    return dtype


class TensorWrapper:
    """``base`` (a torch tensor or a NumPy array) seen with the element type ``dtype`` (a
    ``polytile.language`` dtype).  Made by :func:`reinterpret`."""

    def __init__(self, base: Any, dtype: Any):
        if not (hasattr(base, "data_ptr") or hasattr(base, "__array_interface__")) or not hasattr(base, "shape"):
            raise TypeError(f"cannot reinterpret a {type(base).__name__}: pass a torch tensor or a NumPy array")
        self.base = base
        self.dtype = _language_dtype(dtype)
        size, old = self.element_size(), _itemsize(base)
        if size != old:
            # The bytes are cut into elements of another size: they must be contiguous and
            # the last dimension's bytes a whole number of the new elements.
            if not _contiguous(base):
                raise ValueError(f"reinterpret as {self.dtype} ({size} bytes) of elements of {old} bytes needs a "
                                 "contiguous tensor")
            shape = tuple(base.shape)
            if not shape or shape[-1] * old % size:
                raise ValueError(f"reinterpret as {self.dtype}: the last dimension of a tensor of shape "
                                 f"{list(shape)} is not a whole number of {size}-byte elements")

    # -- what kernels and Triton's tests read ------------------------------------------

    def data_ptr(self) -> int:
        from .args import data_pointer

        base = self.base
        return base.data_ptr() if hasattr(base, "data_ptr") else data_pointer(base)

    def element_size(self) -> int:
        return max(self.dtype.primitive_bitwidth // 8, 1)

    def numel(self) -> int:
        return _nbytes(self.base) // self.element_size()

    @property
    def shape(self) -> tuple:
        shape = tuple(self.base.shape)
        if not shape:
            return shape
        last = shape[-1] * _itemsize(self.base) // self.element_size()
        return (*shape[:-1], last)

    def stride(self, dim: int | None = None) -> Any:
        if self.element_size() == _itemsize(self.base):  # the same elements: the base's strides
            strides = _strides(self.base)
        else:
            strides, step = [], 1
            for size in reversed(self.shape):
                strides.append(step)
                step *= size
            strides = tuple(reversed(strides))
        return strides if dim is None else strides[dim]

    @property
    def device(self) -> Any:
        return getattr(self.base, "device", "cpu")

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 1

    def __repr__(self) -> str:
        return f"TensorWrapper[{self.dtype}]({self.base!r})"

    __str__ = __repr__

    # -- as Triton's: the same operations, kept wrapped --------------------------------

    def cpu(self) -> "TensorWrapper":
        return TensorWrapper(self.base.cpu(), self.dtype)

    def to(self, device: Any) -> "TensorWrapper":
        return TensorWrapper(self.base.to(device), self.dtype)

    def clone(self) -> "TensorWrapper":
        base = self.base
        return TensorWrapper(base.clone() if hasattr(base, "clone") else base.copy(), self.dtype)

    def copy_(self, other: "TensorWrapper") -> "TensorWrapper":
        source = other.base if isinstance(other, TensorWrapper) else other
        if hasattr(self.base, "copy_"):
            self.base.copy_(source)
        else:
            self.base[...] = source
        return self

    # -- the memory, for the interpreter (host) and array libraries -----------------------

    @property
    def __array_interface__(self) -> dict:
        typestr = _TYPESTR.get(str(self.dtype))
        if typestr is None:
            raise AttributeError(f"NumPy has no {self.dtype}: the interpreter cannot view a tensor as it")
        if getattr(self.device, "type", self.device) != "cpu":  # a torch device, or NumPy's "cpu"
            raise AttributeError("a GPU tensor's memory is not host memory")
        strides = tuple(step * self.element_size() for step in self.stride())
        return {"shape": self.shape, "typestr": typestr, "data": (self.data_ptr(), False), "version": 3,
                "strides": strides}


def reinterpret(tensor: Any, dtype: Any) -> Any:
    """``tensor``'s memory, passed to kernels with the element type ``dtype`` (Triton's
    ``triton.reinterpret``): a :class:`TensorWrapper`; a wrapper is re-wrapped around its
    base."""
    if isinstance(tensor, TensorWrapper):
        tensor = tensor.base
        if str(_language_dtype(dtype)) == _element_name(tensor):
            return tensor  # back to its own element type: the tensor itself, as Triton's
    return TensorWrapper(tensor, dtype)


def _contiguous(base: Any) -> bool:
    if hasattr(base, "is_contiguous"):
        return bool(base.is_contiguous())
    flags = getattr(base, "flags", None)
    return bool(flags is None or flags["C_CONTIGUOUS"])


def _element_name(base: Any) -> str:
    """The language name of ``base``'s element type (``int32``, ``fp16``...), or ""."""
    from ..language import core as lc

    name = str(base.dtype).rsplit(".", 1)[-1]
    found = lc.NUMPY_TO_DTYPE.get(name)
    return str(found) if found is not None else ""


def _strides(base: Any) -> tuple:
    if hasattr(base, "stride") and callable(base.stride):
        return tuple(base.stride())
    return tuple(step // base.itemsize for step in base.strides)


def _itemsize(base: Any) -> int:
    if hasattr(base, "element_size"):
        return int(base.element_size())
    return int(base.itemsize)


def _nbytes(base: Any) -> int:
    if hasattr(base, "numel"):
        return int(base.numel()) * _itemsize(base)
    return int(base.nbytes)


__all__ = ["TensorWrapper", "reinterpret"]
