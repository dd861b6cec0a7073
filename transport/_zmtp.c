/* duomq.transport._zmtp: ZMTP 3.1 frames read and written in C (issue 41: on
 * the serving thread and the clients' I/O threads each request and answer
 * crossed ~25 Python calls of framing, buffering and queueing; a thread
 * that slept pays each of them several times over on this machine).
 *
 * Optional, like format/_native.c: transport/zmtp.py loads it, and its own
 * FrameReader, message and write_out stay the reference and the fallback
 * (DUOMQ_NATIVE=0); tests/transport/test_zmtp.py runs every case both ways and
 * compares. The same rules as the reference: a frame's flag byte with a
 * reserved bit set, or a size above max_frame, raises ZmtpError from its
 * head (before its body is buffered); a frame is taken whole or not at
 * all; bytes fed stay until taken.
 *
 * One source file per direction, in csrc/: read.c (the Reader) and write.c. */

#include "csrc/zmtp.h"

PyObject *duomq_zmtp_error, *duomq_zmtp_eof, *duomq_s_popleft, *duomq_s_append;

static PyObject *py_init(PyObject *self, PyObject *args)
{
    PyObject *error, *eof;
    if (!PyArg_ParseTuple(args, "OU", &error, &eof))
        return NULL;
    Py_XSETREF(ZmtpError, Py_NewRef(error));
    Py_XSETREF(Eof, Py_NewRef(eof));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"init", py_init, METH_VARARGS,
     "init(ZmtpError, EOF): the error this module raises and the text of a closed connection."},
    {"message", duomq_zmtp_message, METH_O, "message(frames): a message's frames as buffers to write."},
    {"write_out", (PyCFunction)(void (*)(void))duomq_zmtp_write_out, METH_FASTCALL,
     "write_out(fd, out): write what waits in out until the kernel takes no more; True when "
     "all left."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_zmtp",
    "ZMTP 3.1 frames read and written in C (transport/zmtp.py is the reference).", -1, methods,
};

PyMODINIT_FUNC PyInit__zmtp(void)
{
    if (PyType_Ready(&duomq_ReaderType) < 0)
        return NULL;
    s_popleft = PyUnicode_InternFromString("popleft");
    s_append = PyUnicode_InternFromString("append");
    if (s_popleft == NULL || s_append == NULL)
        return NULL;
    ZmtpError = Py_NewRef(PyExc_ValueError);      /* until init() names zmtp's */
    Eof = PyUnicode_FromString("the peer closed the connection");
    if (Eof == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Reader", (PyObject *)&duomq_ReaderType) < 0 ||
        PyModule_AddIntConstant(m, "IOV_MAX", IOV_MOST) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
