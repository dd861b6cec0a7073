/* The master's side of a producer's batch: checked record by record (scan),
 * sealed in place (seal), or both with its consume-queue entries in one go
 * (stage); the idempotent numbering its first record carries (sequence); and
 * a slave's check of stored records (first_unsealed). Each has a pure twin
 * (format/bulk_scan.py, format/seal.py, store/bulk_dispatch.py with numpy,
 * common/idempotence.py) that gives the same answers; the tests compare.
 *
 * A producer's record carries crc = CRC-32C of its payload; a stored
 * (sealed) record's crc is CRC-32C of bytes PATCH_OFFSET..HEADER_SIZE
 * continued from that. */

#include "records.h"

/* the epoch of the master that stores a record: flags bytes 0..2 (record.py's EPOCH_AT) */
static inline void put_epoch(uint8_t *r, uint32_t epoch)
{
    r[OFF_FLAGS] = (uint8_t)(epoch >> 16);
    r[OFF_FLAGS + 1] = (uint8_t)(epoch >> 8);
    r[OFF_FLAGS + 2] = (uint8_t)epoch;
}

/* One record at r sealed as it is stored: queue id and offset, physical
 * offset, store time, epoch, then crc = CRC-32C of the header from
 * PATCH_OFFSET continued from the payload's CRC (the crc field). */
static inline void seal_one(uint8_t *r, int queue_id, long long qoff, long long phys,
                            long long store_ts, uint32_t epoch)
{
    put32(r + OFF_QUEUE_ID, (uint32_t)queue_id);
    put64(r + OFF_QUEUE_OFFSET, (uint64_t)qoff);
    put64(r + OFF_PHYSICAL_OFFSET, (uint64_t)phys);
    put64(r + OFF_STORE_TS_MS, (uint64_t)store_ts);
    put_epoch(r, epoch);
    put32(r + OFF_CRC, crc32c(be32(r + OFF_CRC), r + PATCH_OFFSET, HS - PATCH_OFFSET));
}

/* ints of a list (or tuple) into a C array; -1 with an exception set */
static int int64s(PyObject *seq, Py_ssize_t n, int64_t *out, const char *what)
{
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(fast) < n) {
        PyErr_Format(PyExc_ValueError, "%s: %zd values, %zd needed", what,
                     PySequence_Fast_GET_SIZE(fast), n);
        Py_DECREF(fast);
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyLong_AsLongLong(items[i]);
        if (out[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
    }
    Py_DECREF(fast);
    return 0;
}

PyDoc_STRVAR(scan_doc,
"scan(buf, topic, max_record_bytes, count) -> (bounds, borns, crcs, texts) or None\n\n"
"A producer's batch walked and checked record by record: each of the count\n"
"records has the format-3 magic, lengths that add up to its size, a size of at\n"
"most max_record_bytes, the topic, and its payload's CRC-32C in its crc field;\n"
"together they fill buf exactly. bounds: the records' starts and buf's end;\n"
"borns: their born times; crcs: their payload CRCs; texts: the indexes of\n"
"the records with tags, keys or properties. None when anything fails.");

static PyObject *py_scan(PyObject *self, PyObject *args)
{
    Py_buffer b, t;
    long long max_bytes;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*y*Ln", &b, &t, &max_bytes, &count))
        return NULL;
    PyObject *bounds = NULL, *borns = NULL, *crcs = NULL, *texts = NULL, *out = NULL;
    const uint8_t *p = b.buf, *topic = t.buf;
    Py_ssize_t end = b.len, tlen = t.len, pos = 0, i = 0;
    if (count < 1 || end < HS || count > end / HS)   /* no room for that many: refused */
        goto none;
    bounds = PyList_New(count + 1);
    borns = PyList_New(count);
    crcs = PyList_New(count);
    texts = PyList_New(0);
    if (!bounds || !borns || !crcs || !texts)
        goto fail;
    while (pos < end) {
        const uint8_t *r = p + pos;
        uint32_t c;
        int64_t size = i == count ? -1 : checked_record(r, end - pos, max_bytes, topic, tlen, &c);
        if (size < 0)
            goto none;
        PyObject *at = PyLong_FromSsize_t(pos), *born = PyLong_FromLongLong(be64(r + OFF_BORN_TS_MS)),
                 *crc = PyLong_FromUnsignedLong(c);
        if (!at || !born || !crc) {
            Py_XDECREF(at); Py_XDECREF(born); Py_XDECREF(crc);
            goto fail;
        }
        PyList_SET_ITEM(bounds, i, at);
        PyList_SET_ITEM(borns, i, born);
        PyList_SET_ITEM(crcs, i, crc);
        if (be16(r + OFF_TAGS_LEN) | be16(r + OFF_KEYS_LEN) | be32(r + OFF_PROPS_LEN)) {
            PyObject *k = PyLong_FromSsize_t(i);
            if (!k || PyList_Append(texts, k) < 0) {
                Py_XDECREF(k);
                goto fail;
            }
            Py_DECREF(k);
        }
        pos += size;
        i++;
    }
    if (i != count)
        goto none;
    PyObject *e = PyLong_FromSsize_t(end);
    if (!e)
        goto fail;
    PyList_SET_ITEM(bounds, count, e);
    out = PyTuple_Pack(4, bounds, borns, crcs, texts);
    goto fail;                       /* not a failure: drop our references, return out */
none:
    out = Py_NewRef(Py_None);
fail:
    Py_XDECREF(bounds); Py_XDECREF(borns); Py_XDECREF(crcs); Py_XDECREF(texts);
    PyBuffer_Release(&b);
    PyBuffer_Release(&t);
    return out;
}

PyDoc_STRVAR(seal_doc,
"seal(buf, bounds, queue_id, first_qoff, offsets, store_ts_ms, epoch=0)\n\n"
"Patch and seal, in place, the records of buf at bounds[:len(offsets)]\n"
"(each carrying its payload CRC): queue id, queue offsets from first_qoff,\n"
"physical offsets, store time, the epoch (flags bytes 0..2), then crc = CRC-32C of the header from PATCH_OFFSET\n"
"continued from the payload's CRC.");

static PyObject *py_seal(PyObject *self, PyObject *args)
{
    Py_buffer b;
    PyObject *bounds_o, *offsets_o;
    int queue_id;
    unsigned int epoch = 0;
    long long first_qoff, store_ts;
    if (!PyArg_ParseTuple(args, "w*OiLOL|I", &b, &bounds_o, &queue_id, &first_qoff, &offsets_o,
                          &store_ts, &epoch))
        return NULL;
    epoch &= 0x7FFFFFu;
    PyObject *out = NULL;
    int64_t *at = NULL;
    Py_ssize_t n = PyObject_Length(offsets_o);
    if (n < 0)
        goto done;
    at = PyMem_Malloc(sizeof(int64_t) * 2 * (size_t)(n ? n : 1));
    if (at == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *phys = at + n;
    if (int64s(bounds_o, n, at, "bounds") < 0 || int64s(offsets_o, n, phys, "offsets") < 0)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++)
        if (at[i] < 0 || at[i] > b.len - HS) {
            PyErr_Format(PyExc_ValueError, "record %zd at %lld is not inside the buffer", i,
                         (long long)at[i]);
            goto done;
        }
    uint8_t *p = b.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint8_t *r = p + at[i];
        seal_one(r, queue_id, first_qoff + i, phys[i], store_ts, epoch);
    }
    out = Py_NewRef(Py_None);
done:
    PyMem_Free(at);
    PyBuffer_Release(&b);
    return out;
}

/* stage's first pass, changing nothing: every record of p[0:end] checked as
 * scan checks it and its texts as UTF-8; at[i] its start, hash[i] its tags'
 * zlib.crc32 (0 without tags), keyed (index, keys start, keys length) of those
 * with keys. 1: all count records check and fill p; 0: not; -1: an exception. */
static int stage_check(const uint8_t *p, Py_ssize_t end, Py_ssize_t count, long long max_bytes,
                       const uint8_t *topic, Py_ssize_t tlen, int64_t *at, uint32_t *hash,
                       PyObject *keyed)
{
    Py_ssize_t pos = 0, i = 0;
    while (pos < end) {
        const uint8_t *r = p + pos;
        uint32_t c;
        int64_t size = i == count ? -1 : checked_record(r, end - pos, max_bytes, topic, tlen, &c);
        if (size < 0)
            return 0;
        Py_ssize_t lg = be16(r + OFF_TAGS_LEN), lk = be16(r + OFF_KEYS_LEN);
        Py_ssize_t lp = (Py_ssize_t)be32(r + OFF_PROPS_LEN);
        const uint8_t *text = r + HS + tlen;
        hash[i] = 0;
        if (lg | lk | lp) {
            PyObject *u = PyUnicode_DecodeUTF8((const char *)text, lg + lk + lp, NULL);
            if (u == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                    return -1;
                PyErr_Clear();
                return 0;
            }
            Py_DECREF(u);
            if (lg)
                hash[i] = duomq_crc32_ieee(text, (size_t)lg);
            if (lk) {
                PyObject *k = Py_BuildValue("(nnn)", i, pos + HS + tlen + lg, lk);
                if (!k || PyList_Append(keyed, k) < 0) {
                    Py_XDECREF(k);
                    return -1;
                }
                Py_DECREF(k);
            }
        }
        at[i] = pos;
        pos += size;
        i++;
    }
    return i == count;
}

/* stage's second pass: each record sealed in place at commit-log offset
 * phys + at[i] (offsets[i]), and its consume-queue entry written at e (offset,
 * size, tags' code: 20 bytes, big-endian). 0, or -1 with an exception. */
static int stage_seal(uint8_t *p, Py_ssize_t count, const int64_t *at, const uint32_t *hash,
                      int queue_id, long long first_qoff, long long phys, long long store_ts,
                      uint32_t epoch, PyObject *offsets, uint8_t *e)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        uint8_t *r = p + at[i];
        int64_t size = (int32_t)be32(r + OFF_TOTAL_SIZE), off = phys + at[i];
        PyObject *o = PyLong_FromLongLong(off);
        if (o == NULL)
            return -1;
        PyList_SET_ITEM(offsets, i, o);
        seal_one(r, queue_id, first_qoff + i, off, store_ts, epoch);
        put64(e, (uint64_t)off);
        put32(e + 8, (uint32_t)size);
        put64(e + 12, (uint64_t)hash[i]);
        e += 20;
    }
    return 0;
}

PyDoc_STRVAR(stage_doc,
"stage(buf, topic, max_record_bytes, count, queue_id, first_qoff, phys, store_ts_ms, epoch)\n"
"    -> (offsets, entries, keyed) or None\n\n"
"A producer's batch made ready to write at commit-log offset phys, as\n"
"store/writes.py's scan, seal and entry packing make it: every record checked\n"
"as scan checks it, and its texts (tags, keys, properties) valid UTF-8; then,\n"
"in place, sealed as seal seals it (queue offsets from first_qoff, the epoch\n"
"stamped). offsets:\n"
"each record's commit-log offset; entries: their consume-queue entries\n"
"(offset, size, the tags' zlib.crc32 or 0: 20 bytes each, big-endian); keyed:\n"
"(index, keys start, keys length) of the records with keys. None, with buf\n"
"untouched, when anything fails: the caller's own path then says what.");

static PyObject *py_stage(PyObject *self, PyObject *args)
{
    Py_buffer b, t;
    long long max_bytes, first_qoff, phys, store_ts;
    Py_ssize_t count;
    int queue_id;
    unsigned int epoch;
    if (!PyArg_ParseTuple(args, "w*y*LniLLLI", &b, &t, &max_bytes, &count, &queue_id, &first_qoff,
                          &phys, &store_ts, &epoch))
        return NULL;
    epoch &= 0x7FFFFFu;
    PyObject *offsets = NULL, *entries = NULL, *keyed = NULL, *out = NULL;
    int64_t *at = NULL;
    uint32_t *hash = NULL;
    if (count < 1 || b.len < HS || count > b.len / HS)
        goto none;
    at = PyMem_Malloc(sizeof(int64_t) * (size_t)count);
    hash = PyMem_Malloc(sizeof(uint32_t) * (size_t)count);
    keyed = PyList_New(0);
    if (!at || !hash || !keyed) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto fail;
    }
    int checked = stage_check(b.buf, b.len, count, max_bytes, t.buf, t.len, at, hash, keyed);
    if (checked < 0)
        goto fail;
    if (checked == 0)
        goto none;
    offsets = PyList_New(count);
    entries = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)20 * count);
    if (!offsets || !entries || stage_seal(b.buf, count, at, hash, queue_id, first_qoff, phys,
                                           store_ts, epoch, offsets,
                                           (uint8_t *)PyBytes_AS_STRING(entries)) < 0)
        goto fail;
    out = PyTuple_Pack(3, offsets, entries, keyed);
    goto fail;                       /* not a failure: drop our references, return out */
none:
    out = Py_NewRef(Py_None);
fail:
    Py_XDECREF(offsets); Py_XDECREF(entries); Py_XDECREF(keyed);
    PyMem_Free(at);
    PyMem_Free(hash);
    PyBuffer_Release(&b);
    PyBuffer_Release(&t);
    return out;
}

PyDoc_STRVAR(sequence_doc,
"sequence(buf) -> (producer id, sequence, count) | None\n\n"
"The idempotent numbering that the first record of a producer's batch in buf\n"
"carries (common/idempotence.py: PRODUCER_ID in hex, PRODUCER_SEQ and\n"
"PRODUCER_BATCH in decimal), read as its sequence_of reads it, in the plain\n"
"case only: the record is flagged and whole, each of the three is named once,\n"
"its value digits only (at most 16 hex, 18 decimal), the id at most 2^63 - 1\n"
"and the count above 0. None for anything else: the Python reads that, or says\n"
"what is wrong.");

/* digits only, as a value: -1 for anything else (a sign, a prefix, too many) */
static int64_t plain_digits(const uint8_t *p, Py_ssize_t n, int hex)
{
    if (n <= 0 || n > (hex ? 16 : 18))
        return -1;
    uint64_t v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (hex && c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (hex && c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v * (hex ? 16 : 10) + d;
    }
    return v > (uint64_t)INT64_MAX ? -1 : (int64_t)v;
}

static PyObject *py_sequence(PyObject *self, PyObject *args)
{
    static const char *names[3] = {"PRODUCER_ID", "PRODUCER_SEQ", "PRODUCER_BATCH"};
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view))
        return NULL;
    const uint8_t *r = view.buf;
    int64_t got[3] = {-1, -1, -1};
    int ok = 0;
    if (view.len >= HS && (be32(r + OFF_FLAGS) & FLAG_SEQUENCED)) {
        Py_ssize_t p = HS + be16(r + OFF_TOPIC_LEN) + be16(r + OFF_TAGS_LEN)
                       + be16(r + OFF_KEYS_LEN);
        Py_ssize_t end = p + (Py_ssize_t)be32(r + OFF_PROPS_LEN);
        ok = end <= view.len;
        while (ok && p < end) {
            const uint8_t *pair = r + p;
            const uint8_t *stop = memchr(pair, 0x02, end - p);
            Py_ssize_t n = stop ? stop - pair : end - p;
            const uint8_t *sep = memchr(pair, 0x01, n);
            Py_ssize_t klen = sep ? sep - pair : n;
            for (int k = 0; k < 3; k++) {
                if ((Py_ssize_t)strlen(names[k]) != klen || memcmp(pair, names[k], klen))
                    continue;
                if (sep == NULL || got[k] >= 0)           /* no value, or named twice */
                    ok = 0;
                else
                    got[k] = plain_digits(sep + 1, n - klen - 1, k == 0);
                if (got[k] < 0)
                    ok = 0;
            }
            p += n + 1;
        }
        ok = ok && got[0] >= 0 && got[1] >= 0 && got[2] > 0;
    }
    PyBuffer_Release(&view);
    if (!ok)
        Py_RETURN_NONE;
    return Py_BuildValue("(LLL)", (long long)got[0], (long long)got[1], (long long)got[2]);
}

PyDoc_STRVAR(first_unsealed_doc,
"first_unsealed(buf, starts) -> int\n\n"
"The index of the first record of buf at starts (each a format-3 record whose\n"
"whole size lies in buf) whose lengths do not add up to its size or whose\n"
"crc is not its seal; -1 when every one checks.");

static PyObject *py_first_unsealed(PyObject *self, PyObject *args)
{
    Py_buffer b;
    PyObject *starts_o;
    if (!PyArg_ParseTuple(args, "y*O", &b, &starts_o))
        return NULL;
    PyObject *out = NULL;
    Py_ssize_t n = PyObject_Length(starts_o), bad = -1;
    int64_t *at = NULL;
    if (n < 0)
        goto done;
    at = PyMem_Malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (at == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (int64s(starts_o, n, at, "starts") < 0)
        goto done;
    const uint8_t *p = b.buf;
    for (Py_ssize_t i = 0; i < n && bad < 0; i++) {
        if (at[i] < 0 || at[i] > b.len - HS) {
            bad = i;
            break;
        }
        const uint8_t *r = p + at[i];
        int64_t size = (int32_t)be32(r + OFF_TOTAL_SIZE);
        if (size < HS || size > b.len - at[i] || stated(r, size) < 0)
            bad = i;
        else if (crc32c(crc32c(0, r + HS, (size_t)(size - HS)), r + PATCH_OFFSET, HS - PATCH_OFFSET)
                 != be32(r + OFF_CRC))
            bad = i;
    }
    out = PyLong_FromSsize_t(bad);
done:
    PyMem_Free(at);
    PyBuffer_Release(&b);
    return out;
}

PyMethodDef duomq_batch_methods[] = {
    {"scan", py_scan, METH_VARARGS, scan_doc},
    {"seal", py_seal, METH_VARARGS, seal_doc},
    {"stage", py_stage, METH_VARARGS, stage_doc},
    {"first_unsealed", py_first_unsealed, METH_VARARGS, first_unsealed_doc},
    {"sequence", py_sequence, METH_VARARGS, sequence_doc},
    {NULL, NULL, 0, NULL},
};
