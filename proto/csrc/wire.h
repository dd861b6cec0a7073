/* What the two halves of duomq.proto._wire share: read.c reads a SEND
 * request and a client's SEND and PULL answers, write.c writes frames and
 * answers; ../_wire.c makes the module of them. */

#ifndef DUOMQ_WIRE_H
#define DUOMQ_WIRE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

extern PyMethodDef duomq_wire_read_methods[], duomq_wire_write_methods[];
int duomq_wire_read_init(PyObject *module);      /* SendView, the type parse_send gives */

#endif
