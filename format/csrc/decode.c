/* The consumer's side: a pull answer's stored records made into messages in
 * one loop, as common/message.py's decode_records reads them (the tests
 * compare the two). */

#include "records.h"

PyDoc_STRVAR(decode_doc,
"decode(buf, broker_group, cls, props_of, host_of, sequencing) -> list | None\n\n"
"A pull answer's stored records as common/message.py's decode_records reads\n"
"them: cls(topic, body, tags, keys, properties, queue_id, queue_offset,\n"
"physical_offset, born_ts_ms, store_ts_ms, born_host, flags, broker_group)\n"
"for each, texts decoded as UTF-8 with errors replaced, properties by\n"
"props_of(bytes) (an empty dict when there are none), hosts by host_of(8\n"
"bytes) once per distinct value (props_of or host_of None: read here, as\n"
"format/record.py's decode_properties and format_host read them), and a\n"
"record opening an idempotent batch\n"
"losing its sequencing properties and flag. None when a record is not a\n"
"whole format-3 record whose lengths add up (an older format, damage): the\n"
"caller's Python loop reads those, or says what is wrong.");

/* a text field: "" when empty, else its UTF-8 with errors replaced */
static PyObject *text_of(const uint8_t *p, Py_ssize_t n, PyObject *empty)
{
    if (n == 0)
        return Py_NewRef(empty);
    return PyUnicode_DecodeUTF8((const char *)p, n, "replace");
}

/* record.decode_properties in C: pairs split at 0x02, each at its first
   0x01 into key and value (a pair without one: the key, value ""), each
   decoded as UTF-8 with errors replaced, a later pair's key winning. The
   same dict as decoding the whole block and splitting the text: the
   separators are ASCII bytes, which no UTF-8 sequence holds and no
   replacement swallows. */
static PyObject *props_dict(const uint8_t *p, Py_ssize_t n, PyObject *empty)
{
    PyObject *d = PyDict_New();
    Py_ssize_t i = 0;
    while (d != NULL && i < n) {
        const uint8_t *stop = memchr(p + i, 0x02, n - i);
        Py_ssize_t j = stop ? stop - p : n;              /* the pair is p[i:j] */
        if (j > i) {
            const uint8_t *sep = memchr(p + i, 0x01, j - i);
            Py_ssize_t kend = sep ? sep - p : j;
            PyObject *k = PyUnicode_DecodeUTF8((const char *)p + i, kend - i, "replace");
            PyObject *v = k == NULL ? NULL
                : sep ? PyUnicode_DecodeUTF8((const char *)sep + 1, j - kend - 1, "replace")
                : Py_NewRef(empty);
            if (v == NULL || PyDict_SetItem(d, k, v) < 0)
                Py_CLEAR(d);
            Py_XDECREF(k);
            Py_XDECREF(v);
        }
        i = j + 1;
    }
    return d;
}

/* record.format_host in C: "" for NO_HOST (eight zero bytes), else
   "a.b.c.d:port" (the port the last four bytes, big-endian, unsigned) */
static PyObject *host_text(const uint8_t *h, PyObject *empty)
{
    static const uint8_t none[8] = {0};
    if (memcmp(h, none, 8) == 0)
        return Py_NewRef(empty);
    return PyUnicode_FromFormat("%u.%u.%u.%u:%lu", h[0], h[1], h[2], h[3],
                                (unsigned long)be32(h + 4));
}

/* cache[key bytes] -> value: made by fn(key) (or decoded) the first time */
static PyObject *cached(PyObject *cache, const uint8_t *p, Py_ssize_t n, PyObject *fn)
{
    PyObject *key = PyBytes_FromStringAndSize((const char *)p, n);
    if (key == NULL)
        return NULL;
    PyObject *v = PyDict_GetItemWithError(cache, key);
    if (v != NULL) {
        Py_DECREF(key);
        return Py_NewRef(v);
    }
    if (PyErr_Occurred()) {
        Py_DECREF(key);
        return NULL;
    }
    v = fn != NULL ? PyObject_CallOneArg(fn, key)
                   : PyUnicode_DecodeUTF8((const char *)p, n, "replace");
    if (v == NULL || PyDict_SetItem(cache, key, v) < 0) {
        Py_XDECREF(v);
        Py_DECREF(key);
        return NULL;
    }
    Py_DECREF(key);
    return v;
}

typedef struct {
    PyObject *group, *cls, *props_of, *host_of, *sequencing;   /* decode's arguments */
    PyObject *topics, *hosts, *empty, *last_host;              /* caches, "" */
    uint8_t last_raw[8];                                        /* last_host's bytes */
} decoder_t;

/* A record's properties p[0:lp] as a dict; when *flags says the record opens
 * an idempotent batch, without its sequencing names (they are not the
 * application's) and *flags without FLAG_SEQUENCED. NULL: an exception. */
static PyObject *record_props(decoder_t *d, const uint8_t *p, Py_ssize_t lp, int32_t *flags)
{
    PyObject *props;
    if (lp == 0)
        props = PyDict_New();
    else if (d->props_of == Py_None)
        props = props_dict(p, lp, d->empty);
    else {
        PyObject *raw = PyBytes_FromStringAndSize((const char *)p, lp);
        props = raw ? PyObject_CallOneArg(d->props_of, raw) : NULL;
        Py_XDECREF(raw);
    }
    if (props != NULL && !PyDict_Check(props)) {
        PyErr_SetString(PyExc_TypeError, "decode: props_of did not give a dict");
        Py_CLEAR(props);
    }
    if (props != NULL && (*flags & FLAG_SEQUENCED)) {
        *flags &= ~FLAG_SEQUENCED;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(d->sequencing); i++) {
            PyObject *k = PyTuple_GET_ITEM(d->sequencing, i);
            int has = PyDict_Contains(props, k);
            if (has < 0 || (has && PyDict_DelItem(props, k) < 0)) {
                Py_CLEAR(props);
                break;
            }
        }
    }
    return props;
}

/* The born host's text: host_of's, once per distinct value, or read here
 * (a pull's records come from few producers: the last one again). */
static PyObject *born_host(decoder_t *d, const uint8_t *h)
{
    if (d->host_of != Py_None)
        return cached(d->hosts, h, 8, d->host_of);
    if (d->last_host != NULL && memcmp(d->last_raw, h, 8) == 0)
        return Py_NewRef(d->last_host);
    PyObject *text = host_text(h, d->empty);
    if (text != NULL) {
        Py_XSETREF(d->last_host, Py_NewRef(text));
        memcpy(d->last_raw, h, 8);
    }
    return text;
}

/* The message of r, a whole format-3 record whose lengths add up: cls's
 * thirteen fields. NULL with an exception. */
static PyObject *decode_record(decoder_t *d, const uint8_t *r)
{
    Py_ssize_t lt = be16(r + OFF_TOPIC_LEN), lg = be16(r + OFF_TAGS_LEN),
               lk = be16(r + OFF_KEYS_LEN), lp = be32(r + OFF_PROPS_LEN),
               lb = be32(r + OFF_BODY_LEN);
    const uint8_t *p = r + HS;
    int32_t flags = (int32_t)be32(r + OFF_FLAGS);
    PyObject *a[13] = {NULL};
    a[0] = cached(d->topics, p, lt, NULL);
    p += lt;
    a[2] = a[0] ? text_of(p, lg, d->empty) : NULL;
    p += lg;
    a[3] = a[2] ? text_of(p, lk, d->empty) : NULL;
    p += lk;
    a[4] = a[3] ? record_props(d, p, lp, &flags) : NULL;
    p += lp;
    a[1] = a[4] ? PyBytes_FromStringAndSize((const char *)p, lb) : NULL;
    if (a[1] != NULL) {
        a[5] = PyLong_FromLong((int32_t)be32(r + OFF_QUEUE_ID));
        a[6] = PyLong_FromLongLong(be64(r + OFF_QUEUE_OFFSET));
        a[7] = PyLong_FromLongLong(be64(r + OFF_PHYSICAL_OFFSET));
        a[8] = PyLong_FromLongLong(be64(r + OFF_BORN_TS_MS));
        a[9] = PyLong_FromLongLong(be64(r + OFF_STORE_TS_MS));
        a[10] = born_host(d, r + OFF_BORN_HOST);
        a[11] = PyLong_FromLong(flags);
        a[12] = Py_NewRef(d->group);
    }
    PyObject *msg = NULL;
    int whole = 1;
    for (int i = 0; i < 13; i++)
        whole &= a[i] != NULL;
    if (whole)
        msg = PyObject_Vectorcall(d->cls, a, 13, NULL);
    for (int i = 0; i < 13; i++)
        Py_XDECREF(a[i]);
    if (msg == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_SystemError, "decode: a field was not made");
    return msg;
}

static PyObject *py_decode(PyObject *self, PyObject *args)
{
    Py_buffer view;
    decoder_t d = {0};
    if (!PyArg_ParseTuple(args, "y*UOOOO!", &view, &d.group, &d.cls, &d.props_of, &d.host_of,
                          &PyTuple_Type, &d.sequencing))
        return NULL;
    const uint8_t *buf = view.buf;
    Py_ssize_t end = view.len, pos = 0;
    PyObject *out = PyList_New(0);
    d.topics = PyDict_New();
    d.hosts = PyDict_New();
    d.empty = PyUnicode_New(0, 0);
    if (out == NULL || d.topics == NULL || d.hosts == NULL || d.empty == NULL)
        goto fail;
    while (pos < end) {
        const uint8_t *r = buf + pos;
        if (end - pos < HS || (int32_t)be32(r + OFF_MAGIC) != RECORD_MAGIC)
            goto other;
        int64_t size = (int32_t)be32(r + OFF_TOTAL_SIZE);
        if (size < HS || size > end - pos || stated(r, size) < 0)
            goto other;
        PyObject *msg = decode_record(&d, r);
        if (msg == NULL)
            goto fail;
        int bad = PyList_Append(out, msg);
        Py_DECREF(msg);
        if (bad)
            goto fail;
        pos += size;
    }
    goto done;
other:
    Py_CLEAR(out);
    out = Py_NewRef(Py_None);
    goto done;
fail:
    Py_CLEAR(out);
done:
    Py_XDECREF(d.topics);
    Py_XDECREF(d.hosts);
    Py_XDECREF(d.last_host);
    Py_XDECREF(d.empty);
    PyBuffer_Release(&view);
    return out;
}

PyMethodDef duomq_decode_methods[] = {
    {"decode", py_decode, METH_VARARGS, decode_doc},
    {NULL, NULL, 0, NULL},
};
