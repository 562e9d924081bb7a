"""The driver calls through cuda-bindings' C layer (``polytile_nvidia.driver_calls``).

Without a GPU: the installed cuda-bindings is checked to export every function under the
signature the module calls it with; the calling convention (``(CUresult, *values)``,
named result codes, enum members) is checked against stand-in C functions; a table that
does not match falls back on ``cuda.bindings.driver``.  The GPU suite runs every launch
through the real thing.
"""

from __future__ import annotations

import ctypes
import sys
import types

import pytest

from polytile_nvidia import driver_calls
from polytile_nvidia.driver_calls import SIGNATURES, CUresult, DriverCalls


def _out(argument):
    # A stand-in C function gets ctypes.byref(...) objects; this is what they point at.
    return argument._obj


def stand_in_functions(*, devices=2, fail_init=0):
    """Python stand-ins for the C functions, writing through their pointer arguments."""
    names = {0: b"CUDA_SUCCESS", 100: b"CUDA_ERROR_NO_DEVICE", 400: b"CUDA_ERROR_INVALID_HANDLE"}
    calls = []

    def error_text(code, text):
        if code not in names:
            return 1  # CUDA_ERROR_INVALID_VALUE, as the driver answers an unknown code
        _out(text).value = names[code]
        return 0

    def record(name, result=0, write=None):
        def function(*args):
            calls.append((name, args))
            if write is not None:
                write(*args)
            return result
        return function

    functions = {
        "cuInit": record("cuInit", fail_init),
        "cuDeviceGetCount": record("cuDeviceGetCount", write=lambda count: setattr(_out(count), "value", devices)),
        "cuDeviceGet": record("cuDeviceGet", write=lambda device, ordinal: setattr(_out(device), "value", ordinal)),
        "cuDeviceGetAttribute": record("cuDeviceGetAttribute",
                                       write=lambda value, attribute, device: setattr(_out(value), "value", 1000 + attribute)),
        "cuDeviceGetName": record("cuDeviceGetName", write=lambda buffer, length, device: ctypes.memmove(buffer, b"GPU\0", 4)),
        "cuDevicePrimaryCtxRetain": record("cuDevicePrimaryCtxRetain",
                                           write=lambda context, device: setattr(_out(context), "value", 0xC0 + device)),
        "cuCtxGetCurrent": record("cuCtxGetCurrent", write=lambda context: setattr(_out(context), "value", None)),
        "cuCtxSetCurrent": record("cuCtxSetCurrent"),
        "cuCtxGetDevice": record("cuCtxGetDevice", write=lambda device: setattr(_out(device), "value", 1)),
        "cuModuleLoadData": record("cuModuleLoadData", write=lambda module, image: setattr(_out(module), "value", 0x111)),
        "cuModuleGetFunction": record("cuModuleGetFunction", 400),
        "cuFuncGetAttribute": record("cuFuncGetAttribute", write=lambda value, attribute, function: setattr(_out(value), "value", 32)),
        "cuFuncSetAttribute": record("cuFuncSetAttribute"),
        "cuPointerGetAttribute": record("cuPointerGetAttribute", write=lambda value, attribute, pointer: setattr(_out(value), "value", 1)),
        "cuLaunchKernel": record("cuLaunchKernel"),
        "cuLaunchCooperativeKernel": record("cuLaunchCooperativeKernel"),
        "cuTensorMapEncodeTiled": record("cuTensorMapEncodeTiled",
                                         write=lambda tensor_map, *rest: ctypes.memmove(tensor_map, MAP_BYTES, 128)),
        "cuGetErrorName": error_text,
        "cuGetErrorString": error_text,
    }
    assert set(functions) == set(SIGNATURES)
    return functions, calls


#: What the stand-in cuTensorMapEncodeTiled writes.
MAP_BYTES = bytes(range(128, 256))


def both(functions):
    """The same stand-ins for calls with the GIL held and with it released."""
    return {name: (function, function) for name, function in functions.items()}


def python_api():
    """A stand-in ``cuda.bindings.driver`` for what DriverCalls does not answer itself."""
    return types.SimpleNamespace(
        __name__="cuda.bindings.driver",
        cuModuleUnload=lambda *args: ("asked the Python API", args),
        CUdevice_attribute=types.SimpleNamespace(CU_DEVICE_ATTRIBUTE_CLOCK_RATE=13),
        cuPointerGetAttribute=lambda attribute, pointer: ("Python API", attribute, pointer),
    )


def test_the_installed_cuda_bindings_exports_every_function_under_its_signature():
    cydriver = pytest.importorskip("cuda.bindings.cydriver")
    table = cydriver.__pyx_capi__
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    mismatched = {name: get_name(table[name]).decode() for name, (signature, _) in SIGNATURES.items()
                  if name not in table or get_name(table[name]) != signature.encode()}
    assert not mismatched
    assert driver_calls._capsule_functions(table) is not None


def test_calls_answer_in_cuda_bindings_convention():
    functions, calls = stand_in_functions()
    cuda = DriverCalls(both(functions), python_api)
    (ok,) = cuda.cuInit(0)
    assert ok == 0 and ok.name == "CUDA_SUCCESS" and not ok
    assert cuda.cuDeviceGetCount() == (0, 2)
    assert cuda.cuDeviceGet(1) == (0, 1)
    attribute = cuda.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    assert cuda.cuDeviceGetAttribute(attribute, 0) == (0, 1075)
    err, name = cuda.cuDeviceGetName(16, 0)
    assert name.split(b"\0")[0] == b"GPU" and len(name) == 16
    assert cuda.cuDevicePrimaryCtxRetain(1) == (0, 0xC1)
    assert cuda.cuCtxGetCurrent() == (0, 0)  # no current context: a null handle, as 0
    assert cuda.cuModuleLoadData(b"\x7fELF\0\0") == (0, 0x111)
    assert cuda.cuFuncGetAttribute(cuda.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, 0x222) == (0, 32)
    ordinal = cuda.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    assert cuda.cuPointerGetAttribute(ordinal, 1 << 40) == (0, 1)
    assert cuda.cuCtxGetDevice() == (0, 1)
    assert cuda.cuCtxSetCurrent(0xC1) == (0,)
    assert cuda.cuFuncSetAttribute(0x222, cuda.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   65536) == (0,)
    assert ("cuFuncSetAttribute", (0x222, 8, 65536)) in calls
    assert cuda.cuLaunchKernel(0x222, 4, 1, 1, 128, 1, 1, 0, 0, 0x5000, 0) == (0,)
    # A null stream and no extra array pass as null pointers.
    assert calls[-1] == ("cuLaunchKernel", (0x222, 4, 1, 1, 128, 1, 1, 0, None, 0x5000, None))
    assert cuda.cuLaunchCooperativeKernel(0x222, 4, 1, 1, 128, 1, 1, 0, 0, 0x5000) == (0,)
    assert calls[-1] == ("cuLaunchCooperativeKernel", (0x222, 4, 1, 1, 128, 1, 1, 0, None, 0x5000))


def test_a_failed_call_has_the_drivers_name_for_its_code():
    functions, _ = stand_in_functions()
    cuda = DriverCalls(both(functions), python_api)
    err, handle = cuda.cuModuleGetFunction(0x111, b"missing")
    assert err == 400 and err.name == "CUDA_ERROR_INVALID_HANDLE" and handle == 0
    assert isinstance(err, CUresult) and repr(err) == "<CUresult.CUDA_ERROR_INVALID_HANDLE: 400>"
    assert cuda.cuGetErrorName(err) == (0, b"CUDA_ERROR_INVALID_HANDLE")
    # A code the driver has no name for still reads as something.
    assert cuda.CUresult(999).name == "CUDA error 999"
    assert cuda.CUresult(400) is err


def test_no_device_is_reported_by_name(monkeypatch):
    from polytile_nvidia import backend as nvidia_backend

    functions, _ = stand_in_functions(fail_init=100)
    monkeypatch.setattr(nvidia_backend, "_import_driver", lambda: DriverCalls(both(functions), python_api))
    assert nvidia_backend.NvidiaBackend().active_devices() == []


def test_what_it_does_not_answer_comes_from_the_python_api():
    functions, _ = stand_in_functions()
    imported = []

    def counted_api():
        imported.append(1)
        return python_api()

    cuda = DriverCalls(both(functions), counted_api)
    cuda.cuInit(0)
    assert not imported  # the calls it answers never import cuda.bindings.driver
    assert cuda.cuModuleUnload(1, 2)[0] == "asked the Python API"
    assert cuda.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_CLOCK_RATE == 13
    assert cuda.cuPointerGetAttribute(1, 0x10)[0] == "Python API"  # not the device ordinal
    assert imported == [1]


@pytest.mark.parametrize("init_result", [0, 100])
def test_the_gil_is_released_once_cuinit_has_succeeded(init_result):
    functions, _ = stand_in_functions(fail_init=init_result)
    held, released = [], []
    pairs = {name: ((lambda *a, _f=f, _n=name: held.append(_n) or _f(*a)),
                    (lambda *a, _f=f, _n=name: released.append(_n) or _f(*a))) for name, f in functions.items()}
    cuda = DriverCalls(pairs, python_api)
    cuda.cuDeviceGetCount()  # before cuInit: a failure to load libcuda must raise here
    cuda.cuInit(0)
    cuda.cuModuleLoadData(b"\x7fELF")
    assert held[:2] == ["cuDeviceGetCount", "cuInit"]
    if init_result == 0:
        assert released == ["cuModuleLoadData"]
    else:
        assert released == [] and held[-1] == "cuModuleLoadData"


def test_null_handles_pass_as_null():
    functions, calls = stand_in_functions()
    cuda = DriverCalls(both(functions), python_api)
    cuda.cuCtxSetCurrent(None)
    cuda.cuCtxSetCurrent(0)
    assert [args for name, args in calls if name == "cuCtxSetCurrent"] == [(None,), (None,)]


class _Capsules(dict):
    """A ``__pyx_capi__`` table of real capsules wrapping stand-in C functions."""

    def __init__(self, signatures):
        super().__init__()
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        self._keep = []
        for name, signature in signatures.items():
            function = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 0)
            label = ctypes.create_string_buffer(signature.encode())
            self._keep += [function, label]
            self[name] = new(ctypes.cast(function, ctypes.c_void_p), label, None)


@pytest.fixture
def cydriver_table(monkeypatch):
    def install(signatures):
        module = types.ModuleType("cuda.bindings.cydriver")
        module.__pyx_capi__ = _Capsules(signatures)
        monkeypatch.setitem(sys.modules, "cuda.bindings.cydriver", module)
        monkeypatch.setattr(driver_calls, "_made", None)
        return module
    return install


def test_a_table_as_expected_gives_driver_calls(cydriver_table):
    module = cydriver_table({name: signature for name, (signature, _) in SIGNATURES.items()})
    calls = driver_calls.driver_calls(python_api)
    assert isinstance(calls, DriverCalls)
    assert driver_calls.driver_calls(python_api) is calls  # made once for the module
    assert module.__pyx_capi__  # kept alive by the fixture for the functions' sake


@pytest.mark.parametrize("change", ["another signature", "a function missing"])
def test_a_table_not_as_expected_falls_back_on_the_python_api(cydriver_table, change):
    signatures = {name: signature for name, (signature, _) in SIGNATURES.items()}
    if change == "another signature":
        signatures["cuModuleLoadData"] = "CUresult (CUmodule *, void const *, int)"
    else:
        del signatures["cuFuncSetAttribute"]
    cydriver_table(signatures)
    assert driver_calls.driver_calls(python_api).__name__ == "cuda.bindings.driver"


def test_no_cydriver_falls_back_on_the_python_api(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda.bindings.cydriver", None)
    calls = driver_calls.driver_calls(python_api)
    assert calls.__name__ == "cuda.bindings.driver"
    assert driver_calls.describe(calls).startswith("driver calls through cuda.bindings.driver: "
                                                   "cuda.bindings.cydriver cannot be imported")


def test_how_the_driver_is_called_is_described(cydriver_table):
    cydriver_table({name: signature for name, (signature, _) in SIGNATURES.items()})
    calls = driver_calls.driver_calls(python_api)
    assert driver_calls.describe(calls) == "driver calls through cuda-bindings' C layer (cuda.bindings.cydriver)"
    cydriver_table({})
    calls = driver_calls.driver_calls(python_api)
    assert "does not export the driver functions under the C signatures" in driver_calls.describe(calls)


# -- tensor maps (polytile-tma on Hopper) ------------------------------------------------------


def test_a_tensor_map_is_encoded_through_c_into_aligned_memory_and_answered_as_bytes():
    """Through a real C function pointer of the exported signature's types: the arrays
    arrive as the driver reads them, the map is written 64-byte aligned."""
    seen = []

    def encode(tensor_map, data_type, rank, address, dims, strides, box, element_strides, interleave, swizzle, l2,
               fill):
        def read(kind, address, count):
            return list((kind * count).from_address(address)) if address else None

        seen.append((tensor_map % 64, data_type, rank, address, read(ctypes.c_uint64, dims, rank),
                     read(ctypes.c_uint64, strides, max(rank - 1, 1)), read(ctypes.c_uint32, box, rank),
                     read(ctypes.c_uint32, element_strides, rank), interleave, swizzle, l2, fill))
        ctypes.memmove(tensor_map, MAP_BYTES, 128)
        return 0

    functions, _ = stand_in_functions()
    c_encode = ctypes.CFUNCTYPE(ctypes.c_int, *SIGNATURES["cuTensorMapEncodeTiled"][1])(encode)
    functions["cuTensorMapEncodeTiled"] = c_encode
    cuda = DriverCalls(both(functions), python_api)
    err, tensor_map = cuda.cuTensorMapEncodeTiled(6, 3, 0x7F0000010000, (512, 256, 4), (1040, 266240), (64, 64, 1),
                                                  (1, 1, 1), 0, 3, 2, 1)
    assert err == 0 and err.name == "CUDA_SUCCESS" and tensor_map == MAP_BYTES
    assert seen == [(0, 6, 3, 0x7F0000010000, [512, 256, 4], [1040, 266240], [64, 64, 1], [1, 1, 1], 0, 3, 2, 1)]
    # Rank 1: no strides, but the driver refuses a null stride array: one entry, the
    # run's bytes (1000 f32), as Triton's driver passes it.
    cuda.cuTensorMapEncodeTiled(7, 1, 0x10000, (1000,), (), (64,), (1,), 0, 0, 2, 0)
    assert seen[-1][4:8] == ([1000], [4000], [64], [1])
    cuda.cuTensorMapEncodeTiled(7, 1, 0x10000, (1001,), (), (64,), (1,), 0, 0, 2, 0)
    assert seen[-1][5] == [4016]  # 4004 bytes, rounded up to 16
    # Rank 5, the most there is.
    cuda.cuTensorMapEncodeTiled(7, 5, 0x10000, (2, 3, 4, 5, 6), (16, 48, 192, 960), (1, 2, 3, 4, 5), (1,) * 5,
                                0, 0, 2, 0)
    assert seen[-1][4:8] == ([2, 3, 4, 5, 6], [16, 48, 192, 960], [1, 2, 3, 4, 5], [1] * 5)
    # A rank the driver does not take is refused as the driver refuses it, without asking it.
    calls = len(seen)
    assert cuda.cuTensorMapEncodeTiled(7, 6, 0x10000, (2,) * 6, (16,) * 5, (1,) * 6, (1,) * 6, 0, 0, 2, 0)[0] == 1
    assert len(seen) == calls


def test_a_refused_tensor_map_has_the_drivers_name_for_its_code():
    functions, _ = stand_in_functions()
    functions["cuTensorMapEncodeTiled"] = lambda *args: 400
    cuda = DriverCalls(both(functions), python_api)
    err, _ = cuda.cuTensorMapEncodeTiled(6, 1, 0x10000, (64,), (), (64,), (1,), 0, 0, 2, 0)
    assert err == 400 and err.name == "CUDA_ERROR_INVALID_HANDLE"


def test_the_tensor_map_encoder_reads_either_binding():
    functions, _ = stand_in_functions()
    cuda = DriverCalls(both(functions), python_api)
    assert driver_calls.tensor_map_encoder(cuda) == cuda.cuTensorMapEncodeTiled

    # cuda.bindings.driver's convention: enums and cuuintNN_t objects in, a CUtensorMap out.
    holder = (ctypes.c_uint8 * 128).from_buffer_copy(MAP_BYTES)
    asked = []

    class Wrapped(int):
        pass

    def enum(name):
        return type(name, (Wrapped,), {})

    def encode(*args):
        asked.append(args)
        return 0, types.SimpleNamespace(getPtr=lambda: ctypes.addressof(holder))

    api = types.SimpleNamespace(
        __name__="cuda.bindings.driver", cuTensorMapEncodeTiled=encode,
        CUtensorMapDataType=enum("CUtensorMapDataType"), CUtensorMapInterleave=enum("CUtensorMapInterleave"),
        CUtensorMapSwizzle=enum("CUtensorMapSwizzle"), CUtensorMapL2promotion=enum("CUtensorMapL2promotion"),
        CUtensorMapFloatOOBfill=enum("CUtensorMapFloatOOBfill"), cuuint64_t=enum("cuuint64_t"),
        cuuint32_t=enum("cuuint32_t"))
    err, tensor_map = driver_calls.tensor_map_encoder(api)(6, 2, 0x10000, (64, 32), (128,), (16, 8), (1, 1), 0, 3, 2, 1)
    assert (err, tensor_map) == (0, MAP_BYTES)
    (args,) = asked
    assert [type(a).__name__ for a in args[:1] + args[7:]] == ["CUtensorMapDataType", "CUtensorMapInterleave",
                                                               "CUtensorMapSwizzle", "CUtensorMapL2promotion",
                                                               "CUtensorMapFloatOOBfill"]
    assert args[1:3] == (2, 0x10000) and args[3:7] == ([64, 32], [128], [16, 8], [1, 1])
    assert [type(v).__name__ for v in args[3] + args[4]] == ["cuuint64_t"] * 3
    assert [type(v).__name__ for v in args[5] + args[6]] == ["cuuint32_t"] * 4
