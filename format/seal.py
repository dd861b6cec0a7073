"""Sealing many records at once (pure: numpy, no I/O).

A stored record's crc is CRC-32C of its header bytes 12..74 continued from its
payload's CRC (``record.seal``). Done one record at a time that is a slice, a
CRC call and a pack per record, as much Python work again as patching the
header; for a large batch this module patches and seals all records with a few
numpy operations instead.

How: for inputs of one length, CRC-32C is affine over GF(2) in the CRC it goes
on from and in the bytes it covers. Write a record's *row* as the 66 bytes
``crc it goes on from (4, big-endian) | header 12..74 (62)``; then

    seal(row_i) = seal(row_0) XOR  XOR_j T[j][row_i[j] XOR row_0[j]]

where ``T[j][v]`` is what a byte ``v`` at position ``j`` adds (a table of
66 x 256 entries, built once from ``crc32c`` itself). In a batch only a few
columns differ from the first record (the payload CRC, the queue offset's and
the physical offset's low bytes, maybe a length), so the sum touches only
those. ``seal(row_0)`` is one ordinary CRC call.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from duomq.format import native
from duomq.format import record as rec
from duomq.format.crc import crc32c

ROW = 4 + rec.HEADER_SIZE - rec.SEALED_FROM      # 66: crc to go on from, then bytes 12..74
_ROW_AT = rec.CRC_OFFSET                          # a row is a record's bytes 8..74 ...
_SEALED = rec.HEADER_SIZE - rec.SEALED_FROM       # ... whose last 62 the crc covers
_QOFF = 4 + rec.OFFSET["queue_offset"] - rec.SEALED_FROM   # columns within a row
_PHYS = 4 + rec.OFFSET["physical_offset"] - rec.SEALED_FROM
_QID = 4 + rec.OFFSET["queue_id"] - rec.SEALED_FROM
_STORE_TS = 4 + rec.OFFSET["store_ts_ms"] - rec.SEALED_FROM
_EPOCH = 4 + rec.EPOCH_AT - rec.SEALED_FROM
_WRITTEN = _EPOCH + rec.EPOCH_BYTES              # bytes 8..59 hold all the broker writes
U8 = np.uint8


@functools.cache
def _table() -> Any:
    """``T`` flattened: ``T[j * 256 + v]`` is the linear part of byte ``v`` at row column ``j``."""
    zeros = bytes(_SEALED)
    base = crc32c(zeros, 0)
    t = np.empty((ROW, 256), np.uint32)
    for j in range(4):
        for v in range(256):
            t[j, v] = crc32c(zeros, v << (8 * (3 - j))) ^ base
    row = bytearray(zeros)
    for p in range(_SEALED):
        for v in range(256):
            row[p] = v
            t[4 + p, v] = crc32c(row, 0) ^ base
        row[p] = 0
    return t.ravel()


def windows(buf: Any, width: int) -> Any:
    """Every ``width`` bytes of ``buf`` starting at each byte (a view, no copy),
    so that ``windows(buf, w)[starts]`` gathers rows at arbitrary offsets."""
    return np.ndarray((len(buf) - width + 1, width), U8, buffer=buf, strides=(1, 1))


def seals(rows: Any) -> Any:
    """CRC-32C of each row's columns 4..66 continued from the CRC in its
    columns 0..4 (big-endian): ``rows`` is ``(n, ROW)`` uint8, n >= 1."""
    first = rows[0]
    diff = rows ^ first
    cols = np.flatnonzero(np.bitwise_or.reduce(diff, 0))
    out = np.full(len(rows), crc32c(first[4:].tobytes(), int.from_bytes(first[:4].tobytes(),
                                                                             "big")), np.uint32)
    if len(cols):       # one row of table entries per column that differs: XOR them down
        out ^= np.bitwise_xor.reduce(_table().take(np.add(diff[:, cols].T, (cols * 256)[:, None],
                                                          dtype=np.intp)), 0)
    return out


def _patch_and_seal(buf: bytearray, bounds: Sequence[int], queue_id: int, first_qoff: int,
                   offsets: Sequence[int], store_ts_ms: int, epoch: int = 0) -> None:
    """What ``record.PATCH``, the epoch stamp and ``record.seal`` do record
    by record, for a whole producer batch in ``buf``: records at
    ``bounds[:-1]`` (as ``scan_batch`` returns them, each carrying its
    payload CRC) get queue id, queue offsets from ``first_qoff``, physical
    ``offsets``, the store time and ``epoch``, then their stored crc. The
    born time stays as the producer set it. ``patch_and_seal`` is this, or
    the C loops' ``seal`` when there are some (``format/native.py``)."""
    n = len(bounds) - 1
    at = np.array(bounds[:-1], np.int64)
    at += _ROW_AT
    rows = windows(buf, ROW)[at]                  # a copy: crc (the payload's), bytes 12..74
    rows[:, _QID:_QID + 4] = np.frombuffer(queue_id.to_bytes(4, "big", signed=True), U8)
    rows[:, _QOFF:_QOFF + 8] = np.arange(first_qoff, first_qoff + n,
                                         dtype=">i8").view(U8).reshape(n, 8)
    if offsets[-1] - offsets[0] == bounds[-2] - bounds[0]:     # one run in one segment
        phys = at + (offsets[0] - bounds[0] - _ROW_AT)
    else:
        phys = np.array(offsets, np.int64)
    rows[:, _PHYS:_PHYS + 8] = phys.astype(">i8").view(U8).reshape(n, 8)
    rows[:, _STORE_TS:_STORE_TS + 8] = np.frombuffer(store_ts_ms.to_bytes(8, "big", signed=True),
                                                     U8)
    rows[:, _EPOCH:_EPOCH + rec.EPOCH_BYTES] = np.frombuffer(rec.epoch_stamp(epoch), U8)
    rows[:, :4] = seals(rows).astype(">u4").view(U8).reshape(n, 4)
    windows(buf, _WRITTEN)[at] = rows[:, :_WRITTEN]


patch_and_seal: Any = _patch_and_seal     # bound by _bind: the C seal, or numpy's


@native.chosen
def _bind(loops: Any) -> None:
    global patch_and_seal
    patch_and_seal = loops.seal if loops is not None else _patch_and_seal
