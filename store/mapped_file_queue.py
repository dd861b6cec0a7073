"""A directory of segments named by their 20-digit base offset
(RocketMQ's ``MappedFileQueue``). Segments are contiguous: each starts where
the one before ends."""

from __future__ import annotations

import bisect
import logging
import os
import threading

from duomq.store.segment import Segment

log = logging.getLogger(__name__)


def segment_name(base: int) -> str:
    return f"{base:020d}"


class MappedFileQueue:
    def __init__(self, directory: str, segment_size: int, mapped: bool = True):
        self.dir = directory
        self.segment_size = segment_size
        self.mapped = mapped            # segments read through a mapping (Segment.open)
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        self._lock = threading.Lock()  # guards the list against retention and rolls
        self._flush_lock = threading.Lock()
        os.makedirs(directory, exist_ok=True)

    def load(self) -> None:
        """Open the existing segments (all marked fully written until recovery)."""
        names = sorted(n for n in os.listdir(self.dir) if n.isdigit() and len(n) == 20)
        for name in names:
            base = int(name)
            path = os.path.join(self.dir, name)
            if os.path.getsize(path) == 0:
                # created and killed before its preallocation: no byte was ever
                # written to it (a write needs the space first), so it goes
                log.warning("segment %s is empty (a crash while it was made): removed", path)
                os.unlink(path)
                continue
            if os.path.getsize(path) != self.segment_size:
                raise ValueError(
                    f"segment {path} has size {os.path.getsize(path)}, expected "
                    f"{self.segment_size}: was segment_size_bytes changed?")
            seg = Segment.open(path, base, self.segment_size, self.mapped)
            seg.wrote = seg.flushed = self.segment_size
            self.segments.append(seg)
        self._bases = [s.base for s in self.segments]
        for prev, nxt in zip(self.segments, self.segments[1:], strict=False):
            if prev.end != nxt.base:
                raise ValueError(f"segments are not contiguous: {prev.path} then {nxt.path}")

    # ------------------------------------------------------------ lookup
    @property
    def min_offset(self) -> int:
        return self.segments[0].base if self.segments else 0

    def last(self) -> Segment | None:
        return self.segments[-1] if self.segments else None

    def find(self, offset: int) -> Segment | None:
        segs = self.segments
        i = bisect.bisect_right(self._bases, offset) - 1
        if 0 <= i < len(segs) and segs[i].base <= offset < segs[i].end:
            return segs[i]
        return None

    def write_offset(self) -> int:
        segs = self.segments           # (``last`` inline: asked several times a send)
        if not segs:
            return 0
        last = segs[-1]
        return last.base + last.wrote

    # ------------------------------------------------------------ growth
    def create(self, base: int) -> Segment:
        seg = Segment.open(os.path.join(self.dir, segment_name(base)), base, self.segment_size,
                           self.mapped)
        with self._lock:
            self.segments.append(seg)
            self._bases.append(base)
        return seg

    def ensure(self, offset: int) -> Segment:
        """The segment holding ``offset``, creating segments up to it."""
        seg = self.find(offset)
        if seg is not None:
            return seg
        if not self.segments:
            base = offset - offset % self.segment_size
            return self.create(base)
        last = self.segments[-1]
        while last.end <= offset:
            nxt = self.create(last.end)      # may fail (a full disk): ``last`` is unchanged
            last.wrote = last.size
            last = nxt
        return last

    # ------------------------------------------------------------ shrink
    def truncate(self, offset: int) -> None:
        """Drop everything at and after ``offset``: zero the tail of its segment
        and delete later segments."""
        with self._lock:
            keep = [s for s in self.segments if s.base < offset or (s.base == offset == 0)]
            drop = [s for s in self.segments if s not in keep]
            self.segments = keep
            self._bases = [s.base for s in keep]
        for s in drop:
            s.destroy()
        seg = self.find(offset)
        if seg is not None:
            rel = offset - seg.base
            seg.zero_from(rel)
            seg.wrote = seg.flushed = rel

    def delete_first(self, count: int) -> list[Segment]:
        with self._lock:
            gone, self.segments = self.segments[:count], self.segments[count:]
            self._bases = [s.base for s in self.segments]
        for s in gone:
            s.destroy()
        return gone

    def flush(self) -> int:
        """fdatasync every segment with unflushed data; return the flushed offset."""
        with self._flush_lock:
            for seg in list(self.segments):
                if seg.wrote > seg.flushed:
                    seg.flush()
        return self.flushed_offset()

    def try_flush(self) -> int | None:
        """``flush`` unless another thread is flushing now (None then)."""
        if not self._flush_lock.acquire(blocking=False):
            return None
        try:
            for seg in list(self.segments):
                if seg.wrote > seg.flushed:
                    seg.flush()
        finally:
            self._flush_lock.release()
        return self.flushed_offset()

    def flushed_offset(self) -> int:
        """Offset below which everything is on disk."""
        flushed = self.min_offset
        for seg in list(self.segments):
            if seg.flushed < seg.wrote or seg.flushed < seg.size:
                return seg.base + seg.flushed
            flushed = seg.end
        return flushed

    def unflushed_bytes(self) -> int:
        return sum(s.wrote - s.flushed for s in list(self.segments[-2:]))

    def release_mappings(self) -> None:
        """Drop this process's page-table entries of every segment (the page
        cache keeps the pages): see ``Segment.release_mapping``."""
        for seg in list(self.segments):
            seg.release_mapping()

    def close(self) -> None:
        for s in self.segments:
            s.close()
        self.segments = []
        self._bases = []
