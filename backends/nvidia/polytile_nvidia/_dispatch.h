/* The dispatcher of _launch.c (which includes this file once, after its own launch
 * helpers: pack_scalar, read_tensor, torch_stream, make_current, the driver entry points,
 * Loaded). */

/* ---- The dispatcher: kernel[grid](...) in one C call ---------------------------------
 *
 * A Dispatcher belongs to one @jit function and keeps up to MAX_PLANS plans.  A plan
 * says how the function was called (how many positional arguments, which keywords),
 * what each argument passed must be for a call to be the same specialization (an int in
 * the same range and with the same hint, a tensor of the same type, dtype and
 * alignment, a constexpr or launch option equal to the same value, a None), where each
 * run-time argument goes in the kernel's parameter bytes, and the compiled kernel the
 * call returns.  A call that matches a plan is checked, packed and launched here (the
 * only Python run is torch's accessors and, for a kernel that reads compile-time
 * globals, its guard); any other goes to `slow` (the Python entry
 * point), which launches it, explains mistakes, and may hand a plan back (`learn`).
 * Plans come from polytile.runtime.dispatch, which derives each check from the same
 * probes that key the Python path, so a call passing them is keyed alike.
 */

enum { MAX_PLANS = 4 };
enum { CHECK_EQUAL = 1, CHECK_NONE = 2, CHECK_TENSOR = 3, CHECK_INT = 4, CHECK_FLOAT = 5, CHECK_BOOL = 6,
       CHECK_ADAPTED = 7 };
enum { HINT_ANY = 0, HINT_ALIGNED = 1, HINT_UNALIGNED = 2, HINT_ONE = 3, HINT_DIVISIBLE = 4, HINT_OTHER = 5 };
enum { RANGE_I32 = 0, RANGE_I64 = 1, RANGE_U64 = 2 };
/* try_plan's answers besides -1 (an exception is set). */
enum { LAUNCHED = 0, NO_MATCH = 1, NEEDS_PYTHON = 2 };

typedef struct {
    uint8_t check, code, hint, range;
    uint32_t object;    /* the expected value, or the tensor type (then its dtype), in `objects` */
    int32_t parameter;  /* the kernel parameter the value is packed into, or -1 */
    uint32_t parts;     /* CHECK_ADAPTED: how many parameters (from `parameter` on) the value fills */
} SlotCheck;

/* CHECK_ADAPTED: an argument a plugin adapts (a tensor descriptor).  `objects` holds, from
 * `object` on: the adapter's key_and_parts (called with the value, it answers (key, parts)),
 * the key the plan was made with, the parts' parameter codes (bytes: 'P' a tensor, 'M' a
 * by-value blob such as a tensor map, which must be bytes of exactly BLOB_BYTES, else a
 * scalar code), the name of the value's version attribute (or None), and the adapter's
 * native answer (a capsule, below, or None).  The value matches when its key equals the
 * plan's; its parts are packed into the `parts` parameters from `parameter` on.
 *
 * With a native answer, the adapter's C function answers instead of key_and_parts, for
 * parts that are a tensor, then integers, then maybe one 'M' blob: the key, the tensor's
 * address and device (read by it, so not read again here), the integers as words and the
 * blob's bytes.
 *
 * With a version attribute, the slot remembers the last value, the objects its __dict__
 * held, its parts and the address of its first tensor part: the same object holding the
 * same objects (the version attribute among them: present only while every change of the
 * value replaces one) whose tensor is at the same address packs those parts again without
 * asking key_and_parts. */
typedef struct {
    PyObject *value, *state, *parts, *dtype;  /* strong references, or NULL */
    uint64_t address;
} AdaptedCache;

/* The native answer ABI, version 3 (polytile.runtime.adapters.ArgumentAdapter.native_answer):
 * a capsule named POLYTILE_ANSWER_CAPSULE holding an AnswerFunction, which answers
 * ANSWERED with *out filled (new references), ASK_KEY_AND_PARTS (then key_and_parts
 * answers), or CANNOT_LAUNCH (the value cannot pass as planned: the Python path decides
 * and says why), never with an exception set. */
enum { ASK_KEY_AND_PARTS = 0, ANSWERED = 1, CANNOT_LAUNCH = 2 };
enum { MAX_WORDS = 16 };
typedef struct {
    PyObject *key;       /* the key key_and_parts would answer */
    PyObject *blob;      /* the bytes of a last 'M' part, or NULL */
    uint64_t address;    /* parts[0] (a 'P' tensor)'s address, read by the answer */
    long long device;    /* its device, likewise */
    int nwords;          /* parts[1:] but the blob, as integers (packed as their codes pack ints) */
    long long words[MAX_WORDS];
} PolytileAnswer;
typedef int (*AnswerFunction)(PyObject *value, PolytileAnswer *out);
#define POLYTILE_ANSWER_CAPSULE "polytile.native_answer.v3"
/* The layout both sides rely on (polytile_tma/_descriptor.c asserts the same). */
_Static_assert(sizeof(PolytileAnswer) == 168 && offsetof(PolytileAnswer, words) == 40,
               "PolytileAnswer is the v3 layout");

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
    PyObject *counts;   /* the launcher's launch counters (bytearray): COUNT_NATIVE counts here */
    AdaptedCache *caches;  /* one per slot (used by CHECK_ADAPTED slots) */
    AnswerFunction *answers;  /* one per slot: a CHECK_ADAPTED slot's native answer, or NULL */
    /* A kernel with global scratch (polytile.gpu.global_scratch): `scratch(programs)`
     * answers (memory, address) from the user's allocator, or raises; the address goes
     * into parameter `scratch_parameter`, the memory is held until the launch is made. */
    PyObject *scratch;
    uint32_t scratch_parameter;
} Plan;

static PyObject *name_dtype, *name_table;

/* Plans, dispatchers and bound calls take part in garbage collection: a plan holds the
 * kernel's guard, which reads the module globals that hold the @jit function, which
 * holds the dispatcher. */
static int plan_traverse(Plan *plan, visitproc visit, void *arg) {
    Py_VISIT(plan->kwnames);
    Py_VISIT(plan->objects);
    Py_VISIT(plan->guard);
    Py_VISIT(plan->launcher);
    Py_VISIT(plan->meta_base);
    Py_VISIT(plan->slot_names);
    Py_VISIT(plan->result);
    Py_VISIT(plan->counts);
    Py_VISIT(plan->scratch);
    for (Py_ssize_t i = 0; plan->caches != NULL && i < plan->nslots; i++) {
        Py_VISIT(plan->caches[i].value);
        Py_VISIT(plan->caches[i].state);
        Py_VISIT(plan->caches[i].parts);
        Py_VISIT(plan->caches[i].dtype);
    }
    return 0;
}

static void forget_adapted(AdaptedCache *cache) {
    Py_CLEAR(cache->value);
    Py_CLEAR(cache->state);
    Py_CLEAR(cache->parts);
    Py_CLEAR(cache->dtype);
}

static int plan_clear(Plan *plan) {
    Py_CLEAR(plan->kwnames);
    Py_CLEAR(plan->objects);
    Py_CLEAR(plan->guard);
    Py_CLEAR(plan->launcher);
    Py_CLEAR(plan->meta_base);
    Py_CLEAR(plan->slot_names);
    Py_CLEAR(plan->result);
    Py_CLEAR(plan->counts);
    Py_CLEAR(plan->scratch);
    for (Py_ssize_t i = 0; plan->caches != NULL && i < plan->nslots; i++) forget_adapted(&plan->caches[i]);
    return 0;
}

static void plan_dealloc(Plan *plan) {
    PyObject_GC_UnTrack(plan);
    plan_clear(plan);
    PyMem_Free(plan->slots);
    PyMem_Free(plan->caches);
    PyMem_Free(plan->answers);
    PyMem_Free(plan->offsets);
    PyMem_Free(plan->base);
    Py_TYPE(plan)->tp_free((PyObject *)plan);
}

static int code_size(char code) {
    switch (code) {
    case '?': case 'b': case 'B': return 1;
    case 'h': case 'H': case 'e': return 2;
    case 'i': case 'I': case 'f': return 4;
    case 'q': case 'Q': case 'd': case 'P': return 8;
    case 'M': return BLOB_BYTES;
    default: return 0;
    }
}

static PyObject *plan_invalid(const char *what) {
    PyErr_Format(PyExc_ValueError, "Plan: %s", what);
    return NULL;
}

/* Plan(nargs, kwnames, slots, objects, offsets, base, block, shared, guard, launcher,
 *      meta_base, slot_names, result, counts[, scratch, scratch_parameter]): every size and
 *      index is checked here, once. */
static PyObject *plan_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    Py_ssize_t nargs;
    PyObject *kwnames, *slots, *objects, *offsets, *base, *guard, *launcher, *meta_base, *slot_names, *result, *counts;
    PyObject *scratch = Py_None;
    unsigned int block, shared, scratch_parameter = 0;
    if (!PyArg_ParseTuple(args, "nOSO!SSIIOOOO!OO!|OI", &nargs, &kwnames, &slots, &PyTuple_Type, &objects, &offsets,
                          &base, &block, &shared, &guard, &launcher, &meta_base, &PyTuple_Type, &slot_names, &result,
                          &PyByteArray_Type, &counts, &scratch, &scratch_parameter))
        return NULL;
    if (scratch != Py_None && !PyCallable_Check(scratch)) return plan_invalid("scratch must be callable or None");
    if (PyByteArray_GET_SIZE(counts) < COUNT_SLOTS * 8) return plan_invalid("counts must hold the launch counters");
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
    plan->caches = PyMem_Calloc(plan->nslots + 1, sizeof(AdaptedCache));
    plan->answers = PyMem_Calloc(plan->nslots + 1, sizeof(AnswerFunction));
    plan->offsets = PyMem_Malloc(plan->count * 4 + 1);
    plan->base = PyMem_Malloc(plan->size + 1);
    Py_INCREF(kwnames); plan->kwnames = kwnames;
    Py_INCREF(objects); plan->objects = objects;
    Py_INCREF(guard); plan->guard = guard;
    Py_INCREF(launcher); plan->launcher = launcher;
    Py_INCREF(meta_base); plan->meta_base = meta_base;
    Py_INCREF(slot_names); plan->slot_names = slot_names;
    Py_INCREF(result); plan->result = result;
    Py_INCREF(counts); plan->counts = counts;
    if (scratch != Py_None) {
        Py_INCREF(scratch);
        plan->scratch = scratch;
    }
    plan->scratch_parameter = scratch_parameter;
    if (plan->slots == NULL || plan->caches == NULL || plan->answers == NULL || plan->offsets == NULL ||
        plan->base == NULL) {
        Py_DECREF(plan);
        return PyErr_NoMemory();
    }
    memcpy(plan->slots, PyBytes_AS_STRING(slots), plan->nslots * sizeof(SlotCheck));
    memcpy(plan->offsets, PyBytes_AS_STRING(offsets), plan->count * 4);
    memcpy(plan->base, PyBytes_AS_STRING(base), plan->size);
    Py_ssize_t object_count = PyTuple_GET_SIZE(objects);
    for (uint32_t i = 0; i < plan->count; i++) {
        if (plan->offsets[i] > plan->size) {
            Py_DECREF(plan);
            return plan_invalid("a parameter's offset is past the argument bytes");
        }
    }
    if (plan->scratch != NULL && (plan->scratch_parameter >= plan->count ||
                                  plan->offsets[plan->scratch_parameter] + 8 > plan->size)) {
        Py_DECREF(plan);
        return plan_invalid("the scratch parameter is not a pointer parameter of the kernel");
    }
    for (Py_ssize_t i = 0; i < plan->nslots; i++) {
        const SlotCheck *slot = &plan->slots[i];
        if (slot->check == CHECK_ADAPTED) {
            int valid = slot->parameter >= 0 && slot->parts > 0 &&
                        (uint64_t)slot->parameter + slot->parts <= plan->count &&
                        (uint64_t)slot->object + 4 < (uint64_t)object_count &&
                        PyCallable_Check(PyTuple_GET_ITEM(objects, slot->object)) &&
                        PyBytes_Check(PyTuple_GET_ITEM(objects, slot->object + 2)) &&
                        (PyTuple_GET_ITEM(objects, slot->object + 3) == Py_None ||
                         PyUnicode_CheckExact(PyTuple_GET_ITEM(objects, slot->object + 3))) &&
                        PyBytes_GET_SIZE(PyTuple_GET_ITEM(objects, slot->object + 2)) == (Py_ssize_t)slot->parts;
            if (valid) {
                PyObject *answer = PyTuple_GET_ITEM(objects, slot->object + 4);
                /* Another ABI's capsule, or not a capsule: key_and_parts answers. */
                if (answer != Py_None && PyCapsule_IsValid(answer, POLYTILE_ANSWER_CAPSULE))
                    plan->answers[i] = (AnswerFunction)PyCapsule_GetPointer(answer, POLYTILE_ANSWER_CAPSULE);
            }
            for (uint32_t part = 0; valid && part < slot->parts; part++) {
                char code = PyBytes_AS_STRING(PyTuple_GET_ITEM(objects, slot->object + 2))[part];
                valid = code_size(code) != 0 &&
                        (uint64_t)plan->offsets[slot->parameter + part] + (uint64_t)code_size(code) <= plan->size;
            }
            if (!valid) {
                Py_DECREF(plan);
                return plan_invalid("an adapted argument's slot check is out of range");
            }
            continue;
        }
        int packs = slot->check == CHECK_TENSOR || slot->check == CHECK_INT || slot->check == CHECK_FLOAT ||
                    slot->check == CHECK_BOOL;
        if (slot->check < CHECK_EQUAL || slot->check > CHECK_BOOL || (packs && (slot->parameter < 0 ||
            (uint32_t)slot->parameter >= plan->count || code_size((char)slot->code) == 0 ||
            (uint64_t)plan->offsets[slot->parameter] + (uint64_t)code_size((char)slot->code) > plan->size)) ||
            (slot->check == CHECK_EQUAL && (Py_ssize_t)slot->object >= object_count) ||
            (slot->check == CHECK_TENSOR && ((uint64_t)slot->object + 1 >= (uint64_t)object_count ||
                                            slot->code != 'P' ||
                                            !PyType_Check(PyTuple_GET_ITEM(objects, slot->object))))) {
            Py_DECREF(plan);
            return plan_invalid("a slot check is out of range");
        }
    }
    return (PyObject *)plan;
}

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "polytile_nvidia._launch.Plan",
    .tp_basicsize = sizeof(Plan),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = plan_new,
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_traverse = (traverseproc)plan_traverse,
    .tp_clear = (inquiry)plan_clear,
    .tp_doc = "One way a @jit function is called, and how to launch it (see the file's comment).",
};

/* Pack one part of an adapted argument; 0, or NO_MATCH (it is not what its code packs).
 * A tensor's address also goes to *first when *seen is 0. */
static int pack_part(char code, PyObject *item, char *at, long long *device, int *any_tensor, uint64_t *first,
                     int *seen) {
    if (code == 'P') {
        uint64_t address;
        if (read_tensor(item, device, &address)) return NO_MATCH;
        if (!*seen) { *first = address; *seen = 1; }
        *any_tensor = 1;
        memcpy(at, &address, 8);
        return 0;
    }
    if (pack_scalar(code, item, at)) {
        PyErr_Clear();
        return NO_MATCH;
    }
    return 0;
}

/* Pack `parts` (a tuple of the slot's parts) into the argument bytes; 0, or NO_MATCH (a
 * part is not what its code packs).  The first tensor part's address goes to *first. */
static int pack_parts(const Plan *plan, const SlotCheck *slot, PyObject *parts, char *bytes, long long *device,
                      int *any_tensor, uint64_t *first) {
    const char *codes = PyBytes_AS_STRING(PyTuple_GET_ITEM(plan->objects, slot->object + 2));
    int seen = 0;
    for (uint32_t part = 0; part < slot->parts; part++)
        if (pack_part(codes[part], PyTuple_GET_ITEM(parts, part), bytes + plan->offsets[slot->parameter + part],
                      device, any_tensor, first, &seen))
            return NO_MATCH;
    return 0;
}

/* Pack a native answer (see PolytileAnswer); 0, or NO_MATCH. */
static int pack_answer(const Plan *plan, const SlotCheck *slot, const PolytileAnswer *answer, char *bytes,
                       long long *device, int *any_tensor) {
    const char *codes = PyBytes_AS_STRING(PyTuple_GET_ITEM(plan->objects, slot->object + 2));
    if (answer->key == NULL || answer->nwords < 0 || answer->nwords > MAX_WORDS ||
        1 + answer->nwords + (answer->blob != NULL) != (Py_ssize_t)slot->parts)
        return NO_MATCH;
    int equal = PyObject_RichCompareBool(answer->key, PyTuple_GET_ITEM(plan->objects, slot->object + 1), Py_EQ);
    if (equal != 1) { if (equal < 0) PyErr_Clear(); return NO_MATCH; }
    if (codes[0] != 'P' || answer->device < 0 || (*device >= 0 && answer->device != *device)) return NO_MATCH;
    *device = answer->device;
    *any_tensor = 1;
    memcpy(bytes + plan->offsets[slot->parameter], &answer->address, 8);
    uint32_t part = 1;
    for (; part <= (uint32_t)answer->nwords; part++)
        if (pack_long(codes[part], answer->words[part - 1], bytes + plan->offsets[slot->parameter + part]))
            return NO_MATCH;
    if (answer->blob != NULL &&
        (codes[part] != 'M' || pack_scalar('M', answer->blob, bytes + plan->offsets[slot->parameter + part]))) {
        PyErr_Clear();
        return NO_MATCH;
    }
    return 0;
}

/* The dtype of the first tensor part of `parts` (a new reference), or NULL. */
static PyObject *first_dtype(const Plan *plan, const SlotCheck *slot, PyObject *parts) {
    const char *codes = PyBytes_AS_STRING(PyTuple_GET_ITEM(plan->objects, slot->object + 2));
    for (uint32_t part = 0; part < slot->parts; part++) {
        if (codes[part] != 'P') continue;
        PyObject *dtype = PyObject_GetAttr(PyTuple_GET_ITEM(parts, part), name_dtype);
        if (dtype == NULL) PyErr_Clear();
        return dtype;
    }
    return NULL;
}

/* What the value's __dict__ holds (a new tuple of its values, in order), or NULL when it
 * has no dict or not the version attribute (then nothing is remembered). */
static PyObject *adapted_state(PyObject *name, PyObject *value) {
    if (name == Py_None) return NULL;
    PyObject **slot = _PyObject_GetDictPtr(value);
    if (slot == NULL || *slot == NULL || !PyDict_CheckExact(*slot)) return NULL;
    PyObject *dict = *slot;
    if (PyDict_GetItemWithError(dict, name) == NULL) { PyErr_Clear(); return NULL; }
    Py_ssize_t position = 0, index = 0;
    PyObject *key, *item;
    PyObject *state = PyTuple_New(PyDict_GET_SIZE(dict));
    if (state == NULL) { PyErr_Clear(); return NULL; }
    while (PyDict_Next(dict, &position, &key, &item)) {
        Py_INCREF(item);
        PyTuple_SET_ITEM(state, index++, item);
    }
    return state;
}

/* Whether the value's __dict__ holds exactly the objects of `state`, in order. */
static int same_state(PyObject *name, PyObject *value, PyObject *state) {
    PyObject **slot = _PyObject_GetDictPtr(value);
    if (slot == NULL || *slot == NULL || !PyDict_CheckExact(*slot)) return 0;
    PyObject *dict = *slot;
    if (PyDict_GET_SIZE(dict) != PyTuple_GET_SIZE(state)) return 0;
    Py_ssize_t position = 0, index = 0;
    PyObject *key, *item;
    while (PyDict_Next(dict, &position, &key, &item))
        if (item != PyTuple_GET_ITEM(state, index++)) return 0;
    (void)name;
    return 1;
}

/* CHECK_ADAPTED (see SlotCheck): 0 when the value's key is the plan's (its parts are
 * packed), NO_MATCH otherwise (the Python path then keys it, or explains what is wrong). */
static int check_adapted(const Plan *plan, const SlotCheck *slot, PyObject *value, char *bytes, long long *device,
                         int *any_tensor) {
    PyObject *objects = plan->objects;
    AnswerFunction native = plan->answers[slot - plan->slots];
    if (native != NULL) {
        PolytileAnswer answer;
        memset(&answer, 0, sizeof answer);
        answer.device = -1;
        int said = native(value, &answer);
        if (PyErr_Occurred()) PyErr_Clear();  /* the ABI forbids it; never let it leak into a later call */
        if (said == ANSWERED) {
            int result = pack_answer(plan, slot, &answer, bytes, device, any_tensor);
            Py_XDECREF(answer.key);
            Py_XDECREF(answer.blob);
            return result;
        }
        if (said == CANNOT_LAUNCH) return NO_MATCH;
    }
    AdaptedCache *cache = &plan->caches[slot - plan->slots];
    PyObject *version_name = PyTuple_GET_ITEM(objects, slot->object + 3);
    if (cache->value == value && cache->parts != NULL && same_state(version_name, value, cache->state)) {
        /* The same descriptor again, unchanged, with its tensor where it was and of the
         * same element type.  The parts are held across the tensor's accessors (Python). */
        PyObject *parts = cache->parts;
        Py_INCREF(parts);
        long long seen_device = *device;
        uint64_t address = cache->address;
        int same = pack_parts(plan, slot, parts, bytes, device, any_tensor, &address) == 0 &&
                   address == cache->address;
        if (same && cache->dtype != NULL) {
            PyObject *dtype = first_dtype(plan, slot, parts);
            same = dtype == cache->dtype;
            Py_XDECREF(dtype);
        }
        Py_DECREF(parts);
        if (same) return 0;
        *device = seen_device;  /* the call below packs again and decides */
    }
    PyObject *answer = PyObject_CallOneArg(PyTuple_GET_ITEM(objects, slot->object), value);
    if (answer == NULL) { PyErr_Clear(); return NO_MATCH; }
    int result = NO_MATCH;
    if (PyTuple_CheckExact(answer) && PyTuple_GET_SIZE(answer) == 2) {
        PyObject *parts = PyTuple_GET_ITEM(answer, 1);
        int equal = PyObject_RichCompareBool(PyTuple_GET_ITEM(answer, 0), PyTuple_GET_ITEM(objects, slot->object + 1),
                                             Py_EQ);
        if (equal < 0) PyErr_Clear();
        uint64_t address = 0;
        if (equal == 1 && PyTuple_Check(parts) && PyTuple_GET_SIZE(parts) == (Py_ssize_t)slot->parts)
            result = pack_parts(plan, slot, parts, bytes, device, any_tensor, &address);
        forget_adapted(cache);
        if (result == 0) {
            /* Read after key_and_parts, which may have settled the value's facts. */
            PyObject *state = adapted_state(version_name, value);
            if (state != NULL) {
                forget_adapted(cache);  /* anything a re-entrant launch left meanwhile */
                Py_INCREF(value); cache->value = value;
                cache->state = state;
                Py_INCREF(parts); cache->parts = parts;
                cache->dtype = first_dtype(plan, slot, parts);
                cache->address = address;
            }
        }
    }
    Py_DECREF(answer);
    return result;
}

static int check_slot(const Plan *plan, const SlotCheck *slot, PyObject *value, char *bytes, long long *device,
                      int *any_tensor) {
    PyObject *objects = plan->objects;
    if (slot->check == CHECK_ADAPTED) return check_adapted(plan, slot, value, bytes, device, any_tensor);
    int packs = slot->check >= CHECK_TENSOR;
    char *at = packs ? bytes + plan->offsets[slot->parameter] : NULL;
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
        uint64_t address;
        if (read_tensor(value, device, &address)) return NO_MATCH;
        if ((slot->hint == HINT_ALIGNED && (address & 15)) || (slot->hint == HINT_UNALIGNED && !(address & 15)))
            return NO_MATCH;
        *any_tensor = 1;
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
    if (PyLong_CheckExact(grid)) {  /* kernel[4] is kernel[(4,)], as on the Python path */
        n = 1;
        items = &grid;
    } else if (PyTuple_Check(grid)) {
        n = PyTuple_GET_SIZE(grid);
        items = PySequence_Fast_ITEMS(grid);
    } else if (PyList_Check(grid)) {
        n = PyList_GET_SIZE(grid);
        items = PySequence_Fast_ITEMS(grid);
    } else {
        return -1;
    }
    if (n < 1 || n > 3) return -1;
    for (int axis = 0; axis < 3; axis++) {
        if (axis >= n) { counts[axis] = 1; continue; }
        /* Ints and what converts to one exactly (NumPy integers); floats and bools are the
         * Python path's to judge. */
        if (PyBool_Check(items[axis]) || PyFloat_Check(items[axis]) || !PyIndex_Check(items[axis])) return -1;
        Py_ssize_t count = PyNumber_AsSsize_t(items[axis], NULL);
        if (count == -1 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
        if (count < 1 || (size_t)count > limits[axis]) return -1;
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
static int try_plan_into(const Plan *plan, PyObject *grid, PyObject *const *values, PyObject **called_grid,
                         char *bytes, void **pointers) {
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
    if (PyTuple_Check(grid) || PyList_Check(grid) || PyLong_CheckExact(grid)) {
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
        if (torch_stream(device, &stream)) return -1;
    }
    PyObject *scratch = NULL;  /* (memory, address): the memory is held until the launch is made */
    if (plan->scratch != NULL) {
        unsigned long long programs = (unsigned long long)counts[0] * counts[1] * counts[2];
        if (!programs) return NEEDS_PYTHON;
        scratch = PyObject_CallFunction(plan->scratch, "K", programs);
        if (scratch == NULL) return -1;
        unsigned long long address = 0;
        if (PyTuple_Check(scratch) && PyTuple_GET_SIZE(scratch) == 2)
            address = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(scratch, 1));
        else
            PyErr_SetString(PyExc_TypeError, "the scratch allocation must answer (memory, address)");
        if (PyErr_Occurred()) {
            Py_DECREF(scratch);
            return -1;
        }
        uint64_t pointer = address;
        memcpy(bytes + plan->offsets[plan->scratch_parameter], &pointer, 8);
    }
    for (uint32_t i = 0; i < plan->count; i++) pointers[i] = bytes + plan->offsets[i];
    int call = 0;
    CUresult result = make_current((CUcontext)(uintptr_t)loaded.context, &call);
    if (result) {
        Py_XDECREF(scratch);
        return raise_driver_error(plan, result, call, device);
    }
    result = launch_kernel((CUfunction)(uintptr_t)loaded.function, (unsigned)counts[0], (unsigned)counts[1],
                           (unsigned)counts[2], plan->block, 1, 1, plan->shared, stream,
                           plan->count ? pointers : NULL, NULL);
    /* The allocator's memory is released after the launch, in stream order (as torch's
     * caching allocator orders a tensor freed after a launch on its stream). */
    Py_XDECREF(scratch);
    if (result) return raise_driver_error(plan, result, CALL_LAUNCH, device);
    count_launch(plan->counts, COUNT_NATIVE);
    return LAUNCHED;
}

/* The argument bytes of a typical kernel fit on the stack; a large plan borrows the heap
 * (torch, guards and grid functions run Python, maybe another launch, inside this frame). */
enum { STACK_BYTES = 1024, STACK_POINTERS = 64 };  /* room for a few 128-byte tensor maps */

static int try_plan(const Plan *plan, PyObject *grid, PyObject *const *values, Py_ssize_t nargs, PyObject *kwnames,
                    PyObject **called_grid) {
    if (plan->objects == NULL || nargs != plan->nargs || !keywords_match(plan->kwnames, kwnames)) return NO_MATCH;
    uint64_t storage[STACK_BYTES / 8];
    void *pointers[STACK_POINTERS];
    if (plan->size <= STACK_BYTES && plan->count <= STACK_POINTERS)
        return try_plan_into(plan, grid, values, called_grid, (char *)storage, pointers);
    char *bytes = PyMem_Malloc(plan->size + 8);
    void **heap_pointers = PyMem_Malloc((plan->count + 1) * sizeof(void *));
    int status = bytes != NULL && heap_pointers != NULL
                     ? try_plan_into(plan, grid, values, called_grid, bytes, heap_pointers)
                     : (PyErr_NoMemory(), -1);
    PyMem_Free(bytes);
    PyMem_Free(heap_pointers);
    return status;
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

/* slow(grid, args, kwargs, grid_was_called, planned): `grid_was_called` when `grid` is
 * what a callable grid returned (not to be called again), `planned` when a plan matched
 * and only this call needed Python (an empty grid, a device not loaded yet): no new plan. */
static PyObject *call_slow(Dispatcher *dispatcher, PyObject *grid, PyObject *const *values, Py_ssize_t nargs,
                           PyObject *kwnames, int grid_was_called, int planned) {
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
    PyObject *result = PyObject_CallFunctionObjArgs(dispatcher->slow, grid, args, kwargs,
                                                    grid_was_called ? Py_True : Py_False, planned ? Py_True : Py_False,
                                                    NULL);
    Py_DECREF(args);
    Py_DECREF(kwargs);
    return result;
}

static PyObject *bound_call(PyObject *self, PyObject *const *values, size_t nargsf, PyObject *kwnames) {
    Bound *bound = (Bound *)self;
    Dispatcher *dispatcher = bound->dispatcher;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (dispatcher == NULL || dispatcher->slow == NULL || bound->grid == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "this kernel launcher was cleared by the garbage collector");
        return NULL;
    }
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
    slow_reason = status == NEEDS_PYTHON ? SLOW_NEEDS_PYTHON : SLOW_NO_PLAN;
    result = call_slow(dispatcher, called_grid != NULL ? called_grid : grid, values, nargs, kwnames,
                       called_grid != NULL, status == NEEDS_PYTHON);
    slow_reason = SLOW_NONE;  /* counted by the launch it made, if it made one */
    Py_XDECREF(called_grid);
    return result;
}

static int bound_traverse(Bound *bound, visitproc visit, void *arg) {
    Py_VISIT(bound->dispatcher);
    Py_VISIT(bound->grid);
    return 0;
}

static int bound_clear(Bound *bound) {
    Py_CLEAR(bound->dispatcher);
    Py_CLEAR(bound->grid);
    return 0;
}

static void bound_dealloc(Bound *bound) {
    PyObject_GC_UnTrack(bound);
    bound_clear(bound);
    Py_TYPE(bound)->tp_free((PyObject *)bound);
}

static PyTypeObject BoundType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "polytile_nvidia._launch.Bound",
    .tp_basicsize = sizeof(Bound),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_vectorcall_offset = offsetof(Bound, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = (destructor)bound_dealloc,
    .tp_traverse = (traverseproc)bound_traverse,
    .tp_clear = (inquiry)bound_clear,
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

static int dispatcher_traverse(Dispatcher *dispatcher, visitproc visit, void *arg) {
    Py_VISIT(dispatcher->slow);
    for (int i = 0; i < dispatcher->count; i++) Py_VISIT(dispatcher->plans[i]);
    return 0;
}

static int dispatcher_clear(Dispatcher *dispatcher) {
    dispatcher_clear_plans(dispatcher);
    Py_CLEAR(dispatcher->slow);
    return 0;
}

static void dispatcher_dealloc(Dispatcher *dispatcher) {
    PyObject_GC_UnTrack(dispatcher);
    dispatcher_clear(dispatcher);
    Py_TYPE(dispatcher)->tp_free((PyObject *)dispatcher);
}

/* bind(grid): what kernel[grid] returns. */
static PyObject *dispatcher_bind(Dispatcher *dispatcher, PyObject *grid) {
    Bound *bound = PyObject_GC_New(Bound, &BoundType);
    if (bound == NULL) return NULL;
    bound->vectorcall = bound_call;
    Py_INCREF(dispatcher);
    bound->dispatcher = dispatcher;
    Py_INCREF(grid);
    bound->grid = grid;
    PyObject_GC_Track(bound);
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
    .tp_name = "polytile_nvidia._launch.Dispatcher",
    .tp_basicsize = sizeof(Dispatcher),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = dispatcher_new,
    .tp_dealloc = (destructor)dispatcher_dealloc,
    .tp_traverse = (traverseproc)dispatcher_traverse,
    .tp_clear = (inquiry)dispatcher_clear,
    .tp_methods = dispatcher_methods,
    .tp_getset = dispatcher_getset,
    .tp_doc = "Dispatcher(slow): kernel[grid](...) launched in C for the calls it has plans for.",
};

