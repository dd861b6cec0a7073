/* duomq.format._native: the master's per-record checks and seals of a
 * producer's batch, and a slave's check of stored records, in one C loop each.
 *
 * Optional. Everything here has a pure implementation (format/bulk_scan.py,
 * format/seal.py, store/bulk_dispatch.py with numpy; format/record.py record
 * by record; client/producer.py's encode_batch) that gives the same answers;
 * the tests run both and compare.
 * The record layout is format/record.py's (all fields big-endian), as
 * layout.h has it: that header is generated from record.py's FIELDS
 * (`python -m duomq.format.layout_h`), so no offset is spelled here; a test
 * fails when the header or this build differs from the Python layout.
 *
 * A producer's record carries crc = CRC-32C of its payload; a stored
 * (sealed) record's crc is CRC-32C of bytes PATCH_OFFSET..HEADER_SIZE
 * continued from that.
 * CRC-32C with the CPU's crc32 instruction where it has one (x86-64 SSE4.2),
 * else a table: the same values as the crc32c package's crc32c(data, crc).
 *
 * And the producer's side: a batch of messages encoded in one loop. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "layout.h"

#define HS HEADER_SIZE

static uint32_t table[256];

static uint32_t crc_sw(uint32_t crc, const uint8_t *p, size_t n)
{
    while (n--)
        crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
__attribute__((target("sse4.2")))
static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n)
{
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}
#define HAVE_HW 1
#endif

static uint32_t (*crc_raw)(uint32_t, const uint8_t *, size_t) = crc_sw;

static inline uint32_t crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
    return ~crc_raw(~crc, p, n);
}

static inline uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint16_t be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }

static inline int64_t be64(const uint8_t *p)
{
    return (int64_t)(((uint64_t)be32(p) << 32) | be32(p + 4));
}

static inline void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v;
}

static inline void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

static inline void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

/* The payload's length as the header states it (-1: not total_size). */
/* the epoch of the master that stores a record: flags bytes 0..2 (record.py's EPOCH_AT) */
static inline void put_epoch(uint8_t *r, uint32_t epoch)
{
    r[OFF_FLAGS] = (uint8_t)(epoch >> 16);
    r[OFF_FLAGS + 1] = (uint8_t)(epoch >> 8);
    r[OFF_FLAGS + 2] = (uint8_t)epoch;
}

static inline int64_t stated(const uint8_t *r, int64_t size)
{
    int64_t want = (int64_t)HS + be16(r + OFF_TOPIC_LEN) + be16(r + OFF_TAGS_LEN) + be16(r + OFF_KEYS_LEN) + be32(r + OFF_PROPS_LEN) + be32(r + OFF_BODY_LEN);
    return want == size ? size - HS : -1;
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

PyDoc_STRVAR(crc32c_doc, "crc32c(data, crc=0): CRC-32C of data continued from crc (the crc32c package's).");

static PyObject *py_crc32c(PyObject *self, PyObject *args)
{
    Py_buffer b;
    unsigned int crc = 0;
    if (!PyArg_ParseTuple(args, "y*|I", &b, &crc))
        return NULL;
    uint32_t c = crc32c(crc, b.buf, (size_t)b.len);
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(c);
}

/* The size of the producer's record at r (end - pos bytes left in the batch)
 * when it checks as scan and stage check it: format-3 magic, lengths that add
 * up, at most max_bytes, the topic, its payload's CRC-32C in its crc field
 * (returned in *payload_crc); -1 otherwise. */
static int64_t checked_record(const uint8_t *r, Py_ssize_t left, long long max_bytes,
                              const uint8_t *topic, Py_ssize_t tlen, uint32_t *payload_crc)
{
    if (left < HS)
        return -1;
    int64_t size = (int32_t)be32(r + OFF_TOTAL_SIZE);
    if (size < HS || size > left || size > max_bytes || (int32_t)be32(r + OFF_MAGIC) != RECORD_MAGIC
        || stated(r, size) < 0 || be16(r + OFF_TOPIC_LEN) != tlen || memcmp(r + HS, topic, tlen) != 0)
        return -1;
    uint32_t c = crc32c(0, r + HS, (size_t)(size - HS));
    if (c != be32(r + OFF_CRC))
        return -1;
    *payload_crc = c;
    return size;
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
"seal(buf, bounds, queue_id, first_qoff, offsets, store_ts_ms, epoch)\n\n"
"Patch and seal, in place, the records of buf at bounds[:len(offsets)]\n"
"(each carrying its payload CRC): queue id, queue offsets from first_qoff,\n"
"physical offsets, store time, the epoch (flags bytes 0..2), then crc = CRC-32C of the header from PATCH_OFFSET\n"
"continued from the payload's CRC.");

static PyObject *py_seal(PyObject *self, PyObject *args)
{
    Py_buffer b;
    PyObject *bounds_o, *offsets_o;
    int queue_id;
    unsigned int epoch;
    long long first_qoff, store_ts;
    if (!PyArg_ParseTuple(args, "w*OiLOLI", &b, &bounds_o, &queue_id, &first_qoff, &offsets_o,
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
        put32(r + OFF_QUEUE_ID, (uint32_t)queue_id);
        put64(r + OFF_QUEUE_OFFSET, (uint64_t)(first_qoff + i));
        put64(r + OFF_PHYSICAL_OFFSET, (uint64_t)phys[i]);
        put64(r + OFF_STORE_TS_MS, (uint64_t)store_ts);
        put_epoch(r, epoch);
        put32(r + OFF_CRC, crc32c(be32(r + OFF_CRC), r + PATCH_OFFSET, HS - PATCH_OFFSET));
    }
    out = Py_NewRef(Py_None);
done:
    PyMem_Free(at);
    PyBuffer_Release(&b);
    return out;
}

/* zlib's crc32 (IEEE, reflected 0xEDB88320): the consume queue's tag code */
static uint32_t ieee[256];

static uint32_t crc32_ieee(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    while (n--)
        c = ieee[(c ^ *p++) & 0xff] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
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
    uint8_t *p = b.buf;
    const uint8_t *topic = t.buf;
    Py_ssize_t end = b.len, tlen = t.len, pos = 0, i = 0;
    if (count < 1 || end < HS || count > end / HS)
        goto none;
    at = PyMem_Malloc(sizeof(int64_t) * (size_t)count);
    hash = PyMem_Malloc(sizeof(uint32_t) * (size_t)count);
    keyed = PyList_New(0);
    if (!at || !hash || !keyed) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto fail;
    }
    while (pos < end) {               /* check everything before changing anything */
        const uint8_t *r = p + pos;
        uint32_t c;
        int64_t size = i == count ? -1 : checked_record(r, end - pos, max_bytes, topic, tlen, &c);
        if (size < 0)
            goto none;
        Py_ssize_t lg = be16(r + OFF_TAGS_LEN), lk = be16(r + OFF_KEYS_LEN);
        Py_ssize_t lp = (Py_ssize_t)be32(r + OFF_PROPS_LEN);
        const uint8_t *text = r + HS + tlen;
        hash[i] = 0;
        if (lg | lk | lp) {
            PyObject *u = PyUnicode_DecodeUTF8((const char *)text, lg + lk + lp, NULL);
            if (u == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                    goto fail;
                PyErr_Clear();
                goto none;
            }
            Py_DECREF(u);
            if (lg)
                hash[i] = crc32_ieee(text, (size_t)lg);
            if (lk) {
                PyObject *k = Py_BuildValue("(nnn)", i, pos + HS + tlen + lg, lk);
                if (!k || PyList_Append(keyed, k) < 0) {
                    Py_XDECREF(k);
                    goto fail;
                }
                Py_DECREF(k);
            }
        }
        at[i] = pos;
        pos += size;
        i++;
    }
    if (i != count)
        goto none;
    offsets = PyList_New(count);
    entries = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)20 * count);
    if (!offsets || !entries)
        goto fail;
    uint8_t *e = (uint8_t *)PyBytes_AS_STRING(entries);
    for (i = 0; i < count; i++) {     /* seal, and the entry of each */
        uint8_t *r = p + at[i];
        int64_t size = (int32_t)be32(r + OFF_TOTAL_SIZE), off = phys + at[i];
        PyObject *o = PyLong_FromLongLong(off);
        if (o == NULL)
            goto fail;
        PyList_SET_ITEM(offsets, i, o);
        put32(r + OFF_QUEUE_ID, (uint32_t)queue_id);
        put64(r + OFF_QUEUE_OFFSET, (uint64_t)(first_qoff + i));
        put64(r + OFF_PHYSICAL_OFFSET, (uint64_t)off);
        put64(r + OFF_STORE_TS_MS, (uint64_t)store_ts);
        put_epoch(r, epoch);
        put32(r + OFF_CRC, crc32c(be32(r + OFF_CRC), r + PATCH_OFFSET, HS - PATCH_OFFSET));
        put64(e, (uint64_t)off);
        put32(e + 8, (uint32_t)size);
        put64(e + 12, (uint64_t)hash[i]);
        e += 20;
    }
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
"a number is negative: the Python then decides).\n"
"None when a message is not a case this\n"
"loop takes (another topic, a body that is not bytes, tags or keys that are\n"
"not str or are over 65535 bytes, properties that are not a dict of str to\n"
"str, a property named in routed (a delayed or transactional message) or\n"
"holding a separator, a record over max_record_bytes): the Python encoder\n"
"then encodes the batch and says what is wrong with it, if anything is.");

typedef struct {
    PyObject *body, *tags, *keys, *props;   /* references held while encoding (props: bytes) */
    const char *tg, *ky;
    Py_ssize_t lg, lk;
} plain_t;

static PyObject *s_topic, *s_body, *s_tags, *s_keys, *s_properties;

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

static PyObject *py_encode(PyObject *self, PyObject *args)
{
    PyObject *msgs, *topic, *routed, *names = Py_None, *pid = NULL, *seq = NULL, *count = NULL;
    long long born, max_bytes;
    int first_flags = 0;
    Py_buffer host;
    if (!PyArg_ParseTuple(args, "OULy*LO!|iOOOO", &msgs, &topic, &born, &host, &max_bytes,
                          &PyFrozenSet_Type, &routed, &first_flags, &names, &pid, &seq, &count))
        return NULL;
    PyObject *fast = NULL, *out = NULL;
    plain_t *pl = NULL;
    Py_ssize_t n = 0, tlen, total = 0, lnum = 0;
    char numbering[NUMBERING_MAX];
    const char *tp = PyUnicode_AsUTF8AndSize(topic, &tlen);
    if (tp == NULL)
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
    if (n == 0 || tlen > 0xFFFF)
        goto none;
    pl = PyMem_Calloc((size_t)n, sizeof(plain_t));
    if (pl == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = PyTuple_GET_ITEM(fast, i), *v;
        plain_t *e = pl + i;
        if ((v = PyObject_GetAttr(m, s_topic)) == NULL)
            goto fail;
        int same = v == topic || (PyUnicode_Check(v) && PyUnicode_Compare(v, topic) == 0);
        Py_DECREF(v);
        if (!same)
            goto none;
        if ((v = PyObject_GetAttr(m, s_properties)) == NULL)
            goto fail;
        int any = PyObject_IsTrue(v);
        if (any > 0 && i == 0 && lnum > 0) {   /* a name of the numbering's own: Python's merge */
            if (!PyDict_CheckExact(v)) {
                Py_DECREF(v);
                goto none;
            }
            for (int k = 0; k < 3; k++) {
                int has = PyDict_Contains(v, PyTuple_GET_ITEM(names, k));
                if (has != 0) {
                    Py_DECREF(v);
                    if (has < 0)
                        goto fail;
                    goto none;
                }
            }
        }
        if (any > 0)
            e->props = props_bytes(v, routed);
        Py_DECREF(v);
        if (any < 0 || (any > 0 && e->props == NULL))
            goto fail;
        if (e->props == Py_None)
            goto none;
        Py_ssize_t lp = (e->props != NULL ? PyBytes_GET_SIZE(e->props) : 0) + (i == 0 ? lnum : 0);
        if ((e->body = PyObject_GetAttr(m, s_body)) == NULL || (e->tags = PyObject_GetAttr(m, s_tags)) == NULL
            || (e->keys = PyObject_GetAttr(m, s_keys)) == NULL)
            goto fail;
        if (!PyBytes_CheckExact(e->body) || utf8_of(e->tags, &e->tg, &e->lg) < 0
            || utf8_of(e->keys, &e->ky, &e->lk) < 0)
            goto none;
        Py_ssize_t size = HS + tlen + e->lg + e->lk + lp + PyBytes_GET_SIZE(e->body);
        if (size > max_bytes || size > INT32_MAX || total > PY_SSIZE_T_MAX - size)
            goto none;
        total += size;
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        goto fail;
    uint8_t *w = (uint8_t *)PyBytes_AS_STRING(out);
    uint32_t topic_crc = crc32c(0, (const uint8_t *)tp, (size_t)tlen);
    for (Py_ssize_t i = 0; i < n; i++) {
        plain_t *e = pl + i;
        const uint8_t *body = (const uint8_t *)PyBytes_AS_STRING(e->body);
        const uint8_t *pr = e->props != NULL ? (const uint8_t *)PyBytes_AS_STRING(e->props) : NULL;
        Py_ssize_t ln = i == 0 ? lnum : 0;     /* the numbering, after the message's own */
        Py_ssize_t lb = PyBytes_GET_SIZE(e->body), lp = e->props != NULL ? PyBytes_GET_SIZE(e->props) : 0,
                   size = HS + tlen + e->lg + e->lk + lp + ln + lb;
        uint32_t c = crc32c(crc32c(crc32c(topic_crc, (const uint8_t *)e->tg, (size_t)e->lg),
                                   (const uint8_t *)e->ky, (size_t)e->lk), pr, (size_t)lp);
        c = crc32c(c, (const uint8_t *)numbering, (size_t)ln);
        c = crc32c(c, body, (size_t)lb);
        memset(w, 0, HS);
        put32(w + OFF_TOTAL_SIZE, (uint32_t)size);
        put32(w + OFF_MAGIC, (uint32_t)RECORD_MAGIC);
        put32(w + OFF_CRC, c);
        if (i == 0)
            put32(w + OFF_FLAGS, (uint32_t)first_flags);
        put64(w + OFF_BORN_TS_MS, (uint64_t)born);
        memcpy(w + OFF_BORN_HOST, host.buf, 8);
        put16(w + OFF_TOPIC_LEN, (uint16_t)tlen);
        put16(w + OFF_TAGS_LEN, (uint16_t)e->lg);
        put16(w + OFF_KEYS_LEN, (uint16_t)e->lk);
        put32(w + OFF_PROPS_LEN, (uint32_t)(lp + ln));
        put32(w + OFF_BODY_LEN, (uint32_t)lb);
        w += HS;
        memcpy(w, tp, (size_t)tlen); w += tlen;
        memcpy(w, e->tg, (size_t)e->lg); w += e->lg;
        memcpy(w, e->ky, (size_t)e->lk); w += e->lk;
        if (lp)
            memcpy(w, pr, (size_t)lp);
        w += lp;
        if (ln)
            memcpy(w, numbering, (size_t)ln);
        w += ln;
        memcpy(w, body, (size_t)lb); w += lb;
    }
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

static PyObject *py_decode(PyObject *self, PyObject *args)
{
    Py_buffer view;
    PyObject *group, *cls, *props_of, *host_of, *sequencing;
    if (!PyArg_ParseTuple(args, "y*UOOOO!", &view, &group, &cls, &props_of, &host_of,
                          &PyTuple_Type, &sequencing))
        return NULL;
    const uint8_t *buf = view.buf;
    Py_ssize_t end = view.len, pos = 0;
    PyObject *out = PyList_New(0), *topics = PyDict_New(), *hosts = PyDict_New();
    PyObject *empty = PyUnicode_New(0, 0), *last_host = NULL;
    uint8_t last_raw[8];
    if (out == NULL || topics == NULL || hosts == NULL || empty == NULL)
        goto fail;
    while (pos < end) {
        const uint8_t *r = buf + pos;
        if (end - pos < HS || (int32_t)be32(r + OFF_MAGIC) != RECORD_MAGIC)
            goto other;
        int64_t size = (int32_t)be32(r + OFF_TOTAL_SIZE);
        if (size < HS || size > end - pos || stated(r, size) < 0)
            goto other;
        Py_ssize_t lt = be16(r + OFF_TOPIC_LEN), lg = be16(r + OFF_TAGS_LEN),
                   lk = be16(r + OFF_KEYS_LEN), lp = be32(r + OFF_PROPS_LEN),
                   lb = be32(r + OFF_BODY_LEN);
        const uint8_t *p = r + HS;
        int32_t flags = (int32_t)be32(r + OFF_FLAGS);
        PyObject *a[13] = {NULL};
        a[0] = cached(topics, p, lt, NULL);
        p += lt;
        a[2] = a[0] ? text_of(p, lg, empty) : NULL;
        p += lg;
        a[3] = a[2] ? text_of(p, lk, empty) : NULL;
        p += lk;
        if (a[3] == NULL)
            a[4] = NULL;
        else if (lp == 0)
            a[4] = PyDict_New();
        else if (props_of == Py_None)
            a[4] = props_dict(p, lp, empty);
        else {
            PyObject *raw = PyBytes_FromStringAndSize((const char *)p, lp);
            a[4] = raw ? PyObject_CallOneArg(props_of, raw) : NULL;
            Py_XDECREF(raw);
        }
        p += lp;
        if (a[4] != NULL && !PyDict_Check(a[4])) {
            PyErr_SetString(PyExc_TypeError, "decode: props_of did not give a dict");
            Py_CLEAR(a[4]);
        }
        if (a[4] != NULL && (flags & FLAG_SEQUENCED)) {   /* an idempotent batch's: not the application's */
            flags &= ~FLAG_SEQUENCED;
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(sequencing); i++) {
                PyObject *k = PyTuple_GET_ITEM(sequencing, i);
                int has = PyDict_Contains(a[4], k);
                if (has < 0 || (has && PyDict_DelItem(a[4], k) < 0)) {
                    Py_CLEAR(a[4]);
                    break;
                }
            }
        }
        a[1] = a[4] ? PyBytes_FromStringAndSize((const char *)p, lb) : NULL;
        if (a[1] != NULL) {
            a[5] = PyLong_FromLong((int32_t)be32(r + OFF_QUEUE_ID));
            a[6] = PyLong_FromLongLong(be64(r + OFF_QUEUE_OFFSET));
            a[7] = PyLong_FromLongLong(be64(r + OFF_PHYSICAL_OFFSET));
            a[8] = PyLong_FromLongLong(be64(r + OFF_BORN_TS_MS));
            a[9] = PyLong_FromLongLong(be64(r + OFF_STORE_TS_MS));
            if (host_of != Py_None)
                a[10] = cached(hosts, r + OFF_BORN_HOST, 8, host_of);
            else if (last_host != NULL && memcmp(last_raw, r + OFF_BORN_HOST, 8) == 0)
                a[10] = Py_NewRef(last_host);     /* a pull's records: few producers */
            else if ((a[10] = host_text(r + OFF_BORN_HOST, empty)) != NULL) {
                Py_XSETREF(last_host, Py_NewRef(a[10]));
                memcpy(last_raw, r + OFF_BORN_HOST, 8);
            }
            a[11] = PyLong_FromLong(flags);
            a[12] = Py_NewRef(group);
        }
        PyObject *msg = NULL;
        int whole = 1;
        for (int i = 0; i < 13; i++)
            whole &= a[i] != NULL;
        if (whole)
            msg = PyObject_Vectorcall(cls, a, 13, NULL);
        for (int i = 0; i < 13; i++)
            Py_XDECREF(a[i]);
        if (msg == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_SystemError, "decode: a field was not made");
            goto fail;
        }
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
    Py_XDECREF(topics);
    Py_XDECREF(hosts);
    Py_XDECREF(last_host);
    Py_XDECREF(empty);
    PyBuffer_Release(&view);
    return out;
}

PyDoc_STRVAR(use_crc_doc,
"use_crc(kind) -> str\n\n"
"Compute CRC-32C with kind ('sse4.2': the CPU's instruction, 'table': the\n"
"portable loop) from now on; returns the kind used before. CRC names the\n"
"kind in use. For tests: a CPU without SSE4.2 takes the table at start.\n"
"ValueError for a kind this CPU or build does not have.");

static PyObject *py_use_crc(PyObject *self, PyObject *args)
{
    const char *kind;
    if (!PyArg_ParseTuple(args, "s", &kind))
        return NULL;
    const char *before = crc_raw == crc_sw ? "table" : "sse4.2";
    if (strcmp(kind, "table") == 0)
        crc_raw = crc_sw;
#ifdef HAVE_HW
    else if (strcmp(kind, "sse4.2") == 0 && __builtin_cpu_supports("sse4.2"))
        crc_raw = crc_hw;
#endif
    else {
        PyErr_Format(PyExc_ValueError, "no CRC-32C kind %R here (table%s)", PyTuple_GET_ITEM(args, 0),
#ifdef HAVE_HW
                     __builtin_cpu_supports("sse4.2") ? ", sse4.2" : ""
#else
                     ""
#endif
                     );
        return NULL;
    }
    if (PyObject_SetAttrString(self, "CRC", PyTuple_GET_ITEM(args, 0)) < 0)
        return NULL;
    return PyUnicode_FromString(before);
}

PyDoc_STRVAR(layout_doc,
"layout() -> dict\n\n"
"The record layout this build was compiled with (layout.h's constants, by\n"
"name): a test compares it with format/record.py's.");

static PyObject *py_layout(PyObject *self, PyObject *unused)
{
    struct { const char *name; long long value; } items[] = {
        {"OFF_TOTAL_SIZE", OFF_TOTAL_SIZE}, {"OFF_MAGIC", OFF_MAGIC}, {"OFF_CRC", OFF_CRC},
        {"OFF_QUEUE_ID", OFF_QUEUE_ID}, {"OFF_QUEUE_OFFSET", OFF_QUEUE_OFFSET},
        {"OFF_PHYSICAL_OFFSET", OFF_PHYSICAL_OFFSET}, {"OFF_BORN_TS_MS", OFF_BORN_TS_MS},
        {"OFF_STORE_TS_MS", OFF_STORE_TS_MS}, {"OFF_BORN_HOST", OFF_BORN_HOST},
        {"OFF_FLAGS", OFF_FLAGS}, {"OFF_TOPIC_LEN", OFF_TOPIC_LEN},
        {"OFF_TAGS_LEN", OFF_TAGS_LEN}, {"OFF_KEYS_LEN", OFF_KEYS_LEN},
        {"OFF_PROPS_LEN", OFF_PROPS_LEN}, {"OFF_BODY_LEN", OFF_BODY_LEN},
        {"HEADER_SIZE", HEADER_SIZE}, {"PATCH_OFFSET", PATCH_OFFSET},
        {"RECORD_MAGIC", RECORD_MAGIC}, {"FLAG_SEQUENCED", FLAG_SEQUENCED},
    };
    PyObject *out = PyDict_New();
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof(items) / sizeof(items[0]); i++) {
        PyObject *v = PyLong_FromLongLong(items[i].value);
        if (v == NULL || PyDict_SetItemString(out, items[i].name, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(v);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"layout", py_layout, METH_NOARGS, layout_doc},
    {"encode", py_encode, METH_VARARGS, encode_doc},
    {"decode", py_decode, METH_VARARGS, decode_doc},
    {"use_crc", py_use_crc, METH_VARARGS, use_crc_doc},
    {"crc32c", py_crc32c, METH_VARARGS, crc32c_doc},
    {"scan", py_scan, METH_VARARGS, scan_doc},
    {"seal", py_seal, METH_VARARGS, seal_doc},
    {"stage", py_stage, METH_VARARGS, stage_doc},
    {"first_unsealed", py_first_unsealed, METH_VARARGS, first_unsealed_doc},
    {"sequence", py_sequence, METH_VARARGS, sequence_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "C loops for the master's batch scan and seal, a slave's check of stored records and "
    "the producer's batch encoding (optional: format/native.py falls back to numpy and "
    "Python).", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
        table[i] = c;
        uint32_t z = i;
        for (int k = 0; k < 8; k++)
            z = (z >> 1) ^ (0xEDB88320u & (0u - (z & 1)));
        ieee[i] = z;
    }
    if (!(s_topic = PyUnicode_InternFromString("topic")) || !(s_body = PyUnicode_InternFromString("body"))
        || !(s_tags = PyUnicode_InternFromString("tags")) || !(s_keys = PyUnicode_InternFromString("keys"))
        || !(s_properties = PyUnicode_InternFromString("properties")))
        return NULL;
    const char *how = "table";
#ifdef HAVE_HW
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        crc_raw = crc_hw;
        how = "sse4.2";
    }
#endif
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddStringConstant(m, "CRC", how) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
