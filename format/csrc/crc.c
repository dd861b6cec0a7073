/* CRC-32C with the CPU's crc32 instruction where it has one (x86-64 SSE4.2),
 * else a table: the same values as the crc32c package's crc32c(data, crc).
 * And zlib's crc32 (IEEE), the consume queue's tag code. */

#include "records.h"

static uint32_t table[256];
static uint32_t ieee[256];

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

uint32_t (*duomq_crc_raw)(uint32_t, const uint8_t *, size_t) = crc_sw;

/* zlib's crc32 (IEEE, reflected 0xEDB88320): the consume queue's tag code */
uint32_t duomq_crc32_ieee(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    while (n--)
        c = ieee[(c ^ *p++) & 0xff] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* The tables, the CPU's loop if it has one, and the module's CRC. */
int duomq_crc_init(PyObject *module)
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
    const char *how = "table";
#ifdef HAVE_HW
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        duomq_crc_raw = crc_hw;
        how = "sse4.2";
    }
#endif
    return PyModule_AddStringConstant(module, "CRC", how);
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
    const char *before = duomq_crc_raw == crc_sw ? "table" : "sse4.2";
    if (strcmp(kind, "table") == 0)
        duomq_crc_raw = crc_sw;
#ifdef HAVE_HW
    else if (strcmp(kind, "sse4.2") == 0 && __builtin_cpu_supports("sse4.2"))
        duomq_crc_raw = crc_hw;
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

PyMethodDef duomq_crc_methods[] = {
    {"use_crc", py_use_crc, METH_VARARGS, use_crc_doc},
    {"crc32c", py_crc32c, METH_VARARGS, crc32c_doc},
    {NULL, NULL, 0, NULL},
};
