"""The store's read path: a queue's messages for a pull (tag-filtered,
each entry checked against its record, a damaged entry repaired or
refused), a record by commit-log offset or by key, offsets by time, and the
raw log a master streams to slaves. A part of ``MessageStore``; the serving
thread calls it."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from duomq.common.message import PullStatus
from duomq.format import record as rec
from duomq.store.consume_queue import CQ_UNIT, ConsumeQueue
from duomq.store.view import Fresh, StorePart

__all__ = ["FILTER_SCAN_ENTRIES", "Fresh", "GetResult", "StoreReads"]
log = logging.getLogger(__name__)
FILTER_SCAN_ENTRIES = 16_000   # most consume-queue entries one filtered read looks at
_PHYSICAL = rec.fields("physical_offset")
_MATCH = rec.fields("total_size", "magic", "queue_id", "queue_offset")
_TOPIC_LEN = rec.fields("topic_len")
_KEY_LOOKUP = rec.fields("store_ts_ms", "topic_len", "tags_len", "keys_len")


@dataclass(slots=True)
class GetResult:
    records: bytes                 # stored records, concatenated
    count: int
    next_offset: int
    min_offset: int
    max_offset: int                # one past the newest visible entry
    status: PullStatus = PullStatus.FOUND
                                   # | NO_MATCHED_MESSAGE (all scanned entries filtered out)


class StoreReads(StorePart):
    """The store's read path, composed into ``MessageStore`` (which names
    its public calls)."""

    def read_raw(self, offset: int, max_bytes: int):
        """Commit-log bytes from ``offset`` as they lie on disk, within one
        segment, up to what is written (filler included): what a slave copies."""
        seg = self.commitlog.mfq.find(offset)
        if seg is None:
            return b""
        rel = offset - seg.base
        n = min(max_bytes, seg.wrote - rel)
        return seg.mm[rel:rel + n] if n > 0 else b""

    def get_messages(self, topic: str, queue_id: int, offset: int, max_count: int,
                     max_bytes: int, visible_end: int,
                     tag_codes: frozenset[int] | None = None,
                     first_fits: bool = False) -> GetResult:
        """Stored records of a queue from ``offset``, only those ending at or
        below ``visible_end`` (the flushed or confirmed offset), within
        ``max_bytes`` but for the first record, which is always read (a pull
        must move on); with ``first_fits`` it must fit too, and when it does
        not the answer is NO_NEW_MESSAGE at ``offset`` (a PULL_MANY whose
        answer is full). With
        ``tag_codes``, entries whose tag code is not among them are skipped on
        the consume queue alone (up to FILTER_SCAN_ENTRIES of them per call):
        the commit log is read for matching records only, and ``next_offset``
        moves past the skipped ones."""
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            return GetResult(b"", 0, 0, 0, 0, PullStatus.NO_NEW_MESSAGE)   # nothing written yet
        lo = cq.min_offset
        hi = self.visible_max_offset(cq, visible_end)
        if offset < lo or offset > cq.max_offset:
            return GetResult(b"", 0, lo if offset < lo else hi, lo, hi, PullStatus.OFFSET_ILLEGAL)
        if offset >= hi:
            return GetResult(b"", 0, offset, lo, hi, PullStatus.NO_NEW_MESSAGE)
        fresh = self.store.fresh
        if fresh is not None and offset == fresh.queue_offset and hi == offset + fresh.count \
                and tag_codes is None and fresh.count <= max_count \
                and len(fresh.records) <= max_bytes and fresh.queue_id == queue_id \
                and fresh.topic == topic and fresh.end == self.commitlog.max_offset \
                and offset // (per := self.config.cq_entries_per_segment) == (hi - 1) // per:
            # what the read below returns (the same records, whole, within one
            # consume-queue segment, where a read stops), as written
            return GetResult(bytes(fresh.records), fresh.count, hi, lo, hi)
        scan = max_count if tag_codes is None else max(max_count, FILTER_SCAN_ENTRIES)
        entries = cq.read(offset, min(scan, hi - offset))
        seg_size = self.commitlog.segment_size
        read = self.commitlog.read
        parts = []
        run_start = run_end = -1
        total = count = 0
        edges: list[int] = []                        # entries where a run starts or ends
        last = -1
        scanned = len(entries) // CQ_UNIT.size       # unless a limit stops the scan early
        for i, (phys, size, code) in enumerate(CQ_UNIT.iter_unpack(entries)):
            if tag_codes is not None and code not in tag_codes:
                continue
            if count == max_count or (total + size > max_bytes and (count or first_fits)):
                scanned = i
                break
            if phys == run_end and phys % seg_size:
                run_end += size
            else:
                if run_start >= 0:
                    parts.append(read(run_start, run_end - run_start))
                    edges.append(last)
                edges.append(i)
                run_start, run_end = phys, phys + size
            last = i
            total += size
            count += 1
        if run_start >= 0:
            parts.append(read(run_start, run_end - run_start))
            edges.append(last)
        if not self._edges_match(entries, edges, offset, queue_id):
            return self._get_checked(cq, entries, offset, scanned, tag_codes, max_count,
                                     max_bytes, lo, hi, first_fits)
        if any(p is None for p in parts):   # deleted under us by retention
            return GetResult(b"", 0, cq.min_offset, cq.min_offset, hi, PullStatus.OFFSET_ILLEGAL)
        if not count and not scanned:       # the first record did not fit (first_fits)
            return GetResult(b"", 0, offset, lo, hi, PullStatus.NO_NEW_MESSAGE)
        status = PullStatus.FOUND if count else PullStatus.NO_MATCHED_MESSAGE
        return GetResult(b"".join(parts), count, offset + scanned, lo, hi, status)

    def _edges_match(self, entries: bytes, edges: list[int], offset: int, queue_id: int) -> bool:
        """Do the entries where runs of contiguous records start and end match
        their records? A damaged entry breaks a run (its offset or its size is
        wrong), so a pull of batched records checks two headers per batch."""
        unpack, matches = CQ_UNIT.unpack_from, self._entry_matches
        for k in edges:
            phys, size, _code = unpack(entries, k * CQ_UNIT.size)
            if not matches(phys, size, queue_id, offset + k):
                return False
        return True

    def _get_checked(self, cq: ConsumeQueue, entries: bytes, offset: int, scanned: int,
                     tag_codes, max_count: int, max_bytes: int, lo: int, hi: int,
                     first_fits: bool = False) -> GetResult:
        """The slow path of a pull whose entries include a damaged one: serve
        the records before it, each checked, or deal with it when it is first."""
        good: list[tuple[int, int]] = []
        total = 0
        for i, (phys, size, code) in enumerate(CQ_UNIT.iter_unpack(entries[:scanned * CQ_UNIT.size])):
            if tag_codes is not None and code not in tag_codes:
                continue
            if len(good) == max_count or (total + size > max_bytes and (good or first_fits)):
                if not good:                # the first record did not fit (first_fits)
                    return GetResult(b"", 0, offset, lo, hi, PullStatus.NO_NEW_MESSAGE)
                break
            if not self._entry_matches(phys, size, cq.queue_id, offset + i):
                if not good:
                    return self._bad_entry(cq, offset + i, lo, hi)
                return GetResult(b"".join(bytes(self.commitlog.read(p, n)) for p, n in good),
                                 len(good), offset + i, lo, hi, PullStatus.FOUND)
            good.append((phys, size))
            total += size
        return self._bad_entry(cq, offset, lo, hi)     # not reached: some edge did not match

    def _entry_matches(self, phys: int, size: int, queue_id: int, queue_offset: int) -> bool:
        """Does the record at ``phys`` say what its consume-queue entry says?"""
        seg = self.commitlog.mfq.find(phys)
        if seg is None or phys + size > seg.base + seg.wrote or size < rec.HEADER_SIZE:
            return False
        got = _MATCH.unpack_from(seg.mm, phys - seg.base)
        return got[0] == size and got[2] == queue_id and got[3] == queue_offset and \
            got[1] in (rec.RECORD_MAGIC, rec.RECORD_MAGIC_V2)

    def _bad_entry(self, cq: ConsumeQueue, qoff: int, lo: int, hi: int) -> GetResult:
        """A consume-queue entry that does not match its record: repaired from
        the commit log when the record is found between its neighbours, else
        skipped (logged), so that no consumer is stuck on it."""
        if self._repair_entry(cq, qoff):
            log.error("consume-queue entry %s/%d@%d did not match its record: repaired from the "
                      "commit log", cq.topic, cq.queue_id, qoff)
            return GetResult(b"", 0, qoff, lo, hi, PullStatus.NO_MATCHED_MESSAGE)
        log.error("consume-queue entry %s/%d@%d does not match any record: skipped (the "
                  "message it pointed to cannot be found)", cq.topic, cq.queue_id, qoff)
        return GetResult(b"", 0, qoff + 1, lo, hi, PullStatus.NO_MATCHED_MESSAGE)

    def _repair_entry(self, cq: ConsumeQueue, qoff: int) -> bool:
        """Find the record of entry ``qoff`` between the records of its
        neighbours (walking the commit log record by record) and rewrite it."""
        before = cq.entry(qoff - 1) if qoff > cq.min_offset else None
        after = cq.entry(qoff + 1) if qoff + 1 < cq.max_offset else None
        pos = before[0] + before[1] if before and \
            self._entry_matches(before[0], before[1], cq.queue_id, qoff - 1) else None
        end = after[0] if after and \
            self._entry_matches(after[0], after[1], cq.queue_id, qoff + 1) else None
        if pos is None or end is None:
            return False
        topic_b = cq.topic.encode()
        mfq = self.commitlog.mfq
        while pos < end:
            seg = mfq.find(pos)
            if seg is None:
                return False
            try:
                size = rec.check_record(seg.mm, pos - seg.base, seg.base + seg.wrote - seg.base)
            except rec.RecordError:
                return False
            if size == -1:
                pos = seg.end
                continue
            got = _MATCH.unpack_from(seg.mm, pos - seg.base)
            lt = _TOPIC_LEN.unpack_from(seg.mm, pos - seg.base)[0]
            t = pos - seg.base + rec.HEADER_SIZE
            if got[2] == cq.queue_id and got[3] == qoff and seg.mm[t:t + lt] == topic_b:
                tags = rec.tags_at(seg.mm, pos - seg.base)
                cq.put_entry(qoff, pos, size, rec.tag_hash(tags))
                return True
            pos += size
        return False

    @staticmethod
    def visible_max_offset(cq: ConsumeQueue, visible_end: int) -> int:
        """One past the newest entry whose record ends at or below ``visible_end``."""
        hi = cq.max_offset
        if hi <= cq.min_offset:
            return hi
        e = cq.entry(hi - 1)
        if e is not None and e[0] + e[1] <= visible_end:
            return hi
        lo = cq.min_offset
        while lo < hi:
            mid = (lo + hi) // 2
            e = cq.entry(mid)
            if e is not None and e[0] + e[1] <= visible_end:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def read_record(self, phys: int, visible_end: int | None = None):
        """The stored record that starts at ``phys`` (a message id's offset),
        checked (magic, lengths, CRC); None if no record starts there or it
        ends past ``visible_end``."""
        view = self.commitlog.record_at(phys) if phys >= self.commitlog.min_offset else None
        if view is None:
            return None
        size, magic = rec.SIZE_MAGIC.unpack_from(view, 0)
        if magic not in (rec.RECORD_MAGIC, rec.RECORD_MAGIC_V2) or size < rec.HEADER_SIZE or \
                (visible_end is not None and phys + size > visible_end):
            return None
        try:
            rec.check_record(view, 0, size)
        except rec.RecordError:
            return None
        if _PHYSICAL.unpack_from(view, 0)[0] != phys:     # a body that looks like a record
            return None
        return view

    def query_by_key(self, topic: str, key: str, begin_ms: int, end_ms: int, max_num: int,
                     max_bytes: int, visible_end: int) -> list:
        """Stored records of ``topic`` with ``key`` among their keys, stored
        within ``[begin_ms, end_ms]``, newest first: at most ``max_num`` of
        them, and no more once ``max_bytes`` is reached. Each candidate from
        the index is checked against its record."""
        topic_b, key_b = topic.encode(), key.encode()
        out, seen, total = [], set(), 0
        for phys in self.index.candidates(topic_b, key_b, begin_ms, end_ms):
            if phys in seen:
                continue
            seen.add(phys)
            view = self.read_record(phys, visible_end)
            if view is None:
                continue
            stored, lt, lg, lk = _KEY_LOOKUP.unpack_from(view, 0)
            p = rec.HEADER_SIZE
            if not begin_ms <= stored <= end_ms or view[p:p + lt] != topic_b or \
                    key_b not in bytes(view[p + lt + lg:p + lt + lg + lk]).split():
                continue
            out.append(view)
            total += len(view)
            if len(out) >= max_num or total >= max_bytes:
                break
        return out

    def store_timestamp(self, phys: int) -> int | None:
        view = self.commitlog.read(phys, rec.HEADER_SIZE)
        return rec.STORE_TS.unpack_from(view, 0)[0] if view is not None else None

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """First queue offset whose message was stored at or after ``timestamp_ms``
        (binary search on store time); max offset when none."""
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            return 0
        lo, hi = cq.min_offset, cq.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            e = cq.entry(mid)
            ts = self.store_timestamp(e[0]) if e else None
            if ts is None or ts < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def physical_at(self, topic: str, queue_id: int, queue_offset: int) -> int | None:
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            return None
        e = cq.entry(queue_offset)
        return e[0] if e else None
