"""Kernel arguments from array libraries: addresses, element types, host views.

The specialization (:mod:`.binder`) reads what it needs from the argument itself, on
whatever device it lives: the address of a NumPy array (fast, :func:`numpy_address`),
the element type and address of a DLPack object (from its capsule,
:func:`dlpack_element_and_address`).  Nothing is converted on the launch path.

The interpreter's launcher (the default :meth:`polytile.backend.Backend.make_launcher`)
then views each pointer argument as a NumPy array with :func:`as_writable_array`.  The
interpreter writes results into the arrays it is given, so every conversion must be a
*view* of the caller's buffer, never a copy: a copy would silently drop the kernel's
output.  Accepted:

* NumPy arrays (as they are);
* torch tensors on the CPU (``tensor.numpy()``, a view, strided where the tensor is: a
  kernel addresses a non-contiguous tensor through the strides it is given, as on a
  GPU); torch is never imported here, a tensor is recognised by its type's module, so
  torch stays optional;
* anything with ``__array_interface__`` (``np.asarray`` views it);
* anything with ``__dlpack__`` (``np.from_dlpack`` views it).

An argument that cannot be viewed (a tensor on a GPU) is a :class:`LaunchError` saying
what to do.
"""

from __future__ import annotations

from typing import Any, Callable


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
    if getattr(tensor, "requires_grad", False):
        tensor = tensor.detach()  # same memory; .numpy() refuses tensors that need a gradient
    try:
        return tensor.numpy()
    except (RuntimeError, TypeError) as exc:
        bits = _torch_bits(tensor)
        if bits is not None:
            return bits
        raise error(f"kernel '{kernel}': argument '{name}' (a torch tensor) cannot be viewed as a NumPy "
                    f"array: {exc}") from None


#: torch's dtypes NumPy has none for, whose bits the interpreter reads (it emulates them).
_TORCH_BITS = {"torch.bfloat16": "int16", "torch.float8_e4m3fn": "uint8", "torch.float8_e5m2": "uint8"}


def _torch_bits(tensor: Any) -> Any:
    """A bf16 or fp8 tensor's memory as a NumPy array of its bits, or None."""
    bits = _TORCH_BITS.get(str(getattr(tensor, "dtype", "")))
    if bits is None:
        return None
    import torch

    return tensor.view(getattr(torch, bits)).numpy()


def data_pointer(array: Any) -> int:
    """The address of an array's first element (for the 16-byte divisibility key)."""
    return array.__array_interface__["data"][0]


# -- NumPy addresses, fast ---------------------------------------------------------------
# ``array.ctypes.data`` and ``__array_interface__`` build objects and cost 2-3 µs, more than
# the whole launch budget.  The address is the first field of NumPy's public array struct
# (``PyArrayObject_fields.data``), right after the object header; it is read through one
# ctypes view of the address space, but only after checking, on arrays of our own, that
# the field is where we expect it (another header size, as in a free-threaded or debug
# build of Python, finds no offset and keeps the slow, documented way).


def _calibrate_numpy_address() -> Callable[[Any], int]:
    import ctypes

    import numpy as np

    slow = data_pointer
    try:
        memory = (ctypes.c_uint64 * (1 << 56)).from_address(0)
    except (ValueError, OverflowError, TypeError, MemoryError):
        return slow
    samples = [np.zeros(3, np.float32), np.arange(7, dtype=np.int64)[1:], np.ones((2, 3))[:, 1]]
    for offset in range(16, 80, 8):
        if all(memory[(id(a) + offset) >> 3] == slow(a) for a in samples):
            def address(array: Any, _memory: Any = memory, _offset: int = offset) -> int:
                return _memory[(id(array) + _offset) >> 3]

            address.offset = offset  # type: ignore[attr-defined]
            address.memory = memory  # type: ignore[attr-defined]
            return address
    return slow


_numpy_address: Callable[[Any], int] | None = None


def numpy_address() -> Callable[[Any], int]:
    """A function giving the data address of a NumPy array (or subclass), fast where it can."""
    global _numpy_address
    if _numpy_address is None:
        _numpy_address = _calibrate_numpy_address()
    return _numpy_address


# -- DLPack -----------------------------------------------------------------------------
# An object known only through ``__dlpack__`` may live on a device NumPy cannot view, so
# its element type and address are read from the capsule itself (the DLTensor at the
# start of a DLManagedTensor).  The capsule is not consumed: dropping it lets its
# producer free it, as the DLPack protocol says.

_DLPACK_STRUCTS: Any = None


def _dlpack_structs() -> Any:
    global _DLPACK_STRUCTS
    if _DLPACK_STRUCTS is None:
        import ctypes

        class DLDevice(ctypes.Structure):
            _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]

        class DLDataType(ctypes.Structure):
            _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]

        class DLTensor(ctypes.Structure):
            _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                        ("dtype", DLDataType), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                        ("byte_offset", ctypes.c_uint64)]

        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype = ctypes.c_void_p
        get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        is_valid = ctypes.pythonapi.PyCapsule_IsValid
        is_valid.restype = ctypes.c_int
        is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
        _DLPACK_STRUCTS = (DLTensor, get_pointer, is_valid)
    return _DLPACK_STRUCTS


#: DLPack type codes (``DLDataTypeCode``) and bits -> NumPy-style names.
_DLPACK_NAMES = {(0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64", (1, 8): "uint8",
                 (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64", (2, 16): "float16", (2, 32): "float32",
                 (2, 64): "float64", (4, 16): "bfloat16", (6, 8): "bool"}


def dlpack_element_and_address(value: Any) -> tuple[str, int]:
    """The element type's name (``"float32"``; ``"dlpack(code,bits,lanes)"`` when no name
    fits) and the address of the first element of an object with ``__dlpack__``."""
    tensor_type, get_pointer, is_valid = _dlpack_structs()
    capsule = value.__dlpack__()
    if not is_valid(capsule, b"dltensor"):
        raise BufferError("__dlpack__() did not return a 'dltensor' capsule")
    tensor = tensor_type.from_address(get_pointer(capsule, b"dltensor"))
    dtype = tensor.dtype
    name = _DLPACK_NAMES.get((dtype.code, dtype.bits)) if dtype.lanes == 1 else None
    address = (tensor.data or 0) + tensor.byte_offset
    del tensor, capsule
    return name or f"dlpack({dtype.code},{dtype.bits},{dtype.lanes})", address


# -- autotuning trials --------------------------------------------------------------------


class SavedArgument:
    """An argument's contents, taken before autotuning trials, to put back between them
    (and to zero, for ``reset_to_zero``).  Works on the argument itself, wherever its
    memory is: NumPy views (host arrays, CPU torch tensors, array-interface and DLPack
    objects), torch tensors on any device (``clone``/``copy_``), and arrays with a NumPy
    interface on a device (CuPy: ``copy()`` and ``a[...] = b``)."""

    def __init__(self, kernel: str, name: str, value: Any, error: Any, keep: bool = True):
        self.value = value
        from .binder import adapter_of

        adapter = adapter_of(value)
        if adapter is not None:  # a plugin's argument (a tensor descriptor): the array it writes through
            stored = adapter.storage(value)
            if stored is None:
                raise error(f"kernel '{kernel}': argument '{name}' ({type(value).__name__}) writes memory its plugin "
                            "cannot name, so it cannot be saved and put back between autotuning trials")
            value = stored
        self._torch = is_torch_tensor(value) and hasattr(value, "copy_") and hasattr(value, "clone")
        if self._torch:
            self._target = value
        elif hasattr(value, "__cuda_array_interface__") and hasattr(value, "copy"):
            self._target = value
        else:
            array = as_writable_array(kernel, name, value, error)
            if array is None:
                raise error(f"kernel '{kernel}': argument '{name}' ({type(value).__name__}) cannot be saved and put "
                            "back between autotuning trials")
            self._target = array
        self._copy = None
        if keep:
            self._copy = self._target.clone() if self._torch else self._target.copy()

    def restore(self) -> None:
        if self._torch:
            self._target.copy_(self._copy)
        else:
            self._target[...] = self._copy

    def zero(self) -> None:
        if self._torch:
            self._target.zero_()
        else:
            self._target[...] = 0


# --------------------------------------------------------------------------------------
# Host-side helpers every GPU launcher needs (vendor-neutral; backends call these).


def bf16_bits(value: Any) -> int:
    """The bfloat16 bits of a Python number, rounded to nearest even as torch and the
    hardware round; NaN is the canonical quiet NaN (0x7FC0: rounding a NaN's f32 bits
    could carry into the sign and give -0.0).  OverflowError beyond the f32 range."""
    import math
    import struct

    if isinstance(value, (str, bytes)):
        raise TypeError("not a number")
    number = float(value)
    if math.isnan(number):
        return 0x7FC0
    bits = struct.unpack("<I", struct.pack("<f", number))[0]
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


_current_raw_stream: Callable[[int], int] | None = None


def torch_stream_function() -> Callable[[int], int] | None:
    """``device -> PyTorch's current raw stream there`` once torch is imported (the
    function :func:`torch_current_stream` calls; a launcher may call it directly), else
    None.  torch is never imported here."""
    global _current_raw_stream
    if _current_raw_stream is None:
        import sys

        torch = sys.modules.get("torch")
        if torch is None:
            return None
        raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
        # The private call skips building a Stream object on every launch.
        _current_raw_stream = raw if raw is not None else (lambda d: torch.cuda.current_stream(d).cuda_stream)
    return _current_raw_stream


def torch_current_stream(device: int) -> int:
    """PyTorch's current stream on ``device`` as a raw handle (CUDA, and ROCm builds of
    torch, which keep the ``torch.cuda`` names), or 0 (the default stream) when torch is
    not imported."""
    function = _current_raw_stream or torch_stream_function()
    return 0 if function is None else function(device)
