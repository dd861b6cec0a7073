/* The timer index's send path: a producer's batch of timers added to the
 * wheel and counted by minute in one loop each, as timer/index.py's
 * add_sent and timer/counts.py's add_many do it timer by timer (the tests
 * compare the two). */

#include "records.h"

#define ENTRY_SIZE 40                /* timer/index.py's ENTRY: >qqiiqq */
#define KIND_TIMER 1
#define EMPTY (-1)

PyDoc_STRVAR(wheel_add_doc,
"wheel_add(ats, stored_ms, roll, phys, sizes, slot_ms, slots, dirty, read_slot,\n"
"          unwritten, log_length, near) -> (log_length, due_soon)\n\n"
"Each timer of a batch (due at ats[k], stored at stored_ms, its record at\n"
"phys[k] of sizes[k] bytes) added to a timer index as timer/index.py's\n"
"add_sent adds it: its wheel time (its due time, or stored_ms + roll when it\n"
"is further ahead than roll), its 40-byte entry appended to the bytearray\n"
"unwritten (the log at log_length), its slot of slot_ms in the ring of\n"
"slots set in dirty (slot index -> (start, last, count, last recall)),\n"
"read_slot(i) giving a slot dirty does not hold. Returns the log's new\n"
"length and the positions k whose wheel time is before near.");

static int64_t floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t floormod(int64_t a, int64_t b)
{
    int64_t m = a % b;
    return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
}

typedef struct {
    int64_t i, start, last, count, recall;
} slot_t;

/* Slot i from dirty, else from read_slot(i): 0, or -1 with an exception. */
static int load_slot(slot_t *s, int64_t i, PyObject *dirty, PyObject *read_slot)
{
    PyObject *key = PyLong_FromLongLong(i), *got;
    if (key == NULL)
        return -1;
    got = PyDict_GetItemWithError(dirty, key);
    if (got != NULL)
        Py_INCREF(got);
    else if (!PyErr_Occurred())
        got = PyObject_CallOneArg(read_slot, key);
    Py_DECREF(key);
    if (got == NULL)
        return -1;
    int ok = PyTuple_Check(got) && PyTuple_GET_SIZE(got) == 4;
    int64_t v[4] = {0, 0, 0, 0};
    for (int k = 0; ok && k < 4; k++) {
        v[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(got, k));
        ok = !(v[k] == -1 && PyErr_Occurred());
    }
    Py_DECREF(got);
    if (!ok) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "a slot is a tuple of four ints");
        return -1;
    }
    *s = (slot_t){i, v[0], v[1], v[2], v[3]};
    return 0;
}

static int store_slot(const slot_t *s, PyObject *dirty)
{
    PyObject *key = PyLong_FromLongLong(s->i);
    PyObject *value = Py_BuildValue("(LLLL)", (long long)s->start, (long long)s->last,
                                    (long long)s->count, (long long)s->recall);
    int r = key && value ? PyDict_SetItem(dirty, key, value) : -1;
    Py_XDECREF(key); Py_XDECREF(value);
    return r;
}

static int item64(PyObject *list, Py_ssize_t k, int64_t *out)
{
    *out = PyLong_AsLongLong(PyList_GET_ITEM(list, k));
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static void put_entry(uint8_t *w, int64_t when, int64_t phys, int64_t size, int64_t prev)
{
    put64(w, (uint64_t)when);
    put64(w + 8, (uint64_t)phys);
    put32(w + 16, (uint32_t)size);
    put32(w + 20, KIND_TIMER);
    put64(w + 24, (uint64_t)prev);
    put64(w + 32, (uint64_t)phys);
}

static PyObject *py_wheel_add(PyObject *self, PyObject *args)
{
    PyObject *ats, *phys, *sizes, *dirty, *read_slot, *unwritten;
    long long stored, roll, slot_ms, slots, log_at, near;
    if (!PyArg_ParseTuple(args, "O!LLO!O!LLO!OO!LL", &PyList_Type, &ats, &stored, &roll,
                          &PyList_Type, &phys, &PyList_Type, &sizes, &slot_ms, &slots,
                          &PyDict_Type, &dirty, &read_slot, &PyByteArray_Type, &unwritten,
                          &log_at, &near))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(ats);
    if (PyList_GET_SIZE(phys) != n || PyList_GET_SIZE(sizes) != n || slot_ms <= 0 || slots <= 0) {
        PyErr_SetString(PyExc_ValueError, "ats, phys and sizes differ in length, or no wheel");
        return NULL;
    }
    int64_t *v = PyMem_Malloc(sizeof(int64_t) * 3 * (size_t)(n ? n : 1));
    if (v == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t k = 0; k < n; k++)     /* all read first: bad input changes nothing */
        if (item64(ats, k, v + 3 * k) < 0 || item64(phys, k, v + 3 * k + 1) < 0
            || item64(sizes, k, v + 3 * k + 2) < 0) {
            PyMem_Free(v);
            return NULL;
        }
    Py_ssize_t had = PyByteArray_GET_SIZE(unwritten);
    PyObject *soon = PyList_New(0), *out = NULL;
    if (soon == NULL || PyByteArray_Resize(unwritten, had + n * ENTRY_SIZE) < 0)
        goto done;
    slot_t cur = {-1, 0, 0, 0, 0};
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t at = v[3 * k], p = v[3 * k + 1], size = v[3 * k + 2];
        int64_t when = at - stored <= roll ? at : stored + roll;
        int64_t start = when - floormod(when, slot_ms);
        int64_t i = floormod(floordiv(start, slot_ms), slots);
        if (i != cur.i && ((cur.i >= 0 && store_slot(&cur, dirty) < 0)
                           || load_slot(&cur, i, dirty, read_slot) < 0))
            goto done;
        if (cur.start != start)          /* empty, or a slot of another turn */
            cur = (slot_t){i, start, EMPTY, 0, EMPTY};
        uint8_t *w = (uint8_t *)PyByteArray_AS_STRING(unwritten) + had + k * ENTRY_SIZE;
        put_entry(w, when, p, size, cur.last);
        cur.last = log_at;
        cur.count++;
        log_at += ENTRY_SIZE;
        if (when < near) {
            PyObject *pos = PyLong_FromSsize_t(k);
            int r = pos ? PyList_Append(soon, pos) : -1;
            Py_XDECREF(pos);
            if (r < 0)
                goto done;
        }
    }
    if (cur.i < 0 || store_slot(&cur, dirty) == 0)
        out = Py_BuildValue("(LO)", log_at, soon);
done:             /* (out NULL: only memory or read_slot failed; the entries are cut again) */
    if (out == NULL && PyByteArray_GET_SIZE(unwritten) > had)
        PyByteArray_Resize(unwritten, had);
    Py_XDECREF(soon);
    PyMem_Free(v);
    return out;
}

PyDoc_STRVAR(count_minutes_doc,
"count_minutes(minutes, ats, bucket_ms) -> True\n\n"
"One more timer in minutes (bucket -> count) for each time of ats, its bucket\n"
"at // bucket_ms, as timer/counts.py's add_many counts them.");

static int bump(PyObject *minutes, int64_t bucket, long long by)
{
    PyObject *key = PyLong_FromLongLong(bucket);
    if (key == NULL)
        return -1;
    PyObject *had = PyDict_GetItemWithError(minutes, key);
    long long was = 0;
    if (had != NULL)
        was = PyLong_AsLongLong(had);
    if (PyErr_Occurred()) {
        Py_DECREF(key);
        return -1;
    }
    PyObject *now = PyLong_FromLongLong(was + by);
    int r = now ? PyDict_SetItem(minutes, key, now) : -1;
    Py_DECREF(key); Py_XDECREF(now);
    return r;
}

static PyObject *py_count_minutes(PyObject *self, PyObject *args)
{
    PyObject *minutes, *ats;
    long long bucket_ms;
    if (!PyArg_ParseTuple(args, "O!O!L", &PyDict_Type, &minutes, &PyList_Type, &ats, &bucket_ms))
        return NULL;
    if (bucket_ms <= 0) {
        PyErr_SetString(PyExc_ValueError, "bucket_ms must be positive");
        return NULL;
    }
    int64_t bucket = 0;
    long long run = 0;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(ats); k++) {
        int64_t at;
        if (item64(ats, k, &at) < 0)
            return NULL;
        int64_t b = floordiv(at, bucket_ms);
        if (run && b != bucket) {
            if (bump(minutes, bucket, run) < 0)
                return NULL;
            run = 0;
        }
        bucket = b;
        run++;
    }
    if (run && bump(minutes, bucket, run) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

PyMethodDef duomq_wheel_methods[] = {
    {"wheel_add", py_wheel_add, METH_VARARGS, wheel_add_doc},
    {"count_minutes", py_count_minutes, METH_VARARGS, count_minutes_doc},
    {NULL, NULL, 0, NULL},
};
