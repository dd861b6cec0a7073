/* duomq.proto._wire: the SEND request's frame read, and answers' frames
 * written, in C (issue 41: the broker's serving thread spent ~10 us of
 * Python per send building and parsing protobuf objects).
 *
 * Optional, like format/_native.c: proto/wire.py loads it, and proto/codec.py
 * stays the reference. parse_send answers only the common case, a Frame of
 * the expected version and type SEND whose payload is a SendRequest of known
 * fields with their proto3 wire types; for anything else (another type, an
 * unknown or mistyped field, a string that is not UTF-8, a truncated or
 * malformed varint, a status or error on a request) it returns None and the
 * caller decodes with protobuf, which accepts or refuses it with its own
 * words. What it accepts it reads as protobuf does: the last occurrence of
 * a field wins, varints are cut to the field's width. The writers give the
 * bytes protobuf's SerializeToString gives (fields in number order, proto3
 * defaults left out, repeated int64 packed); tests/proto compare them.
 * read_send_answer and read_pull_answer read a client's answers to its SEND
 * and PULL (issue 41's lean client path) under the same rule: the common
 * case only, read as protobuf reads it, None for anything else;
 * pull_response writes a PULL's answer as send_response a SEND's, and
 * send_request a producer's SEND.
 *
 * One source file per direction, in csrc/: read.c and write.c. */

#include "csrc/wire.h"

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_wire",
    "The SEND request's frame read and answers' frames written in C (optional: "
    "proto/codec.py is the reference).", -1, NULL,
};

PyMODINIT_FUNC PyInit__wire(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddFunctions(m, duomq_wire_read_methods) < 0
        || PyModule_AddFunctions(m, duomq_wire_write_methods) < 0 || duomq_wire_read_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
