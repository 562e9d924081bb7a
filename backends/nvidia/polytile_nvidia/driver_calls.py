"""The CUDA driver calls of a launch, through cuda-bindings' C-level layer.

Importing ``cuda.bindings.driver``, cuda-bindings' Python API, costs 10-25 ms (it builds
hundreds of classes and enums), more than everything else a process does to launch a
kernel from the on-disk cache.  Such a launch makes a dozen driver calls (find the
device, retain its context, load the cubin, read a few attributes, encode the tensor maps
of polytile-tma's descriptors on Hopper, and launch where the native launcher is not
built yet).  It makes them
through ``cuda.bindings.cydriver`` instead: the same library's Cython-level functions,
the ones its Python API calls, importing in a few milliseconds.  Cython exports them as
a table of C function pointers (``__pyx_capi__``), each named by its C signature; every
one used here is checked against the signature this module calls it with, and a table
that does not match means the Python API is used instead.  Like the Python API, they
are called with the GIL released (once ``cuInit`` has succeeded: until then a failure to
load libcuda is a Python exception that must reach the caller).

:class:`DriverCalls` answers those calls in ``cuda.bindings.driver``'s convention
(``(CUresult, *values)`` tuples, enum namespaces, integer handles), so the rest of the
backend does not know which one it talks to.  Whatever else is asked of it comes from
``cuda.bindings.driver``, imported at that moment.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any, Callable

_int_p = ctypes.POINTER(ctypes.c_int)
_void_pp = ctypes.POINTER(ctypes.c_void_p)
_char_pp = ctypes.POINTER(ctypes.c_char_p)

#: A CUtensorMap: its bytes, and the alignment the driver writes it at.
TENSOR_MAP_BYTES, TENSOR_MAP_ALIGNMENT = 128, 64
#: cuTensorMapEncodeTiled's arrays, laid out after the map in one buffer (one allocation
#: and one struct.pack_into a call): per rank 1 to 5, the packing and the arrays' offsets.
_MAX_MAP_RANK = 5
_DIMS_AT, _STRIDES_AT, _BOX_AT, _STEPS_AT = 128, 168, 208, 228
_MAP_ARRAYS = [None] + [struct.Struct(f"<{r}Q{(5 - r) * 8}x{max(r - 1, 1)}Q{(5 - max(r - 1, 1)) * 8}x{r}I"
                                      f"{(5 - r) * 4}x{r}I")
                        for r in range(1, _MAX_MAP_RANK + 1)]
#: CUtensorMapDataType -> bytes per element (the rank-1 stride below).
_DATA_TYPE_BYTES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}


def _strides_for_the_driver(data_type: int, dims: Any, strides: Any) -> list:
    """The byte strides of dimensions 1 to rank - 1; for a 1-D map, which has none, one
    entry, the run's bytes (as Triton's driver passes it) rounded up to 16: the driver
    refuses a 1-D map whose stride array is a null pointer (CUDA_ERROR_INVALID_VALUE on an
    H100, 2026-11-27)."""
    if len(dims) == 1 and not strides:
        # Rounded up to 16 bytes, the alignment every stride the driver reads must have.
        return [-(-int(dims[0]) * _DATA_TYPE_BYTES.get(int(data_type), 1) // 16) * 16]
    return list(strides)
#: The buffer: room to align the map, then the map and the arrays (8-byte words).
_MapStorage = ctypes.c_uint64 * ((TENSOR_MAP_ALIGNMENT + _STEPS_AT + 4 * _MAX_MAP_RANK + 7) // 8)

#: Each function used: the C signature cuda-bindings exports it under, and its ctypes
#: argument types (every one returns CUresult, an int).
SIGNATURES: dict[str, tuple[str, tuple[Any, ...]]] = {
    "cuInit": ("CUresult (unsigned int)", (ctypes.c_uint,)),
    "cuDeviceGetCount": ("CUresult (int *)", (_int_p,)),
    "cuDeviceGet": ("CUresult (CUdevice *, int)", (_int_p, ctypes.c_int)),
    "cuDeviceGetAttribute": ("CUresult (int *, CUdevice_attribute, CUdevice)", (_int_p, ctypes.c_int, ctypes.c_int)),
    "cuDeviceGetName": ("CUresult (char *, int, CUdevice)", (ctypes.c_char_p, ctypes.c_int, ctypes.c_int)),
    "cuDevicePrimaryCtxRetain": ("CUresult (CUcontext *, CUdevice)", (_void_pp, ctypes.c_int)),
    "cuCtxGetCurrent": ("CUresult (CUcontext *)", (_void_pp,)),
    "cuCtxSetCurrent": ("CUresult (CUcontext)", (ctypes.c_void_p,)),
    "cuCtxGetDevice": ("CUresult (CUdevice *)", (_int_p,)),
    "cuModuleLoadData": ("CUresult (CUmodule *, void const *)", (_void_pp, ctypes.c_char_p)),
    "cuModuleGetFunction": ("CUresult (CUfunction *, CUmodule, char const *)",
                            (_void_pp, ctypes.c_void_p, ctypes.c_char_p)),
    "cuFuncGetAttribute": ("CUresult (int *, CUfunction_attribute, CUfunction)",
                           (_int_p, ctypes.c_int, ctypes.c_void_p)),
    "cuFuncSetAttribute": ("CUresult (CUfunction, CUfunction_attribute, int)",
                           (ctypes.c_void_p, ctypes.c_int, ctypes.c_int)),
    "cuPointerGetAttribute": ("CUresult (void *, CUpointer_attribute, CUdeviceptr)",
                              (ctypes.c_void_p, ctypes.c_int, ctypes.c_ulonglong)),
    "cuLaunchKernel": ("CUresult (CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, "
                       "unsigned int, unsigned int, CUstream, void **, void **)",
                       (ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)),
    "cuLaunchCooperativeKernel": ("CUresult (CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, "
                                  "unsigned int, unsigned int, unsigned int, CUstream, void **)",
                                  (ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p)),
    "cuTensorMapEncodeTiled": ("CUresult (CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, cuuint64_t const *, "
                               "cuuint64_t const *, cuuint32_t const *, cuuint32_t const *, CUtensorMapInterleave, "
                               "CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill)",
                               # The arrays as addresses (see DriverCalls.cuTensorMapEncodeTiled).
                               (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                ctypes.c_int, ctypes.c_int)),
    "cuGetErrorName": ("CUresult (CUresult, char const **)", (ctypes.c_int, _char_pp)),
    "cuGetErrorString": ("CUresult (CUresult, char const **)", (ctypes.c_int, _char_pp)),
}


def _handle(handle: Any) -> int | None:
    """A driver handle (an int, a cuda.bindings handle object or None) as ctypes passes it."""
    return None if handle is None else (int(handle) or None)


class _Enum:
    """The members of a driver enum that the backend names; any other member is looked
    up in ``cuda.bindings.driver``.  (The driver API never renumbers its enums.)"""

    def __init__(self, calls: "DriverCalls", name: str, members: dict[str, int]):
        self._calls = calls
        self._name = name
        for member, value in members.items():
            setattr(self, member, value)

    def __getattr__(self, member: str) -> Any:
        if member.startswith("_"):
            raise AttributeError(member)
        return int(getattr(getattr(self._calls.python_api(), self._name), member))


class CUresult(int):
    """A driver result code that knows its name (``CUDA_SUCCESS``, ``CUDA_ERROR_...``),
    as ``cuda.bindings.driver.CUresult`` members do."""

    name: str

    def __repr__(self) -> str:
        return f"<CUresult.{self.name}: {int(self)}>"


class DriverCalls:
    """``cuda.bindings.driver``'s calling convention over cuda-bindings' C functions."""

    __name__ = "polytile_nvidia.driver_calls"

    def __init__(self, functions: dict[str, tuple[Callable[..., int], Callable[..., int]]],
                 python_api: Callable[[], Any]):
        # Each function twice: called with the GIL held until cuInit has succeeded
        # (cuda-bindings loads libcuda on the first call and raises a Python exception
        # when it cannot, which must reach the caller), then with the GIL released, as
        # cuda.bindings.driver calls them (creating a context or loading a module takes
        # milliseconds to seconds, and other Python threads go on meanwhile).
        self._held = {name: pair[0] for name, pair in functions.items()}
        self._released = {name: pair[1] for name, pair in functions.items()}
        self._f = self._held
        self._results: dict[int, CUresult] = {}
        self._import_python_api = python_api
        self._python_api: Any = None
        self._lock = threading.Lock()
        self.CUdevice_attribute = _Enum(self, "CUdevice_attribute", {
            "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK": 1,
            "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK": 8,
            "CU_DEVICE_ATTRIBUTE_WARP_SIZE": 10,
            "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT": 16,
            "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR": 75,
            "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR": 76,
            "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 97,
        })
        self.CUfunction_attribute = _Enum(self, "CUfunction_attribute", {
            "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK": 0,
            "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES": 1,
            "CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES": 2,
            "CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES": 3,
            "CU_FUNC_ATTRIBUTE_NUM_REGS": 4,
            "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES": 8,
        })
        self.CUpointer_attribute = _Enum(self, "CUpointer_attribute", {
            "CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL": 9,
        })

    def python_api(self) -> Any:
        """``cuda.bindings.driver``, imported the first time something outside this
        class's calls is asked for."""
        if self._python_api is None:
            self._python_api = self._import_python_api()
        return self._python_api

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.python_api(), name)

    def CUresult(self, code: int) -> CUresult:  # noqa: N802 - cuda.bindings.driver's name
        """The result code ``code`` with its name (``cuGetErrorName``)."""
        result = self._results.get(code)
        if result is None:
            result = CUresult(code)
            if code == 0:
                result.name = "CUDA_SUCCESS"
            else:
                text = ctypes.c_char_p()
                failed = self._f["cuGetErrorName"](code, ctypes.byref(text))
                result.name = text.value.decode() if not failed and text.value else f"CUDA error {code}"
            with self._lock:
                result = self._results.setdefault(code, result)
        return result

    # -- the calls, each as cuda.bindings.driver answers it ----------------------------

    def cuInit(self, flags: int) -> tuple:
        result = self.CUresult(self._f["cuInit"](flags))
        if not result:
            self._f = self._released
        return (result,)

    def cuDeviceGetCount(self) -> tuple:
        count = ctypes.c_int()
        return self.CUresult(self._f["cuDeviceGetCount"](ctypes.byref(count))), count.value

    def cuDeviceGet(self, ordinal: int) -> tuple:
        device = ctypes.c_int()
        return self.CUresult(self._f["cuDeviceGet"](ctypes.byref(device), int(ordinal))), device.value

    def cuDeviceGetAttribute(self, attribute: int, device: int) -> tuple:
        value = ctypes.c_int()
        return self.CUresult(self._f["cuDeviceGetAttribute"](ctypes.byref(value), int(attribute), int(device))), value.value

    def cuDeviceGetName(self, length: int, device: int) -> tuple:
        buffer = ctypes.create_string_buffer(length)
        return self.CUresult(self._f["cuDeviceGetName"](buffer, length, int(device))), buffer.raw

    def cuDevicePrimaryCtxRetain(self, device: int) -> tuple:
        context = ctypes.c_void_p()
        return self.CUresult(self._f["cuDevicePrimaryCtxRetain"](ctypes.byref(context), int(device))), context.value or 0

    def cuCtxGetCurrent(self) -> tuple:
        context = ctypes.c_void_p()
        return self.CUresult(self._f["cuCtxGetCurrent"](ctypes.byref(context))), context.value or 0

    def cuCtxSetCurrent(self, context: Any) -> tuple:
        return (self.CUresult(self._f["cuCtxSetCurrent"](_handle(context))),)

    def cuCtxGetDevice(self) -> tuple:
        device = ctypes.c_int()
        return self.CUresult(self._f["cuCtxGetDevice"](ctypes.byref(device))), device.value

    def cuModuleLoadData(self, image: bytes) -> tuple:
        module = ctypes.c_void_p()
        return self.CUresult(self._f["cuModuleLoadData"](ctypes.byref(module), bytes(image))), module.value or 0

    def cuModuleGetFunction(self, module: Any, name: bytes) -> tuple:
        function = ctypes.c_void_p()
        result = self._f["cuModuleGetFunction"](ctypes.byref(function), _handle(module), name)
        return self.CUresult(result), function.value or 0

    def cuFuncGetAttribute(self, attribute: int, function: Any) -> tuple:
        value = ctypes.c_int()
        return self.CUresult(self._f["cuFuncGetAttribute"](ctypes.byref(value), int(attribute), _handle(function))), value.value

    def cuFuncSetAttribute(self, function: Any, attribute: int, value: int) -> tuple:
        return (self.CUresult(self._f["cuFuncSetAttribute"](_handle(function), int(attribute), int(value))),)

    def cuLaunchKernel(self, function: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shared: int,
                       stream: Any, params: int, extra: int) -> tuple:
        """``params``, ``extra``: addresses of ``void *`` arrays (0 for none)."""
        result = self._f["cuLaunchKernel"](_handle(function), gx, gy, gz, bx, by, bz, shared, _handle(stream),
                                           params or None, extra or None)
        return (self.CUresult(result),)

    def cuLaunchCooperativeKernel(self, function: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,
                                  shared: int, stream: Any, params: int) -> tuple:
        """``params``: the address of a ``void *`` array (launch_cooperative_grid=True)."""
        result = self._f["cuLaunchCooperativeKernel"](_handle(function), gx, gy, gz, bx, by, bz, shared,
                                                      _handle(stream), params or None)
        return (self.CUresult(result),)

    def cuPointerGetAttribute(self, attribute: int, pointer: int) -> tuple:
        if int(attribute) != self.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
            return self.python_api().cuPointerGetAttribute(attribute, pointer)
        value = ctypes.c_int()
        return self.CUresult(self._f["cuPointerGetAttribute"](ctypes.byref(value), int(attribute), int(pointer))), value.value

    def cuTensorMapEncodeTiled(self, tensorDataType: int, tensorRank: int, globalAddress: int,  # noqa: N803
                               globalDim: Any, globalStrides: Any, boxDim: Any, elementStrides: Any, interleave: int,
                               swizzle: int, l2Promotion: int, oobFill: int) -> tuple:
        """``(CUresult, the map's 128 bytes)``; the arguments as ``cuda.bindings.driver``
        takes them (enums as their values, the arrays as sequences of ints), innermost
        dimension first.  (``cuda.bindings.driver`` answers a ``CUtensorMap`` object
        instead of bytes: :func:`tensor_map_encoder` reads either.)"""
        if not 1 <= tensorRank <= _MAX_MAP_RANK:
            return self.CUresult(1), b""  # CUDA_ERROR_INVALID_VALUE, as the driver answers it
        # One buffer: the map, 64-byte aligned as the driver writes it, then the arrays.
        storage = _MapStorage()
        start = ctypes.addressof(storage)
        at = -(-start // TENSOR_MAP_ALIGNMENT) * TENSOR_MAP_ALIGNMENT
        offset = at - start
        _MAP_ARRAYS[tensorRank].pack_into(storage, offset + _DIMS_AT, *globalDim,
                                          *_strides_for_the_driver(tensorDataType, globalDim, globalStrides),
                                          *boxDim, *elementStrides)
        result = self._f["cuTensorMapEncodeTiled"](
            at, int(tensorDataType), tensorRank, globalAddress or None, at + _DIMS_AT, at + _STRIDES_AT,
            at + _BOX_AT, at + _STEPS_AT, int(interleave), int(swizzle), int(l2Promotion), int(oobFill))
        return self.CUresult(result), bytes(storage)[offset:offset + TENSOR_MAP_BYTES]

    def cuGetErrorName(self, code: int) -> tuple:
        return self._error_text("cuGetErrorName", code)

    def cuGetErrorString(self, code: int) -> tuple:
        return self._error_text("cuGetErrorString", code)

    def _error_text(self, call: str, code: int) -> tuple:
        text = ctypes.c_char_p()
        return self.CUresult(self._f[call](int(code), ctypes.byref(text))), text.value or b""


def _capsule_functions(table: dict[str, Any]) -> dict[str, tuple[Callable[..., int], Callable[..., int]]] | None:
    """For each of :data:`SIGNATURES`, ctypes functions out of a Cython ``__pyx_capi__``
    table that call it with the GIL held and with it released; None when one is missing
    or exported under another signature."""
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    functions: dict[str, tuple[Callable[..., int], Callable[..., int]]] = {}
    for name, (signature, argtypes) in SIGNATURES.items():
        capsule = table.get(name)
        if capsule is None or get_name(capsule) != signature.encode():
            return None
        address = get_pointer(capsule, signature.encode())
        functions[name] = (ctypes.PYFUNCTYPE(ctypes.c_int, *argtypes)(address),
                           ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(address))
    return functions


_made: tuple[Any, DriverCalls] | None = None
#: The Python API driver_calls() last answered with instead, and why.
_fallback: tuple[Any, str] | None = None


def driver_calls(python_api: Callable[[], Any]) -> Any:
    """The driver's calls: a :class:`DriverCalls` over ``cuda.bindings.cydriver``, or,
    where cydriver cannot be imported or its table is not as expected, ``python_api()``
    (which imports ``cuda.bindings.driver`` and words its import errors)."""
    global _made
    import importlib

    try:
        cydriver = importlib.import_module("cuda.bindings.cydriver")
    except ImportError as exc:
        return _fall_back(python_api, f"cuda.bindings.cydriver cannot be imported ({exc})")
    made = _made
    if made is not None and made[0] is cydriver:
        return made[1]
    functions = _capsule_functions(getattr(cydriver, "__pyx_capi__", None) or {})
    if functions is None:
        return _fall_back(python_api, "cuda.bindings.cydriver does not export the driver functions under the C "
                                      "signatures polytile calls them with (another cuda-bindings version?)")
    calls = DriverCalls(functions, python_api)
    _made = (cydriver, calls)
    return calls


def _fall_back(python_api: Callable[[], Any], reason: str) -> Any:
    global _fallback
    module = python_api()
    _fallback = (module, reason)
    return module


def tensor_map_encoder(calls: Any) -> Callable[..., tuple]:
    """``calls``' cuTensorMapEncodeTiled (``calls`` a :class:`DriverCalls` or
    ``cuda.bindings.driver``) as one function answering ``(CUresult, the map's 128
    bytes)`` either way, taking the enums as their values (ints)."""
    if isinstance(calls, DriverCalls):
        return calls.cuTensorMapEncodeTiled
    encode = calls.cuTensorMapEncodeTiled
    data_type, interleave_type = calls.CUtensorMapDataType, calls.CUtensorMapInterleave
    swizzle_type, l2_type = calls.CUtensorMapSwizzle, calls.CUtensorMapL2promotion
    fill_type = calls.CUtensorMapFloatOOBfill
    u64, u32 = calls.cuuint64_t, calls.cuuint32_t  # its arrays take these, not ints

    def encode_through_python_api(data: int, rank: int, address: int, dims: Any, strides: Any, box: Any,
                                  element_strides: Any, interleave: int, swizzle: int, l2_promotion: int,
                                  fill: int) -> tuple:
        strides = _strides_for_the_driver(data, dims, strides)
        err, tensor_map = encode(data_type(data), rank, address, [u64(v) for v in dims], [u64(v) for v in strides],
                                 [u32(v) for v in box], [u32(v) for v in element_strides],
                                 interleave_type(interleave), swizzle_type(swizzle), l2_type(l2_promotion),
                                 fill_type(fill))
        if err or tensor_map is None:
            return err, b""
        return err, ctypes.string_at(int(tensor_map.getPtr()), TENSOR_MAP_BYTES)

    return encode_through_python_api


def describe(calls: Any) -> str:
    """How the driver is called, in words, for ``polytile info`` ("" for a test double)."""
    if isinstance(calls, DriverCalls):
        return "driver calls through cuda-bindings' C layer (cuda.bindings.cydriver)"
    if getattr(calls, "__name__", None) != "cuda.bindings.driver":
        return ""  # a test double: nothing to say
    fallback = _fallback
    why = f": {fallback[1]}" if fallback is not None and fallback[0] is calls else ""
    return f"driver calls through cuda.bindings.driver{why}"
