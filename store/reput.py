"""Consume-queue entries for records the commit log holds but no queue
points to yet (RocketMQ's ``ReputMessageService``): what a slave applied,
and what recovery found past the checkpoint. Every record is checked
(magic, lengths, CRC) before an entry points to it. A part of
``MessageStore``."""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass

from duomq.common.errors import InvalidNameError
from duomq.common.names import validate_queue
from duomq.format import record as rec
from duomq.format.crc import crc32c
from duomq.store import bulk_dispatch
from duomq.store.consume_queue import pack_entries
from duomq.store.view import StorePart

log = logging.getLogger(__name__)
# the header fields dispatch reads
_DISPATCH = rec.fields("total_size", "magic", "crc", "queue_id", "queue_offset", "flags",
                       "topic_len", "tags_len", "keys_len", "props_len", "body_len")


@dataclass(frozen=True)
class Dispatch:
    """Records checked past ``start`` up to ``end`` (``count`` of them), not
    yet pointed to: each queue's runs of entries ``[first queue offset,
    [phys, size, tag hash, ...]]``, the keyed records and the idempotent
    batches' first records."""
    start: int
    end: int
    count: int
    pending: dict[tuple[bytes, int], list]
    keyed: list
    sequenced: list[int]


def _queue_name(topic: bytes, queue_id: int) -> str:
    """A replicated record's topic as a queue this store accepts; RecordError if not."""
    try:
        name = str(topic, "utf-8")
        validate_queue(name, queue_id)
    except (UnicodeDecodeError, InvalidNameError) as exc:
        raise rec.RecordError(f"a replicated record names a queue this store refuses "
                              f"({topic!r}, {queue_id}): {exc}") from None
    return name


class Reput(StorePart):
    """Consume-queue dispatch, composed into ``MessageStore`` (which names
    its public calls)."""

    def dispatch(self) -> int:
        """Build consume-queue entries for complete records past
        ``dispatched_offset`` (RocketMQ's reput); every record is checked
        (magic, lengths, CRC) and entries are written once per queue per call.
        Returns how many records were dispatched."""
        return self.write_dispatch(self.check_dispatch())

    def check_dispatch(self) -> Dispatch:
        """``dispatch``'s first half, which writes nothing: every complete
        record past ``dispatched_offset`` checked (RecordError for a damaged
        one or a queue this store refuses), and its entries collected. A
        slave acks once this holds and its log is flushed, then writes the
        entries (``write_dispatch``), before it checks the next chunk."""
        mfq = self.commitlog.mfq
        pos, end, n = self.store.dispatched_offset, self.commitlog.max_offset, 0
        pending: dict[tuple[bytes, int], list] = {}   # (topic, queue) -> [[first qoff, flat]]
        keyed: list = []                              # (topic, keys, phys, store time)
        sequenced: list[int] = []                     # idempotent batches' first records
        while pos < end:
            seg = mfq.find(pos)
            if seg is None:
                break
            rel, k = self._dispatch_segment(seg, pos - seg.base, pending, keyed, sequenced)
            n += k
            if rel is None:                          # the segment is done: the next one
                pos = seg.base + seg.size
            else:                                    # a record not all here yet
                pos = seg.base + rel
                break
        for topic, qid in pending:
            if (str(topic, "utf-8", "replace"), qid) not in self.queues:
                _queue_name(topic, qid)
        return Dispatch(self.store.dispatched_offset, pos, n, pending, keyed, sequenced)

    def write_dispatch(self, d: Dispatch) -> int:
        """``dispatch``'s second half: the checked records' entries written,
        their keys indexed, idempotent batches observed, and
        ``dispatched_offset`` moved. Returns how many records that was."""
        self.writer.check("consume-queue entries")
        if d.start != self.store.dispatched_offset:
            raise ValueError(f"a dispatch checked from {d.start} cannot be written at "
                             f"{self.store.dispatched_offset}")
        for key, runs in d.pending.items():            # one consume-queue write per run
            for run in runs:
                self._dispatch_entries(key, run)
        if d.keyed:
            self.index.add(d.keyed)
        self.store.observe_sequenced(d.sequenced, checked=True)   # by the dispatch's scan
        # the queues first: whoever sees the new offset finds them (the serving thread)
        self.appended.extend((str(t, "utf-8"), q, d.end) for t, q in d.pending)
        self.store.dispatched_offset = d.end
        self.store.messages_stored += d.count
        return d.count

    def _dispatch_segment(self, seg, rel: int, pending: dict, keyed: list, sequenced: list
                          ) -> tuple[int | None, int]:
        """Collect the entries of one segment's records from ``rel`` into
        ``pending``, and those with keys into ``keyed``. Returns ``(None, count)`` when the segment is done (a
        filler, or too little room left for one), else ``(rel, count)`` with
        ``rel`` where an incomplete record starts. A run of many format-3
        records goes through ``bulk_dispatch`` first; the rest, and anything
        it refuses, through the record-by-record loop."""
        done = 0
        if seg.wrote - rel >= bulk_dispatch.BULK_MIN * rec.HEADER_SIZE:
            starts, end = bulk_dispatch.find_run(seg.mm, rel, seg.wrote, seg.size)
            scanned = bulk_dispatch.scan(seg.mm, seg.base, starts, end) \
                if len(starts) >= bulk_dispatch.BULK_MIN else None
            if scanned is not None:
                runs, bulk_keyed, bulk_sequenced = scanned
                for key, first, flat in runs:
                    self._pending_run(pending, key, first).extend(flat)
                keyed.extend(bulk_keyed)
                sequenced.extend(bulk_sequenced)
                rel, done = end, len(starts)
        out, n = self._scan_segment(seg, rel, pending, keyed, sequenced)
        return out, n + done

    def _scan_segment(self, seg, rel: int, pending: dict, keyed: list, sequenced: list
                      ) -> tuple[int | None, int]:
        """``_dispatch_segment`` record by record: the slave's hot loop."""
        unpack, crc32, crc_of = _DISPATCH.unpack_from, zlib.crc32, crc32c
        HS, RECORD, BLANK_, MIN = rec.HEADER_SIZE, rec.RECORD_MAGIC, rec.BLANK_MAGIC, rec.BLANK.size
        V2, SEALED, SEQUENCED = rec.RECORD_MAGIC_V2, rec.SEALED_FROM, rec.FLAG_SEQUENCED
        mm = seg.mm
        mv = memoryview(mm)
        base, wrote, seg_size = seg.base, seg.wrote, seg.size
        n = 0
        last_qid, last_topic, next_qoff = -1, None, -1
        flat: list[int] = []
        while True:
            left = wrote - rel
            if seg_size - rel < MIN:                 # too small for a filler: segment end
                return None, n
            if left < HS:                            # a filler, or a record not all here
                if left >= MIN:
                    fsize, fmagic = rec.SIZE_MAGIC.unpack_from(mv, rel)
                    if fmagic == BLANK_ and fsize <= left:
                        return None, n
                return rel, n
            size, magic, crc, qid, qoff, flags, lt, lg, lk, lp, lb = unpack(mv, rel)
            if magic != RECORD and magic != V2:
                if magic == BLANK_:
                    return (None, n) if size <= left else (rel, n)
                if magic == rec.RECORD_MAGIC_V1:
                    raise rec.OldFormatError(f"replicated record at {base + rel} is in record "
                                             f"format 1: the master runs an older duomq")
                raise rec.RecordError(f"damaged replicated record at {base + rel}")
            if size > left:
                return rel, n                        # the rest has not arrived yet
            nxt = rel + size
            if size != HS + lt + lg + lk + lp + lb or crc != (
                    crc_of(mv[rel + SEALED:rel + HS], crc_of(mv[rel + HS:nxt])) if magic == RECORD
                    else crc_of(mv[nxt - lb:nxt])):        # format 2: the body's
                raise rec.RecordError(f"damaged replicated record at {base + rel}")
            p = rel + HS
            topic = mm[p:p + lt]
            if qid != last_qid or qoff != next_qoff or topic != last_topic:
                flat = self._pending_run(pending, (topic, qid), qoff)
                last_qid, last_topic = qid, topic
            flat.extend((base + rel, size, crc32(mm[p + lt:p + lt + lg]) if lg else 0))
            if lk:
                k = p + lt + lg
                keyed.append((topic, mm[k:k + lk], base + rel, rec.STORE_TS.unpack_from(mv, rel)[0]))
            if flags & SEQUENCED:
                sequenced.append(base + rel)
            next_qoff = qoff + 1
            rel = nxt
            n += 1

    def _pending_run(self, pending: dict, key: tuple[bytes, int], qoff: int) -> list[int]:
        """The flat entry list that entries of ``key`` from queue offset
        ``qoff`` extend: the queue's last run, or a new run after it when
        there is none or it does not end at ``qoff`` (each written in turn)."""
        runs = pending.get(key)
        if runs is None:
            runs = pending[key] = [[qoff, []]]
        elif qoff != runs[-1][0] + len(runs[-1][1]) // 3:   # not contiguous: a run of its own
            runs.append([qoff, []])
        return runs[-1][1]

    def _dispatch_entries(self, key, batch) -> None:
        first, flat = batch
        if not flat:
            return
        cq = self.store.consume_queue(str(key[0], "utf-8"), key[1])   # named as checked
        count = len(flat) // 3
        if first == cq.max_offset:
            cq.append(pack_entries(flat, count), first)
        else:                                        # recovery-style: place each entry
            for i in range(count):
                cq.put_entry(first + i, *flat[3 * i:3 * i + 3])
