/* The NVIDIA launch fast path: pack the arguments and call cuLaunchKernel in one C call.
 *
 * Built on first use by polytile.runtime.launcher.build_native_module (no CUDA headers:
 * the few driver types are declared here).  The driver entry points are handed in as
 * addresses by configure(), so the same code runs against the real libcuda or against
 * test doubles.
 *
 * launch(plan, table, args, gx, gy, gz, stream) packs and launches the common case:
 * scalars that are Python ints, floats and bools, pointer arguments that are None or
 * tensors of a registered type (torch.Tensor: data_ptr() and get_device()), all on one
 * device on which the kernel is already loaded.  It returns 0 when the kernel was
 * launched, -1 when the call needs the general Python path (anything else, including
 * every mistake: that path names the argument at fault), and (CUresult, call) when the
 * driver failed.  Nothing is launched and no context is switched before it is sure to
 * return 0 or a driver error.
 *
 * The argument bytes and the pointer array live on this function's stack, so launches
 * from several threads share nothing and need no lock.
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
/* CUDA's limit on kernel parameter bytes (32764 since 12.1) bounds what we pack. */
enum { MAX_ARGUMENT_BYTES = 32768, MAX_ARGUMENTS = 1024, MAX_TENSOR_TYPES = 8 };

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
    PyObject *returned = PyObject_VectorcallMethod(name, &value, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (returned == NULL) return -1;
    *result = PyLong_AsLongLong(returned);
    Py_DECREF(returned);
    return (*result == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* Write one scalar; 0 when done, -1 for a value only the Python path may judge. */
static int pack_scalar(char code, PyObject *value, char *at) {
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
    switch (code) {
    case '?': if (number != 0 && number != 1) return -1; *(uint8_t *)at = (uint8_t)number; return 0;
    case 'b': if (number < INT8_MIN || number > INT8_MAX) return -1; *(int8_t *)at = (int8_t)number; return 0;
    case 'B': if (number < 0 || number > UINT8_MAX) return -1; *(uint8_t *)at = (uint8_t)number; return 0;
    case 'h': if (number < INT16_MIN || number > INT16_MAX) return -1; { int16_t v = (int16_t)number; memcpy(at, &v, 2); } return 0;
    case 'H': if (number < 0 || number > UINT16_MAX) return -1; { uint16_t v = (uint16_t)number; memcpy(at, &v, 2); } return 0;
    case 'i': if (number < INT32_MIN || number > INT32_MAX) return -1; { int32_t v = (int32_t)number; memcpy(at, &v, 4); } return 0;
    case 'I': if (number < 0 || number > UINT32_MAX) return -1; { uint32_t v = (uint32_t)number; memcpy(at, &v, 4); } return 0;
    case 'q': memcpy(at, &number, 8); return 0;
    default: return -1;
    }
}

static PyObject *driver_error(CUresult result, int call) { return Py_BuildValue("(ii)", (int)result, call); }

static PyObject *needs_python(void) {
    PyErr_Clear();
    return PyLong_FromLong(-1);
}

/* Make `context` current on this thread if it is not: other libraries may have switched. */
static PyObject *activate(CUcontext context) {
    CUcontext current = NULL;
    CUresult result = ctx_get_current(&current);
    if (result) return driver_error(result, CALL_CTX_GET);
    if (current != context && (result = ctx_set_current(context))) return driver_error(result, CALL_CTX_SET);
    return NULL;
}

static PyObject *launch(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 7) {
        PyErr_SetString(PyExc_TypeError, "launch(plan, table, args, gx, gy, gz, stream)");
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
            long long where, data;
            if (!is_tensor(value)) return needs_python();
            if (call_for_integer(value, name_get_device, &where) || where < 0) return needs_python();
            if (device >= 0 && where != device) return needs_python();
            if (call_for_integer(value, name_data_ptr, &data)) return needs_python();
            device = where;
            address = (uint64_t)data;
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
        if (any_tensor && current_stream != NULL) {
            PyObject *index = PyLong_FromLongLong(device);
            if (index == NULL) return needs_python();
            PyObject *raw = PyObject_CallOneArg(current_stream, index);
            Py_DECREF(index);
            if (raw == NULL) return NULL;  /* torch's own error, as the Python path would raise it */
            stream = PyLong_AsVoidPtr(raw);
            Py_DECREF(raw);
            if (stream == NULL && PyErr_Occurred()) return NULL;
        }
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

/* ---- The dispatcher: kernel[grid](...) in one C call ---------------------------------
 *
 * A Dispatcher belongs to one @jit function and keeps up to MAX_PLANS plans.  A plan
 * says how the function was called (how many positional arguments, which keywords),
 * what each argument passed must be for a call to be the same specialization (an int in
 * the same range and with the same hint, a tensor of the same type, dtype and
 * alignment, a constexpr or launch option equal to the same value, a None), where each
 * run-time argument goes in the kernel's parameter bytes, and the compiled kernel the
 * call returns.  A call that matches a plan is checked, packed and launched here
 * without running Python code of ours; any other goes to `slow` (the Python entry
 * point), which launches it, explains mistakes, and may hand a plan back (`learn`).
 * Plans come from polytile.runtime.dispatch, which derives each check from the same
 * probes that key the Python path, so a call passing them is keyed alike.
 */

enum { MAX_PLANS = 4 };
enum { CHECK_EQUAL = 1, CHECK_NONE = 2, CHECK_TENSOR = 3, CHECK_INT = 4, CHECK_FLOAT = 5, CHECK_BOOL = 6 };
enum { HINT_ANY = 0, HINT_ALIGNED = 1, HINT_UNALIGNED = 2, HINT_ONE = 3, HINT_DIVISIBLE = 4, HINT_OTHER = 5 };
enum { RANGE_I32 = 0, RANGE_I64 = 1, RANGE_U64 = 2 };
/* try_plan's answers besides -1 (an exception is set). */
enum { LAUNCHED = 0, NO_MATCH = 1, NEEDS_PYTHON = 2 };

typedef struct {
    uint8_t check, code, hint, range;
    uint32_t object;    /* the expected value, or the tensor type (then its dtype), in `objects` */
    int32_t parameter;  /* the kernel parameter the value is packed into, or -1 */
    uint32_t unused;
} SlotCheck;

typedef struct {
    PyObject_HEAD
    Py_ssize_t nargs;
    PyObject *kwnames;  /* tuple, or None for a call without keywords */
    Py_ssize_t nslots;
    SlotCheck *slots;
    PyObject *objects;  /* tuple */
    uint32_t count, size, block, shared;
    uint32_t *offsets;  /* each kernel parameter's place in the bytes */
    char *base;         /* the bytes with the defaults of parameters not passed */
    PyObject *guard, *launcher, *meta_base, *slot_names, *result;
} Plan;

static PyObject *name_dtype, *name_table;

static void plan_dealloc(Plan *plan) {
    PyMem_Free(plan->slots);
    PyMem_Free(plan->offsets);
    PyMem_Free(plan->base);
    Py_XDECREF(plan->kwnames);
    Py_XDECREF(plan->objects);
    Py_XDECREF(plan->guard);
    Py_XDECREF(plan->launcher);
    Py_XDECREF(plan->meta_base);
    Py_XDECREF(plan->slot_names);
    Py_XDECREF(plan->result);
    Py_TYPE(plan)->tp_free((PyObject *)plan);
}

static int code_size(char code) {
    switch (code) {
    case '?': case 'b': case 'B': return 1;
    case 'h': case 'H': case 'e': return 2;
    case 'i': case 'I': case 'f': return 4;
    case 'q': case 'Q': case 'd': case 'P': return 8;
    default: return 0;
    }
}

static PyObject *plan_invalid(const char *what) {
    PyErr_Format(PyExc_ValueError, "Plan: %s", what);
    return NULL;
}

/* Plan(nargs, kwnames, slots, objects, offsets, base, block, shared, guard, launcher,
 *      meta_base, slot_names, result): every size and index is checked here, once. */
static PyObject *plan_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    Py_ssize_t nargs;
    PyObject *kwnames, *slots, *objects, *offsets, *base, *guard, *launcher, *meta_base, *slot_names, *result;
    unsigned int block, shared;
    if (!PyArg_ParseTuple(args, "nOSO!SSIIOOOO!O", &nargs, &kwnames, &slots, &PyTuple_Type, &objects, &offsets, &base,
                          &block, &shared, &guard, &launcher, &meta_base, &PyTuple_Type, &slot_names, &result))
        return NULL;
    Py_ssize_t keywords = 0;
    if (kwnames != Py_None) {
        if (!PyTuple_CheckExact(kwnames)) return plan_invalid("kwnames must be a tuple or None");
        keywords = PyTuple_GET_SIZE(kwnames);
    }
    if (nargs < 0 || PyBytes_GET_SIZE(slots) % sizeof(SlotCheck) ||
        PyBytes_GET_SIZE(slots) / (Py_ssize_t)sizeof(SlotCheck) != nargs + keywords ||
        PyTuple_GET_SIZE(slot_names) != nargs + keywords)
        return plan_invalid("one slot check and one name per argument passed");
    if (PyBytes_GET_SIZE(offsets) % 4 || PyBytes_GET_SIZE(offsets) / 4 > MAX_ARGUMENTS ||
        PyBytes_GET_SIZE(base) > MAX_ARGUMENT_BYTES)
        return plan_invalid("too many parameters or bytes");
    if (guard != Py_None && !PyCallable_Check(guard)) return plan_invalid("guard must be callable or None");
    if (meta_base != Py_None && !PyDict_CheckExact(meta_base)) return plan_invalid("meta_base must be a dict or None");
    Plan *plan = (Plan *)type->tp_alloc(type, 0);
    if (plan == NULL) return NULL;
    plan->nargs = nargs;
    plan->nslots = nargs + keywords;
    plan->count = (uint32_t)(PyBytes_GET_SIZE(offsets) / 4);
    plan->size = (uint32_t)PyBytes_GET_SIZE(base);
    plan->block = block;
    plan->shared = shared;
    plan->slots = PyMem_Malloc(plan->nslots * sizeof(SlotCheck) + 1);
    plan->offsets = PyMem_Malloc(plan->count * 4 + 1);
    plan->base = PyMem_Malloc(plan->size + 1);
    Py_INCREF(kwnames); plan->kwnames = kwnames;
    Py_INCREF(objects); plan->objects = objects;
    Py_INCREF(guard); plan->guard = guard;
    Py_INCREF(launcher); plan->launcher = launcher;
    Py_INCREF(meta_base); plan->meta_base = meta_base;
    Py_INCREF(slot_names); plan->slot_names = slot_names;
    Py_INCREF(result); plan->result = result;
    if (plan->slots == NULL || plan->offsets == NULL || plan->base == NULL) {
        Py_DECREF(plan);
        return PyErr_NoMemory();
    }
    memcpy(plan->slots, PyBytes_AS_STRING(slots), plan->nslots * sizeof(SlotCheck));
    memcpy(plan->offsets, PyBytes_AS_STRING(offsets), plan->count * 4);
    memcpy(plan->base, PyBytes_AS_STRING(base), plan->size);
    Py_ssize_t object_count = PyTuple_GET_SIZE(objects);
    for (Py_ssize_t i = 0; i < plan->nslots; i++) {
        const SlotCheck *slot = &plan->slots[i];
        int packs = slot->check == CHECK_TENSOR || slot->check == CHECK_INT || slot->check == CHECK_FLOAT ||
                    slot->check == CHECK_BOOL;
        if (slot->check < CHECK_EQUAL || slot->check > CHECK_BOOL || (packs && (slot->parameter < 0 ||
            (uint32_t)slot->parameter >= plan->count || code_size((char)slot->code) == 0 ||
            plan->offsets[slot->parameter] + (uint32_t)code_size((char)slot->code) > plan->size)) ||
            (slot->check == CHECK_EQUAL && slot->object >= object_count) ||
            (slot->check == CHECK_TENSOR && (slot->object + 1 >= object_count || slot->code != 'P' ||
                                            !PyType_Check(PyTuple_GET_ITEM(objects, slot->object))))) {
            Py_DECREF(plan);
            return plan_invalid("a slot check is out of range");
        }
    }
    return (PyObject *)plan;
}

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_polytile_nvidia_launch.Plan",
    .tp_basicsize = sizeof(Plan),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = plan_new,
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_doc = "One way a @jit function is called, and how to launch it (see the file's comment).",
};

/* 0 when the value passes the slot's check (and is packed), NO_MATCH when it does not. */
static int check_slot(const Plan *plan, const SlotCheck *slot, PyObject *value, char *bytes, long long *device,
                      int *any_tensor) {
    PyObject *objects = plan->objects;
    char *at = slot->parameter >= 0 ? bytes + plan->offsets[slot->parameter] : NULL;
    switch (slot->check) {
    case CHECK_EQUAL: {
        PyObject *expected = PyTuple_GET_ITEM(objects, slot->object);
        if (value == expected) return 0;
        if (Py_TYPE(value) != Py_TYPE(expected)) return NO_MATCH;
        int equal = PyObject_RichCompareBool(value, expected, Py_EQ);
        if (equal < 0) PyErr_Clear();
        return equal == 1 ? 0 : NO_MATCH;
    }
    case CHECK_NONE:
        return value == Py_None ? 0 : NO_MATCH;
    case CHECK_TENSOR: {
        if (Py_TYPE(value) != (PyTypeObject *)PyTuple_GET_ITEM(objects, slot->object)) return NO_MATCH;
        PyObject *dtype = PyObject_GetAttr(value, name_dtype);
        if (dtype == NULL) { PyErr_Clear(); return NO_MATCH; }
        Py_DECREF(dtype);  /* torch's dtypes are singletons: identity is equality */
        if (dtype != PyTuple_GET_ITEM(objects, slot->object + 1)) return NO_MATCH;
        long long where, data;
        if (call_for_integer(value, name_get_device, &where) || where < 0) { PyErr_Clear(); return NO_MATCH; }
        if (*device >= 0 && where != *device) return NO_MATCH;
        if (call_for_integer(value, name_data_ptr, &data)) { PyErr_Clear(); return NO_MATCH; }
        if ((slot->hint == HINT_ALIGNED && (data & 15)) || (slot->hint == HINT_UNALIGNED && !(data & 15)))
            return NO_MATCH;
        *device = where;
        *any_tensor = 1;
        uint64_t address = (uint64_t)data;
        memcpy(at, &address, 8);
        return 0;
    }
    case CHECK_INT: {
        if (!PyLong_CheckExact(value)) return NO_MATCH;
        int overflow = 0;
        long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
        unsigned long long low_bits;
        if (overflow == 0) {
            int in_i32 = number >= INT32_MIN && number <= INT32_MAX;
            if ((slot->range == RANGE_I32) != in_i32 || slot->range == RANGE_U64) return NO_MATCH;
            low_bits = (unsigned long long)number;
        } else {
            if (slot->range != RANGE_U64 || overflow < 0) return NO_MATCH;
            low_bits = PyLong_AsUnsignedLongLong(value);
            if (low_bits == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return NO_MATCH; }
        }
        /* Python's `x & 15` on a negative int is two's complement, as here. */
        switch (slot->hint) {
        case HINT_ONE: if (low_bits != 1) return NO_MATCH; break;
        case HINT_DIVISIBLE: if (low_bits & 15) return NO_MATCH; break;
        case HINT_OTHER: if (low_bits == 1 || !(low_bits & 15)) return NO_MATCH; break;
        default: break;
        }
        return pack_scalar((char)slot->code, value, at) ? (PyErr_Clear(), NO_MATCH) : 0;
    }
    case CHECK_FLOAT:
        if (!PyFloat_CheckExact(value)) return NO_MATCH;
        return pack_scalar((char)slot->code, value, at) ? (PyErr_Clear(), NO_MATCH) : 0;
    case CHECK_BOOL:
        if (!PyBool_Check(value)) return NO_MATCH;
        return pack_scalar((char)slot->code, value, at) ? (PyErr_Clear(), NO_MATCH) : 0;
    default:
        return NO_MATCH;
    }
}

static int keywords_match(PyObject *expected, PyObject *kwnames) {
    if (kwnames == NULL) return expected == Py_None;
    if (expected == Py_None) return 0;
    if (expected == kwnames) return 1;
    Py_ssize_t n = PyTuple_GET_SIZE(kwnames);
    if (PyTuple_GET_SIZE(expected) != n) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(expected, i), *b = PyTuple_GET_ITEM(kwnames, i);
        if (a != b && PyUnicode_Compare(a, b) != 0) return 0;
    }
    return 1;
}

/* The grid as three block counts within CUDA's limits; 0 when it is one, else the
 * Python path must judge it (an empty grid, a bad one, a NumPy integer). */
static int read_grid(PyObject *grid, unsigned long counts[3]) {
    static const unsigned long limits[3] = {2147483647UL, 65535UL, 65535UL};
    Py_ssize_t n;
    PyObject **items;
    if (PyTuple_CheckExact(grid)) {
        n = PyTuple_GET_SIZE(grid);
        items = PySequence_Fast_ITEMS(grid);
    } else if (PyList_CheckExact(grid)) {
        n = PyList_GET_SIZE(grid);
        items = PySequence_Fast_ITEMS(grid);
    } else {
        return -1;
    }
    if (n < 1 || n > 3) return -1;
    for (int axis = 0; axis < 3; axis++) {
        if (axis >= n) { counts[axis] = 1; continue; }
        if (!PyLong_Check(items[axis]) || PyBool_Check(items[axis])) return -1;
        int overflow = 0;
        long long count = PyLong_AsLongLongAndOverflow(items[axis], &overflow);
        if (overflow || count < 1 || (unsigned long long)count > limits[axis]) { PyErr_Clear(); return -1; }
        counts[axis] = (unsigned long)count;
    }
    return 0;
}

/* A callable grid gets the arguments by name over the options and defaults, as the
 * Python path gives them. */
static PyObject *call_grid(const Plan *plan, PyObject *grid, PyObject *const *values) {
    PyObject *meta = PyDict_Copy(plan->meta_base);
    if (meta == NULL) return NULL;
    for (Py_ssize_t i = 0; i < plan->nslots; i++) {
        if (PyDict_SetItem(meta, PyTuple_GET_ITEM(plan->slot_names, i), values[i])) {
            Py_DECREF(meta);
            return NULL;
        }
    }
    PyObject *result = PyObject_CallOneArg(grid, meta);
    Py_DECREF(meta);
    return result;
}

static int raise_driver_error(const Plan *plan, CUresult code, int call, long long device) {
    PyObject *failure = Py_BuildValue("(ii)", (int)code, call);
    if (failure == NULL) return -1;
    PyObject *returned = PyObject_CallMethod(plan->launcher, "_raise_native", "(OL)", failure, device);
    Py_DECREF(failure);
    Py_XDECREF(returned);
    if (returned != NULL) PyErr_Format(PyExc_RuntimeError, "CUDA error %d was not reported", (int)code);
    return -1;
}

/* LAUNCHED, NO_MATCH, NEEDS_PYTHON (with *called_grid the grid's result when a callable
 * grid was called, so that the Python path does not call it again), or -1. */
static int try_plan(const Plan *plan, PyObject *grid, PyObject *const *values, Py_ssize_t nargs, PyObject *kwnames,
                    PyObject **called_grid) {
    if (nargs != plan->nargs || !keywords_match(plan->kwnames, kwnames)) return NO_MATCH;
    uint64_t storage[MAX_ARGUMENT_BYTES / 8];
    void *pointers[MAX_ARGUMENTS];
    char *bytes = (char *)storage;
    memcpy(bytes, plan->base, plan->size);
    long long device = -1;
    int any_tensor = 0;
    for (Py_ssize_t i = 0; i < plan->nslots; i++)
        if (check_slot(plan, &plan->slots[i], values[i], bytes, &device, &any_tensor)) return NO_MATCH;
    if (plan->guard != Py_None) {
        PyObject *holds = PyObject_CallNoArgs(plan->guard);
        if (holds == NULL) return -1;
        Py_DECREF(holds);
        if (holds != Py_True) return NO_MATCH;  /* a global changed: the Python path recompiles */
    }
    if (device < 0) return NEEDS_PYTHON;  /* no argument says where to run */
    unsigned long counts[3];
    if (PyTuple_CheckExact(grid)) {
        if (read_grid(grid, counts)) return NEEDS_PYTHON;
    } else if (plan->meta_base != Py_None && PyCallable_Check(grid)) {
        PyObject *result = call_grid(plan, grid, values);
        if (result == NULL) return -1;
        *called_grid = result;
        if (read_grid(result, counts)) return NEEDS_PYTHON;
    } else {
        return NEEDS_PYTHON;
    }
    PyObject *table = PyObject_GetAttr(plan->launcher, name_table);
    if (table == NULL) return -1;
    if (!PyBytes_Check(table) || device >= PyBytes_GET_SIZE(table) / (Py_ssize_t)sizeof(Loaded)) {
        Py_DECREF(table);
        return NEEDS_PYTHON;
    }
    Loaded loaded = ((const Loaded *)PyBytes_AS_STRING(table))[device];
    Py_DECREF(table);
    if (!loaded.function) return NEEDS_PYTHON;  /* not loaded on that device yet */
    void *stream = NULL;
    if (any_tensor) {
        if (current_stream == NULL) return NEEDS_PYTHON;
        PyObject *index = PyLong_FromLongLong(device);
        if (index == NULL) return -1;
        PyObject *raw = PyObject_CallOneArg(current_stream, index);
        Py_DECREF(index);
        if (raw == NULL) return -1;
        stream = PyLong_AsVoidPtr(raw);
        Py_DECREF(raw);
        if (stream == NULL && PyErr_Occurred()) return -1;
    }
    for (uint32_t i = 0; i < plan->count; i++) pointers[i] = bytes + plan->offsets[i];
    CUcontext current = NULL;
    CUresult result = ctx_get_current(&current);
    if (result) return raise_driver_error(plan, result, CALL_CTX_GET, device);
    if (current != (CUcontext)(uintptr_t)loaded.context &&
        (result = ctx_set_current((CUcontext)(uintptr_t)loaded.context)))
        return raise_driver_error(plan, result, CALL_CTX_SET, device);
    result = launch_kernel((CUfunction)(uintptr_t)loaded.function, (unsigned)counts[0], (unsigned)counts[1],
                           (unsigned)counts[2], plan->block, 1, 1, plan->shared, stream,
                           plan->count ? pointers : NULL, NULL);
    if (result) return raise_driver_error(plan, result, CALL_LAUNCH, device);
    return LAUNCHED;
}

typedef struct {
    PyObject_HEAD
    PyObject *slow;  /* slow(grid, args, kwargs or None) -> compiled kernel */
    Plan *plans[MAX_PLANS];
    int count;
} Dispatcher;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Dispatcher *dispatcher;
    PyObject *grid;
} Bound;

static PyTypeObject DispatcherType, BoundType;

static PyObject *call_slow(Dispatcher *dispatcher, PyObject *grid, PyObject *const *values, Py_ssize_t nargs,
                           PyObject *kwnames) {
    PyObject *args = PyTuple_New(nargs);
    if (args == NULL) return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        Py_INCREF(values[i]);
        PyTuple_SET_ITEM(args, i, values[i]);
    }
    PyObject *kwargs = Py_None;
    Py_INCREF(kwargs);
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames)) {
        Py_DECREF(kwargs);
        kwargs = PyDict_New();
        for (Py_ssize_t i = 0; kwargs != NULL && i < PyTuple_GET_SIZE(kwnames); i++) {
            if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i), values[nargs + i])) Py_CLEAR(kwargs);
        }
        if (kwargs == NULL) {
            Py_DECREF(args);
            return NULL;
        }
    }
    PyObject *result = PyObject_CallFunctionObjArgs(dispatcher->slow, grid, args, kwargs, NULL);
    Py_DECREF(args);
    Py_DECREF(kwargs);
    return result;
}

static PyObject *bound_call(PyObject *self, PyObject *const *values, size_t nargsf, PyObject *kwnames) {
    Bound *bound = (Bound *)self;
    Dispatcher *dispatcher = bound->dispatcher;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    /* Plans held for the call: another thread may learn or clear while torch or a grid
     * function runs (they may release the GIL). */
    Plan *plans[MAX_PLANS];
    int count = dispatcher->count;
    for (int i = 0; i < count; i++) {
        plans[i] = dispatcher->plans[i];
        Py_INCREF(plans[i]);
    }
    PyObject *grid = bound->grid, *called_grid = NULL, *result = NULL;
    int status = NO_MATCH;
    for (int i = 0; i < count && status == NO_MATCH; i++) {
        status = try_plan(plans[i], grid, values, nargs, kwnames, &called_grid);
        if (status == LAUNCHED) {
            result = plans[i]->result;
            Py_INCREF(result);
        }
    }
    for (int i = 0; i < count; i++) Py_DECREF(plans[i]);
    if (status == -1 || status == LAUNCHED) {
        Py_XDECREF(called_grid);
        return result;
    }
    result = call_slow(dispatcher, called_grid != NULL ? called_grid : grid, values, nargs, kwnames);
    Py_XDECREF(called_grid);
    return result;
}

static void bound_dealloc(Bound *bound) {
    Py_XDECREF(bound->dispatcher);
    Py_XDECREF(bound->grid);
    Py_TYPE(bound)->tp_free((PyObject *)bound);
}

static PyTypeObject BoundType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_polytile_nvidia_launch.Bound",
    .tp_basicsize = sizeof(Bound),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Bound, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = (destructor)bound_dealloc,
    .tp_doc = "kernel[grid]: call it with the kernel's arguments to launch.",
};

static PyObject *dispatcher_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *slow;
    if (!PyArg_ParseTuple(args, "O:Dispatcher", &slow)) return NULL;
    if (!PyCallable_Check(slow)) {
        PyErr_SetString(PyExc_TypeError, "Dispatcher(slow): slow must be callable");
        return NULL;
    }
    Dispatcher *dispatcher = (Dispatcher *)type->tp_alloc(type, 0);
    if (dispatcher == NULL) return NULL;
    Py_INCREF(slow);
    dispatcher->slow = slow;
    dispatcher->count = 0;
    return (PyObject *)dispatcher;
}

static void dispatcher_clear_plans(Dispatcher *dispatcher) {
    int count = dispatcher->count;
    dispatcher->count = 0;
    for (int i = 0; i < count; i++) Py_DECREF(dispatcher->plans[i]);
}

static void dispatcher_dealloc(Dispatcher *dispatcher) {
    dispatcher_clear_plans(dispatcher);
    Py_XDECREF(dispatcher->slow);
    Py_TYPE(dispatcher)->tp_free((PyObject *)dispatcher);
}

/* bind(grid): what kernel[grid] returns. */
static PyObject *dispatcher_bind(Dispatcher *dispatcher, PyObject *grid) {
    Bound *bound = PyObject_New(Bound, &BoundType);
    if (bound == NULL) return NULL;
    bound->vectorcall = bound_call;
    Py_INCREF(dispatcher);
    bound->dispatcher = dispatcher;
    Py_INCREF(grid);
    bound->grid = grid;
    return (PyObject *)bound;
}

/* learn(plan): tried first from now on; the least recent beyond MAX_PLANS is dropped. */
static PyObject *dispatcher_learn(Dispatcher *dispatcher, PyObject *plan) {
    if (!PyObject_TypeCheck(plan, &PlanType)) {
        PyErr_SetString(PyExc_TypeError, "learn takes a Plan");
        return NULL;
    }
    Plan *dropped = dispatcher->count == MAX_PLANS ? dispatcher->plans[MAX_PLANS - 1] : NULL;
    int kept = dispatcher->count == MAX_PLANS ? MAX_PLANS - 1 : dispatcher->count;
    memmove(&dispatcher->plans[1], &dispatcher->plans[0], kept * sizeof(Plan *));
    Py_INCREF(plan);
    dispatcher->plans[0] = (Plan *)plan;
    dispatcher->count = kept + 1;
    Py_XDECREF(dropped);
    Py_RETURN_NONE;
}

static PyObject *dispatcher_forget(Dispatcher *dispatcher, PyObject *unused) {
    dispatcher_clear_plans(dispatcher);
    Py_RETURN_NONE;
}

static PyObject *dispatcher_results(Dispatcher *dispatcher, void *unused) {
    PyObject *results = PyTuple_New(dispatcher->count);
    for (int i = 0; results != NULL && i < dispatcher->count; i++) {
        Py_INCREF(dispatcher->plans[i]->result);
        PyTuple_SET_ITEM(results, i, dispatcher->plans[i]->result);
    }
    return results;
}

static PyMethodDef dispatcher_methods[] = {
    {"bind", (PyCFunction)dispatcher_bind, METH_O, "bind(grid): the callable kernel[grid] returns."},
    {"learn", (PyCFunction)dispatcher_learn, METH_O, "learn(plan): launch calls matching the plan here."},
    {"forget", (PyCFunction)dispatcher_forget, METH_NOARGS, "Drop every plan (the next calls go to slow)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef dispatcher_getset[] = {
    {"results", (getter)dispatcher_results, NULL, "The compiled kernels of the plans, most recent first.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject DispatcherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_polytile_nvidia_launch.Dispatcher",
    .tp_basicsize = sizeof(Dispatcher),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = dispatcher_new,
    .tp_dealloc = (destructor)dispatcher_dealloc,
    .tp_methods = dispatcher_methods,
    .tp_getset = dispatcher_getset,
    .tp_doc = "Dispatcher(slow): kernel[grid](...) launched in C for the calls it has plans for.",
};

static PyMethodDef methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL, "Pack and launch (see the file's comment)."},
    {"launch_packed", launch_packed, METH_VARARGS, "Launch with the arguments already packed."},
    {"configure", configure, METH_VARARGS, "Set the driver entry points and the current-stream callable."},
    {"set_current_stream", set_current_stream, METH_O, "Set the callable giving a device's current stream."},
    {"add_tensor_type", add_tensor_type, METH_O, "Read pointer arguments of this type in C."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_polytile_nvidia_launch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__polytile_nvidia_launch(void) {
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
        PyModule_AddObject(self, "Dispatcher", (PyObject *)&DispatcherType)) {
        Py_DECREF(self);
        return NULL;
    }
    return self;
}
