/* Writing: a message's frames as buffers to write (message), and a
 * connection's queue of messages written out with sendmsg (write_out). */

#include "zmtp.h"

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
PyObject *duomq_zmtp_message(PyObject *self, PyObject *frames)
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
PyObject *duomq_zmtp_write_out(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
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

