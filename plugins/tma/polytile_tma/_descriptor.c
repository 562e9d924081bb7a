/* polytile_tma._descriptor: the fields of a host TensorDescriptor and what a launch
 * passes for one, in C (polytile_tma.host builds TensorDescriptor on DescriptorCore).
 *
 * Why C: a launch may make its descriptors every time (Triton's own tutorials do:
 * TensorDescriptor.from_tensor(...) in the host function that launches), and issue 15
 * asks that three new descriptors cost at most half again a launch with three pointers.
 * In Python, building one descriptor and keying it costs microseconds (a dataclass, its
 * checks, the key's tuples); here it costs what torch's accessors cost.
 *
 * What lives here is the fast path only, for the common case: a torch tensor of a dtype
 * seen before, fields of plain ints in tuples or lists, every rule kept.  Everything
 * else (NumPy arrays, array-likes, NumPy integers, broken descriptors, the words of
 * every error) is decided by polytile_tma.host in Python, which this module calls back
 * (configure() hands it the functions).  polytile_tma.host has the same behaviour in
 * Python for installs without a C compiler, and the tests check that both agree.
 *
 * The launch cache: key_and_parts(desc) answers (key, parts), the specialization key
 * piece and the parameters the descriptor passes as (see polytile_tma.arguments).  The
 * descriptor keeps its last answer with the objects it came from: the base, each field
 * object (and, for a list, a copy of its entries: a list may change in place), the
 * base's dtype and address.  The answer is reused only while all of them are the same;
 * assigning a field drops it. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <stddef.h>

enum { MAX_RANK = 5, ALIGNMENT = 16 };
#define MAX_BLOCK_ELEMENTS (1LL << 20)
/* Maps kept by bulk_key_and_parts before the table is cleared (a long run of new arrays). */
#define MAX_MAPS 4096

/* From configure(): Python's side of every decision this file does not make. */
static PyObject *slow_init;          /* slow_init(desc, from_tensor): the full checks (raise what is wrong) */
static PyObject *slow_from_tensor;   /* slow_from_tensor(cls, tensor, block_shape, padding) */
static PyObject *slow_key_and_parts; /* slow_key_and_parts(desc) -> (key, parts) */
static PyObject *torch_types;        /* set: the torch tensor types seen (with an address) */
static PyObject *dtype_facts;        /* dict: dtype -> (element, bytes, floating) */
/* From configure_bulk(): Hopper's tensor maps. */
static PyObject *bulk_plans;         /* dict: key -> plan or None, filled by plan_of */
static PyObject *plan_of;            /* plan_of(key) -> plan or None */
static PyObject *encode_map;         /* encode_map(key, parts, address) -> bytes */
static PyObject *slow_bulk_key_and_parts;  /* the same as bulk_key_and_parts, in Python */
static PyObject *maps;               /* dict: (address, key, parts[1:]) -> bytes */
static uint64_t maps_generation;     /* bumped by forget_maps: a descriptor's kept map is of one */

static PyObject *str_zero, *str_nan, *str_data_ptr, *str_dtype, *str_shape, *str_stride, *str_get_device;
static PyObject *field_names[5];   /* interned "base", "shape", ... */
static PyObject *core_getsets[5];  /* the core type's descriptors of those fields */

typedef struct {
    PyObject_HEAD
    PyObject *fields[5];  /* base, shape, strides, block_shape, padding */
    /* The launch cache (see the file's comment); key NULL when there is none.  The parts
     * after the base are kept as integers: a launch through the native dispatcher packs
     * them from here, and the tuples Python's key_and_parts answers are made on demand. */
    PyObject *key;        /* the specialization key piece (shared among descriptors keyed alike) */
    uint64_t answer_id;   /* which answer this is (every compute makes a new one) */
    Py_ssize_t nvalues;   /* shape, then every stride but the last */
    long long values[2 * MAX_RANK - 1];
    PyObject *pair;       /* (key, parts) as tuples, once asked for */
    PyObject *seen[5];    /* the field objects the answer was computed from */
    PyObject *copies[3];  /* tuple copies of shape, strides, block_shape where those are lists */
    PyObject *seen_dtype;
    /* The base's address the answer was checked at; from_tensor leaves it unread
     * (address_known 0): the launch reads the address anyway, and checks it then. */
    uint64_t seen_address;
    int address_known;
    /* The tensor map of `pair` (bytes; None when its key's blocks do not move as bulk
     * copies), found in generation `map_generation` of the kept maps (forget_maps starts
     * a new one), for answer `map_answer`. */
    PyObject *map;
    uint64_t map_answer, map_generation;
    PyObject *mapped;     /* bulk_key_and_parts's answer with that map (Python's launch path) */
} Descriptor;

enum { BASE = 0, SHAPE = 1, STRIDES = 2, BLOCK = 3, PADDING = 4 };
static const char *const FIELD_NAMES[5] = {"base", "shape", "strides", "block_shape", "padding"};

static uint64_t answers_made;  /* answer ids: unique in the process */

static void forget(Descriptor *d) {
    d->answer_id = 0;  /* no answer: nothing kept for one may be taken for the next */
    Py_CLEAR(d->key);
    Py_CLEAR(d->pair);
    for (int i = 0; i < 5; i++) Py_CLEAR(d->seen[i]);
    for (int i = 0; i < 3; i++) Py_CLEAR(d->copies[i]);
    Py_CLEAR(d->seen_dtype);
    Py_CLEAR(d->map);
    Py_CLEAR(d->mapped);
}

/* A subclass (TensorDescriptor is one) is a heap type: Python's subtype_traverse and
 * subtype_dealloc visit and release the type, the __dict__ and the weak references, and
 * call these for the rest. */
static int descriptor_traverse(Descriptor *d, visitproc visit, void *arg) {
    for (int i = 0; i < 5; i++) { Py_VISIT(d->fields[i]); Py_VISIT(d->seen[i]); }
    for (int i = 0; i < 3; i++) Py_VISIT(d->copies[i]);
    Py_VISIT(d->key);
    Py_VISIT(d->pair);
    Py_VISIT(d->seen_dtype);
    Py_VISIT(d->map);
    Py_VISIT(d->mapped);
    return 0;
}

static int descriptor_clear(Descriptor *d) {
    for (int i = 0; i < 5; i++) Py_CLEAR(d->fields[i]);
    forget(d);
    return 0;
}

static void descriptor_dealloc(Descriptor *d) {
    PyObject_GC_UnTrack(d);
    descriptor_clear(d);
    Py_TYPE(d)->tp_free((PyObject *)d);
}

/* ---- reading a torch base and plain int fields ------------------------------------ */

/* The address of `base` (data_ptr()) into *address: 1, 0 when it has none to give (an
 * exception is cleared: the Python path says why), -1 never. */
static int read_address(PyObject *base, uint64_t *address) {
    PyObject *ptr = PyObject_CallMethodNoArgs(base, str_data_ptr);
    if (ptr == NULL) { PyErr_Clear(); return 0; }
    unsigned long long value = PyLong_Check(ptr) ? PyLong_AsUnsignedLongLong(ptr) : (unsigned long long)-1;
    Py_DECREF(ptr);
    if (value == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    *address = (uint64_t)value;
    return 1;
}

/* A field that is a tuple (torch.Size among them) or an exact list of exact ints that fit
 * in 64 bits: its length, and its entries into values; -1 otherwise (the Python path). */
static Py_ssize_t read_ints(PyObject *field, long long *values) {
    PyObject **items;
    Py_ssize_t n;
    if (PyTuple_Check(field)) { items = &PyTuple_GET_ITEM(field, 0); n = PyTuple_GET_SIZE(field); }
    else if (PyList_CheckExact(field)) { items = PySequence_Fast_ITEMS(field); n = PyList_GET_SIZE(field); }
    else return -1;
    if (n < 1 || n > MAX_RANK) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyLong_CheckExact(items[i])) return -1;
        int overflow = 0;
        values[i] = PyLong_AsLongLongAndOverflow(items[i], &overflow);
        if (overflow || (values[i] == -1 && PyErr_Occurred())) { PyErr_Clear(); return -1; }
    }
    return n;
}

/* An exact tuple of the field's entries (the same int objects). */
static PyObject *as_tuple(PyObject *field) {
    if (PyTuple_CheckExact(field)) { Py_INCREF(field); return field; }
    return PySequence_Tuple(field);  /* a list or a tuple subclass (torch.Size) */
}

static PyObject *divisible_by_16(const long long *values, Py_ssize_t n) {
    PyObject *tuple = PyTuple_New(n);
    if (tuple == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *flag = values[i] % 16 == 0 ? Py_True : Py_False;
        Py_INCREF(flag);
        PyTuple_SET_ITEM(tuple, i, flag);
    }
    return tuple;
}

/* The keys made last, reused by descriptors keyed alike (a launch that makes its
 * descriptors every time makes the same few keys again and again): no tuples to build,
 * and the plan's comparison with its own key meets the same objects. */
enum { RECENT_KEYS = 8 };
static PyObject *recent_keys[RECENT_KEYS];
/* Whether each recent key's blocks move as bulk copies (find_map): NULL not asked yet, else
 * Py_True or Py_False (a key's tuple is hashed once, not at every new descriptor). */
static PyObject *recent_bulk[RECENT_KEYS];
static int next_recent;

static void forget_recent_bulk(void) {
    for (int k = 0; k < RECENT_KEYS; k++) recent_bulk[k] = NULL;
}

static int same_flags(PyObject *flags, const long long *values, Py_ssize_t n) {
    if (PyTuple_GET_SIZE(flags) != n) return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if ((PyTuple_GET_ITEM(flags, i) == Py_True) != (values[i] % 16 == 0)) return 0;
    return 1;
}

/* A recent key equal to the one these facts make (a new reference), or NULL. */
static PyObject *recent_key(PyObject *element, const long long *block, PyObject *padding, const long long *shape,
                            const long long *strides, Py_ssize_t rank) {
    for (int k = 0; k < RECENT_KEYS; k++) {
        PyObject *key = recent_keys[k];
        if (key == NULL || PyTuple_GET_ITEM(key, 0) != element || PyTuple_GET_ITEM(key, 2) != padding) continue;
        PyObject *block_tuple = PyTuple_GET_ITEM(key, 1);
        if (PyTuple_GET_SIZE(block_tuple) != rank) continue;
        int same = 1;
        for (Py_ssize_t i = 0; same && i < rank; i++)
            same = PyLong_AsLongLong(PyTuple_GET_ITEM(block_tuple, i)) == block[i];
        if (same && same_flags(PyTuple_GET_ITEM(key, 3), shape, rank) &&
            same_flags(PyTuple_GET_ITEM(key, 4), strides, rank - 1)) {
            Py_INCREF(key);
            return key;
        }
    }
    return NULL;
}

static void remember_key(PyObject *key) {
    recent_bulk[next_recent] = NULL;  /* before the old key's release, which may run Python */
    Py_INCREF(key);
    Py_XSETREF(recent_keys[next_recent], key);
    next_recent = (next_recent + 1) % RECENT_KEYS;
}

/* The recent key's slot of `key` (the same object), or -1. */
static int recent_slot(PyObject *key) {
    for (int k = 0; k < RECENT_KEYS; k++)
        if (recent_keys[k] == key) return k;
    return -1;
}

/* The launch answer of a descriptor, computed here when it is the common case: 1 (the
 * cache is set), 0 (not the common case, or a rule is broken: the Python path decides),
 * -1 (an exception: out of memory).  With read_base_address 0 the base's address is left
 * for the launch to read and check (still_holds): from_tensor's descriptors are made to
 * be launched, and every launch reads the address. */
static int compute_from(Descriptor *d, PyObject *const *f, int read_base_address) {
    PyObject *base = f[BASE], *padding = f[PADDING];
    if (base == NULL || torch_types == NULL) return 0;
    int known = PySet_Contains(torch_types, (PyObject *)Py_TYPE(base));
    if (known <= 0) { if (known < 0) PyErr_Clear(); return 0; }
    PyObject *dtype = PyObject_GetAttr(base, str_dtype);
    if (dtype == NULL) { PyErr_Clear(); return 0; }
    PyObject *facts = PyDict_GetItemWithError(dtype_facts, dtype);  /* borrowed */
    if (facts == NULL || !PyTuple_Check(facts) || PyTuple_GET_SIZE(facts) != 3) {
        PyErr_Clear();
        Py_DECREF(dtype);
        return 0;
    }
    long long element_bytes = PyLong_AsLongLong(PyTuple_GET_ITEM(facts, 1));
    int floating = PyObject_IsTrue(PyTuple_GET_ITEM(facts, 2));
    uint64_t address = 0;
    if (element_bytes <= 0 || floating < 0 ||
        (read_base_address && (!read_address(base, &address) || address % ALIGNMENT))) {
        PyErr_Clear();
        Py_DECREF(dtype);
        return 0;
    }
    /* The rules, as polytile_tma.host._plainly_valid checks them. */
    long long shape[MAX_RANK], strides[MAX_RANK], block[MAX_RANK];
    Py_ssize_t rank = read_ints(f[SHAPE], shape);
    int valid = rank > 0 && read_ints(f[STRIDES], strides) == rank &&
                read_ints(f[BLOCK], block) == rank && strides[rank - 1] == 1 &&
                (padding == str_zero || padding == str_nan ||
                 (PyUnicode_CheckExact(padding) && (PyUnicode_Compare(padding, str_zero) == 0 ||
                                                   PyUnicode_Compare(padding, str_nan) == 0)));
    if (valid) {
        int nan = padding == str_nan || (padding != str_zero && PyUnicode_Compare(padding, str_nan) == 0);
        valid = !nan || floating;
        padding = nan ? str_nan : str_zero;  /* interned: equal keys share their objects */
    }
    long long count = 1;
    for (Py_ssize_t i = 0; valid && i < rank; i++) {
        long long b = block[i];
        valid = shape[i] > 0 && b > 0 && b <= MAX_BLOCK_ELEMENTS && (b & (b - 1)) == 0;
        if (valid) count *= b;
        valid = valid && count <= MAX_BLOCK_ELEMENTS;
        if (valid && i < rank - 1) {
            /* |stride| * bytes stays far from overflow: strides are checked < 2**56 first */
            long long s = strides[i];
            valid = s > -(1LL << 56) && s < (1LL << 56) && (s * element_bytes) % ALIGNMENT == 0;
        }
    }
    if (!valid) { PyErr_Clear(); Py_DECREF(dtype); return 0; }

    PyObject *element = PyTuple_GET_ITEM(facts, 0);
    PyObject *key = recent_key(element, block, padding, shape, strides, rank);
    if (key == NULL) {
        /* key = (element, block, padding, shape divisible by 16, strides but the last divisible by 16) */
        PyObject *block_tuple = as_tuple(f[BLOCK]);
        PyObject *shape16 = divisible_by_16(shape, rank), *stride16 = divisible_by_16(strides, rank - 1);
        if (block_tuple && shape16 && stride16)
            key = PyTuple_Pack(5, element, block_tuple, padding, shape16, stride16);
        Py_XDECREF(block_tuple); Py_XDECREF(shape16); Py_XDECREF(stride16);
        if (key != NULL) remember_key(key);
    }
    if (key == NULL) { Py_DECREF(dtype); return -1; }
    Py_XSETREF(d->key, key);
    Py_CLEAR(d->pair);
    d->nvalues = 2 * rank - 1;
    for (Py_ssize_t i = 0; i < rank; i++) d->values[i] = shape[i];
    for (Py_ssize_t i = 0; i + 1 < rank; i++) d->values[rank + i] = strides[i];
    d->answer_id = ++answers_made;
    for (int i = 0; i < 5; i++) { Py_INCREF(f[i]); Py_XSETREF(d->seen[i], f[i]); }
    /* A list block's entries are the key's block (equal values): no copy to make. */
    if (PyList_Check(f[BLOCK])) {
        PyObject *copy = PyTuple_GET_ITEM(key, 1);
        Py_INCREF(copy);
        Py_XSETREF(d->copies[BLOCK - SHAPE], copy);
    }
    for (int i = 0; i < 2; i++) {
        if (!PyList_Check(f[SHAPE + i])) continue;
        PyObject *copy = PyList_AsTuple(f[SHAPE + i]);
        if (copy == NULL) { forget(d); Py_DECREF(dtype); return -1; }
        Py_XSETREF(d->copies[i], copy);
    }
    Py_XSETREF(d->seen_dtype, dtype);
    d->seen_address = address;
    d->address_known = read_base_address;
    return 1;
}


/* compute_from over strong references to the fields: torch's accessors (Python code) may
 * reassign a field meanwhile; an answer computed from fields no longer there is dropped. */
static int compute(Descriptor *d) {
    PyObject *f[5];
    for (int i = 0; i < 5; i++) { f[i] = d->fields[i]; Py_XINCREF(f[i]); }
    forget(d);
    int done = f[BASE] != NULL ? compute_from(d, f, 1) : 0;
    for (int i = 0; done > 0 && i < 5; i++)
        if (d->fields[i] != f[i]) { forget(d); done = 0; }
    for (int i = 0; i < 5; i++) Py_XDECREF(f[i]);
    return done;
}

/* Whether the cached answer still holds: 1, 0 (compute again), never -1. */
static int still_holds(Descriptor *d) {
    if (d->key == NULL) return 0;
    for (int i = 0; i < 5; i++)
        if (d->fields[i] != d->seen[i]) return 0;
    for (int i = 0; i < 3; i++) {
        PyObject *copy = d->copies[i];
        if (copy == NULL) continue;  /* a tuple: it cannot change */
        PyObject *list = d->fields[SHAPE + i];
        Py_ssize_t n = PyList_GET_SIZE(list);
        if (n != PyTuple_GET_SIZE(copy)) return 0;
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *now = PyList_GET_ITEM(list, j), *then = PyTuple_GET_ITEM(copy, j);
            if (now == then) continue;
            if (!PyLong_CheckExact(now)) return 0;
            int equal = PyObject_RichCompareBool(now, then, Py_EQ);
            if (equal != 1) { PyErr_Clear(); return 0; }
        }
    }
    PyObject *base = d->fields[BASE];
    Py_INCREF(base);  /* held across torch's accessors, which may reassign the field */
    PyObject *dtype = PyObject_GetAttr(base, str_dtype);
    uint64_t address;
    int holds = dtype != NULL && dtype == d->seen_dtype && read_address(base, &address) &&
                (d->address_known ? address == d->seen_address : address % ALIGNMENT == 0) && d->key != NULL &&
                d->fields[BASE] == base;
    if (holds && !d->address_known) {  /* from_tensor's answer, at its first launch */
        d->seen_address = address;
        d->address_known = 1;
    }
    if (dtype == NULL) PyErr_Clear();
    Py_XDECREF(dtype);  /* torch's dtypes are singletons: identity is equality */
    Py_DECREF(base);
    return holds;
}

/* ---- construction ------------------------------------------------------------------- */

/* After the fields are set: the common case is checked here, anything else by Python. */
static int settle(Descriptor *d, int fresh) {
    /* A descriptor from_tensor has just made is reachable only through the garbage
     * collector: compute_from reads its fields in place (from_tensor holds strong
     * references to them), and an answer whose fields were replaced meanwhile is dropped,
     * as compute() drops one. */
    int done;
    if (fresh) {
        PyObject *f[5];
        memcpy(f, d->fields, sizeof f);
        done = compute_from(d, f, 0);
        for (int i = 0; done > 0 && i < 5; i++)
            if (d->fields[i] != f[i]) { forget(d); done = 0; }
    } else {
        done = compute(d);
    }
    if (done != 0) return done > 0 ? 0 : -1;
    if (slow_init == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "polytile_tma._descriptor is not configured (import polytile_tma.host)");
        return -1;
    }
    /* from_tensor's descriptor (fresh) leaves the base's address to the launch there too. */
    PyObject *result = PyObject_CallFunctionObjArgs(slow_init, (PyObject *)d, fresh ? Py_True : Py_False, NULL);
    if (result == NULL) return -1;
    Py_DECREF(result);
    return 0;
}

static void set_fields(Descriptor *d, PyObject *const *values) {
    for (int i = 0; i < 5; i++) {
        Py_INCREF(values[i]);
        Py_XSETREF(d->fields[i], values[i]);
    }
}

static int descriptor_init(Descriptor *d, PyObject *args, PyObject *kwds) {
    static char *names[] = {"base", "shape", "strides", "block_shape", "padding", NULL};
    PyObject *values[5] = {NULL, NULL, NULL, NULL, str_zero};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO|O:TensorDescriptor", names, &values[0], &values[1],
                                     &values[2], &values[3], &values[4]))
        return -1;
    set_fields(d, values);
    return settle(d, 0);
}

static int reads_core_fields(PyTypeObject *type);

/* TensorDescriptor.from_tensor(tensor, block_shape, padding="zero"): a torch tensor of a
 * known type here, anything else in Python. */
static PyObject *descriptor_from_tensor(PyObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    static const char *const names[] = {"tensor", "block_shape", "padding"};
    PyObject *given[3] = {NULL, NULL, str_zero};
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs > 3) {
        PyErr_Format(PyExc_TypeError, "from_tensor() takes at most 3 arguments (%zd given)", nargs);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) given[i] = args[i];
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        int found = 0;
        for (int i = 0; i < 3 && !found; i++)
            if (PyUnicode_CompareWithASCIIString(name, names[i]) == 0) {
                if (i < nargs) {
                    PyErr_Format(PyExc_TypeError, "from_tensor() got multiple values for argument '%s'", names[i]);
                    return NULL;
                }
                given[i] = args[nargs + k];
                found = 1;
            }
        if (!found) {
            PyErr_Format(PyExc_TypeError, "from_tensor() got an unexpected keyword argument '%U'", name);
            return NULL;
        }
    }
    for (int i = 0; i < 2; i++)
        if (given[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "from_tensor() missing required argument '%s'", names[i]);
            return NULL;
        }
    PyTypeObject *type = (PyTypeObject *)cls;
    int known = torch_types == NULL ? 0 : PySet_Contains(torch_types, (PyObject *)Py_TYPE(given[0]));
    if (known < 0) PyErr_Clear();
    if (known <= 0 || type->tp_init != (initproc)descriptor_init || type->tp_new != PyType_GenericNew ||
        !reads_core_fields(type)) {
        if (slow_from_tensor == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "polytile_tma._descriptor is not configured");
            return NULL;
        }
        return PyObject_CallFunctionObjArgs(slow_from_tensor, cls, given[0], given[1], given[2], NULL);
    }
    PyObject *values[5] = {given[0], NULL, NULL, given[1], given[2]};
    values[SHAPE] = PyObject_GetAttr(given[0], str_shape);
    if (values[SHAPE] == NULL) return NULL;
    values[STRIDES] = PyObject_CallMethodNoArgs(given[0], str_stride);
    if (values[STRIDES] == NULL) { Py_DECREF(values[SHAPE]); return NULL; }
    Descriptor *d = (Descriptor *)type->tp_alloc(type, 0);
    if (d != NULL) set_fields(d, values);
    if (d != NULL && settle(d, 1) < 0) Py_CLEAR(d);
    Py_DECREF(values[SHAPE]);  /* after settle: the fields it reads in place stay alive */
    Py_DECREF(values[STRIDES]);
    return (PyObject *)d;
}

/* ---- the fields: attributes, as a dataclass's ---------------------------------------- */

static PyObject *get_field(Descriptor *d, void *which) {
    PyObject *value = d->fields[(intptr_t)which];
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "'TensorDescriptor' object has no attribute '%s'",
                     FIELD_NAMES[(intptr_t)which]);
        return NULL;
    }
    Py_INCREF(value);
    return value;
}

static int set_field(Descriptor *d, PyObject *value, void *which) {
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "the field '%s' of a TensorDescriptor cannot be deleted",
                     FIELD_NAMES[(intptr_t)which]);
        return -1;
    }
    Py_INCREF(value);
    Py_XSETREF(d->fields[(intptr_t)which], value);
    forget(d);
    return 0;
}

static PyGetSetDef descriptor_fields[] = {
    {"base", (getter)get_field, (setter)set_field, "The tensor described.", (void *)BASE},
    {"shape", (getter)get_field, (setter)set_field, "The described tensor's shape.", (void *)SHAPE},
    {"strides", (getter)get_field, (setter)set_field, "Its strides, in elements.", (void *)STRIDES},
    {"block_shape", (getter)get_field, (setter)set_field, "The block one load or store moves.", (void *)BLOCK},
    {"padding", (getter)get_field, (setter)set_field, "What reads outside give: 'zero' or 'nan'.", (void *)PADDING},
    {NULL},
};

static PyMethodDef descriptor_methods[] = {
    {"from_tensor", (PyCFunction)(void (*)(void))descriptor_from_tensor, METH_FASTCALL | METH_KEYWORDS | METH_CLASS,
     "from_tensor(tensor, block_shape, padding='zero'): the descriptor of all of tensor."},
    {NULL},
};

static PyTypeObject DescriptorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "polytile_tma._descriptor.DescriptorCore",
    .tp_basicsize = sizeof(Descriptor),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)descriptor_init,
    .tp_dealloc = (destructor)descriptor_dealloc,
    .tp_traverse = (traverseproc)descriptor_traverse,
    .tp_clear = (inquiry)descriptor_clear,
    .tp_getset = descriptor_fields,
    .tp_methods = descriptor_methods,
    .tp_doc = "The fields of a TensorDescriptor and its launch cache (see polytile_tma.host).",
};

/* ---- what a launch passes ------------------------------------------------------------- */

/* Whether ``type``'s instances read their fields from the core (no subclass property or
 * __getattribute__ over them): only those take the C path.  Decided once per type. */
static PyObject *plain_types, *odd_types;  /* sets of types */

static int reads_core_fields(PyTypeObject *type) {
    if (type == &DescriptorType) return 1;
    if (PySet_Contains(plain_types, (PyObject *)type) == 1) return 1;
    if (PySet_Contains(odd_types, (PyObject *)type) == 1) return 0;
    PyErr_Clear();
    int plain = type->tp_getattro == PyObject_GenericGetAttr;
    for (int i = 0; plain && i < 5; i++) {
        PyObject *found = _PyType_Lookup(type, field_names[i]);  /* borrowed */
        plain = found != NULL && found == core_getsets[i];
    }
    if (PySet_Add(plain ? plain_types : odd_types, (PyObject *)type) < 0) PyErr_Clear();
    return plain;
}

/* The parts a launch passes for the answer of `key`, the base and these values:
 * (base, *shape, *strides[:-1]). */
static PyObject *parts_of(PyObject *base, const long long *values, Py_ssize_t nvalues) {
    PyObject *parts = PyTuple_New(1 + nvalues);
    if (parts == NULL) return NULL;
    PyTuple_SET_ITEM(parts, 0, Py_NewRef(base));
    for (Py_ssize_t i = 0; i < nvalues; i++) {
        PyObject *value = PyLong_FromLongLong(values[i]);
        if (value == NULL) { Py_DECREF(parts); return NULL; }
        PyTuple_SET_ITEM(parts, 1 + i, value);
    }
    return parts;
}

/* The descriptor's answer as (key, parts) tuples (a new reference), made once per answer.
 * Making them may run Python (a garbage collection's finalizers) that changes the
 * descriptor: they are made from strong references and kept only if the answer is the same. */
static PyObject *pair_of(Descriptor *d) {
    if (d->pair != NULL) return Py_NewRef(d->pair);
    PyObject *key = Py_NewRef(d->key), *base = Py_NewRef(d->seen[BASE]);
    uint64_t id = d->answer_id;
    long long values[2 * MAX_RANK - 1];
    Py_ssize_t nvalues = d->nvalues;
    memcpy(values, d->values, sizeof values);
    PyObject *parts = parts_of(base, values, nvalues), *pair = NULL;
    if (parts != NULL) pair = PyTuple_Pack(2, key, parts);
    Py_XDECREF(parts);
    if (pair != NULL && d->answer_id == id && d->key == key && d->pair == NULL) d->pair = Py_NewRef(pair);
    Py_DECREF(key);
    Py_DECREF(base);
    return pair;
}

static PyObject *key_and_parts(PyObject *module, PyObject *value) {
    (void)module;
    if (PyObject_TypeCheck(value, &DescriptorType) && reads_core_fields(Py_TYPE(value))) {
        Descriptor *d = (Descriptor *)value;
        int done = still_holds(d) ? 1 : compute(d);
        if (done < 0) return NULL;
        if (done > 0) return pair_of(d);
    }
    if (slow_key_and_parts == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "polytile_tma._descriptor is not configured");
        return NULL;
    }
    return PyObject_CallOneArg(slow_key_and_parts, value);
}

/* The maps used last, found without building a lookup key (a launch that makes its
 * descriptors every time asks for the same few maps again and again): by address, key
 * (the same object: keys are shared, see recent_key) and the parts' shape and strides. */
enum { RECENT_MAPS = 16, MAX_PARTS = 2 * MAX_RANK };
typedef struct {
    uint64_t address;
    PyObject *key, *map;  /* strong references (no tensors: the maps outlive no array) */
    Py_ssize_t count;
    long long values[MAX_PARTS];
} RecentMap;
static RecentMap recent_maps[RECENT_MAPS];
static int next_map;

static PyObject *recent_map(uint64_t address, PyObject *key, const long long *values, Py_ssize_t count) {
    for (int k = 0; k < RECENT_MAPS; k++) {
        RecentMap *entry = &recent_maps[k];
        if (entry->map == NULL || entry->address != address || entry->key != key || entry->count != count ||
            memcmp(entry->values, values, (size_t)count * sizeof(long long)) != 0)
            continue;
        return Py_NewRef(entry->map);
    }
    return NULL;
}

static void remember_map(uint64_t address, PyObject *key, const long long *values, Py_ssize_t count,
                         PyObject *map) {
    if (count > MAX_PARTS) return;
    RecentMap *entry = &recent_maps[next_map];
    memcpy(entry->values, values, (size_t)count * sizeof(long long));
    Py_INCREF(key); Py_XSETREF(entry->key, key);
    Py_INCREF(map); Py_XSETREF(entry->map, map);
    entry->address = address;
    entry->count = count;
    next_map = (next_map + 1) % RECENT_MAPS;
}

static void forget_recent_maps(void) {
    for (int k = 0; k < RECENT_MAPS; k++) {
        Py_CLEAR(recent_maps[k].key);
        Py_CLEAR(recent_maps[k].map);
    }
}

/* One answer's facts, copied out of a descriptor: the calls into Python below (the plan,
 * the encoder, which releases the GIL) may let the descriptor change meanwhile. */
typedef struct {
    PyObject *key, *base;  /* strong references */
    uint64_t id, address;
    Py_ssize_t nvalues;
    long long values[2 * MAX_RANK - 1];
} Answer;

static void take_answer(Descriptor *d, Answer *a) {
    a->key = Py_NewRef(d->key);
    a->base = Py_NewRef(d->seen[BASE]);
    a->id = d->answer_id;
    a->address = d->seen_address;
    a->nvalues = d->nvalues;
    memcpy(a->values, d->values, sizeof a->values);
}

static void drop_answer(Answer *a) {
    Py_CLEAR(a->key);
    Py_CLEAR(a->base);
}

/* The tensor map of answer `a` of `d`: a new reference to its bytes, to None when the
 * key's blocks do not move as bulk copies, or NULL with an exception.  Maps are kept per
 * (address, key, shape, strides); the descriptor keeps its own while its answer is `a`. */
static PyObject *find_map(Descriptor *d, const Answer *a) {
    if (d->map != NULL && d->map_answer == a->id && d->map_generation == maps_generation) return Py_NewRef(d->map);
    uint64_t generation = maps_generation;
    PyObject *key = a->key, *tensor_map = NULL;
    int slot = recent_slot(key);
    PyObject *bulk = slot >= 0 ? recent_bulk[slot] : NULL;
    if (bulk == NULL) {
        PyObject *plan = PyDict_GetItemWithError(bulk_plans, key);  /* borrowed */
        if (plan == NULL) {
            if (PyErr_Occurred()) return NULL;
            plan = PyObject_CallOneArg(plan_of, key);  /* fills bulk_plans */
            if (plan == NULL) return NULL;
            Py_DECREF(plan);  /* kept by bulk_plans (or None) */
        }
        bulk = plan == Py_None ? Py_False : Py_True;
        if (slot >= 0 && recent_keys[slot] == key) recent_bulk[slot] = bulk;
    }
    if (bulk == Py_False) tensor_map = Py_NewRef(Py_None);
    if (tensor_map == NULL) tensor_map = recent_map(a->address, key, a->values, a->nvalues);
    if (tensor_map == NULL) {
        PyObject *lookup = NULL, *parts = parts_of(a->base, a->values, a->nvalues);
        PyObject *where = PyLong_FromUnsignedLongLong(a->address);
        PyObject *rest = parts != NULL ? PyTuple_GetSlice(parts, 1, 1 + a->nvalues) : NULL;
        if (rest != NULL && where != NULL) lookup = PyTuple_Pack(3, where, key, rest);
        Py_XDECREF(rest);
        if (lookup != NULL) {
            tensor_map = PyDict_GetItemWithError(maps, lookup);
            if (tensor_map != NULL) Py_INCREF(tensor_map);
            else if (!PyErr_Occurred()) {
                tensor_map = PyObject_CallFunctionObjArgs(encode_map, key, parts, where, NULL);
                if (tensor_map != NULL && !PyBytes_Check(tensor_map)) {
                    PyErr_SetString(PyExc_TypeError, "encode_map must answer bytes");
                    Py_CLEAR(tensor_map);
                }
                if (tensor_map != NULL) {
                    if (PyDict_GET_SIZE(maps) >= MAX_MAPS) PyDict_Clear(maps);
                    if (PyDict_SetItem(maps, lookup, tensor_map) < 0) Py_CLEAR(tensor_map);
                }
            }
        }
        Py_XDECREF(parts);
        Py_XDECREF(where);
        Py_XDECREF(lookup);
        if (tensor_map != NULL && generation == maps_generation)
            remember_map(a->address, key, a->values, a->nvalues, tensor_map);
    }
    if (tensor_map != NULL && d->answer_id == a->id && generation == maps_generation) {
        Py_CLEAR(d->mapped);  /* first: the releases below may run Python that reaches this descriptor */
        Py_INCREF(tensor_map); Py_XSETREF(d->map, tensor_map);
        d->map_answer = a->id;
        d->map_generation = generation;
    }
    return tensor_map;
}

/* The plain (C) descriptor behind `value`, or NULL for anything Python must answer. */
static Descriptor *plain_descriptor(PyObject *value) {
    return PyObject_TypeCheck(value, &DescriptorType) && reads_core_fields(Py_TYPE(value)) ? (Descriptor *)value
                                                                                             : NULL;
}

/* key_and_parts, with the tensor map appended where the key's blocks move as bulk copies
 * (Hopper). */
static PyObject *bulk_key_and_parts(PyObject *module, PyObject *value) {
    PyObject *pair = key_and_parts(module, value);
    if (pair == NULL) return NULL;
    Descriptor *d = plain_descriptor(value);
    if (d == NULL || d->pair != pair || bulk_plans == NULL) {
        /* Python's answer (not the common case): Python adds the map, or says what is wrong. */
        Py_DECREF(pair);
        if (slow_bulk_key_and_parts == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "polytile_tma._descriptor is not configured for bulk copies");
            return NULL;
        }
        return PyObject_CallOneArg(slow_bulk_key_and_parts, value);
    }
    Answer a;
    take_answer(d, &a);
    PyObject *tensor_map = find_map(d, &a);
    drop_answer(&a);
    if (tensor_map == NULL || tensor_map == Py_None) {
        Py_XDECREF(tensor_map);
        if (tensor_map == NULL) Py_CLEAR(pair);
        return pair;
    }
    int kept = d->map == tensor_map && d->pair == pair;  /* the descriptor's own answer and map */
    if (kept && d->mapped != NULL) {
        Py_DECREF(tensor_map);
        Py_DECREF(pair);
        return Py_NewRef(d->mapped);
    }
    PyObject *key = PyTuple_GET_ITEM(pair, 0), *parts = PyTuple_GET_ITEM(pair, 1);
    Py_ssize_t count = PyTuple_GET_SIZE(parts);
    PyObject *full = NULL, *with_map = PyTuple_New(count + 1);
    if (with_map != NULL) {
        for (Py_ssize_t i = 0; i < count; i++) PyTuple_SET_ITEM(with_map, i, Py_NewRef(PyTuple_GET_ITEM(parts, i)));
        PyTuple_SET_ITEM(with_map, count, Py_NewRef(tensor_map));
        full = PyTuple_Pack(2, key, with_map);
        Py_DECREF(with_map);
    }
    if (full != NULL && kept) Py_XSETREF(d->mapped, Py_NewRef(full));
    Py_DECREF(tensor_map);
    Py_DECREF(pair);
    return full;
}

/* ---- the native answer (polytile.runtime.adapters.ArgumentAdapter.native_answer) ------
 *
 * A native dispatcher asks this at each launch it plans, through a capsule named
 * "polytile.native_answer.v3", instead of calling key_and_parts: no tuples are built (the
 * parts after the base come as integers, the map as its bytes), and the base's address
 * and device, read here, are not read again by the dispatcher.  The struct is the ABI the
 * dispatcher defines (version 3). */
enum { MAX_WORDS = 16 };
typedef struct {
    PyObject *key;       /* new reference: the key key_and_parts would answer */
    PyObject *blob;      /* new reference: the bytes of a last by-value part (a tensor map), or NULL */
    uint64_t address;    /* parts[0] (the base)'s address, read in this call */
    long long device;    /* its device, likewise */
    int nwords;          /* parts[1:] but the blob (shape, then strides but the last), as integers */
    long long words[MAX_WORDS];
} PolytileAnswer;
#define POLYTILE_ANSWER_CAPSULE "polytile.native_answer.v3"
_Static_assert(sizeof(PolytileAnswer) == 168 && offsetof(PolytileAnswer, words) == 40,
               "PolytileAnswer is the v3 layout the dispatcher reads");

/* torch's get_device() of `base` into *device: 1, or 0 (cleared) when it has none. */
static int read_device(PyObject *base, long long *device) {
    PyObject *where = PyObject_CallMethodNoArgs(base, str_get_device);
    if (where == NULL) { PyErr_Clear(); return 0; }
    long long value = PyLong_Check(where) ? PyLong_AsLongLong(where) : -1;
    Py_DECREF(where);
    if (value == -1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    *device = value;
    return 1;
}

enum { ASK_KEY_AND_PARTS = 0, ANSWERED = 1, CANNOT_LAUNCH = 2 };

/* ANSWERED with *out filled; ASK_KEY_AND_PARTS (anything but the common case: Python
 * answers); CANNOT_LAUNCH where the tensor map cannot be made (the Python path then says
 * why, once, rather than the dispatcher asking the encoder again).  Never an exception. */
static int answer(PyObject *value, PolytileAnswer *out, int bulk) {
    Descriptor *d = plain_descriptor(value);
    if (d == NULL || (bulk && bulk_plans == NULL)) return ASK_KEY_AND_PARTS;
    if (!still_holds(d) && compute(d) <= 0) { PyErr_Clear(); return ASK_KEY_AND_PARTS; }
    if (d->nvalues > MAX_WORDS) return ASK_KEY_AND_PARTS;
    Answer a;
    take_answer(d, &a);
    long long device;
    /* The device last: an answer for a base no longer the field's is dropped. */
    int read = read_device(a.base, &device) && d->answer_id == a.id && d->fields[BASE] == a.base;
    PyObject *tensor_map = NULL;
    if (read && bulk) {
        tensor_map = find_map(d, &a);
        if (tensor_map == NULL) {
            PyErr_Clear();
            drop_answer(&a);
            return CANNOT_LAUNCH;
        }
        if (tensor_map == Py_None) Py_CLEAR(tensor_map);
    }
    if (!read) { drop_answer(&a); return ASK_KEY_AND_PARTS; }
    out->key = a.key;  /* the reference moves to the answer */
    a.key = NULL;
    out->blob = tensor_map;
    out->address = a.address;
    out->device = device;
    out->nwords = (int)a.nvalues;
    memcpy(out->words, a.values, (size_t)a.nvalues * sizeof(long long));
    drop_answer(&a);
    return ANSWERED;
}

static int plain_answer(PyObject *value, PolytileAnswer *out) { return answer(value, out, 0); }
static int bulk_answer(PyObject *value, PolytileAnswer *out) { return answer(value, out, 1); }

static int replace(PyObject **slot, PyObject *value, const char *name, int (*check)(PyObject *)) {
    if (value == NULL) return 0;
    if (check != NULL && !check(value)) {
        PyErr_Format(PyExc_TypeError, "configure: %s has the wrong type", name);
        return -1;
    }
    Py_INCREF(value);
    Py_XSETREF(*slot, value);
    return 0;
}

static int is_callable(PyObject *x) { return PyCallable_Check(x); }
static int is_set(PyObject *x) { return PySet_Check(x); }
static int is_dict(PyObject *x) { return PyDict_Check(x); }

static PyObject *configure(PyObject *module, PyObject *args, PyObject *kwds) {
    static char *names[] = {"slow_init", "slow_from_tensor", "slow_key_and_parts", "torch_types", "dtype_facts",
                            "bulk_plans", "plan_of", "encode_map", "slow_bulk_key_and_parts", NULL};
    PyObject *v[9] = {NULL};
    (void)module;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$OOOOOOOOO:configure", names, &v[0], &v[1], &v[2], &v[3], &v[4],
                                     &v[5], &v[6], &v[7], &v[8]))
        return NULL;
    if (replace(&slow_init, v[0], names[0], is_callable) || replace(&slow_from_tensor, v[1], names[1], is_callable) ||
        replace(&slow_key_and_parts, v[2], names[2], is_callable) || replace(&torch_types, v[3], names[3], is_set) ||
        replace(&dtype_facts, v[4], names[4], is_dict) || replace(&bulk_plans, v[5], names[5], is_dict) ||
        replace(&plan_of, v[6], names[6], is_callable) || replace(&encode_map, v[7], names[7], is_callable) ||
        replace(&slow_bulk_key_and_parts, v[8], names[8], is_callable))
        return NULL;
    if (v[5] != NULL || v[6] != NULL) forget_recent_bulk();  /* new plans: ask them again */
    Py_RETURN_NONE;
}

static PyObject *forget_maps(PyObject *module, PyObject *unused) {
    (void)module; (void)unused;
    forget_recent_bulk();
    PyDict_Clear(maps);
    forget_recent_maps();
    maps_generation++;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"key_and_parts", key_and_parts, METH_O, "key_and_parts(desc) -> (key, parts): what a launch passes."},
    {"bulk_key_and_parts", bulk_key_and_parts, METH_O,
     "bulk_key_and_parts(desc) -> (key, parts), the parts with the tensor map where the key has a bulk plan."},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "configure(**hooks): Python's side (see the file's comment)."},
    {"forget_maps", forget_maps, METH_NOARGS, "Drop every kept tensor map (tests)."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "polytile_tma._descriptor",
    "Host TensorDescriptor fields and launch answers in C (see _descriptor.c).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__descriptor(void) {
    if (PyType_Ready(&DescriptorType) < 0) return NULL;
    for (int i = 0; i < 5; i++) {
        field_names[i] = PyUnicode_InternFromString(FIELD_NAMES[i]);
        if (field_names[i] == NULL) return NULL;
        core_getsets[i] = PyDict_GetItemWithError(DescriptorType.tp_dict, field_names[i]);  /* the type keeps it */
        if (core_getsets[i] == NULL) return NULL;
    }
    plain_types = PySet_New(NULL);
    odd_types = PySet_New(NULL);
    if (plain_types == NULL || odd_types == NULL) return NULL;
    str_zero = PyUnicode_InternFromString("zero");
    str_nan = PyUnicode_InternFromString("nan");
    str_data_ptr = PyUnicode_InternFromString("data_ptr");
    str_dtype = PyUnicode_InternFromString("dtype");
    str_shape = PyUnicode_InternFromString("shape");
    str_stride = PyUnicode_InternFromString("stride");
    str_get_device = PyUnicode_InternFromString("get_device");
    maps = PyDict_New();
    if (!str_zero || !str_nan || !str_data_ptr || !str_dtype || !str_shape || !str_stride || !str_get_device || !maps)
        return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) return NULL;
    Py_INCREF(&DescriptorType);
    PyObject *answers[2] = {PyCapsule_New((void *)plain_answer, POLYTILE_ANSWER_CAPSULE, NULL),
                            PyCapsule_New((void *)bulk_answer, POLYTILE_ANSWER_CAPSULE, NULL)};
    int added = answers[0] != NULL && answers[1] != NULL &&
                PyModule_AddObjectRef(module, "native_answer", answers[0]) == 0 &&
                PyModule_AddObjectRef(module, "native_bulk_answer", answers[1]) == 0;
    Py_XDECREF(answers[0]);
    Py_XDECREF(answers[1]);
    if (!added) {
        Py_DECREF(module);
        return NULL;
    }
    if (PyModule_AddObject(module, "DescriptorCore", (PyObject *)&DescriptorType) < 0 ||
        PyModule_AddStringConstant(module, "source_digest", POLYTILE_DESCRIPTOR_SOURCE_DIGEST) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
