"""A producer's large batch checked at once (pure: numpy, no I/O).

``record.scan_batch`` checks a batch record by record: an unpack, a CRC
call, a topic comparison and four list appends per record, about 0.7 us
each, most of a master's cost of storing a batch. This does the same checks
in a few passes: the sizes walked once (records of one size at a stride, as
``store/bulk_dispatch.py`` does), the headers gathered into an array and
checked together, the payload CRCs by ``map`` (C loops, no bytecode per
record). Anything unusual returns None: the caller then runs
``scan_batch``, which names the first bad record exactly as before.

With the C loops (``format/native.py``) the walk and every check of a
record are one C loop instead, for batches of any size (``pays``). Either
way, the records with tags, keys or properties then have their texts
checked and their tag hashes taken here, those records only (``_texts``)."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from duomq.format import native, seal
from duomq.format import record as rec
from duomq.format.crc import crc32c

HS = rec.HEADER_SIZE
_HEADER = rec.numpy_dtype()
_SIZE = rec.fields("total_size")
_TEXT_LENS = rec.fields("tags_len", "keys_len", "props_len")


def _one_size(buf: Any, lo: int, end: int, size: int) -> bool:
    """Whether ``buf[lo:end]`` is records of ``size`` bytes each (one gather)."""
    if size < HS or (end - lo) % size:
        return False
    sizes = seal.windows(buf, 4)[lo:end - size + 1:size].view(">i4").ravel()
    return len(sizes) == (end - lo) // size and bool((sizes == size).all())


def starts_of(buf: Any, end: int) -> list[int] | None:
    """Where each record of ``buf`` starts, walking the sizes (None: a size
    that cannot be right). A batch of records of one size is checked at its
    stride with one gather, and so is one whose first record alone differs
    (an idempotent batch's, which carries the numbering)."""
    (size,) = _SIZE.unpack_from(buf, 0)
    if _one_size(buf, 0, end, size):
        return list(range(0, end, size))
    if HS <= size and end - size >= HS:
        (rest,) = _SIZE.unpack_from(buf, size)
        if _one_size(buf, size, end, rest):
            return [0, *range(size, end, rest)]
    starts: list[int] = []
    add, unpack = starts.append, _SIZE.unpack_from
    pos = 0
    while pos < end:
        if end - pos < HS:
            return None
        (size,) = unpack(buf, pos)
        if size < HS:
            return None
        add(pos)
        pos += size
    return starts if pos == end else None


BULK_MIN = 96      # without the C loops, records a batch needs before numpy pays


def pays(count: int) -> bool:
    """Whether a batch of ``count`` records goes through ``scan`` and
    ``seal.patch_and_seal`` (else record by record): always with the C loops."""
    return _ALWAYS or count >= BULK_MIN


def scan(buf: bytearray, topic: bytes, max_record_bytes: int, count: int,
         crcs: list[int]) -> tuple[list[int], list[int], list[int],
                                   list[tuple[int, int, int]]] | None:
    """What ``record.scan_batch`` returns for a well-formed batch (and the
    payload CRCs appended to ``crcs``), or None for one it must look at."""
    checked = _check(buf, topic, max_record_bytes, count)
    if checked is None:
        return None
    bounds, borns, payload_crcs, texted = checked
    hashes = [0] * count
    keyed: list[tuple[int, int, int]] = []
    if texted and not _texts(buf, bounds, len(topic), texted, hashes, keyed):
        return None
    crcs.extend(payload_crcs)
    return bounds, borns, hashes, keyed


def _checked(buf: bytearray, topic: bytes, max_record_bytes: int, count: int
             ) -> tuple[list[int], list[int], list[int], list[int]] | None:
    """numpy's answer to what ``_native.scan`` answers: the bounds, born
    times and payload CRCs of a well-formed batch and the indexes of its
    records with texts, or None."""
    end = len(buf)
    if end < HS:
        return None
    starts = starts_of(buf, end)
    if starts is None or len(starts) != count:
        return None
    at = np.array(starts, np.int64)
    h = seal.windows(buf, HS)[at].view(_HEADER).reshape(count)
    size = h["total_size"].astype(np.int64)
    lt, lg, lk, lp = (h[f].astype(np.int64) for f in ("topic_len", "tags_len", "keys_len",
                                                        "props_len"))
    tlen = len(topic)
    if not ((h["magic"] == rec.RECORD_MAGIC).all()
            and (size == HS + lt + lg + lk + lp + h["body_len"]).all()
            and (size <= max_record_bytes).all() and (lt == tlen).all()):
        return None
    payload = at + HS
    if tlen and not (seal.windows(buf, tlen)[payload] == np.frombuffer(topic, np.uint8)).all():
        return None
    got = list(map(crc32c, map(buf.__getitem__, map(slice, payload.tolist(),
                                                    (at + size).tolist()))))
    if got != h["crc"].tolist():
        return None
    starts.append(end)
    return starts, h["born_ts_ms"].tolist(), got, np.flatnonzero(lg + lk + lp).tolist()


def _texts(buf: bytearray, bounds: list[int], tlen: int, texted: list[int], hashes: list[int],
           keyed: list[tuple[int, int, int]]) -> bool:
    """For the records ``texted`` (those with tags, keys or properties): their
    tag hashes into ``hashes``, ``(index, keys start, keys length)`` onto
    ``keyed``; False when their texts are not UTF-8."""
    parts = []
    unpack = _TEXT_LENS.unpack_from
    for i in texted:
        lg, lk, lp = unpack(buf, bounds[i])
        p = bounds[i] + HS + tlen
        parts.append(buf[p:p + lg + lk + lp])
        if lg:
            hashes[i] = zlib.crc32(buf[p:p + lg])
        if lk:
            keyed.append((i, p + lg, lk))
    try:       # one decode for all: a newline ends any sequence a text leaves open
        str(b"\n".join(parts), "utf-8")
    except UnicodeDecodeError:
        return False
    return True


_ALWAYS = False           # bound by _bind: the C loops take any batch
_check: Any = _checked    # the C scan, or numpy's


@native.chosen
def _bind(loops: Any) -> None:
    global _ALWAYS, _check
    _ALWAYS = loops is not None
    _check = loops.scan if loops is not None else _checked
