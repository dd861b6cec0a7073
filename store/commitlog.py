"""The commit log: every record of a broker, appended in order
(RocketMQ's ``CommitLog``).

A record never spans two segments: when a batch's next record does not fit,
the rest of the segment is filled with a blank record and the record starts
the next segment. Only the broker's single serving thread appends; flush
threads read positions and fsync.
"""

from __future__ import annotations

import itertools

from duomq.format import record as rec
from duomq.store.mapped_file_queue import MappedFileQueue


class CommitLog:
    def __init__(self, directory: str, segment_size: int):
        # Segments are fallocated, not zero-filled: measured here, zero-filling
        # gained ~1% on SYNC_FLUSH sends but doubled the bytes a catching-up
        # slave writes and stalled the serving thread at every segment roll.
        self.mfq = MappedFileQueue(directory, segment_size)
        self.segment_size = segment_size

    def load(self) -> None:
        self.mfq.load()

    @property
    def min_offset(self) -> int:
        return self.mfq.min_offset

    @property
    def max_offset(self) -> int:
        """One past the last written byte."""
        return self.mfq.write_offset()

    def open_room(self, size: int):
        """The open segment when ``size`` more bytes fit in it (a write's
        common case: one ``pwrite``, no plan), else None."""
        segs = self.mfq.segments
        if segs and segs[-1].wrote + size <= segs[-1].size:
            return segs[-1]
        return None

    @staticmethod
    def append_to(seg, buf) -> None:
        """Write ``buf`` at the end of ``seg`` (``open_room``'s), published
        once the write returned."""
        seg.write(buf, seg.wrote)
        seg.wrote += len(buf)

    def place(self, sizes: list[int]) -> tuple[list[int], list[tuple[int, int, int]]]:
        """Plan where a batch of records of ``sizes`` lands.

        Returns the physical offset of each record and a write plan of
        ``(segment_base, start_index, end_index)`` chunks: records
        ``[start_index, end_index)`` go into the segment at ``segment_base``;
        every chunk but the last seals its segment. Pure: nothing is written.
        """
        seg_size = self.segment_size
        pos = self.max_offset
        base = pos - pos % seg_size
        if pos + sum(sizes) <= base + seg_size:   # the common case: it all fits
            offsets = list(itertools.accumulate(sizes[:-1], initial=pos))
            return offsets, [(base, 0, len(sizes))]
        offsets = []
        plan = []
        start = 0
        for i, size in enumerate(sizes):
            if pos + size > base + seg_size:
                plan.append((base, start, i))
                base += seg_size
                pos = base
                start = i
            offsets.append(pos)
            pos += size
        plan.append((base, start, len(sizes)))
        return offsets, plan

    def write(self, buf, bounds: list[int], plan) -> None:
        """Write a planned batch: one pwrite per segment touched.
        ``bounds[i]`` is record i's start in ``buf``, ``bounds[-1]`` its end."""
        view = memoryview(buf)
        last = len(plan) - 1
        # every segment first: a full disk fails here, before a byte is written
        segs = [self.mfq.find(base) or self.mfq.create(base) for base, _i, _j in plan]
        for k, ((_base, i, j), seg) in enumerate(zip(plan, segs, strict=True)):
            if i < j:
                chunk = view[bounds[i]:bounds[j]]
                seg.write(chunk, seg.wrote)
                seg.wrote += len(chunk)
            if k < last:
                self._seal(seg)

    @staticmethod
    def _seal(seg) -> None:
        """Fill the rest of a segment with a blank record (when 8 bytes fit)."""
        left = seg.size - seg.wrote
        if left >= rec.BLANK.size:
            seg.write(rec.BLANK.pack(left, rec.BLANK_MAGIC), seg.wrote)
        seg.wrote = seg.size

    def read(self, offset: int, size: int):
        """A memoryview of ``size`` bytes at ``offset`` (within one segment), or None."""
        seg = self.mfq.find(offset)
        if seg is None:
            return None
        rel = offset - seg.base
        if rel + size > seg.wrote:
            return None
        return memoryview(seg.mm)[rel:rel + size]

    def record_at(self, offset: int):
        """A memoryview of the record at ``offset`` as it lies, its length
        read from its first field (unchecked: ``StoreReads.read_record``
        checks it), or None where no whole one is written."""
        seg = self.mfq.find(offset)
        if seg is None:
            return None
        rel, wrote = offset - seg.base, seg.wrote
        if rel + rec.SIZE_MAGIC.size > wrote:
            return None
        view = memoryview(seg.mm)
        size = rec.SIZE_MAGIC.unpack_from(view, rel)[0]
        if size < rec.SIZE_MAGIC.size or rel + size > wrote:
            return None
        return view[rel:rel + size]

    def flush(self) -> int:
        return self.mfq.flush()

    def close(self) -> None:
        self.mfq.close()
