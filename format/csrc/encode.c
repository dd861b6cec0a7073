/* The producer's side: a batch of messages encoded in one loop, as
 * client/producer's encode_batch encodes it (the tests compare the two). */

#include "records.h"

PyDoc_STRVAR(encode_doc,
"encode(msgs, topic, born_ts_ms, host, max_record_bytes, routed, first_flags=0,\n"
"       names=None, producer_id=0, sequence=0, count=0) -> bytes or None\n\n"
"A producer's batch of messages of topic, encoded as client/producer.py's\n"
"encode_batch encodes it: each record with its payload's CRC-32C, born time\n"
"and host, the first record's flags first_flags (FLAG_SEQUENCED: an\n"
"idempotent batch, its numbering in its properties), everything else zero.\n"
"names (the three numbering properties' names, common/idempotence.py's\n"
"SEQUENCING): the first record's properties end with them, the producer id\n"
"in hex and the sequence and count in decimal, as encode_batch's numbering\n"
"dict puts them (None when the first message names one of them itself, or\n"
"a number is negative: the Python then decides). A message's deliver_at_ms\n"
"(a timer's time, 0: none) follows its properties as DELIVER_AT.\n"
"None when a message is not a case this\n"
"loop takes (another topic, a body that is not bytes, tags or keys that are\n"
"not str or are over 65535 bytes, properties that are not a dict of str to\n"
"str, a property named in routed (a delayed or transactional message; a\n"
"timer when routed names DELIVER_AT, or one that names it in its properties\n"
"too, or a deliver_at_ms that is not an int from 0) or holding a separator,\n"
"a record over max_record_bytes): the Python encoder then encodes the batch\n"
"and says what is wrong with it, if anything is.");

typedef struct {
    PyObject *body, *tags, *keys, *props;   /* references held while encoding (props: bytes) */
    const char *tg, *ky;
    Py_ssize_t lg, lk;
} plain_t;

static PyObject *s_topic, *s_body, *s_tags, *s_keys, *s_properties, *s_deliver_at_ms,
                *s_DELIVER_AT;

int duomq_encode_init(void)
{
    return (s_topic = PyUnicode_InternFromString("topic")) && (s_body = PyUnicode_InternFromString("body"))
        && (s_tags = PyUnicode_InternFromString("tags")) && (s_keys = PyUnicode_InternFromString("keys"))
        && (s_properties = PyUnicode_InternFromString("properties"))
        && (s_deliver_at_ms = PyUnicode_InternFromString("deliver_at_ms"))
        && (s_DELIVER_AT = PyUnicode_InternFromString("DELIVER_AT")) ? 0 : -1;
}

/* A message's deliver_at_ms: 0 none, the time, -1 with an exception, -2 not
 * an int from 0 (the Python says what is wrong). */
static long long deliver_at(PyObject *m)
{
    PyObject *v = PyObject_GetAttr(m, s_deliver_at_ms);
    if (v == NULL) {                   /* (a record of the broker's own: its time in properties) */
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    long long at = -2;
    if (PyLong_CheckExact(v)) {
        int over;
        at = PyLong_AsLongLongAndOverflow(v, &over);
        if (over || at < 0)
            at = -2;
    }
    Py_DECREF(v);
    return at;
}

/* e->props followed by the DELIVER_AT property of at: 0, or -1 with an exception. */
static int with_delivery(plain_t *e, long long at)
{
    char tail[48];
    int lt = snprintf(tail, sizeof tail, "DELIVER_AT\x01%lld\x02", at);
    Py_ssize_t had = e->props != NULL ? PyBytes_GET_SIZE(e->props) : 0;
    PyObject *out = PyBytes_FromStringAndSize(NULL, had + lt);
    if (out == NULL)
        return -1;
    if (had)
        memcpy(PyBytes_AS_STRING(out), PyBytes_AS_STRING(e->props), (size_t)had);
    memcpy(PyBytes_AS_STRING(out) + had, tail, (size_t)lt);
    Py_XSETREF(e->props, out);
    return 0;
}

/* a str attribute's UTF-8 (empty for ""); -1: not a str of at most 65535 bytes */
static int utf8_of(PyObject *v, const char **p, Py_ssize_t *n)
{
    if (!PyUnicode_Check(v))
        return -1;
    if (PyUnicode_GET_LENGTH(v) == 0) {
        *p = "";
        *n = 0;
        return 0;
    }
    *p = PyUnicode_AsUTF8AndSize(v, n);
    if (*p == NULL) {               /* a lone surrogate: Python's encoder raises for it */
        PyErr_Clear();
        return -1;
    }
    return *n > 0xFFFF ? -1 : 0;
}

/* a str's UTF-8, or NULL: not an exact str, not encodable, or holding a separator */
static const char *prop_text(PyObject *v, Py_ssize_t *n)
{
    if (!PyUnicode_CheckExact(v))
        return NULL;
    const char *p = PyUnicode_AsUTF8AndSize(v, n);
    if (p == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (memchr(p, PROP_SEP, (size_t)*n) || memchr(p, PAIR_SEP, (size_t)*n))
        return NULL;
    return p;
}

/* A message's properties as format/record.py's encode_properties writes them
 * ("key\x01value\x02" each, in the dict's order): a new bytes, Py_None (a new
 * reference) when this loop leaves them to Python, NULL with an exception. No
 * Python code runs between the two walks of the dict. */
static PyObject *props_bytes(PyObject *d, PyObject *routed)
{
    if (!PyDict_CheckExact(d))
        return Py_NewRef(Py_None);
    Py_ssize_t pos = 0, total = 0, n;
    PyObject *k, *v;
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (!PyUnicode_CheckExact(k))
            return Py_NewRef(Py_None);
        int r = PySet_Contains(routed, k);
        if (r < 0)
            return NULL;
        if (r)
            return Py_NewRef(Py_None);
        if (prop_text(k, &n) == NULL)
            return Py_NewRef(Py_None);
        total += n + 2;
        if (prop_text(v, &n) == NULL)
            return Py_NewRef(Py_None);
        total += n;
        if (total > 0x7FFFFFFF)
            return Py_NewRef(Py_None);
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        return NULL;
    char *w = PyBytes_AS_STRING(out), *end = w + total;
    Py_ssize_t nk, nv;
    pos = 0;
    while (PyDict_Next(d, &pos, &k, &v)) {
        const char *tk = prop_text(k, &nk), *tv = prop_text(v, &nv);   /* cached by the first walk */
        if (tk == NULL || tv == NULL || nk + nv + 2 > end - w)
            break;                                                    /* the dict changed */
        memcpy(w, tk, (size_t)nk); w += nk;
        *w++ = PROP_SEP;
        memcpy(w, tv, (size_t)nv); w += nv;
        *w++ = PAIR_SEP;
    }
    if (w != end) {
        Py_DECREF(out);
        return Py_NewRef(Py_None);
    }
    return out;
}

/* The numbering properties ("name\x01value\x02" each) into buf (at least
 * NUMBERING_MAX bytes): their length, or 0 when the Python must decide (a
 * name that is not a plain str or holds a separator, a number that is not an
 * int from 0 to 2**64-1). */
#define NUMBERING_MAX 512
static Py_ssize_t numbering_props(char *buf, PyObject *names, PyObject *pid, PyObject *seq,
                                  PyObject *count)
{
    if (!PyTuple_CheckExact(names) || PyTuple_GET_SIZE(names) != 3)
        return 0;
    PyObject *nums[3] = {pid, seq, count};
    char *w = buf;
    for (int i = 0; i < 3; i++) {
        Py_ssize_t n;
        const char *name = prop_text(PyTuple_GET_ITEM(names, i), &n);
        if (name == NULL || n == 0 || n > 100 || !PyLong_CheckExact(nums[i]))
            return 0;
        unsigned long long v = PyLong_AsUnsignedLongLong(nums[i]);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {   /* negative, or too big */
            PyErr_Clear();
            return 0;
        }
        memcpy(w, name, (size_t)n);
        w += n;
        *w++ = PROP_SEP;
        w += snprintf(w, 24, i == 0 ? "%llx" : "%llu", v);
        *w++ = PAIR_SEP;
    }
    return w - buf;
}

/* Whether the first message's properties name one of the numbering's own
 * (the Python merges those): 1 yes (or not a plain dict), 0 no, -1 an exception. */
static int names_numbering(PyObject *props, PyObject *names)
{
    if (!PyDict_CheckExact(props))
        return 1;
    for (int k = 0; k < 3; k++) {
        int has = PyDict_Contains(props, PyTuple_GET_ITEM(names, k));
        if (has != 0)
            return has;
    }
    return 0;
}

/* Message m's parts into e (references held there until the batch is done),
 * its record's size added to *total; ln: the numbering's length when m opens
 * the batch (else 0). 1: taken; 0: a case for the Python; -1: an exception. */
static int plain_message(PyObject *m, plain_t *e, PyObject *topic, PyObject *routed,
                         PyObject *names, Py_ssize_t ln, Py_ssize_t tlen, long long max_bytes,
                         Py_ssize_t *total)
{
    PyObject *v;
    if ((v = PyObject_GetAttr(m, s_topic)) == NULL)
        return -1;
    int same = v == topic || (PyUnicode_Check(v) && PyUnicode_Compare(v, topic) == 0);
    Py_DECREF(v);
    if (!same)
        return 0;
    long long at = deliver_at(m);             /* a timer: routed, or its property added */
    int timer = at > 0 ? PySet_Contains(routed, s_DELIVER_AT) : 0;
    if (at == -1 || timer < 0)
        return -1;
    if (at == -2 || timer)
        return 0;
    if ((v = PyObject_GetAttr(m, s_properties)) == NULL)
        return -1;
    int any = PyObject_IsTrue(v);
    int own = any > 0 && ln > 0 ? names_numbering(v, names) : 0;
    int twice = any > 0 && at > 0                 /* DELIVER_AT given twice: the Python's case */
        ? (PyDict_CheckExact(v) ? PyDict_Contains(v, s_DELIVER_AT) : 1) : 0;
    if (any > 0 && own == 0 && twice == 0)
        e->props = props_bytes(v, routed);
    Py_DECREF(v);
    if (any < 0 || own < 0 || twice < 0 || (any > 0 && own == 0 && !twice && e->props == NULL))
        return -1;
    if (own > 0 || twice || e->props == Py_None)
        return 0;
    if (at > 0 && with_delivery(e, at) < 0)
        return -1;
    Py_ssize_t lp = (e->props != NULL ? PyBytes_GET_SIZE(e->props) : 0) + ln;
    if ((e->body = PyObject_GetAttr(m, s_body)) == NULL || (e->tags = PyObject_GetAttr(m, s_tags)) == NULL
        || (e->keys = PyObject_GetAttr(m, s_keys)) == NULL)
        return -1;
    if (!PyBytes_CheckExact(e->body) || utf8_of(e->tags, &e->tg, &e->lg) < 0
        || utf8_of(e->keys, &e->ky, &e->lk) < 0)
        return 0;
    Py_ssize_t size = HS + tlen + e->lg + e->lk + lp + PyBytes_GET_SIZE(e->body);
    if (size > max_bytes || size > INT32_MAX || *total > PY_SSIZE_T_MAX - size)
        return 0;
    *total += size;
    return 1;
}

typedef struct {
    const char *tp;                   /* the topic's UTF-8 */
    Py_ssize_t tlen;
    uint32_t topic_crc;               /* CRC-32C of the topic: each payload's starts so */
    long long born;
    const void *host;                 /* 8 bytes */
} batch_t;

/* One record at w, its properties followed by numbering[0:ln] (the first
 * record's), flags in its header: returns where the next one goes. */
static uint8_t *write_record(uint8_t *w, const plain_t *e, const batch_t *bt,
                             const char *numbering, Py_ssize_t ln, uint32_t flags)
{
    const uint8_t *body = (const uint8_t *)PyBytes_AS_STRING(e->body);
    const uint8_t *pr = e->props != NULL ? (const uint8_t *)PyBytes_AS_STRING(e->props) : NULL;
    Py_ssize_t tlen = bt->tlen, lb = PyBytes_GET_SIZE(e->body),
               lp = e->props != NULL ? PyBytes_GET_SIZE(e->props) : 0,
               size = HS + tlen + e->lg + e->lk + lp + ln + lb;
    uint32_t c = crc32c(crc32c(crc32c(bt->topic_crc, (const uint8_t *)e->tg, (size_t)e->lg),
                               (const uint8_t *)e->ky, (size_t)e->lk), pr, (size_t)lp);
    c = crc32c(c, (const uint8_t *)numbering, (size_t)ln);
    c = crc32c(c, body, (size_t)lb);
    memset(w, 0, HS);
    put32(w + OFF_TOTAL_SIZE, (uint32_t)size);
    put32(w + OFF_MAGIC, (uint32_t)RECORD_MAGIC);
    put32(w + OFF_CRC, c);
    put32(w + OFF_FLAGS, flags);
    put64(w + OFF_BORN_TS_MS, (uint64_t)bt->born);
    memcpy(w + OFF_BORN_HOST, bt->host, 8);
    put16(w + OFF_TOPIC_LEN, (uint16_t)tlen);
    put16(w + OFF_TAGS_LEN, (uint16_t)e->lg);
    put16(w + OFF_KEYS_LEN, (uint16_t)e->lk);
    put32(w + OFF_PROPS_LEN, (uint32_t)(lp + ln));
    put32(w + OFF_BODY_LEN, (uint32_t)lb);
    w += HS;
    memcpy(w, bt->tp, (size_t)tlen); w += tlen;
    memcpy(w, e->tg, (size_t)e->lg); w += e->lg;
    memcpy(w, e->ky, (size_t)e->lk); w += e->lk;
    if (lp)
        memcpy(w, pr, (size_t)lp);
    w += lp;
    if (ln)
        memcpy(w, numbering, (size_t)ln);
    w += ln;
    memcpy(w, body, (size_t)lb);
    return w + lb;
}

static PyObject *py_encode(PyObject *self, PyObject *args)
{
    PyObject *msgs, *topic, *routed, *names = Py_None, *pid = NULL, *seq = NULL, *count = NULL;
    long long max_bytes;
    int first_flags = 0;
    Py_buffer host;
    batch_t bt;
    if (!PyArg_ParseTuple(args, "OULy*LO!|iOOOO", &msgs, &topic, &bt.born, &host, &max_bytes,
                          &PyFrozenSet_Type, &routed, &first_flags, &names, &pid, &seq, &count))
        return NULL;
    PyObject *fast = NULL, *out = NULL;
    plain_t *pl = NULL;
    Py_ssize_t n = 0, total = 0, lnum = 0;
    char numbering[NUMBERING_MAX];
    bt.host = host.buf;
    if ((bt.tp = PyUnicode_AsUTF8AndSize(topic, &bt.tlen)) == NULL)
        goto fail;
    if (host.len != 8) {
        PyErr_Format(PyExc_ValueError, "host is %zd bytes, not 8", host.len);
        goto fail;
    }
    if (names != Py_None) {
        if (pid == NULL || seq == NULL || count == NULL) {
            PyErr_SetString(PyExc_TypeError, "encode: names without the three numbers");
            goto fail;
        }
        if ((lnum = numbering_props(numbering, names, pid, seq, count)) == 0)
            goto none;
    }
    fast = PySequence_Tuple(msgs);   /* a copy: reading an attribute may run code that changes msgs */
    if (fast == NULL)
        goto fail;
    n = PyTuple_GET_SIZE(fast);
    if (n == 0 || bt.tlen > 0xFFFF)
        goto none;
    if ((pl = PyMem_Calloc((size_t)n, sizeof(plain_t))) == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int took = plain_message(PyTuple_GET_ITEM(fast, i), pl + i, topic, routed, names,
                                 i == 0 ? lnum : 0, bt.tlen, max_bytes, &total);
        if (took < 0)
            goto fail;
        if (took == 0)
            goto none;
    }
    if ((out = PyBytes_FromStringAndSize(NULL, total)) == NULL)
        goto fail;
    bt.topic_crc = crc32c(0, (const uint8_t *)bt.tp, (size_t)bt.tlen);
    uint8_t *w = (uint8_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++)     /* the numbering after the first message's own */
        w = write_record(w, pl + i, &bt, numbering, i == 0 ? lnum : 0,
                         i == 0 ? (uint32_t)first_flags : 0);
    goto fail;                       /* not a failure: drop our references, return out */
none:
    out = Py_NewRef(Py_None);
fail:
    if (pl != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_XDECREF(pl[i].body); Py_XDECREF(pl[i].tags); Py_XDECREF(pl[i].keys);
            Py_XDECREF(pl[i].props);
        }
        PyMem_Free(pl);
    }
    Py_XDECREF(fast);
    PyBuffer_Release(&host);
    return out;
}

PyMethodDef duomq_encode_methods[] = {
    {"encode", py_encode, METH_VARARGS, encode_doc},
    {NULL, NULL, 0, NULL},
};
