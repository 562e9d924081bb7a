/* The NVIDIA launch fast path: pack the arguments and call cuLaunchKernel in one C call.
 *
 * Built when polytile-nvidia is installed, as the extension module polytile_nvidia._launch
 * (backends/nvidia/setup.py; no CUDA headers: the few driver types are declared here).
 * polytile_nvidia.driver builds it at run time too, into the cache directory, but only
 * where the installed module is missing or older than this source.  The driver entry
 * points are handed in as addresses by configure(), so the same code runs against the
 * real libcuda or against test doubles.
 *
 * launch(plan, table, args, gx, gy, gz, stream, counts) packs and launches the common case:
 * scalars that are Python ints, floats and bools, by-value parameters of BLOB_BYTES bytes
 * (code 'M', a CUtensorMap) given as bytes of exactly that length, pointer arguments that
 * are None or tensors of a registered type (torch.Tensor: data_ptr() and get_device()),
 * all on one device on which the kernel is already loaded.  It returns 0 when the kernel was
 * launched, -1 when the call needs the general Python path (anything else, including
 * every mistake: that path names the argument at fault), and (CUresult, call) when the
 * driver failed.  Nothing is launched and no context is switched before it is sure to
 * return 0 or a driver error.
 *
 * The argument bytes and the pointer array live on this function's stack, so launches
 * from several threads share nothing and need no lock.
 *
 * Launch counts: each launcher keeps a bytearray of COUNT_SLOTS 64-bit counters (see
 * polytile_nvidia.launcher.LaunchCounts): the dispatcher counts its own launches in
 * COUNT_NATIVE; launch() counts the launches it makes for the Python entry point by why
 * they came through Python (the reason the dispatcher handed the call over, if it did).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef int CUresult;
typedef void *CUfunction;
typedef void *CUcontext;
typedef void *CUstream;
typedef CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                 CUstream, void **, void **);
typedef CUresult (*CtxGetCurrent)(CUcontext *);
typedef CUresult (*CtxSetCurrent)(CUcontext);

enum { CALL_CTX_GET = 1, CALL_CTX_SET = 2, CALL_LAUNCH = 3 };
/* The launch counters' slots; a SLOW_* reason r is counted in slot COUNT_NO_DISPATCHER + r. */
enum { COUNT_NATIVE = 0, COUNT_NO_DISPATCHER = 1, COUNT_NO_PLAN = 2, COUNT_NEEDS_PYTHON = 3, COUNT_SLOTS = 8 };
enum { SLOW_NONE = 0, SLOW_NO_PLAN = 1, SLOW_NEEDS_PYTHON = 2 };
/* Why the dispatcher last handed a call to the Python path (SLOW_*), until that call's
 * launch is counted (under the GIL: exact for launches from one thread). */
static int slow_reason;

static void count_launch(PyObject *counts, int slot) {
    if (counts != NULL && PyByteArray_CheckExact(counts) && PyByteArray_GET_SIZE(counts) >= COUNT_SLOTS * 8) {
        uint64_t value;
        char *at = PyByteArray_AS_STRING(counts) + slot * 8;
        memcpy(&value, at, 8);
        value++;
        memcpy(at, &value, 8);
    }
}

/* take_slow_reason(): why the dispatcher handed the current call to Python (0: it did
 * not), cleared. */
static PyObject *take_slow_reason(PyObject *self, PyObject *unused) {
    int reason = slow_reason;
    slow_reason = SLOW_NONE;
    return PyLong_FromLong(reason);
}
/* CUDA's limit on kernel parameter bytes (32764 since 12.1) bounds what we pack. */
enum { MAX_ARGUMENT_BYTES = 32768, MAX_ARGUMENTS = 1024, MAX_TENSOR_TYPES = 8 };
/* Code 'M': a parameter passed by value as exactly this many opaque bytes (a CUtensorMap);
 * by-value parameters of other sizes take the Python path (arguments.native_codes). */
enum { BLOB_BYTES = 128 };

static LaunchKernel launch_kernel;
static CtxGetCurrent ctx_get_current;
static CtxSetCurrent ctx_set_current;
static PyObject *current_stream;  /* torch's current raw stream of a device */
static PyTypeObject *tensor_types[MAX_TENSOR_TYPES];
static int tensor_type_count;
static PyObject *name_data_ptr, *name_get_device;

/* The plan, built once per kernel by arguments.ArgumentPacker.native_plan. */
typedef struct {
    uint32_t block, shared, size, count;
} PlanHeader;
typedef struct {
    uint8_t code, unused[3];
    uint32_t offset;
} PlanSlot;
/* One device's loaded kernel, in the table the launcher keeps (indexed by device). */
typedef struct {
    uint64_t function, context;
} Loaded;

static int is_tensor(PyObject *value) {
    PyTypeObject *type = Py_TYPE(value);
    for (int i = 0; i < tensor_type_count; i++)
        if (tensor_types[i] == type) return 1;
    return 0;
}

/* Call a method without arguments and read an integer result; -1 with an exception set. */
static int call_for_integer(PyObject *value, PyObject *name, long long *result) {
    /* The slot before the arguments is ours: PY_VECTORCALL_ARGUMENTS_OFFSET lets the
     * callee borrow it. */
    PyObject *stack[2] = {NULL, value};
    PyObject *returned = PyObject_VectorcallMethod(name, stack + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (returned == NULL) return -1;
    *result = PyLong_AsLongLong(returned);
    Py_DECREF(returned);
    return (*result == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* A tensor's device and address, where every pointer argument so far is on *device (-1:
 * none yet); -1, the error cleared, for anything only the Python path may judge. */
static int read_tensor(PyObject *value, long long *device, uint64_t *address) {
    long long where, data;
    if (call_for_integer(value, name_get_device, &where) || where < 0 || (*device >= 0 && where != *device) ||
        call_for_integer(value, name_data_ptr, &data)) {
        PyErr_Clear();
        return -1;
    }
    *device = where;
    *address = (uint64_t)data;
    return 0;
}

/* torch's current stream on `device` (current_stream is set); -1 with torch's error set. */
static int torch_stream(long long device, void **stream) {
    PyObject *index = PyLong_FromLongLong(device);
    if (index == NULL) return -1;
    PyObject *raw = PyObject_CallOneArg(current_stream, index);
    Py_DECREF(index);
    if (raw == NULL) return -1;
    *stream = PyLong_AsVoidPtr(raw);
    Py_DECREF(raw);
    return (*stream == NULL && PyErr_Occurred()) ? -1 : 0;
}

/* Write the integer `number` as `code` packs it; 0 when done, -1 when it does not fit (or
 * `code` packs no integer): the Python path then judges it.  'Q' takes only values that
 * fit in a signed 64-bit int here (pack_scalar handles larger Python ints itself). */
static int pack_long(char code, long long number, char *at) {
    switch (code) {
    case '?': if (number != 0 && number != 1) return -1; *(uint8_t *)at = (uint8_t)number; return 0;
    case 'b': if (number < INT8_MIN || number > INT8_MAX) return -1; *(int8_t *)at = (int8_t)number; return 0;
    case 'B': if (number < 0 || number > UINT8_MAX) return -1; *(uint8_t *)at = (uint8_t)number; return 0;
    case 'h': if (number < INT16_MIN || number > INT16_MAX) return -1; { int16_t v = (int16_t)number; memcpy(at, &v, 2); } return 0;
    case 'H': if (number < 0 || number > UINT16_MAX) return -1; { uint16_t v = (uint16_t)number; memcpy(at, &v, 2); } return 0;
    case 'i': if (number < INT32_MIN || number > INT32_MAX) return -1; { int32_t v = (int32_t)number; memcpy(at, &v, 4); } return 0;
    case 'I': if (number < 0 || number > UINT32_MAX) return -1; { uint32_t v = (uint32_t)number; memcpy(at, &v, 4); } return 0;
    case 'q': memcpy(at, &number, 8); return 0;
    case 'Q': if (number < 0) return -1; memcpy(at, &number, 8); return 0;
    case 'e': return PyFloat_Pack2((double)number, at, 1) ? (PyErr_Clear(), -1) : 0;
    case 'f': return PyFloat_Pack4((double)number, at, 1) ? (PyErr_Clear(), -1) : 0;
    case 'd': return PyFloat_Pack8((double)number, at, 1) ? (PyErr_Clear(), -1) : 0;
    default: return -1;
    }
}

/* Write one scalar, or a by-value blob ('M'); 0 when done, -1 for a value only the Python
 * path may judge (for 'M': anything but bytes of exactly BLOB_BYTES; the Python path also
 * takes a bytearray, and words the mistakes). */
static int pack_scalar(char code, PyObject *value, char *at) {
    if (code == 'M') {
        if (!PyBytes_Check(value) || PyBytes_GET_SIZE(value) != BLOB_BYTES) return -1;
        memcpy(at, PyBytes_AS_STRING(value), BLOB_BYTES);
        return 0;
    }
    if (code == 'e' || code == 'f' || code == 'd') {
        if (!PyFloat_Check(value) && !PyLong_Check(value)) return -1;
        double number = PyFloat_AsDouble(value);
        if (number == -1.0 && PyErr_Occurred()) return -1;
        if (code == 'e') return PyFloat_Pack2(number, at, 1);
        if (code == 'f') return PyFloat_Pack4(number, at, 1);
        return PyFloat_Pack8(number, at, 1);
    }
    if (!PyLong_Check(value)) return -1;
    if (code == 'Q') {
        unsigned long long bits = PyLong_AsUnsignedLongLong(value);
        if (bits == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        memcpy(at, &bits, 8);
        return 0;
    }
    int overflow = 0;
    long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || (number == -1 && PyErr_Occurred())) return -1;
    return pack_long(code, number, at);
}

static PyObject *driver_error(CUresult result, int call) { return Py_BuildValue("(ii)", (int)result, call); }

static PyObject *needs_python(void) {
    PyErr_Clear();
    return PyLong_FromLong(-1);
}

/* Make `context` current on this thread if it is not: other libraries may have switched. */
/* 0, or the failed driver call's CUresult with *call saying which. */
static CUresult make_current(CUcontext context, int *call) {
    CUcontext current = NULL;
    CUresult result = ctx_get_current(&current);
    if (result) {
        *call = CALL_CTX_GET;
        return result;
    }
    if (current != context && (result = ctx_set_current(context))) *call = CALL_CTX_SET;
    return result;
}

static PyObject *activate(CUcontext context) {
    int call = 0;
    CUresult result = make_current(context, &call);
    return result ? driver_error(result, call) : NULL;
}

static PyObject *launch(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 8) {
        PyErr_SetString(PyExc_TypeError, "launch(plan, table, args, gx, gy, gz, stream, counts)");
        return NULL;
    }
    if (launch_kernel == NULL || !PyBytes_Check(argv[0]) || !PyBytes_Check(argv[1])) return needs_python();
    const PlanHeader *plan = (const PlanHeader *)PyBytes_AS_STRING(argv[0]);
    const PlanSlot *slots = (const PlanSlot *)(plan + 1);
    PyObject *args = argv[2];
    PyObject **values;
    Py_ssize_t count;
    if (PyList_CheckExact(args)) {
        values = PySequence_Fast_ITEMS(args);
        count = PyList_GET_SIZE(args);
    } else if (PyTuple_CheckExact(args)) {
        values = PySequence_Fast_ITEMS(args);
        count = PyTuple_GET_SIZE(args);
    } else {
        return needs_python();
    }
    if (PyBytes_GET_SIZE(argv[0]) < (Py_ssize_t)sizeof(PlanHeader) || plan->count > MAX_ARGUMENTS ||
        plan->size > MAX_ARGUMENT_BYTES ||
        PyBytes_GET_SIZE(argv[0]) != (Py_ssize_t)(sizeof(PlanHeader) + plan->count * sizeof(PlanSlot)))
        return needs_python();
    if (count != (Py_ssize_t)plan->count) return needs_python();

    uint64_t storage[MAX_ARGUMENT_BYTES / 8];
    void *pointers[MAX_ARGUMENTS];
    char *bytes = (char *)storage;
    long long device = -1;
    int any_tensor = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *value = values[i];
        char *at = bytes + slots[i].offset;
        pointers[i] = at;
        if (slots[i].code != 'P') {
            if (pack_scalar((char)slots[i].code, value, at)) return needs_python();
            continue;
        }
        uint64_t address = 0;
        if (value != Py_None) {
            if (!is_tensor(value) || read_tensor(value, &device, &address)) return needs_python();
            any_tensor = 1;
        }
        memcpy(at, &address, 8);
    }
    /* No argument says where to run: the Python path asks for the current device. */
    if (device < 0) return needs_python();
    Py_ssize_t devices = PyBytes_GET_SIZE(argv[1]) / (Py_ssize_t)sizeof(Loaded);
    if (device >= devices) return needs_python();
    const Loaded *loaded = (const Loaded *)PyBytes_AS_STRING(argv[1]) + device;
    if (!loaded->function) return needs_python();

    void *stream = NULL;
    PyObject *stream_value = argv[6];
    if (stream_value == Py_None) {
        /* An error is torch's own, as the Python path would raise it. */
        if (any_tensor && current_stream != NULL && torch_stream(device, &stream)) return NULL;
    } else if (PyLong_Check(stream_value)) {
        stream = PyLong_AsVoidPtr(stream_value);
        if (stream == NULL && PyErr_Occurred()) return needs_python();
    } else {
        return needs_python();
    }
    unsigned long grid[3];
    for (int axis = 0; axis < 3; axis++) {
        grid[axis] = PyLong_AsUnsignedLong(argv[3 + axis]);
        if (grid[axis] == (unsigned long)-1 && PyErr_Occurred()) return needs_python();
    }

    PyObject *failed = activate((CUcontext)(uintptr_t)loaded->context);
    if (failed) return failed;
    CUresult result = launch_kernel((CUfunction)(uintptr_t)loaded->function, (unsigned)grid[0], (unsigned)grid[1],
                                    (unsigned)grid[2], plan->block, 1, 1, plan->shared, stream,
                                    count ? pointers : NULL, NULL);
    if (result) return driver_error(result, CALL_LAUNCH);
    count_launch(argv[7], COUNT_NO_DISPATCHER + slow_reason);
    slow_reason = SLOW_NONE;
    return PyLong_FromLong(0);
}

/* launch_packed(function, context, gx, gy, gz, block, shared, stream, params): the
 * arguments already packed (by the Python path) at the address `params`. */
static PyObject *launch_packed(PyObject *self, PyObject *args) {
    unsigned long long function, context, stream, params;
    unsigned int gx, gy, gz, block, shared;
    if (!PyArg_ParseTuple(args, "KKIIIIIKK", &function, &context, &gx, &gy, &gz, &block, &shared, &stream, &params))
        return NULL;
    if (launch_kernel == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the native launcher is not configured");
        return NULL;
    }
    PyObject *failed = activate((CUcontext)(uintptr_t)context);
    if (failed) return failed;
    CUresult result = launch_kernel((CUfunction)(uintptr_t)function, gx, gy, gz, block, 1, 1, shared,
                                    (CUstream)(uintptr_t)stream, (void **)(uintptr_t)params, NULL);
    if (result) return driver_error(result, CALL_LAUNCH);
    return PyLong_FromLong(0);
}

/* configure(cuLaunchKernel, cuCtxGetCurrent, cuCtxSetCurrent, current_stream): entry
 * points as addresses, and the callable giving torch's current stream of a device. */
static PyObject *configure(PyObject *self, PyObject *args) {
    unsigned long long launch_address, get_address, set_address;
    PyObject *stream_function;
    if (!PyArg_ParseTuple(args, "KKKO", &launch_address, &get_address, &set_address, &stream_function)) return NULL;
    if (!launch_address || !get_address || !set_address) {
        PyErr_SetString(PyExc_ValueError, "configure: a driver entry point address is 0");
        return NULL;
    }
    Py_INCREF(stream_function);
    Py_XSETREF(current_stream, stream_function);
    launch_kernel = (LaunchKernel)(uintptr_t)launch_address;
    ctx_get_current = (CtxGetCurrent)(uintptr_t)get_address;
    ctx_set_current = (CtxSetCurrent)(uintptr_t)set_address;
    Py_RETURN_NONE;
}

/* set_current_stream(callable): torch's own function giving a device's current raw
 * stream, once torch is in use (one Python call per launch fewer than going through
 * polytile.runtime.args). */
static PyObject *set_current_stream(PyObject *self, PyObject *function) {
    if (!PyCallable_Check(function)) {
        PyErr_SetString(PyExc_TypeError, "set_current_stream takes a callable");
        return NULL;
    }
    Py_INCREF(function);
    Py_XSETREF(current_stream, function);
    Py_RETURN_NONE;
}

/* add_tensor_type(type): pointer arguments of this exact type are read in C. */
static PyObject *add_tensor_type(PyObject *self, PyObject *type) {
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "add_tensor_type takes a type");
        return NULL;
    }
    for (int i = 0; i < tensor_type_count; i++)
        if (tensor_types[i] == (PyTypeObject *)type) Py_RETURN_FALSE;
    if (tensor_type_count == MAX_TENSOR_TYPES) Py_RETURN_FALSE;  /* the rest take the Python path */
    Py_INCREF(type);
    tensor_types[tensor_type_count++] = (PyTypeObject *)type;
    Py_RETURN_TRUE;
}

#include "_dispatch.h"

static PyMethodDef methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL, "Pack and launch (see the file's comment)."},
    {"launch_packed", launch_packed, METH_VARARGS, "Launch with the arguments already packed."},
    {"configure", configure, METH_VARARGS, "Set the driver entry points and the current-stream callable."},
    {"set_current_stream", set_current_stream, METH_O, "Set the callable giving a device's current stream."},
    {"add_tensor_type", add_tensor_type, METH_O, "Read pointer arguments of this type in C."},
    {"take_slow_reason", take_slow_reason, METH_NOARGS, "Why the dispatcher handed this call to Python (cleared)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "polytile_nvidia._launch", NULL, -1, methods};

/* The SHA-256 of the sources it was built from (setup.py, or the run-time build, defines
 * it): polytile_nvidia.driver compares it with the sources next to it. */
#ifndef POLYTILE_LAUNCH_SOURCE_DIGEST
#define POLYTILE_LAUNCH_SOURCE_DIGEST ""
#endif

PyMODINIT_FUNC PyInit__launch(void) {
    name_data_ptr = PyUnicode_InternFromString("data_ptr");
    name_get_device = PyUnicode_InternFromString("get_device");
    name_dtype = PyUnicode_InternFromString("dtype");
    name_table = PyUnicode_InternFromString("_table");
    if (name_data_ptr == NULL || name_get_device == NULL || name_dtype == NULL || name_table == NULL) return NULL;
    if (PyType_Ready(&PlanType) || PyType_Ready(&BoundType) || PyType_Ready(&DispatcherType)) return NULL;
    PyObject *self = PyModule_Create(&module);
    if (self == NULL) return NULL;
    Py_INCREF(&PlanType);
    Py_INCREF(&DispatcherType);
    if (PyModule_AddObject(self, "Plan", (PyObject *)&PlanType) ||
        PyModule_AddObject(self, "Dispatcher", (PyObject *)&DispatcherType) ||
        PyModule_AddStringConstant(self, "source_digest", POLYTILE_LAUNCH_SOURCE_DIGEST)) {
        Py_DECREF(self);
        return NULL;
    }
    return self;
}
