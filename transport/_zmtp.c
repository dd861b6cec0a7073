/* duomq.common._zmtp: ZMTP 3.1 frames read and written in C (issue 41: on
 * the serving thread and the clients' I/O threads each request and answer
 * crossed ~25 Python calls of framing, buffering and queueing; a thread
 * that slept pays each of them several times over on this machine).
 *
 * Optional, like format/_native.c: transport/zmtp.py loads it, and its own
 * FrameReader, message and write_out stay the reference and the fallback
 * (DUOMQ_NATIVE=0); tests/test_zmtp.py runs every case both ways and
 * compares. The same rules as the reference: a frame's flag byte with a
 * reserved bit set, or a size above max_frame, raises ZmtpError from its
 * head (before its body is buffered); a frame is taken whole or not at
 * all; bytes fed stay until taken. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MORE 1
#define LONG 2
#define COMMAND 4
#define IOV_MOST 512             /* buffers one sendmsg takes (zmtp.IOV_MAX) */
#define MESSAGES_MOST 64         /* messages one sendmsg takes (zmtp.gather's most) */
#define COMPACT_AT 65536         /* taken bytes kept before the rest moves down */
#define SHRINK_ABOVE (256 * 1024) /* an emptied buffer larger than this is freed */

static PyObject *ZmtpError;      /* transport.zmtp.ZmtpError, given by init() */
static PyObject *Eof;            /* transport.zmtp.EOF */
static PyObject *s_popleft, *s_append;

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

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "duomq.common._zmtp.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Frames out of a byte stream fed in pieces of any size (zmtp.FrameReader's rules).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)reader_init,
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_methods = reader_methods,
    .tp_getset = reader_getset,
};

/* ------------------------------------------------------------ writing */

static void put_head(uint8_t *h, Py_ssize_t *hn, uint64_t size, int flags)
{
    if (size < 256) {
        h[0] = (uint8_t)flags;
        h[1] = (uint8_t)size;
        *hn = 2;
        return;
    }
    h[0] = (uint8_t)(flags | LONG);
    for (int i = 8; i >= 1; i--) {
        h[i] = (uint8_t)size;
        size >>= 8;
    }
    *hn = 9;
}

/* message(frames): the buffers to write, as zmtp.message gives them: a
 * frame below 1 KiB with its head, a larger one apart from it */
static PyObject *py_message(PyObject *self, PyObject *frames)
{
    PyObject *seq = PySequence_Fast(frames, "message(frames): a list of frames");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyList_New(0);
    if (out == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *frame = PySequence_Fast_GET_ITEM(seq, i);
        Py_buffer view;
        if (PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE) < 0)
            goto fail;
        uint8_t head[9];
        Py_ssize_t hn;
        put_head(head, &hn, (uint64_t)view.len, i < n - 1 ? MORE : 0);
        PyObject *piece;
        int rc;
        if (view.len < 1024) {
            piece = PyBytes_FromStringAndSize(NULL, hn + view.len);
            if (piece != NULL) {
                memcpy(PyBytes_AS_STRING(piece), head, hn);
                memcpy(PyBytes_AS_STRING(piece) + hn, view.buf, view.len);
            }
            PyBuffer_Release(&view);
            rc = piece == NULL ? -1 : PyList_Append(out, piece);
            Py_XDECREF(piece);
        } else {
            PyBuffer_Release(&view);
            piece = PyBytes_FromStringAndSize((const char *)head, hn);
            rc = piece == NULL ? -1 : PyList_Append(out, piece);
            Py_XDECREF(piece);
            if (rc == 0)
                rc = PyList_Append(out, frame);
        }
        if (rc < 0)
            goto fail;
    }
    Py_DECREF(seq);
    return out;
fail:
    Py_DECREF(seq);
    Py_XDECREF(out);
    return NULL;
}

/* take n written bytes off the front of out (zmtp.consume's rule) */
static int consume(PyObject *out, size_t n)
{
    while (n) {
        Py_ssize_t left = PyObject_Length(out);
        if (left < 0)
            return -1;
        if (left == 0)
            return 0;
        PyObject *msg = PySequence_GetItem(out, 0);
        if (msg == NULL)
            return -1;
        if (!PyList_Check(msg)) {
            Py_DECREF(msg);
            PyErr_SetString(PyExc_TypeError, "a waiting message is a list of buffers");
            return -1;
        }
        Py_ssize_t whole = 0;
        while (n && whole < PyList_GET_SIZE(msg)) {
            PyObject *b = PyList_GET_ITEM(msg, whole);
            Py_ssize_t size = PyObject_Length(b);
            if (size < 0) {
                Py_DECREF(msg);
                return -1;
            }
            if ((size_t)size <= n) {
                n -= size;
                whole++;
                continue;
            }
            PyObject *mv = PyMemoryView_FromObject(b);     /* cut: the rest stays */
            PyObject *rest = mv == NULL ? NULL : PySequence_GetSlice(mv, (Py_ssize_t)n, size);
            Py_XDECREF(mv);
            if (rest == NULL || PyList_SetItem(msg, whole, rest) < 0) {
                Py_DECREF(msg);
                return -1;
            }
            n = 0;
        }
        if (whole && PyList_SetSlice(msg, 0, whole, NULL) < 0) {
            Py_DECREF(msg);
            return -1;
        }
        Py_ssize_t remains = PyList_GET_SIZE(msg);
        Py_DECREF(msg);
        if (remains == 0) {
            PyObject *r = PyObject_CallMethodNoArgs(out, s_popleft);
            if (r == NULL)
                return -1;
            Py_DECREF(r);
        }
    }
    return 0;
}

/* write_out(fd, out): write the messages waiting in the deque out (each a
 * list of buffers) until the kernel takes no more. True when all left,
 * False when some wait for room; OSError for a connection that failed */
static PyObject *py_write_out(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "write_out(fd, out)");
        return NULL;
    }
    int fd = PyLong_AsLong(args[0]);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    PyObject *out = args[1];
    struct iovec iov[IOV_MOST];
    Py_buffer views[IOV_MOST];
    for (;;) {
        Py_ssize_t waiting = PyObject_Length(out);
        if (waiting < 0)
            return NULL;
        if (waiting == 0)
            Py_RETURN_TRUE;
        int nv = 0;
        size_t offered = 0;
        int failed = 0;
        PyObject *it = PyObject_GetIter(out);
        if (it == NULL)
            return NULL;
        PyObject *msg;
        int msgs = 0;
        while (nv < IOV_MOST && msgs < MESSAGES_MOST && (msg = PyIter_Next(it)) != NULL) {
            msgs++;
            if (!PyList_Check(msg)) {
                Py_DECREF(msg);
                PyErr_SetString(PyExc_TypeError, "a waiting message is a list of buffers");
                failed = 1;
                break;
            }
            for (Py_ssize_t i = 0; i < PyList_GET_SIZE(msg) && nv < IOV_MOST; i++) {
                if (PyObject_GetBuffer(PyList_GET_ITEM(msg, i), &views[nv], PyBUF_SIMPLE) < 0) {
                    failed = 1;
                    break;
                }
                iov[nv].iov_base = views[nv].buf;
                iov[nv].iov_len = views[nv].len;
                offered += views[nv].len;
                nv++;
            }
            Py_DECREF(msg);
            if (failed)
                break;
        }
        Py_DECREF(it);
        if (failed || PyErr_Occurred()) {
            for (int i = 0; i < nv; i++)
                PyBuffer_Release(&views[i]);
            return NULL;
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = nv};
        ssize_t n;
        Py_BEGIN_ALLOW_THREADS
        n = sendmsg(fd, &mh, MSG_NOSIGNAL);
        Py_END_ALLOW_THREADS
        int err = errno;
        for (int i = 0; i < nv; i++)
            PyBuffer_Release(&views[i]);
        if (n < 0) {
            if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)
                Py_RETURN_FALSE;
            errno = err;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        if (consume(out, (size_t)n) < 0)
            return NULL;
        if ((size_t)n < offered)              /* the kernel took less than offered: full */
            Py_RETURN_FALSE;
    }
}

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
    {"message", py_message, METH_O, "message(frames): a message's frames as buffers to write."},
    {"write_out", (PyCFunction)(void (*)(void))py_write_out, METH_FASTCALL,
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
    if (PyType_Ready(&ReaderType) < 0)
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
    if (PyModule_AddObjectRef(m, "Reader", (PyObject *)&ReaderType) < 0 ||
        PyModule_AddIntConstant(m, "IOV_MAX", IOV_MOST) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
