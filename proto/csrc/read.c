/* Reading, the common case only (../_wire.c says what that is): a SEND
 * request's frame (parse_send), a client's answers to its SEND and PULL
 * (read_send_answer, read_pull_answer). */

#include "wire.h"

/* ------------------------------------------------------------ reading */

/* a varint at *p (< end): 0 and *p moved past it, or -1 (truncated, or
 * longer than 10 bytes) */
static int varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    const uint8_t *q = *p;
    for (int shift = 0; shift < 70; shift += 7) {
        if (q >= end)
            return -1;
        uint8_t b = *q++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *p = q;
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* a length-delimited field's bytes: 0 with *start and *n, or -1 */
static int delimited(const uint8_t **p, const uint8_t *end, const uint8_t **start, Py_ssize_t *n)
{
    uint64_t len;
    if (varint(p, end, &len) < 0 || len > (uint64_t)(end - *p))
        return -1;
    *start = *p;
    *n = (Py_ssize_t)len;
    *p += len;
    return 0;
}

static PyTypeObject SendViewType;

static PyStructSequence_Field send_view_fields[] = {
    {"topic", "the topic (str)"},
    {"queue_id", "the queue (int32)"},
    {"count", "records in the batch (int32)"},
    {"records", "the records, concatenated (bytes)"},
    {"producer_group", "the producer group (str)"},
    {"scheduled", "some records ask for a delay (bool)"},
    {NULL, NULL},
};

static PyStructSequence_Desc send_view_desc = {
    "duomq.proto._wire.SendView",
    "A SendRequest as parse_send read it: the fields SendRequest has, read-only.",
    send_view_fields, 6,
};

/* the SendRequest in [p, end) as a SendView; NULL with no exception set when
 * it is not the common case, NULL with one set on a failure of memory */
static PyObject *send_view(const uint8_t *p, const uint8_t *end)
{
    const uint8_t *topic = (const uint8_t *)"", *records = (const uint8_t *)"",
                  *group = (const uint8_t *)"";
    Py_ssize_t topic_n = 0, records_n = 0, group_n = 0;
    int32_t queue_id = 0, count = 0;
    int scheduled = 0;
    while (p < end) {
        uint64_t key, v;
        if (varint(&p, end, &key) < 0)
            return NULL;
        int wire = (int)(key & 7);
        switch (key >> 3) {
        case 1: case 4: case 5: {
            const uint8_t *s;
            Py_ssize_t n;
            if (wire != 2 || delimited(&p, end, &s, &n) < 0)
                return NULL;
            if (key >> 3 == 1) { topic = s; topic_n = n; }
            else if (key >> 3 == 4) { records = s; records_n = n; }
            else { group = s; group_n = n; }
            break;
        }
        case 2: case 3: case 6:
            if (wire != 0 || varint(&p, end, &v) < 0)
                return NULL;
            if (key >> 3 == 2) queue_id = (int32_t)(uint32_t)v;
            else if (key >> 3 == 3) count = (int32_t)(uint32_t)v;
            else scheduled = v != 0;
            break;
        default:
            return NULL;
        }
    }
    PyObject *view = PyStructSequence_New(&SendViewType);
    if (view == NULL)
        return NULL;
    PyObject *t = PyUnicode_DecodeUTF8((const char *)topic, topic_n, "strict");
    PyObject *g = t ? PyUnicode_DecodeUTF8((const char *)group, group_n, "strict") : NULL;
    if (g == NULL) {              /* not UTF-8: protobuf says what is wrong */
        Py_XDECREF(t);
        Py_DECREF(view);
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            PyErr_Clear();
        return NULL;
    }
    PyObject *items[6] = {
        t, PyLong_FromLong(queue_id), PyLong_FromLong(count),
        PyBytes_FromStringAndSize((const char *)records, records_n), g,
        PyBool_FromLong(scheduled),
    };
    for (int i = 0; i < 6; i++) {
        if (items[i] == NULL) {
            for (int k = 0; k < 6; k++)
                Py_XDECREF(items[k]);
            Py_DECREF(view);
            return NULL;
        }
    }
    for (int i = 0; i < 6; i++)
        PyStructSequence_SET_ITEM(view, i, items[i]);
    return view;
}

PyDoc_STRVAR(parse_send_doc,
"parse_send(frame, version, send_type): (request_id, SendView) of a SEND\n"
"request's frame of this protocol version, or None for anything else (the\n"
"caller then decodes it with protobuf).");

static PyObject *py_parse_send(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "parse_send(frame, version, send_type)");
        return NULL;
    }
    Py_buffer b;
    if (PyObject_GetBuffer(args[0], &b, PyBUF_SIMPLE) < 0)
        return NULL;
    long long want_version = PyLong_AsLongLong(args[1]);
    long long want_type = PyLong_AsLongLong(args[2]);
    if (PyErr_Occurred()) {
        PyBuffer_Release(&b);
        return NULL;
    }
    const uint8_t *p = b.buf, *end = p + b.len;
    const uint8_t *payload = NULL;
    Py_ssize_t payload_n = 0;
    uint64_t version = 0, request_id = 0, type = 0;
    PyObject *out = NULL;
    while (p < end) {
        uint64_t key, v;
        if (varint(&p, end, &key) < 0)
            goto common_case_only;
        int wire = (int)(key & 7);
        switch (key >> 3) {
        case 1: case 2: case 3:
            if (wire != 0 || varint(&p, end, &v) < 0)
                goto common_case_only;
            if (key >> 3 == 1) version = (uint32_t)v;
            else if (key >> 3 == 2) request_id = v;
            else type = (uint64_t)(int64_t)(int32_t)(uint32_t)v;
            break;
        case 6:
            if (wire != 2 || delimited(&p, end, &payload, &payload_n) < 0)
                goto common_case_only;
            break;
        default:              /* a status or error (a response's), or unknown */
            goto common_case_only;
        }
    }
    if ((long long)version != want_version || (long long)(int64_t)type != want_type)
        goto common_case_only;
    if (payload == NULL)
        payload = p;
    PyObject *view = send_view(payload, payload + payload_n);
    if (view == NULL) {
        if (PyErr_Occurred())
            goto done;
        goto common_case_only;
    }
    out = Py_BuildValue("(KN)", (unsigned long long)request_id, view);
    goto done;
common_case_only:
    out = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&b);
    return out;
}

/* a SendResponse in [p, end) as (queue_offset, [physical_offsets],
 * broker_group, in_sync_replicas, degraded, epoch, duplicate); NULL with no
 * exception set when it is not the common case (an unknown or mistyped
 * field, a group that is not UTF-8, a malformed varint), with one set on a
 * failure of memory. Repeated offsets packed or not, as protobuf reads them */
static PyObject *send_response_fields(const uint8_t *p, const uint8_t *end)
{
    const uint8_t *group = (const uint8_t *)"";
    Py_ssize_t group_n = 0;
    int64_t queue_offset = 0, epoch = 0;
    int32_t isr = 0;
    int degraded = 0, duplicate = 0;
    PyObject *offsets = PyList_New(0);
    if (offsets == NULL)
        return NULL;
    while (p < end) {
        uint64_t key, v;
        if (varint(&p, end, &key) < 0)
            goto not_common;
        int wire = (int)(key & 7);
        switch (key >> 3) {
        case 2:
            if (wire == 2) {              /* packed */
                const uint8_t *s;
                Py_ssize_t n;
                if (delimited(&p, end, &s, &n) < 0)
                    goto not_common;
                const uint8_t *q = s, *qe = s + n;
                while (q < qe) {
                    if (varint(&q, qe, &v) < 0)
                        goto not_common;
                    PyObject *o = PyLong_FromLongLong((int64_t)v);
                    if (o == NULL || PyList_Append(offsets, o) < 0) {
                        Py_XDECREF(o);
                        goto failed;
                    }
                    Py_DECREF(o);
                }
                break;
            }
            if (wire != 0 || varint(&p, end, &v) < 0)
                goto not_common;
            {
                PyObject *o = PyLong_FromLongLong((int64_t)v);
                if (o == NULL || PyList_Append(offsets, o) < 0) {
                    Py_XDECREF(o);
                    goto failed;
                }
                Py_DECREF(o);
            }
            break;
        case 3:
            if (wire != 2 || delimited(&p, end, &group, &group_n) < 0)
                goto not_common;
            break;
        case 1: case 4: case 5: case 6: case 7:
            if (wire != 0 || varint(&p, end, &v) < 0)
                goto not_common;
            switch (key >> 3) {
            case 1: queue_offset = (int64_t)v; break;
            case 4: isr = (int32_t)(uint32_t)v; break;
            case 5: degraded = v != 0; break;
            case 6: epoch = (int64_t)v; break;
            default: duplicate = v != 0; break;
            }
            break;
        default:
            goto not_common;
        }
    }
    PyObject *g = PyUnicode_DecodeUTF8((const char *)group, group_n, "strict");
    if (g == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            goto failed;
        PyErr_Clear();
        goto not_common;
    }
    return Py_BuildValue("(LNNiNLN)", (long long)queue_offset, offsets, g, (int)isr,
                         PyBool_FromLong(degraded), (long long)epoch, PyBool_FromLong(duplicate));
not_common:
failed:
    Py_DECREF(offsets);
    return NULL;
}

/* an answer's Frame: its fields, the payload and error as slices of it */
typedef struct {
    uint64_t version, request_id;
    int64_t type, status;
    const uint8_t *error, *payload;
    Py_ssize_t error_n, payload_n;
} AnswerFrame;

/* the Frame in [p, end) read as protobuf reads it: 0, or -1 when it is not
 * the common case (an unknown or mistyped field, a malformed varint) */
static int answer_frame(const uint8_t *p, const uint8_t *end, AnswerFrame *f)
{
    *f = (AnswerFrame){0, 0, 0, 0, (const uint8_t *)"", p, 0, 0};
    while (p < end) {
        uint64_t key, v;
        if (varint(&p, end, &key) < 0)
            return -1;
        int wire = (int)(key & 7);
        switch (key >> 3) {
        case 1: case 2: case 3: case 4:
            if (wire != 0 || varint(&p, end, &v) < 0)
                return -1;
            if (key >> 3 == 1) f->version = (uint32_t)v;
            else if (key >> 3 == 2) f->request_id = v;
            else if (key >> 3 == 3) f->type = (int32_t)(uint32_t)v;
            else f->status = (int32_t)(uint32_t)v;
            break;
        case 5: case 6:
            if (wire != 2)
                return -1;
            if (key >> 3 == 5 ? delimited(&p, end, &f->error, &f->error_n) < 0
                              : delimited(&p, end, &f->payload, &f->payload_n) < 0)
                return -1;
            break;
        default:
            return -1;
        }
    }
    return 0;
}

PyDoc_STRVAR(read_send_answer_doc,
"read_send_answer(frame, version, request_id, send_type): (status, error,\n"
"SendResponse's fields as send_response_fields gives them) of the answer to\n"
"SEND request_id in this protocol version, or None for anything else (another\n"
"request's answer, another version or type, an unknown field, text that is\n"
"not UTF-8): the caller then reads it with protobuf.");

static PyObject *py_read_send_answer(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError,
                        "read_send_answer(frame, version, request_id, send_type)");
        return NULL;
    }
    Py_buffer b;
    if (PyObject_GetBuffer(args[0], &b, PyBUF_SIMPLE) < 0)
        return NULL;
    long long want_version = PyLong_AsLongLong(args[1]);
    unsigned long long want_rid = PyLong_AsUnsignedLongLong(args[2]);
    long long want_type = PyLong_AsLongLong(args[3]);
    if (PyErr_Occurred()) {
        PyBuffer_Release(&b);
        return NULL;
    }
    AnswerFrame f;
    PyObject *out = NULL, *fields = NULL, *text = NULL;
    if (answer_frame(b.buf, (const uint8_t *)b.buf + b.len, &f) < 0)
        goto common_case_only;
    if ((long long)f.version != want_version || f.request_id != want_rid ||
        f.type != want_type)
        goto common_case_only;
    fields = send_response_fields(f.payload, f.payload + f.payload_n);
    if (fields == NULL) {
        if (PyErr_Occurred())
            goto done;
        goto common_case_only;
    }
    text = PyUnicode_DecodeUTF8((const char *)f.error, f.error_n, "strict");
    if (text == NULL) {
        Py_DECREF(fields);
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            goto done;
        PyErr_Clear();
        goto common_case_only;
    }
    out = Py_BuildValue("(LNN)", (long long)f.status, text, fields);
    goto done;
common_case_only:
    out = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&b);
    return out;
}

/* a PullResponse in [p, end) as (count, records, next_offset, min_offset,
 * max_offset, suggest_broker_id or None, advice_ttl_ms, replica_lag_ms or
 * None): None for the two optional fields when absent, as HasField says;
 * NULL as send_response_fields */
static PyObject *pull_response_fields(const uint8_t *p, const uint8_t *end)
{
    const uint8_t *records = (const uint8_t *)"";
    Py_ssize_t records_n = 0;
    int32_t count = 0, suggest = 0, ttl = 0;
    int64_t next = 0, lo = 0, hi = 0, lag = 0;
    int has_suggest = 0, has_lag = 0;
    while (p < end) {
        uint64_t key, v;
        if (varint(&p, end, &key) < 0)
            return NULL;
        int wire = (int)(key & 7);
        switch (key >> 3) {
        case 2:
            if (wire != 2 || delimited(&p, end, &records, &records_n) < 0)
                return NULL;
            break;
        case 1: case 3: case 4: case 5: case 6: case 7: case 8:
            if (wire != 0 || varint(&p, end, &v) < 0)
                return NULL;
            switch (key >> 3) {
            case 1: count = (int32_t)(uint32_t)v; break;
            case 3: next = (int64_t)v; break;
            case 4: lo = (int64_t)v; break;
            case 5: hi = (int64_t)v; break;
            case 6: suggest = (int32_t)(uint32_t)v; has_suggest = 1; break;
            case 7: ttl = (int32_t)(uint32_t)v; break;
            default: lag = (int64_t)v; has_lag = 1; break;
            }
            break;
        default:
            return NULL;
        }
    }
    PyObject *sug = has_suggest ? PyLong_FromLong(suggest) : Py_NewRef(Py_None);
    PyObject *lg = has_lag ? PyLong_FromLongLong(lag) : Py_NewRef(Py_None);
    if (sug == NULL || lg == NULL) {
        Py_XDECREF(sug);
        Py_XDECREF(lg);
        return NULL;
    }
    return Py_BuildValue("(iy#LLLNiN)", (int)count, (const char *)records, records_n,
                         (long long)next, (long long)lo, (long long)hi, sug, (int)ttl, lg);
}

PyDoc_STRVAR(read_pull_answer_doc,
"read_pull_answer(frame, version, pull_type): (request_id, status, error,\n"
"PullResponse's fields as pull_response_fields gives them) of an answer to a\n"
"PULL in this protocol version, or None for anything else (another version or\n"
"type, an unknown field, text that is not UTF-8): the caller then reads it\n"
"with protobuf.");

static PyObject *py_read_pull_answer(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "read_pull_answer(frame, version, pull_type)");
        return NULL;
    }
    Py_buffer b;
    if (PyObject_GetBuffer(args[0], &b, PyBUF_SIMPLE) < 0)
        return NULL;
    long long want_version = PyLong_AsLongLong(args[1]);
    long long want_type = PyLong_AsLongLong(args[2]);
    if (PyErr_Occurred()) {
        PyBuffer_Release(&b);
        return NULL;
    }
    AnswerFrame f;
    PyObject *out = NULL, *fields = NULL, *text = NULL;
    if (answer_frame(b.buf, (const uint8_t *)b.buf + b.len, &f) < 0)
        goto common_case_only;
    if ((long long)f.version != want_version || f.type != want_type)
        goto common_case_only;
    fields = pull_response_fields(f.payload, f.payload + f.payload_n);
    if (fields == NULL) {
        if (PyErr_Occurred())
            goto done;
        goto common_case_only;
    }
    text = PyUnicode_DecodeUTF8((const char *)f.error, f.error_n, "strict");
    if (text == NULL) {
        Py_DECREF(fields);
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            goto done;
        PyErr_Clear();
        goto common_case_only;
    }
    out = Py_BuildValue("(KLNN)", (unsigned long long)f.request_id, (long long)f.status, text,
                        fields);
    goto done;
common_case_only:
    out = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&b);
    return out;
}

PyMethodDef duomq_wire_read_methods[] = {
    {"parse_send", (PyCFunction)(void (*)(void))py_parse_send, METH_FASTCALL, parse_send_doc},
    {"read_send_answer", (PyCFunction)(void (*)(void))py_read_send_answer, METH_FASTCALL,
     read_send_answer_doc},
    {"read_pull_answer", (PyCFunction)(void (*)(void))py_read_pull_answer, METH_FASTCALL,
     read_pull_answer_doc},
    {NULL, NULL, 0, NULL},
};

int duomq_wire_read_init(PyObject *m)
{
    if (SendViewType.tp_name == NULL &&
        PyStructSequence_InitType2(&SendViewType, &send_view_desc) < 0)
        return -1;
    Py_INCREF(&SendViewType);
    if (PyModule_AddObject(m, "SendView", (PyObject *)&SendViewType) < 0) {
        Py_DECREF(&SendViewType);
        return -1;
    }
    return 0;
}
