"""A consume queue: per topic-queue, fixed 20-byte entries pointing into the
commit log (RocketMQ's ``ConsumeQueue``). A queue offset is an entry's index.

Entry layout, big-endian: commit-log offset (8), record size (4), tag hash (8).
Files are named by the byte offset of their first entry (20-digit). An
all-zero entry is empty (no record has size 0).
"""

from __future__ import annotations

import os
import struct

from duomq.common.names import validate_queue
from duomq.store.mapped_file_queue import MappedFileQueue

CQ_UNIT = struct.Struct(">qiq")
UNIT = CQ_UNIT.size  # 20
_structs: dict[int, struct.Struct] = {}


def pack_entries(flat: list[int], n: int) -> bytes:
    """Pack n entries from a flat [phys, size, hash, phys, size, hash, ...] list."""
    s = _structs.get(n)
    if s is None:
        s = _structs[n] = struct.Struct(">" + "qiq" * n)
    return s.pack(*flat)


class ConsumeQueue:
    def __init__(self, root: str, topic: str, queue_id: int, entries_per_segment: int):
        validate_queue(topic, queue_id)     # they become a path: never outside ``root``
        self.topic = topic
        self.queue_id = queue_id
        # read with pread: one file descriptor per segment, not two (segment.py)
        self.mfq = MappedFileQueue(os.path.join(root, topic, str(queue_id)),
                                   entries_per_segment * UNIT, mapped=False)
        self.min_offset = 0      # first readable entry (after retention)
        self.max_offset = 0      # one past the last entry
        # bytes of entries written (by the thread that dispatches) and of those
        # flushed (by the checkpointing thread): one writer each, no lost update;
        # and the commit-log offset no unflushed entry's record is below
        self.written = 0
        self.flushed_written = 0
        self.dirty_since = -1
        # the newest entry as appended, so that asking for it (every pull and
        # every held pull's check asks what is visible) reads no file
        self._tail_at = -1
        self._tail: tuple[int, int, int] = (0, 0, 0)

    # ------------------------------------------------------------ load
    def load(self) -> None:
        self.mfq.load()
        segs = self.mfq.segments
        if not segs:
            return
        last = segs[-1]
        data = last.read(0, last.size)
        used = len(data.rstrip(b"\0"))
        used = -(-used // UNIT) * UNIT
        last.wrote = last.flushed = used
        self.max_offset = (last.base + used) // UNIT
        self.min_offset = segs[0].base // UNIT

    # ------------------------------------------------------------ write
    def append(self, data: bytes, queue_offset: int) -> None:
        """Append entries whose first index is ``queue_offset`` (== max_offset)."""
        byte_pos = queue_offset * UNIT
        segs = self.mfq.segments
        last = segs[-1] if segs else None
        if last is not None and last.base <= byte_pos and byte_pos + len(data) <= last.end \
                and self.written != self.flushed_written:
            # the common case: into the last segment, after entries not yet flushed
            rel = byte_pos - last.base
            last.write(data, rel)
            if rel + len(data) > last.wrote:
                last.wrote = rel + len(data)
            self.written += len(data)
        else:
            self._write(data, byte_pos)
        self.max_offset = queue_offset + len(data) // UNIT
        if data:
            self._tail_at = self.max_offset - 1
            self._tail = CQ_UNIT.unpack_from(data, len(data) - UNIT)

    def reserve(self, queue_offset: int, count: int) -> None:
        """Create the segments that entries ``[queue_offset, +count)`` need,
        before the records they point to are written: on a full disk the
        write fails with nothing stored, never with records and no entries."""
        mfq = self.mfq
        last_byte = (queue_offset + count) * UNIT - 1
        while mfq.find(last_byte) is None:
            last = mfq.last()
            if last is None:
                first = queue_offset * UNIT
                mfq.create(first - first % mfq.segment_size)
            elif last.end <= last_byte:
                mfq.create(last.end)
            else:
                break                        # below the first segment: nothing to create

    def put_entry(self, queue_offset: int, phys: int, size: int, tag_hash: int) -> None:
        """Write one entry in place (recovery); extends max_offset if needed."""
        self._tail_at = -1
        self._write(CQ_UNIT.pack(phys, size, tag_hash), queue_offset * UNIT)
        if queue_offset + 1 > self.max_offset:
            self.max_offset = queue_offset + 1

    def _write(self, data: bytes, byte_pos: int) -> None:
        if self.written == self.flushed_written:     # all durable so far: this is the first
            self.dirty_since = CQ_UNIT.unpack_from(data, 0)[0]
        self.written += len(data)
        view = memoryview(data)
        while view:
            seg = self.mfq.ensure(byte_pos)
            rel = byte_pos - seg.base
            n = min(len(view), seg.size - rel)
            seg.write(view[:n], rel)
            seg.wrote = max(seg.wrote, rel + n)
            view = view[n:]
            byte_pos += n

    # ------------------------------------------------------------ read
    def read(self, queue_offset: int, count: int):
        """Up to ``count`` entries from ``queue_offset`` as bytes (may stop early
        at a segment end); empty when there are none."""
        count = min(count, self.max_offset - queue_offset)
        if count <= 0 or queue_offset < self.min_offset:
            return b""
        byte_pos = queue_offset * UNIT
        seg = self.mfq.find(byte_pos)
        if seg is None:
            return b""
        rel = byte_pos - seg.base
        n = min(count * UNIT, seg.wrote - rel)
        return seg.read(rel, n)

    def entry(self, queue_offset: int):
        """(phys, size, tag_hash) at ``queue_offset``, or None."""
        if queue_offset == self._tail_at and self.min_offset <= queue_offset < self.max_offset:
            return self._tail
        raw = self.read(queue_offset, 1)
        return CQ_UNIT.unpack(raw) if len(raw) == UNIT else None

    def last_below(self, phys_limit: int) -> tuple[int, int] | None:
        """(phys, size) of the last entry whose record ends at or below
        ``phys_limit`` (entries rise with the commit log), or None. Recovery
        uses it to check that a checkpoint is a record boundary."""
        lo, hi = self.min_offset, self.max_offset      # answer in [lo - 1, hi)
        while lo < hi:
            mid = (lo + hi) // 2
            e = self.entry(mid)
            if e is not None and e[1] and e[0] + e[1] > phys_limit:
                hi = mid
            else:
                lo = mid + 1
        for qoff in range(lo - 1, max(self.min_offset, lo - 64) - 1, -1):   # skip empty ones
            e = self.entry(qoff)
            if e is not None and e[1]:
                return e[0], e[1]
        return None

    def first_after(self, phys_limit: int) -> int | None:
        """The commit-log offset of the first entry whose record starts past
        ``phys_limit``, or None (recovery: where valid data resumes after damage)."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            e = self.entry(mid)
            if e is not None and e[1] and e[0] > phys_limit:
                hi = mid
            else:
                lo = mid + 1
        for qoff in range(lo, min(self.max_offset, lo + 64)):          # skip empty ones
            e = self.entry(qoff)
            if e is not None and e[1] and e[0] > phys_limit:
                return int(e[0])
        return None

    # ------------------------------------------------------------ shrink
    def truncate_beyond(self, phys_end: int) -> int:
        """Drop entries whose record ends past ``phys_end``; return how many."""
        self._tail_at = -1
        dropped = 0
        while self.max_offset > self.min_offset:
            e = self.entry(self.max_offset - 1)
            if e is not None and e[1] and e[0] + e[1] <= phys_end:   # size 0: empty entry
                break
            self.max_offset -= 1
            dropped += 1
        if dropped:
            self.mfq.truncate(self.max_offset * UNIT)
        return dropped

    def correct_min_offset(self, min_phys: int) -> None:
        """Delete segments wholly below ``min_phys`` and move min_offset to the
        first entry whose record still exists."""
        segs = self.mfq.segments
        drop = 0
        for seg in segs[:-1]:
            last_entry = seg.read(seg.size - UNIT, UNIT)
            phys, size, _ = CQ_UNIT.unpack(last_entry)
            if phys + size <= min_phys:
                drop += 1
            else:
                break
        if drop:
            self.mfq.delete_first(drop)
        lo = max(self.min_offset, self.mfq.min_offset // UNIT)
        hi = self.max_offset
        while lo < hi:  # first entry with phys >= min_phys
            mid = (lo + hi) // 2
            e = self.entry(mid)
            if e is not None and e[0] >= min_phys:
                hi = mid
            else:
                lo = mid + 1
        self.min_offset = lo

    @property
    def unflushed(self) -> int:
        """Bytes of entries written since the last flush."""
        return self.written - self.flushed_written

    def flush(self, since: int = -1) -> None:
        """fdatasync what was written. Entries written meanwhile (by the
        serving thread, while this one waits on the disk) stay counted as
        unflushed, from ``since``: a commit-log offset no record of theirs
        is below (the checkpointing thread passes where dispatch stood
        before it began)."""
        w = self.written
        self.mfq.flush()
        self.flushed_written = w
        if self.written != w:
            self.dirty_since = since

    def close(self) -> None:
        self.mfq.close()
