/* What the two halves of duomq.transport._zmtp share: read.c holds the
 * Reader (frames out of a byte stream), write.c the writers (a message's
 * buffers, writing out a connection's queue); ../_zmtp.c makes the module. */

#ifndef DUOMQ_ZMTP_H
#define DUOMQ_ZMTP_H

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

/* the module's: the error it raises (transport.zmtp.ZmtpError, given by
 * init()), the text of a closed connection (transport.zmtp.EOF), interned names */
extern PyObject *duomq_zmtp_error, *duomq_zmtp_eof, *duomq_s_popleft, *duomq_s_append;
#define ZmtpError duomq_zmtp_error
#define Eof duomq_zmtp_eof
#define s_popleft duomq_s_popleft
#define s_append duomq_s_append

extern PyTypeObject duomq_ReaderType;
PyObject *duomq_zmtp_message(PyObject *self, PyObject *frames);
PyObject *duomq_zmtp_write_out(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

#endif
