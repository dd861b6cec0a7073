/* The Reader: ZMTP frames out of a byte stream fed in pieces of any size,
 * or read from a non-blocking descriptor (zmtp.FrameReader's rules). */

#include "zmtp.h"

/* ------------------------------------------------------------ Reader */

typedef struct {
    PyObject_HEAD
    uint8_t *buf;
    Py_ssize_t cap, len, pos;    /* bytes held: buf[pos:len] */
    long long max_frame;         /* -1: no bound */
    PyObject *parts;             /* data frames of a message not yet whole (list) */
} Reader;

static int reader_init(Reader *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"max_frame", NULL};
    long long max_frame = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|L", names, &max_frame))
        return -1;
    self->max_frame = max_frame;
    if (self->parts == NULL && (self->parts = PyList_New(0)) == NULL)
        return -1;
    return 0;
}

static void reader_dealloc(Reader *self)
{
    PyMem_Free(self->buf);
    Py_XDECREF(self->parts);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* room for n more bytes past len: taken bytes dropped first, as the
 * reference's feed does */
static int reserve(Reader *self, Py_ssize_t n)
{
    if (self->pos && self->pos == self->len) {
        self->pos = self->len = 0;
    } else if (self->pos > COMPACT_AT) {
        memmove(self->buf, self->buf + self->pos, self->len - self->pos);
        self->len -= self->pos;
        self->pos = 0;
    }
    if (self->len + n <= self->cap)
        return 0;
    Py_ssize_t cap = self->cap ? self->cap : 4096;
    while (cap < self->len + n)
        cap *= 2;
    uint8_t *grown = PyMem_Realloc(self->buf, cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->buf = grown;
    self->cap = cap;
    return 0;
}

/* everything taken: a large buffer goes back (a connection that once read a
 * big batch does not hold its size while idle) */
static void settle(Reader *self)
{
    if (self->pos == self->len && self->cap > SHRINK_ABOVE) {
        PyMem_Free(self->buf);
        self->buf = NULL;
        self->cap = self->len = self->pos = 0;
    }
}

static PyObject *reader_feed(Reader *self, PyObject *data)
{
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int rc = reserve(self, view.len);
    if (rc == 0) {
        memcpy(self->buf + self->len, view.buf, view.len);
        self->len += view.len;
    }
    PyBuffer_Release(&view);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* what one read into view gave (n bytes, or -1 with err): fed here; None,
 * or why the connection ended (EOF when the peer closed it) */
static PyObject *fed(Reader *self, Py_buffer *view, ssize_t n, int err)
{
    if (n < 0) {
        PyBuffer_Release(view);
        if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)
            Py_RETURN_NONE;
        return PyUnicode_FromFormat("[Errno %d] %s", err, strerror(err));
    }
    if (n == 0) {
        PyBuffer_Release(view);
        Py_INCREF(Eof);
        return Eof;
    }
    int rc = reserve(self, n);
    if (rc == 0) {
        memcpy(self->buf + self->len, view->buf, n);
        self->len += n;
    }
    PyBuffer_Release(view);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* a read of the non-blocking fd into view (args[0], args[1]), read again
 * while the fd has nothing until CLOCK_MONOTONIC (time.perf_counter_ns)
 * reaches until (0: one read), with the GIL let go; fed here */
static PyObject *read_until(Reader *self, PyObject *const *args, long long until)
{
    int fd = PyLong_AsLong(args[0]);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_WRITABLE) < 0)
        return NULL;
    ssize_t n;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        n = recv(fd, view.buf, view.len, 0);
        if (n >= 0)
            break;
        err = errno;
        if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR)
            break;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((long long)now.tv_sec * 1000000000LL + now.tv_nsec >= until)
            break;
    }
    Py_END_ALLOW_THREADS
    return fed(self, &view, n, err);
}

/* fill(fd, view): one read of the non-blocking fd into view, fed here.
 * None, or why the connection ended (EOF when the peer closed it) */
static PyObject *reader_fill(Reader *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "fill(fd, view)");
        return NULL;
    }
    return read_until(self, args, 0);
}

/* fill_until(fd, view, until_ns): fill, read again while the fd has nothing
 * until time.perf_counter_ns() reaches until_ns: a busy poll's reads in one
 * call, with no Python between them and the GIL let go meanwhile (issue 41:
 * a spin asked the socket from Python, a few us a look). The same answers
 * as fill; None also when the time ran out with nothing read (pending()
 * says which) */
static PyObject *reader_fill_until(Reader *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "fill_until(fd, view, until_ns)");
        return NULL;
    }
    long long until = PyLong_AsLongLong(args[2]);
    if (until == -1 && PyErr_Occurred())
        return NULL;
    return read_until(self, args, until);
}

static PyObject *reader_take(Reader *self, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0 || self->len - self->pos < n)
        Py_RETURN_NONE;
    PyObject *out = PyBytes_FromStringAndSize((const char *)self->buf + self->pos, n);
    if (out != NULL)
        self->pos += n;
    return out;
}

/* the next whole frame: 1 with *flags and its body (a new reference), 0
 * until fed more, -1 with ZmtpError (or MemoryError) set */
static int next_frame(Reader *self, int *flags, PyObject **body)
{
    const uint8_t *p = self->buf + self->pos;
    Py_ssize_t have = self->len - self->pos;
    if (have < 2)
        return 0;
    int f = p[0];
    uint64_t size;
    Py_ssize_t head;
    if (f & ~(MORE | LONG | COMMAND)) {
        PyErr_Format(ZmtpError, "frame flags %#04x: reserved bits set", f);
        return -1;
    }
    if (f & LONG) {
        if (have < 9)
            return 0;
        size = 0;
        for (int i = 1; i < 9; i++)
            size = (size << 8) | p[i];
        head = 9;
    } else {
        size = p[1];
        head = 2;
    }
    if (self->max_frame >= 0 && size > (uint64_t)self->max_frame) {
        PyErr_Format(ZmtpError, "a frame of %llu bytes: more than the %lld allowed",
                     (unsigned long long)size, self->max_frame);
        return -1;
    }
    if (size > (uint64_t)(have - head))
        return 0;
    *body = PyBytes_FromStringAndSize((const char *)p + head, (Py_ssize_t)size);
    if (*body == NULL)
        return -1;
    *flags = f;
    self->pos += head + (Py_ssize_t)size;
    return 1;
}

static PyObject *reader_frame(Reader *self, PyObject *unused)
{
    int flags;
    PyObject *body;
    int got = next_frame(self, &flags, &body);
    if (got <= 0)
        return got < 0 ? NULL : (settle(self), Py_NewRef(Py_None));
    settle(self);
    PyObject *out = Py_BuildValue("(iN)", flags, body);
    return out;
}

static PyObject *reader_pending(Reader *self, PyObject *unused)
{
    return PyLong_FromSsize_t(self->len - self->pos);
}

/* messages(out, prefix, whole, most): whole data messages appended to the
 * deque out while it holds fewer than most: [prefix, *frames] when prefix
 * is not None (a ROUTER's), else the list of frames (whole) or the last
 * frame alone. A message's earlier frames wait in .parts between calls.
 * Returns the first command frame met, as (flags, body), or None when no
 * whole frame is left (or out is full) */
static PyObject *reader_messages(Reader *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "messages(out, prefix, whole, most)");
        return NULL;
    }
    PyObject *out = args[0], *prefix = args[1];
    int whole = PyObject_IsTrue(args[2]);
    Py_ssize_t most = PyLong_AsSsize_t(args[3]);
    if (whole < 0 || (most == -1 && PyErr_Occurred()))
        return NULL;
    PyObject *result = NULL;
    for (;;) {
        Py_ssize_t queued = PyObject_Length(out);
        if (queued < 0)
            goto done;
        if (queued >= most)
            break;
        int flags;
        PyObject *body;
        int got = next_frame(self, &flags, &body);
        if (got < 0)
            goto done;
        if (got == 0)
            break;
        if (flags & COMMAND) {
            result = Py_BuildValue("(iN)", flags, body);
            goto done;
        }
        if (flags & MORE) {
            int rc = PyList_Append(self->parts, body);
            Py_DECREF(body);
            if (rc < 0)
                goto done;
            continue;
        }
        PyObject *msg;
        Py_ssize_t n = PyList_GET_SIZE(self->parts);
        if (prefix != Py_None || whole) {
            int lead = prefix != Py_None;
            msg = PyList_New(lead + n + 1);
            if (msg == NULL) {
                Py_DECREF(body);
                goto done;
            }
            if (lead)
                PyList_SET_ITEM(msg, 0, Py_NewRef(prefix));
            for (Py_ssize_t i = 0; i < n; i++)
                PyList_SET_ITEM(msg, lead + i, Py_NewRef(PyList_GET_ITEM(self->parts, i)));
            PyList_SET_ITEM(msg, lead + n, body);
        } else {
            msg = body;               /* answers are one frame: the last is it */
        }
        if (n && PyList_SetSlice(self->parts, 0, n, NULL) < 0) {
            Py_DECREF(msg);
            goto done;
        }
        PyObject *r = PyObject_CallMethodOneArg(out, s_append, msg);
        Py_DECREF(msg);
        if (r == NULL)
            goto done;
        Py_DECREF(r);
    }
    result = Py_NewRef(Py_None);
done:
    settle(self);
    return result;
}

static PyObject *reader_get_parts(Reader *self, void *unused)
{
    return Py_NewRef(self->parts);
}

static PyObject *reader_get_max_frame(Reader *self, void *unused)
{
    return PyLong_FromLongLong(self->max_frame);
}

static PyMethodDef reader_methods[] = {
    {"feed", (PyCFunction)reader_feed, METH_O, "feed(data): bytes to read frames from."},
    {"fill", (PyCFunction)(void (*)(void))reader_fill, METH_FASTCALL,
     "fill(fd, view): one read of the non-blocking fd (through view), fed here: None, "
     "or why the connection ended (EOF when the peer closed it)."},
    {"fill_until", (PyCFunction)(void (*)(void))reader_fill_until, METH_FASTCALL,
     "fill_until(fd, view, until_ns): fill, reading again while the fd has nothing until "
     "time.perf_counter_ns() reaches until_ns (the GIL let go): None, or why the "
     "connection ended."},
    {"take", (PyCFunction)reader_take, METH_O,
     "take(n): the next n raw bytes (the greeting), or None until fed."},
    {"frame", (PyCFunction)reader_frame, METH_NOARGS,
     "frame(): the next whole frame as (flags, body), or None until fed more."},
    {"pending", (PyCFunction)reader_pending, METH_NOARGS, "pending(): bytes fed and not taken."},
    {"messages", (PyCFunction)(void (*)(void))reader_messages, METH_FASTCALL,
     "messages(out, prefix, whole, most): whole data messages into out; the first command "
     "frame met, or None."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef reader_getset[] = {
    {"parts", (getter)reader_get_parts, NULL, "frames of a message not yet whole", NULL},
    {"max_frame", (getter)reader_get_max_frame, NULL, "the bound on a frame's body", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject duomq_ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "duomq.transport._zmtp.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Frames out of a byte stream fed in pieces of any size (zmtp.FrameReader's rules).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)reader_init,
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_methods = reader_methods,
    .tp_getset = reader_getset,
};

