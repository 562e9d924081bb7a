"""Kernel arguments as cuLaunchKernel wants them, packed by a plan built once.

cuLaunchKernel takes an array of pointers, one per parameter, each to that argument's
bytes.  An :class:`ArgumentPacker` is built once per compiled specialization: it lays the
parameters out in one buffer (each at its natural alignment), points a fixed array at
them, and compiles one ``struct.Struct`` for the whole layout.  A launch then writes all
arguments with a single ``pack_into`` into the same memory; nothing is allocated for the
arguments and ``params_address`` never changes.  ``struct`` also checks the scalars (an
out-of-range integer, a string for a float); only when it fails are the arguments looked
at one by one, to name the culprit.

Pointer arguments are read by the kind of object, chosen once per Python type:

* torch tensors: ``data_ptr()`` and ``get_device()`` (torch is never imported here);
* CuPy arrays: ``data.ptr`` and ``device.id``;
* anything with ``__cuda_array_interface__``: ``["data"][0]``; the driver says which
  device holds it (``cuPointerGetAttribute``), and that memory is device memory at all;
* anything with ``__dlpack__``: ``__dlpack_device__()`` must be a CUDA device; the
  address is read from the DLPack capsule;
* ``None``: a null pointer.

A parameter whose IR type has ``by_value = (size, alignment)`` (a TMA tensor map, say)
takes a ``bytes`` (or ``bytearray``) object of exactly ``size`` bytes, copied into the
argument bytes as they are.  The host side keeps it 8-aligned: cuLaunchKernel copies each
argument through its pointer, and where it lands on the device is the kernel's business.

A kernel runs on the device that holds its arguments: the first pointer argument with a
device decides, and every other must be on the same one.
"""

from __future__ import annotations

import ctypes
import operator
import struct
from typing import Any, Callable, NamedTuple, Sequence

from polytile.errors import LaunchError
from polytile.ir.types import FloatType, IntType, PointerType, Type
from polytile.runtime.args import bf16_bits
from polytile.runtime.launcher import argument_count_error, mixed_devices_error

#: Where a pointer argument lives, besides a device index: nowhere (a null pointer) ...
ANY_DEVICE = -1
#: ... or somewhere only the driver can tell (``__cuda_array_interface__`` memory).
ASK_DRIVER = -2


#: The scalar struct codes the native launcher packs itself, and its limits (_launch.c).
_NATIVE_SCALAR_CODES = frozenset("bBhHiIqQefd")
#: The one by-value size the native launcher packs itself (code "M"): a CUtensorMap.
_NATIVE_BLOB_BYTES = 128
_NATIVE_MAX_BYTES = 32768
_NATIVE_MAX_ARGUMENTS = 1024


class ArgumentProblem(Exception):
    """Raised by a pointer reader; the packer adds the kernel and the argument's name."""


class ParameterKind(NamedTuple):
    """How one parameter type is stored in the argument buffer.

    ``code`` is a ``struct`` format code (``"i"``, ``"Q"``, ``"128s"``); ``convert``, when
    given, turns the Python value into what ``code`` packs (bf16 bits, say) and raises
    ValueError, TypeError or OverflowError for a value it cannot take; ``takes`` says in
    words what the parameter accepts, for error messages.  ``by_value``: opaque bytes
    passed as they are (an IR type's ``by_value``), kept 8-aligned in the buffer.
    """

    code: str
    takes: str
    convert: Callable[[Any], Any] | None = None
    pointer: bool = False
    by_value: bool = False

    @property
    def size(self) -> int:
        return struct.calcsize("<" + self.code)

    @property
    def alignment(self) -> int:
        return 8 if self.by_value else min(self.size, 8)


_INT_CODES = {(8, True): "b", (16, True): "h", (32, True): "i", (64, True): "q",
              (8, False): "B", (16, False): "H", (32, False): "I", (64, False): "Q"}
_F16_MAX = 65504.0
_F32_MAX = 3.4028234663852886e38


def _to_i1(value: Any) -> int:
    if isinstance(value, bool) or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_")):
        return 1 if value else 0
    number = operator.index(value)
    if number not in (0, 1):
        raise ValueError("out of range")
    return number


def _int_kind(type_: Type) -> ParameterKind:
    assert isinstance(type_, IntType)
    if type_.width == 1:
        return ParameterKind("B", "True, False, 0 or 1", _to_i1)
    bits = type_.width
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if type_.signed else (0, (1 << bits) - 1)
    return ParameterKind(_INT_CODES[bits, type_.signed], f"an integer from {low} to {high}")


def _float_kind(type_: Type) -> ParameterKind:
    assert isinstance(type_, FloatType)
    kind = type_.kind
    if kind == "f16":
        return ParameterKind("e", f"a number of magnitude at most {_F16_MAX:g}")
    if kind == "bf16":
        return ParameterKind("H", f"a number of magnitude at most {_F32_MAX:g}", bf16_bits)
    if kind == "f32":
        return ParameterKind("f", f"a number of magnitude at most {_F32_MAX:g}")
    if kind == "f64":
        return ParameterKind("d", "a number")
    raise LaunchError(f"scalar parameters of type {kind} are not supported; pass the value as f16, bf16 or f32 "
                      "and convert it inside the kernel")


_POINTER_TAKES = ("a GPU array: a torch tensor on a GPU, a CuPy array, an object with __cuda_array_interface__ "
                  "or __dlpack__, or None")


def _pointer_kind(type_: Type) -> ParameterKind:
    return ParameterKind("Q", _POINTER_TAKES, pointer=True)


#: How each IR type class becomes kernel-argument bytes; plugins add theirs with
#: :func:`register_parameter_kind` (a tensor descriptor passed by value, say).
PARAMETER_KINDS: dict[type, Callable[[Type], ParameterKind]] = {
    IntType: _int_kind,
    FloatType: _float_kind,
    PointerType: _pointer_kind,
}


def _by_value_kind(by_value: Any) -> ParameterKind:
    """The kind of a parameter passed as ``size`` opaque bytes (``by_value = (size,
    alignment)``): ``struct``'s ``"Ns"`` pads or truncates silently, so the conversion
    checks the length itself."""
    try:
        size, _alignment = (operator.index(v) for v in by_value)
    except (TypeError, ValueError):
        raise LaunchError(f"its type's by_value is {by_value!r}, not (size, alignment)") from None
    if size <= 0:
        raise LaunchError(f"its type's by_value size is {size}; it must be positive")

    def exact_bytes(value: Any) -> Any:
        if isinstance(value, (bytes, bytearray)) and len(value) == size:
            return value
        raise ValueError(f"not {size} bytes")

    return ParameterKind(f"{size}s", f"a bytes object of exactly {size} bytes", exact_bytes, by_value=True)


def register_parameter_kind(type_class: type, factory: Callable[[Type], ParameterKind]) -> None:
    """Let kernels take parameters of ``type_class`` (an IR type class); ``factory``
    returns the :class:`ParameterKind` for one such type."""
    PARAMETER_KINDS[type_class] = factory


def parameter_kind(kernel: str, name: str, type_: Type) -> ParameterKind:
    factory = PARAMETER_KINDS.get(type(type_))
    by_value = getattr(type_, "by_value", None) if factory is None else None
    if factory is None and by_value is None:
        raise LaunchError(f"kernel '{kernel}': parameter '{name}' has type {type_}, which the NVIDIA launcher cannot "
                          "pass (known: integers, floats, pointers, types passed by value, and types plugins "
                          "register)")
    try:
        return factory(type_) if factory is not None else _by_value_kind(by_value)
    except LaunchError as exc:
        raise LaunchError(f"kernel '{kernel}': parameter '{name}': {exc}") from None


class ArgumentPacker:
    """The argument buffer and packing plan of one compiled kernel.

    ``parameters`` are ``(name, IR type)`` pairs of the run-time parameters, in order.
    ``device_of_pointer(address) -> int | None`` asks the driver where memory lives
    (used for ``__cuda_array_interface__`` arguments; defaults to the CUDA driver).
    """

    def __init__(self, kernel: str, parameters: Sequence[tuple[str, Type]], *,
                 device_of_pointer: Callable[[int], int | None] | None = None):
        self.kernel = kernel
        self.names = tuple(name for name, _ in parameters)
        self.types = tuple(type_ for _, type_ in parameters)
        self.kinds = tuple(parameter_kind(kernel, name, type_) for name, type_ in parameters)
        fmt, offsets, size = "<", [], 0
        for kind in self.kinds:
            padding = -size % kind.alignment
            fmt += "x" * padding + kind.code
            size += padding
            offsets.append(size)
            size += kind.size
        self.offsets = tuple(offsets)
        self.size = size
        self._struct = struct.Struct(fmt)
        assert self._struct.size == size
        # uint64 storage: every value starts at its natural alignment from an 8-aligned base.
        self.buffer = (ctypes.c_uint64 * max(1, -(-size // 8)))()
        base = ctypes.addressof(self.buffer)
        self.pointers = (ctypes.c_void_p * max(1, len(offsets)))(*(base + offset for offset in offsets))
        #: What cuLaunchKernel takes as kernelParams; fixed for the packer's lifetime.
        self.params_address = ctypes.addressof(self.pointers) if offsets else 0
        self._pointer_slots = tuple((i, self.names[i]) for i, kind in enumerate(self.kinds) if kind.pointer)
        self._converted = tuple((i, kind.convert) for i, kind in enumerate(self.kinds) if kind.convert is not None)
        self._values: list[Any] = [0] * len(self.kinds)
        self._device_of_pointer = device_of_pointer

    def pack(self, args: Sequence[Any]) -> tuple[int, bool]:
        """Write ``args`` into the buffer; return ``(device, any_torch_tensor)``.

        ``device`` is the index of the device holding the pointer arguments, or
        :data:`ANY_DEVICE` when none says (only None pointers, or no pointers).
        """
        values = self._values
        if len(args) != len(values):
            raise self._count_error(args)
        values[:] = args
        device = ANY_DEVICE
        first = ""
        torch = False
        for index, name in self._pointer_slots:
            value = values[index]
            reader = _READERS.get(type(value)) or _reader_for(value)
            try:
                address, where = reader(value)
                if where == ASK_DRIVER:
                    where = self._ask_driver(address)
            except ArgumentProblem as exc:
                raise LaunchError(f"kernel '{self.kernel}': argument '{name}' {exc}") from None
            if where >= 0:
                if device < 0:
                    device, first = where, name
                elif where != device:
                    raise mixed_devices_error(self.kernel, name, where, first, device, "cuda:{}")
            torch = torch or reader is _read_torch or (reader is _read_wrapped and _is_torch(value.base))
            values[index] = address
        if self._converted:
            for index, convert in self._converted:
                try:
                    values[index] = convert(values[index])
                except (ValueError, TypeError, OverflowError):
                    raise self._scalar_error(index, args[index]) from None
        try:
            self._struct.pack_into(self.buffer, 0, *values)
        except (struct.error, OverflowError, TypeError, ValueError):
            raise self._explain(args) from None
        return device, torch

    def native_codes(self) -> tuple[str, ...] | None:
        """Each parameter's code in the native launcher (``"P"`` a pointer, ``"?"`` a
        bool, ``"M"`` 128 bytes passed by value, else a ``struct`` code), or None when a
        parameter is of a kind only :meth:`pack` handles (bf16, plugin kinds, by-value
        bytes of another size) or the arguments exceed its limits."""
        codes = []
        for kind in self.kinds:
            if kind.pointer:
                codes.append("P")
            elif kind.by_value and kind.size == _NATIVE_BLOB_BYTES:
                codes.append("M")
            elif kind.convert is _to_i1:
                codes.append("?")
            elif kind.convert is None and kind.code in _NATIVE_SCALAR_CODES:
                codes.append(kind.code)
            else:
                return None
        if self.size > _NATIVE_MAX_BYTES or len(codes) > _NATIVE_MAX_ARGUMENTS:
            return None
        return tuple(codes)

    def native_plan(self, block: int, shared: int) -> bytes | None:
        """The layout the native launcher packs by (see ``_launch.c``), or None (see
        :meth:`native_codes`)."""
        codes = self.native_codes()
        if codes is None:
            return None
        slots = b"".join(struct.pack("<B3xI", ord(code), offset) for code, offset in zip(codes, self.offsets))
        return struct.pack("<4I", block, shared, self.size, len(codes)) + slots

    def default_bytes(self, defaults: dict[int, Any]) -> bytes | None:
        """The argument bytes with ``defaults`` (parameter index -> value) packed and
        zeros elsewhere, or None when a value does not fit its parameter."""
        buffer = bytearray(self.size)
        for index, value in defaults.items():
            kind = self.kinds[index]
            try:
                struct.pack_into("<" + kind.code, buffer, self.offsets[index],
                                 kind.convert(value) if kind.convert is not None else value)
            except (struct.error, OverflowError, TypeError, ValueError):
                return None
        return bytes(buffer)

    def packed_bytes(self) -> bytes:
        """The buffer's bytes as the last :meth:`pack` left them."""
        return ctypes.string_at(ctypes.addressof(self.buffer), self.size)

    def _ask_driver(self, address: int) -> int:
        if self._device_of_pointer is None:
            from .driver import device_of_pointer

            self._device_of_pointer = device_of_pointer
        where = self._device_of_pointer(address)
        if where is None:
            raise ArgumentProblem(f"points to {address:#x}, which is not GPU memory (the CUDA driver does not know "
                                  "it): pass an array allocated on the GPU")
        return where

    def _count_error(self, args: Sequence[Any]) -> LaunchError:
        return argument_count_error(self.kernel, self.names, len(args))

    def _scalar_error(self, index: int, value: Any) -> LaunchError:
        name, type_, kind = self.names[index], self.types[index], self.kinds[index]
        if isinstance(value, (bytes, bytearray, memoryview)):
            shown = f"of {memoryview(value).nbytes} bytes"
        else:
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        return LaunchError(f"kernel '{self.kernel}': argument '{name}' is {type(value).__name__} {shown}, but "
                           f"parameter '{name}' is {type_}, which takes {kind.takes}")

    def _explain(self, args: Sequence[Any]) -> LaunchError:
        for index, kind in enumerate(self.kinds):
            if kind.pointer:
                continue
            try:
                value = kind.convert(args[index]) if kind.convert else args[index]
                struct.pack("<" + kind.code, value)
            except (struct.error, OverflowError, TypeError, ValueError):
                return self._scalar_error(index, args[index])
        return LaunchError(f"kernel '{self.kernel}': the arguments could not be packed "
                           f"({', '.join(f'{n}={type(a).__name__}' for n, a in zip(self.names, args))})")


# -- pointer readers -------------------------------------------------------------------
# Each takes the argument and returns (address, device index | ANY_DEVICE | ASK_DRIVER),
# or raises ArgumentProblem with the rest of a sentence that starts "argument 'x' ...".

_GPU_ARRAY_HINT = "a GPU kernel needs GPU memory"


def _read_torch(value: Any) -> tuple[int, int]:
    if not value.is_cuda:
        raise ArgumentProblem(f"is a torch tensor on '{value.device}'; {_GPU_ARRAY_HINT}: pass tensor.cuda()")
    return value.data_ptr(), value.get_device()


def _read_cupy(value: Any) -> tuple[int, int]:
    return value.data.ptr, value.device.id


def _read_cai(value: Any) -> tuple[int, int]:
    try:
        address = int(value.__cuda_array_interface__["data"][0])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ArgumentProblem(f"({type(value).__name__}) has a malformed __cuda_array_interface__ ({exc})") from None
    return address, ASK_DRIVER if address else ANY_DEVICE


#: DLPack device types (DLDeviceType) that are GPU memory the kernel can read.
_DLPACK_CUDA = 2
_DLPACK_CUDA_HOST = 3
_DLPACK_CUDA_MANAGED = 13
_DLPACK_DEVICE_NAMES = {1: "the CPU", 4: "an OpenCL device", 7: "a Vulkan device", 8: "a Metal device",
                        9: "a VPI device", 10: "a ROCm GPU", 11: "ROCm host memory", 12: "an extension device",
                        14: "a oneAPI device", 15: "a WebGPU device", 16: "a Hexagon device", 17: "a MAIA device"}


def _read_dlpack(value: Any) -> tuple[int, int]:
    device_type, device_id = value.__dlpack_device__()
    device_type, device_id = int(device_type), int(device_id)
    if device_type not in (_DLPACK_CUDA, _DLPACK_CUDA_MANAGED, _DLPACK_CUDA_HOST):
        where = _DLPACK_DEVICE_NAMES.get(device_type, f"DLPack device type {device_type}")
        raise ArgumentProblem(f"({type(value).__name__}) lives on {where}; {_GPU_ARRAY_HINT}: move it to a "
                              "CUDA device first")
    address = dlpack_data_pointer(value.__dlpack__())
    if device_type == _DLPACK_CUDA_HOST:
        return address, ASK_DRIVER if address else ANY_DEVICE
    return address, device_id


def _read_none(value: Any) -> tuple[int, int]:
    return 0, ANY_DEVICE


def _reject_numpy(value: Any) -> tuple[int, int]:
    raise ArgumentProblem(f"is a NumPy array, in host memory; {_GPU_ARRAY_HINT}: pass torch.as_tensor(array, "
                          "device='cuda') or cupy.asarray(array), and copy results back from it")


def _reject(value: Any) -> tuple[int, int]:
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    raise ArgumentProblem(f"is {type(value).__name__} {shown}, but the parameter is a pointer, which takes "
                          f"{_POINTER_TAKES}")


def _is_torch(value: Any) -> bool:
    return type(value).__module__.split(".", 1)[0] == "torch"


def _read_wrapped(value: Any) -> tuple[int, int]:
    """A ``polytile.reinterpret`` wrapper: read as the tensor it wraps (a torch base makes
    the launch use torch's current stream, as the tensor would)."""
    base = value.base
    return (_READERS.get(type(base)) or _reader_for(base))(base)


def _reader_for(value: Any) -> Callable[[Any], tuple[int, int]]:
    """The reader for ``value``'s type, cached when the type alone decides it."""
    from polytile.runtime.reinterpret import TensorWrapper

    cls = type(value)
    module = cls.__module__.split(".", 1)[0]
    if value is None:
        reader = _read_none
    elif cls is TensorWrapper:
        reader = _read_wrapped
    elif module == "torch" and hasattr(cls, "data_ptr"):
        reader = _read_torch
        TORCH_TYPES.append(cls)
    elif module == "cupy" and hasattr(cls, "data") and hasattr(cls, "device"):
        reader = _read_cupy
    elif hasattr(cls, "__cuda_array_interface__"):
        reader = _read_cai
    elif module == "numpy":
        reader = _reject_numpy
    elif hasattr(cls, "__dlpack_device__") and hasattr(cls, "__dlpack__"):
        reader = _read_dlpack
    elif hasattr(value, "__cuda_array_interface__"):  # set on the instance: decide per object
        return _read_cai
    elif hasattr(value, "__dlpack_device__") and hasattr(value, "__dlpack__"):
        return _read_dlpack
    else:
        return _reject
    _READERS[cls] = reader
    return reader


_READERS: dict[type, Callable[[Any], tuple[int, int]]] = {}
#: The torch tensor classes seen so far, which the native launcher may read itself.
TORCH_TYPES: list[type] = []


# -- DLPack ----------------------------------------------------------------------------


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

_CAPSULE_LAYOUTS = {b"dltensor": _DLManagedTensor, b"dltensor_versioned": _DLManagedTensorVersioned}


def dlpack_data_pointer(capsule: Any) -> int:
    """The address of the first element of the tensor a DLPack capsule describes.

    The capsule is read, not consumed: its name is left alone, so that its destructor
    frees the description when the capsule goes (the memory itself stays the producer's).
    """
    name = _capsule_name(capsule)
    layout = _CAPSULE_LAYOUTS.get(name)
    if layout is None:
        raise ArgumentProblem(f"gave a DLPack capsule named {name!r}, which is not an unused DLPack tensor")
    managed = layout.from_address(_capsule_pointer(capsule, name))
    tensor = managed.dl_tensor
    return (tensor.data or 0) + tensor.byte_offset
