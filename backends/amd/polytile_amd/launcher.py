"""Launching a compiled AMD kernel: ``launcher(grid, args)``.

The arguments go to ``hipModuleLaunchKernel`` as one kernarg buffer
(``HIP_LAUNCH_PARAM_BUFFER_POINTER``), each at the offset the code object's metadata
declares for it; the runtime adds the hidden arguments after them.  The buffer, the
struct that fills it and the ``extra`` array pointing at it are built once per compiled
kernel (:class:`KernargPacker`); a launch is one ``pack_into``.  The module is loaded on
a device the first time the kernel runs there.

Pointer arguments: torch tensors (ROCm builds call their GPU "cuda"), objects with
``__cuda_array_interface__`` (CuPy on ROCm; HIP says which device holds the memory), and
``None`` (a null pointer).  The kernel runs on the device holding its pointer arguments,
else on the current one.  LDS is static (in the code object), so launches ask for none.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any, Callable, Sequence

from polytile.errors import LaunchError
from polytile.ir.types import FloatType, IntType, PointerType, Type
from polytile.runtime.args import bf16_bits
from polytile.runtime.launcher import LauncherBase, argument_count_error, mixed_devices_error

from . import driver
from .codeobject import KernelInfo, read_code_object

#: hipModuleLaunchKernel's ``extra`` markers.
HIP_LAUNCH_PARAM_BUFFER_POINTER = 0x01
HIP_LAUNCH_PARAM_BUFFER_SIZE = 0x02
HIP_LAUNCH_PARAM_END = 0x03
MAX_GRID = (2**31 - 1, 65535, 65535)
ANY_DEVICE = -1

_INT_CODES = {(8, True): "b", (16, True): "h", (32, True): "i", (64, True): "q",
              (8, False): "B", (16, False): "H", (32, False): "I", (64, False): "Q"}
_FLOAT_CODES = {"f16": "e", "f32": "f", "f64": "d"}


def _code(kernel: str, name: str, type_: Type) -> tuple[str, Callable[[Any], Any] | None]:
    """The struct code of a parameter, and a conversion of the Python value if needed."""
    if isinstance(type_, PointerType):
        return "Q", None
    if isinstance(type_, IntType):
        if type_.width == 1:
            return "B", lambda v: 1 if v else 0
        return _INT_CODES[type_.width, type_.signed], None
    if isinstance(type_, FloatType):
        if type_.kind == "bf16":
            return "H", bf16_bits
        if type_.kind in _FLOAT_CODES:
            return _FLOAT_CODES[type_.kind], None
    raise LaunchError(f"kernel '{kernel}': parameter '{name}' has type {type_}, which the AMD launcher cannot pass")


class KernargPacker:
    """The kernarg buffer of one kernel, laid out as its code object declares."""

    def __init__(self, kernel: str, parameters: Sequence[tuple[str, Type]], info: KernelInfo):
        self.kernel = kernel
        self.names = tuple(name for name, _ in parameters)
        declared = info.explicit_arguments
        if len(declared) != len(parameters):
            raise LaunchError(f"kernel '{kernel}': the code object declares {len(declared)} arguments but the kernel "
                              f"has {len(parameters)} run-time parameters ({', '.join(self.names) or 'none'}); "
                              "the cached binary does not belong to this kernel: clear the cache")
        fmt, position, converts, pointers = "<", 0, [], []
        for index, ((name, type_), slot) in enumerate(zip(parameters, declared)):
            code, convert = _code(kernel, name, type_)
            if struct.calcsize("<" + code) != slot.size or slot.offset < position:
                raise LaunchError(f"kernel '{kernel}': parameter '{name}' ({type_}) packs into "
                                  f"{struct.calcsize('<' + code)} bytes at offset {position} or later, but the code "
                                  f"object declares {slot.size} bytes at offset {slot.offset}")
            fmt += "x" * (slot.offset - position) + code
            position = slot.offset + slot.size
            if convert is not None:
                converts.append((index, convert))
            if isinstance(type_, PointerType):
                pointers.append((index, name))
        self.offsets = tuple(slot.offset for slot in declared)
        self.size = position
        self._struct = struct.Struct(fmt)
        self.buffer = (ctypes.c_uint64 * max(1, -(-self.size // 8)))()
        self._size = ctypes.c_size_t(self.size)
        self.extra = (ctypes.c_void_p * 5)(HIP_LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(self.buffer),
                                           HIP_LAUNCH_PARAM_BUFFER_SIZE, ctypes.addressof(self._size),
                                           HIP_LAUNCH_PARAM_END)
        #: What hipModuleLaunchKernel takes as ``extra``; fixed for the packer's lifetime.
        self.extra_address = ctypes.addressof(self.extra)
        self._pointers = tuple(pointers)
        self._converts = tuple(converts)
        self._values: list[Any] = [0] * len(parameters)

    def pack(self, args: Sequence[Any], device_of_pointer: Callable[[int], int | None]) -> tuple[int, bool]:
        """Write ``args`` into the buffer; return the device of the pointer arguments
        (:data:`ANY_DEVICE` when none says) and whether one is a torch tensor."""
        values = self._values
        if len(args) != len(values):
            raise argument_count_error(self.kernel, self.names, len(args))
        values[:] = args
        device, first, torch = ANY_DEVICE, "", False
        for index, name in self._pointers:
            value = values[index]
            address, where, from_torch = _pointer(self.kernel, name, value, device_of_pointer)
            if where >= 0:
                if device < 0:
                    device, first = where, name
                elif where != device:
                    raise mixed_devices_error(self.kernel, name, where, first, device, "GPU {}")
            torch = torch or from_torch
            values[index] = address
        try:
            for index, convert in self._converts:
                values[index] = convert(values[index])
            self._struct.pack_into(self.buffer, 0, *values)
        except (struct.error, OverflowError, TypeError, ValueError) as exc:
            raise LaunchError(f"kernel '{self.kernel}': the arguments could not be packed: {exc} "
                              f"({', '.join(f'{n}={type(a).__name__}' for n, a in zip(self.names, args))})") from None
        return device, torch

    def packed_bytes(self) -> bytes:
        return ctypes.string_at(ctypes.addressof(self.buffer), self.size)


def _pointer(kernel: str, name: str, value: Any,
             device_of_pointer: Callable[[int], int | None]) -> tuple[int, int, bool]:
    """The address of a pointer argument, its device, and whether it is a torch tensor."""
    if value is None:
        return 0, ANY_DEVICE, False
    cls = type(value)
    if cls.__name__ == "TensorWrapper" and cls.__module__ == "polytile.runtime.reinterpret":
        value, cls = value.base, type(value.base)  # polytile.reinterpret: the tensor it wraps
    if cls.__module__.split(".", 1)[0] == "torch" and hasattr(value, "data_ptr"):
        if not value.is_cuda:
            raise LaunchError(f"kernel '{kernel}': argument '{name}' is a torch tensor on '{value.device}'; an AMD "
                              "kernel needs GPU memory: pass tensor.cuda() (ROCm builds of torch call the GPU cuda)")
        return value.data_ptr(), value.get_device(), True
    interface = getattr(value, "__cuda_array_interface__", None)
    if interface is not None:
        address = int(interface["data"][0])
        if not address:
            return 0, ANY_DEVICE, False
        where = device_of_pointer(address)
        if where is None:
            raise LaunchError(f"kernel '{kernel}': argument '{name}' points to {address:#x}, which is not GPU memory")
        return address, where, False
    raise LaunchError(f"kernel '{kernel}': argument '{name}' is {cls.__name__}, but the parameter is a pointer, which "
                      "takes a torch tensor on an AMD GPU, an array with __cuda_array_interface__ (CuPy), or None")


class Launcher(LauncherBase):
    """Launches one compiled kernel; call it as ``launcher((gx, gy, gz), args)``.

    The device, module-per-device, grid and stream handling are
    :class:`~polytile.runtime.launcher.LauncherBase`'s; this class packs the kernarg
    buffer and calls HIP.
    """

    runtime_name = "HIP"
    block_word = "workgroups"
    max_grid = MAX_GRID

    def __init__(self, hsaco: bytes, kernel_name: str, parameters: Sequence[tuple[str, Type]], *,
                 num_warps: int, warp_size: int):
        self.block = num_warps * warp_size
        if not 1 <= self.block <= 1024:
            raise LaunchError(f"kernel '{kernel_name}': num_warps={num_warps} gives a workgroup of {self.block} "
                              "work-items; a workgroup holds 1 to 1024")
        super().__init__(kernel_name, [name for name, _ in parameters])
        self.hsaco = bytes(hsaco)
        self.info = read_code_object(self.hsaco).kernel(kernel_name)
        self.packer = KernargPacker(kernel_name, parameters, info=self.info)
        self._extra = self.packer.extra_address

    def _pack(self, args: Sequence[Any]) -> tuple[int, bool]:
        return self.packer.pack(args, driver.device_of_pointer)

    def _current_device(self) -> int:
        return driver.current_device()

    def _load(self, device: int) -> Any:
        return driver.load_module(self.hsaco, device=device, name=self.kernel_name).function(self.kernel_name).handle

    def _launch(self, function: Any, gx: int, gy: int, gz: int, stream: Any, device: int) -> None:
        state = driver._state
        state.make_current(device)
        state.check(state.bindings.hipModuleLaunchKernel(function, gx, gy, gz, self.block, 1, 1, 0, stream, None,
                                                         self._extra), "hipModuleLaunchKernel", self.kernel_name, device)

    def __repr__(self) -> str:
        return (f"<polytile_amd.Launcher '{self.kernel_name}': {len(self.packer.names)} arguments, "
                f"{self.block} work-items, {self.info.group_segment_fixed_size} bytes of LDS>")


__all__ = ["KernargPacker", "Launcher"]
