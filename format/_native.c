/* duomq.format._native: the master's per-record checks and seals of a
 * producer's batch, a slave's check of stored records, the producer's batch
 * encoding and a pull answer's decoding, in one C loop each.
 *
 * Optional. Everything here has a pure implementation (format/bulk_scan.py,
 * format/seal.py, store/bulk_dispatch.py with numpy; format/record.py record
 * by record; client/producer's encode_batch; common/message.py's
 * decode_records) that gives the same answers; the tests run both and compare.
 * The record layout is format/record.py's (all fields big-endian), as
 * layout.h has it: that header is generated from record.py's FIELDS
 * (`python -m duomq.format.layout_h`), so no offset is spelled here; a test
 * fails when the header or this build differs from the Python layout.
 *
 * One source file per codec, in csrc/ (records.h says what they share):
 * crc.c, batch.c, encode.c, decode.c, timers.c, wheel.c. This file makes the module of them. */

#include "csrc/records.h"

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
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "C loops for the master's batch scan and seal, a slave's check of stored records, "
    "the producer's batch encoding and a pull answer's decoding (optional: "
    "format/native.py falls back to numpy and Python).", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void)
{
    if (duomq_encode_init() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (duomq_crc_init(m) < 0 || PyModule_AddFunctions(m, duomq_crc_methods) < 0
        || PyModule_AddFunctions(m, duomq_batch_methods) < 0
        || PyModule_AddFunctions(m, duomq_encode_methods) < 0
        || PyModule_AddFunctions(m, duomq_decode_methods) < 0
        || PyModule_AddFunctions(m, duomq_timers_methods) < 0
        || PyModule_AddFunctions(m, duomq_wheel_methods) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
