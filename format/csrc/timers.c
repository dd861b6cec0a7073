/* The master's side of timer messages: a producer's batch of timers checked
 * and rewritten for the timer topic in one loop, as master/requeue.py's
 * timers_batch does it record by record from decoded messages (the tests
 * compare the two). */

#include "records.h"

PyDoc_STRVAR(timers_doc,
"timers(buf, count, topic, real_qid, now_ms, max_delay_ms, max_record_bytes,\n"
"       timer_topic) -> (records, delivery_times, sizes) or None\n\n"
"A producer's batch of count records of topic, every one a timer message due\n"
"after now_ms and at most max_delay_ms later, checked as scan checks a batch\n"
"(magic, lengths, size, topic, payload CRC-32C) and rewritten for\n"
"timer_topic: each record's properties followed by REAL_TOPIC (topic) and\n"
"REAL_QID (real_qid, bytes), its payload CRC computed again, its broker\n"
"fields zero: the bytes master/requeue.py's timers_batch gives. None when\n"
"the batch is not that (a record without a delivery time, or one past or\n"
"too far, a delay level, a transaction, a property only the broker writes,\n"
"REAL_TOPIC or REAL_QID given, a name twice, properties not in their\n"
"canonical form or not ASCII, tags or keys not ASCII, flags, born times or\n"
"hosts that differ, a record over max_record_bytes once rewritten): the\n"
"Python then places it and says what is wrong with it, if anything is.");

static int same(const uint8_t *p, Py_ssize_t n, const char *name)
{
    size_t ln = strlen(name);
    return (size_t)n == ln && memcmp(p, name, ln) == 0;
}

static int ascii(const uint8_t *p, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (p[i] & 0x80)
            return 0;
    return 1;
}

/* The delivery time of properties p[0:n] (canonical "name\x01value\x02"
 * pairs), or -1 when the record is not a plain timer. */
static int64_t delivery_time(const uint8_t *p, Py_ssize_t n)
{
    static const char *refused[] = {"DELAY", "TRAN_MSG", "RECALL_OF", "TIMER_ORIGIN",
                                    "REAL_TOPIC", "REAL_QID"};
    int64_t at = -1;
    Py_ssize_t pos = 0;
    while (pos < n) {
        const uint8_t *name = p + pos, *sep = memchr(name, PROP_SEP, (size_t)(n - pos));
        if (sep == NULL)
            return -1;
        const uint8_t *value = sep + 1, *end = memchr(value, PAIR_SEP, (size_t)(p + n - value));
        if (end == NULL || sep == name || memchr(value, PROP_SEP, (size_t)(end - value)) != NULL)
            return -1;
        Py_ssize_t ln = sep - name, lv = end - value;
        for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++)
            if (same(name, ln, refused[k]))
                return -1;
        if (same(name, ln, "DELIVER_AT")) {
            if (at >= 0 || lv < 1 || lv > 18)
                return -1;
            int64_t v = 0;
            for (Py_ssize_t k = 0; k < lv; k++) {
                if (value[k] < '0' || value[k] > '9')
                    return -1;
                v = v * 10 + (value[k] - '0');
            }
            at = v;
        }
        pos = end + 1 - p;
    }
    return at;
}

/* The record r rewritten at w for the timer topic, nsize bytes: the header
 * the producer's with its size, topic and properties lengths anew and the
 * broker's fields zero (the store seals them), the topic, tags and keys,
 * the properties and REAL_TOPIC and REAL_QID, the body, the payload's CRC
 * last. Returns where the next record goes. */
static uint8_t *rewrite(uint8_t *w, const uint8_t *r, Py_ssize_t nsize, const uint8_t *ttopic,
                        Py_ssize_t ttlen, const uint8_t *topic, Py_ssize_t tlen,
                        const uint8_t *qid, Py_ssize_t qlen, Py_ssize_t lgk, Py_ssize_t lp,
                        Py_ssize_t lb)
{
    const uint8_t *text = r + HS + tlen;
    memcpy(w, r, HS);
    put32(w + OFF_TOTAL_SIZE, (uint32_t)nsize);
    memset(w + OFF_QUEUE_ID, 0, OFF_BORN_TS_MS - OFF_QUEUE_ID);
    memset(w + OFF_STORE_TS_MS, 0, 8);
    put16(w + OFF_TOPIC_LEN, (uint16_t)ttlen);
    put32(w + OFF_PROPS_LEN, (uint32_t)(lp + 10 + 2 + tlen + 8 + 2 + qlen));
    uint8_t *o = w + HS;
    memcpy(o, ttopic, ttlen); o += ttlen;
    memcpy(o, text, lgk + lp); o += lgk + lp;
    memcpy(o, "REAL_TOPIC", 10); o += 10; *o++ = PROP_SEP;
    memcpy(o, topic, tlen); o += tlen; *o++ = PAIR_SEP;
    memcpy(o, "REAL_QID", 8); o += 8; *o++ = PROP_SEP;
    memcpy(o, qid, qlen); o += qlen; *o++ = PAIR_SEP;
    memcpy(o, text + lgk + lp, lb); o += lb;
    put32(w + OFF_CRC, crc32c(0, w + HS, (size_t)(nsize - HS)));
    return o;
}

static PyObject *py_timers(PyObject *self, PyObject *args)
{
    Py_buffer b, t, q, tt;
    Py_ssize_t count;
    long long now, max_delay, max_bytes;
    if (!PyArg_ParseTuple(args, "y*ny*y*LLLy*", &b, &count, &t, &q, &now, &max_delay, &max_bytes,
                          &tt))
        return NULL;
    const uint8_t *p = b.buf, *topic = t.buf, *qid = q.buf, *ttopic = tt.buf;
    Py_ssize_t end = b.len, tlen = t.len, ttlen = tt.len;
    PyObject *out = NULL, *records = NULL, *ats = NULL, *sizes = NULL;
    /* the properties each record gains: REAL_TOPIC and REAL_QID */
    Py_ssize_t extra = 10 + 2 + tlen + 8 + 2 + q.len;
    Py_ssize_t grow = extra + ttlen - tlen;
    if (count < 1 || end < HS || count > end / HS || tlen > 0xFFFF || ttlen > 0xFFFF
        || !ascii(topic, tlen) || !ascii(qid, q.len))
        goto none;
    ats = PyList_New(count);
    sizes = PyList_New(count);
    records = PyBytes_FromStringAndSize(NULL, end + grow * count);
    if (!ats || !sizes || !records)
        goto fail;
    uint8_t *w = (uint8_t *)PyBytes_AS_STRING(records);
    Py_ssize_t pos = 0, i = 0;
    const uint8_t *first = p;
    while (pos < end) {
        const uint8_t *r = p + pos;
        uint32_t crc;
        int64_t size = i == count ? -1 : checked_record(r, end - pos, max_bytes, topic, tlen, &crc);
        if (size < 0 || be32(r + OFF_FLAGS) != 0
            || be64(r + OFF_BORN_TS_MS) != be64(first + OFF_BORN_TS_MS)
            || memcmp(r + OFF_BORN_HOST, first + OFF_BORN_HOST, 8) != 0)
            goto none;
        Py_ssize_t lg = be16(r + OFF_TAGS_LEN), lk = be16(r + OFF_KEYS_LEN);
        Py_ssize_t lp = (Py_ssize_t)be32(r + OFF_PROPS_LEN), lb = (Py_ssize_t)be32(r + OFF_BODY_LEN);
        const uint8_t *text = r + HS + tlen;
        if (!ascii(text, lg + lk + lp))
            goto none;
        int64_t at = delivery_time(text + lg + lk, lp);
        if (at <= now || at - now > max_delay)
            goto none;
        Py_ssize_t nsize = size + grow;
        if (nsize > max_bytes)
            goto none;
        uint8_t *o = rewrite(w, r, nsize, ttopic, ttlen, topic, tlen, qid, q.len, lg + lk,
                             lp, lb);
        PyObject *a = PyLong_FromLongLong(at), *s = PyLong_FromSsize_t(nsize);
        if (!a || !s) {
            Py_XDECREF(a); Py_XDECREF(s);
            goto fail;
        }
        PyList_SET_ITEM(ats, i, a);
        PyList_SET_ITEM(sizes, i, s);
        w = o;
        pos += size;
        i++;
    }
    if (i != count)
        goto none;
    out = PyTuple_Pack(3, records, ats, sizes);
    goto fail;                       /* not a failure: drop our references, return out */
none:
    out = Py_NewRef(Py_None);
fail:
    Py_XDECREF(records); Py_XDECREF(ats); Py_XDECREF(sizes);
    PyBuffer_Release(&b); PyBuffer_Release(&t); PyBuffer_Release(&q); PyBuffer_Release(&tt);
    return out;
}

PyMethodDef duomq_timers_methods[] = {
    {"timers", py_timers, METH_VARARGS, timers_doc},
    {NULL, NULL, 0, NULL},
};
