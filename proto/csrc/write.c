/* Writing: frames and answers as protobuf's SerializeToString writes them
 * (frame, send_response, pull_response, send_request). */

#include "wire.h"

/* ------------------------------------------------------------ writing */

typedef struct {
    uint8_t *buf;
    Py_ssize_t len, cap;
} Out;

static int grow(Out *o, Py_ssize_t more)
{
    if (o->len + more <= o->cap)
        return 0;
    Py_ssize_t cap = (o->len + more) * 2;
    uint8_t *n = PyMem_Realloc(o->buf, cap);
    if (n == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->buf = n;
    o->cap = cap;
    return 0;
}

static int put_varint(Out *o, uint64_t v)
{
    if (grow(o, 10) < 0)
        return -1;
    while (v >= 0x80) {
        o->buf[o->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    o->buf[o->len++] = (uint8_t)v;
    return 0;
}

static int put_bytes(Out *o, int field, const void *data, Py_ssize_t n)
{
    if (put_varint(o, (uint64_t)field << 3 | 2) < 0 || put_varint(o, (uint64_t)n) < 0 ||
        grow(o, n) < 0)
        return -1;
    memcpy(o->buf + o->len, data, n);
    o->len += n;
    return 0;
}

/* a varint field unless it holds the default (proto3) */
static int put_int(Out *o, int field, uint64_t v)
{
    if (v == 0)
        return 0;
    return put_varint(o, (uint64_t)field << 3) < 0 ? -1 : put_varint(o, v);
}

/* a str field unless empty; -1 with an exception set */
static int put_str(Out *o, int field, PyObject *s)
{
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (u == NULL)
        return -1;
    return n ? put_bytes(o, field, u, n) : 0;
}

static int as_i64(PyObject *v, int64_t *out)
{
    *out = PyLong_AsLongLong(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

PyDoc_STRVAR(frame_doc,
"frame(version, request_id, type, status, error, payload): a serialized Frame,\n"
"as codec.encode_response builds it (error None or str, as protobuf takes it;\n"
"payload None or bytes).");

static PyObject *py_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || (args[4] != Py_None && !PyUnicode_Check(args[4])) ||
        (args[5] != Py_None && !PyBytes_Check(args[5]))) {
        PyErr_SetString(PyExc_TypeError,
                        "frame(version: int, request_id: int, type: int, status: int, "
                        "error: str | None, payload: bytes | None)");
        return NULL;
    }
    int64_t version, type, status;
    unsigned long long rid = PyLong_AsUnsignedLongLong(args[1]);
    if ((rid == (unsigned long long)-1 && PyErr_Occurred()) || as_i64(args[0], &version) < 0 ||
        as_i64(args[2], &type) < 0 || as_i64(args[3], &status) < 0)
        return NULL;
    Out o = {NULL, 0, 0};
    Py_ssize_t pn = args[5] == Py_None ? 0 : PyBytes_GET_SIZE(args[5]);
    if (grow(&o, 64 + pn) < 0 ||
        put_int(&o, 1, (uint32_t)version) < 0 || put_int(&o, 2, rid) < 0 ||
        put_int(&o, 3, (uint64_t)(int64_t)(int32_t)type) < 0 ||
        put_int(&o, 4, (uint64_t)(int64_t)(int32_t)status) < 0 ||
        (args[4] != Py_None && put_str(&o, 5, args[4]) < 0) ||
        (pn && put_bytes(&o, 6, PyBytes_AS_STRING(args[5]), pn) < 0)) {
        PyMem_Free(o.buf);
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize((const char *)o.buf, o.len);
    PyMem_Free(o.buf);
    return out;
}

PyDoc_STRVAR(send_response_doc,
"send_response(queue_offset, physical_offsets, broker_group, in_sync_replicas,\n"
"degraded, epoch, duplicate): a serialized SendResponse.");

static PyObject *py_send_response(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7 || !PyUnicode_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "send_response(queue_offset: int, physical_offsets: list[int], "
                        "broker_group: str, in_sync_replicas: int, degraded: bool, epoch: int, "
                        "duplicate: bool)");
        return NULL;
    }
    int64_t qoff, in_sync, epoch;
    if (as_i64(args[0], &qoff) < 0 || as_i64(args[3], &in_sync) < 0 ||
        as_i64(args[5], &epoch) < 0)
        return NULL;
    int degraded = PyObject_IsTrue(args[4]), duplicate = PyObject_IsTrue(args[6]);
    if (degraded < 0 || duplicate < 0)
        return NULL;
    PyObject *offsets = PySequence_Fast(args[1], "physical_offsets must be a sequence of int");
    if (offsets == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(offsets);
    PyObject **items = PySequence_Fast_ITEMS(offsets);
    Out o = {NULL, 0, 0}, packed = {NULL, 0, 0};
    PyObject *out = NULL;
    if (grow(&o, 64) < 0 || put_int(&o, 1, (uint64_t)qoff) < 0)
        goto done;
    if (n) {
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t v;
            if (as_i64(items[i], &v) < 0 || put_varint(&packed, (uint64_t)v) < 0)
                goto done;
        }
        if (put_bytes(&o, 2, packed.buf, packed.len) < 0)
            goto done;
    }
    if (put_str(&o, 3, args[2]) < 0 ||
        put_int(&o, 4, (uint64_t)(int64_t)(int32_t)in_sync) < 0 ||
        put_int(&o, 5, (uint64_t)degraded) < 0 || put_int(&o, 6, (uint64_t)epoch) < 0 ||
        put_int(&o, 7, (uint64_t)duplicate) < 0)
        goto done;
    out = PyBytes_FromStringAndSize((const char *)o.buf, o.len);
done:
    PyMem_Free(o.buf);
    PyMem_Free(packed.buf);
    Py_DECREF(offsets);
    return out;
}

PyDoc_STRVAR(send_request_doc,
"send_request(topic, queue_id, count, records, producer_group, scheduled):\n"
"SendRequest's bytes as protobuf writes them.");

static PyObject *py_send_request(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "send_request(topic: str, queue_id: int, count: int, records: bytes, "
                        "producer_group: str, scheduled: bool)");
        return NULL;
    }
    int64_t qid, count;
    if (as_i64(args[1], &qid) < 0 || as_i64(args[2], &count) < 0)
        return NULL;
    int scheduled = PyObject_IsTrue(args[5]);
    if (scheduled < 0)
        return NULL;
    Py_buffer rec;
    if (PyObject_GetBuffer(args[3], &rec, PyBUF_SIMPLE) < 0)
        return NULL;
    Out o = {NULL, 0, 0};
    PyObject *out = NULL;
    if (grow(&o, 64 + rec.len) < 0 || put_str(&o, 1, args[0]) < 0 ||
        put_int(&o, 2, (uint64_t)(int64_t)(int32_t)qid) < 0 ||
        put_int(&o, 3, (uint64_t)(int64_t)(int32_t)count) < 0 ||
        (rec.len && put_bytes(&o, 4, rec.buf, rec.len) < 0) || put_str(&o, 5, args[4]) < 0 ||
        put_int(&o, 6, (uint64_t)scheduled) < 0)
        goto done;
    out = PyBytes_FromStringAndSize((const char *)o.buf, o.len);
done:
    PyMem_Free(o.buf);
    PyBuffer_Release(&rec);
    return out;
}

PyDoc_STRVAR(pull_response_doc,
"pull_response(count, records, next_offset, min_offset, max_offset,\n"
"suggest_broker_id, advice_ttl_ms, replica_lag_ms): PullResponse's bytes as\n"
"protobuf writes them (the optional fields: None when unset).");

static PyObject *py_pull_response(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "pull_response(count, records, next_offset, min_offset, max_offset, "
                        "suggest_broker_id, advice_ttl_ms, replica_lag_ms)");
        return NULL;
    }
    int64_t count, next, lo, hi, ttl, suggest = 0, lag = 0;
    if (as_i64(args[0], &count) < 0 || as_i64(args[2], &next) < 0 ||
        as_i64(args[3], &lo) < 0 || as_i64(args[4], &hi) < 0 || as_i64(args[6], &ttl) < 0 ||
        (args[5] != Py_None && as_i64(args[5], &suggest) < 0) ||
        (args[7] != Py_None && as_i64(args[7], &lag) < 0))
        return NULL;
    Py_buffer rec;
    if (PyObject_GetBuffer(args[1], &rec, PyBUF_SIMPLE) < 0)
        return NULL;
    Out o = {NULL, 0, 0};
    PyObject *out = NULL;
    if (grow(&o, 48 + rec.len) < 0 ||
        put_int(&o, 1, (uint64_t)(int64_t)(int32_t)count) < 0 ||
        (rec.len && put_bytes(&o, 2, rec.buf, rec.len) < 0) ||
        put_int(&o, 3, (uint64_t)next) < 0 || put_int(&o, 4, (uint64_t)lo) < 0 ||
        put_int(&o, 5, (uint64_t)hi) < 0)
        goto done;
    if (args[5] != Py_None && (put_varint(&o, 6 << 3) < 0 ||
                               put_varint(&o, (uint64_t)(int64_t)(int32_t)suggest) < 0))
        goto done;
    if (put_int(&o, 7, (uint64_t)(int64_t)(int32_t)ttl) < 0)
        goto done;
    if (args[7] != Py_None && (put_varint(&o, 8 << 3) < 0 || put_varint(&o, (uint64_t)lag) < 0))
        goto done;
    out = PyBytes_FromStringAndSize((const char *)o.buf, o.len);
done:
    PyMem_Free(o.buf);
    PyBuffer_Release(&rec);
    return out;
}

PyMethodDef duomq_wire_write_methods[] = {
    {"frame", (PyCFunction)(void (*)(void))py_frame, METH_FASTCALL, frame_doc},
    {"send_response", (PyCFunction)(void (*)(void))py_send_response, METH_FASTCALL,
     send_response_doc},
    {"pull_response", (PyCFunction)(void (*)(void))py_pull_response, METH_FASTCALL,
     pull_response_doc},
    {"send_request", (PyCFunction)(void (*)(void))py_send_request, METH_FASTCALL,
     send_request_doc},
    {NULL, NULL, 0, NULL},
};
