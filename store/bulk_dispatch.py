"""A slave's dispatch of a run of format-3 records at once (numpy).

The record-by-record loop (``MessageStore._scan_segment``) costs about a
microsecond per record, two CRC calls of it. For a run of many complete
format-3 records this does the same work in a few passes: one walk over the
sizes in Python, then the headers gathered into an array, lengths checked
together, payload CRCs computed by ``map`` (C loops, no bytecode per record),
stored crcs checked by ``format.seal.seals`` (or both CRCs by the C loops,
``format/native.py``), tag hashes, topics and the
consume-queue entries of each run of one queue built in bulk. Anything that
fails a check returns None: the caller's loop then goes over the same records
and names the first bad one exactly as before."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from duomq.format import native, seal
from duomq.format import record as rec
from duomq.format.crc import crc32c

BULK_MIN = 64              # records in a run before the bulk path pays
STRIDE_MIN = 8             # records of one size ahead before they are checked together
HS = rec.HEADER_SIZE
_HEADER = rec.numpy_dtype()
_SIZE_MAGIC = rec.numpy_dtype("magic")        # total_size and magic


def find_run(mv: Any, rel: int, wrote: int, seg_size: int) -> tuple[list[int], int]:
    """Starts of the complete format-3 records from ``rel`` (stopping at
    anything else: a filler, an older format, a partial record, damage), and
    where the last one ends.

    Records of one batch often have one size: from each record, the ones that
    follow at the same stride are checked together (one gather of their
    sizes and magics); the walk goes record by record only where sizes vary."""
    starts: list[int] = []
    add, unpack = starts.append, rec.SIZE_MAGIC.unpack_from
    record, least = rec.RECORD_MAGIC, rec.BLANK.size
    pos = rel
    while seg_size - pos >= least and wrote - pos >= HS:
        size, magic = unpack(mv, pos)
        if magic != record or size < HS or size > wrote - pos:
            break
        fit = (wrote - pos) // size            # records of this size that fit from pos
        if fit >= STRIDE_MIN and unpack(mv, pos + size) == (size, magic):   # the next too
            heads = seal.windows(mv, 8)[pos:pos + (fit - 1) * size + 1:size].view(_SIZE_MAGIC)
            same = np.flatnonzero((heads["total_size"].ravel() != size)
                                  | (heads["magic"].ravel() != record))
            k = int(same[0]) if len(same) else fit         # the first that differs
            starts.extend(range(pos, pos + k * size, size))
            pos += k * size
            continue
        add(pos)
        pos += size
    return starts, pos


def _one_topic(buf: bytes, payload: Any, lt: Any, first: bytes) -> bool:
    """Do all the records name the topic ``first``? (One gather, no loop.)"""
    width = len(first)
    if not (lt == width).all():
        return False
    if width == 0:
        return True
    names = seal.windows(buf, width)[payload]
    return bool((names == np.frombuffer(first, np.uint8)).all())


def scan(mm: Any, base: int, starts: list[int], end: int):
    """The records at ``starts`` (segment-relative, ending at ``end``) of
    the segment mapped by ``mm`` at log offset ``base``, checked: ``(runs,
    keyed, sequenced)``, each run ``((topic, queue id), first queue offset, [phys, size,
    tag hash, ...])`` and each keyed record ``(topic, keys, phys, store
    time)``, and the offsets of the records that open an idempotent batch;
    None when a record fails a check."""
    lo = starts[0]
    buf = mm[lo:end]                                  # a copy: no view of the mapping
    n = len(starts)
    at = np.array(starts, np.int64)
    at -= lo
    headers = seal.windows(buf, HS)[at]                     # (n, 74)
    h = headers.view(_HEADER).reshape(n)
    size = h["total_size"].astype(np.int64)
    lt, lg, lk = (h[f].astype(np.int64) for f in ("topic_len", "tags_len", "keys_len"))
    if not (size == HS + lt + lg + lk + h["props_len"] + h["body_len"]).all():
        return None
    payload = at + HS
    if not _all_sealed(buf, at, size, payload, headers, h):
        return None
    tags_at = payload + lt
    hashes = np.zeros(n, np.int64)
    tagged = np.flatnonzero(lg)
    if len(tagged):
        t0 = tags_at[tagged]
        hashes[tagged] = list(map(zlib.crc32, map(buf.__getitem__,
                                                  map(slice, t0.tolist(),
                                                      (t0 + lg[tagged]).tolist()))))
    first = buf[int(payload[0]):int(tags_at[0])]
    if _one_topic(buf, payload, lt, first):
        topics = [first] * n                     # the usual case: one topic, no per-record work
        codes = np.zeros(n, np.int64)
    else:
        topics = list(map(buf.__getitem__, map(slice, payload.tolist(), tags_at.tolist())))
        ids: dict[bytes, int] = {}
        codes = np.fromiter((ids.setdefault(t, len(ids)) for t in topics), np.int64, n)
    qid, qoff = h["queue_id"].astype(np.int64), h["queue_offset"].astype(np.int64)
    cut = np.flatnonzero((codes[1:] != codes[:-1]) | (qid[1:] != qid[:-1])
                         | (qoff[1:] != qoff[:-1] + 1)) + 1
    phys = at + (base + lo)
    entries = np.stack((phys, size, hashes), axis=1)
    edges = [0, *cut.tolist(), n]
    runs = [((topics[a], int(qid[a])), int(qoff[a]), entries[a:b].ravel().tolist())
            for a, b in zip(edges, edges[1:], strict=False)]
    keyed = []
    for i in np.flatnonzero(lk).tolist():
        k = int(tags_at[i] + lg[i])
        keyed.append((topics[i], buf[k:k + int(lk[i])], int(phys[i]), int(h["store_ts_ms"][i])))
    sequenced = phys[np.flatnonzero(h["flags"] & rec.FLAG_SEQUENCED)].tolist()
    return runs, keyed, sequenced


def _all_sealed_numpy(buf: bytes, at: Any, size: Any, payload: Any, headers: Any, h: Any) -> bool:
    """Whether every record's crc is its seal, in numpy."""
    # bytes slices: copying ~100 bytes and a CRC of bytes beat a CRC of a memoryview
    crcs = list(map(crc32c, map(buf.__getitem__, map(slice, payload.tolist(),
                                                     (at + size).tolist()))))
    rows = headers[:, rec.CRC_OFFSET:HS].copy()
    rows[:, :4] = np.array(crcs, ">u4").view(np.uint8).reshape(len(at), 4)
    return bool((seal.seals(rows) == h["crc"]).all())


def _all_sealed_c(buf: bytes, at: Any, size: Any, payload: Any, headers: Any, h: Any) -> bool:
    """The same, by the C loops' first_unsealed."""
    return bool(_first_unsealed(buf, at.tolist()) < 0)


_all_sealed: Any = _all_sealed_numpy      # bound by _bind
_first_unsealed: Any = native.declined


@native.chosen
def _bind(loops: Any) -> None:
    global _all_sealed, _first_unsealed
    _all_sealed = _all_sealed_c if loops is not None else _all_sealed_numpy
    _first_unsealed = loops.first_unsealed if loops is not None else native.declined
