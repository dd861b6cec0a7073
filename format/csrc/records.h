/* What the C loops of duomq.format._native share: the record layout
 * (layout.h, generated from format/record.py's FIELDS), big-endian reads and
 * writes, CRC-32C (crc.c chooses the CPU's instruction or the table once)
 * and the checks more than one loop makes. Each codec is one source file:
 * crc.c, batch.c (the master's side: a producer's batch checked, sealed and
 * staged; a slave's check of stored records), encode.c (the producer's
 * side), decode.c (the consumer's side); ../_native.c makes the module. */

#ifndef DUOMQ_RECORDS_H
#define DUOMQ_RECORDS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../layout.h"

#define HS HEADER_SIZE

/* crc.c: the loop in use, and the table of zlib's crc32 for tag codes */
extern uint32_t (*duomq_crc_raw)(uint32_t, const uint8_t *, size_t);
uint32_t duomq_crc32_ieee(const uint8_t *p, size_t n);
int duomq_crc_init(PyObject *module);

static inline uint32_t crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
    return ~duomq_crc_raw(~crc, p, n);
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
static inline int64_t stated(const uint8_t *r, int64_t size)
{
    int64_t want = (int64_t)HS + be16(r + OFF_TOPIC_LEN) + be16(r + OFF_TAGS_LEN) + be16(r + OFF_KEYS_LEN) + be32(r + OFF_PROPS_LEN) + be32(r + OFF_BODY_LEN);
    return want == size ? size - HS : -1;
}

/* The size of the producer's record at r (end - pos bytes left in the batch)
 * when it checks as scan and stage check it: format-3 magic, lengths that add
 * up, at most max_bytes, the topic, its payload's CRC-32C in its crc field
 * (returned in *payload_crc); -1 otherwise. */
static inline int64_t checked_record(const uint8_t *r, Py_ssize_t left, long long max_bytes,
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

/* the methods of each codec, added to the module by ../_native.c */
extern PyMethodDef duomq_crc_methods[], duomq_batch_methods[], duomq_encode_methods[],
    duomq_decode_methods[], duomq_timers_methods[], duomq_wheel_methods[];
int duomq_encode_init(void);

#endif
