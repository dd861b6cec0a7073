"""The key index of a store (RocketMQ's ``IndexService``): message keys to
commit-log offsets, in index files that each hold ``max_entries`` entries.

A record's keys (space-separated) are indexed as ``topic#key`` when it is
stored (master) or dispatched (slave), and again by recovery for records past
the checkpoint (those already indexed are skipped). Lookups walk the files
newest first; the store checks each candidate against the record itself, so
a hash collision or an entry whose record was cut away never comes back.
Files are named by the commit-log offset of their first entry.
"""

from __future__ import annotations

import logging
import os
import threading
import zlib

from duomq.store.index_file import IndexFile

log = logging.getLogger(__name__)


def key_hash(topic: bytes, key: bytes) -> int:
    """The hash of ``topic#key``."""
    return zlib.crc32(key, topic_seed(topic))


def topic_seed(topic: bytes) -> int:
    return zlib.crc32(b"#", zlib.crc32(topic))


class KeyIndex:
    def __init__(self, directory: str, slot_count: int, max_entries: int):
        self.dir = directory
        self.slot_count = slot_count
        self.max_entries = max_entries
        self.files: list[IndexFile] = []
        # the list and the files' lives: the writer, lookups, retention and
        # truncation vs. the checkpoint thread's flush
        self._lock = threading.Lock()
        self._dirty: set[IndexFile] = set()
        self._failed = False
        os.makedirs(directory, exist_ok=True)

    def load(self) -> None:
        for name in sorted(n for n in os.listdir(self.dir) if n.isdigit() and len(n) == 20):
            f = IndexFile(os.path.join(self.dir, name), self.slot_count, self.max_entries)
            if f.count:
                self.files.append(f)
            else:                               # created, never written
                f.destroy()

    @property
    def last_phys(self) -> int:
        """Commit-log offset of the newest indexed record, -1 if none."""
        for f in reversed(self.files):
            if f.count:
                return f.end_phys
        return -1

    @property
    def entries(self) -> int:
        return sum(f.count for f in self.files)

    # ------------------------------------------------------------ write
    def add(self, records) -> None:
        """Index ``(topic, keys, phys, store_ts_ms)`` records (bytes texts), in
        commit-log order. Records at or below ``last_phys`` are already here.
        A write that fails (disk full) is logged and loses only index entries:
        the messages are stored."""
        last = self.last_phys
        hashes, offsets, times = [], [], []
        crc32 = zlib.crc32
        seeds: dict[bytes, int] = {}
        for topic, keys, phys, ts in records:
            if phys <= last:
                continue
            seed = seeds.get(topic)
            if seed is None:
                seed = seeds[topic] = topic_seed(topic)
            for key in keys.split():
                hashes.append(crc32(key, seed))
                offsets.append(phys)
                times.append(ts)
        self._append(hashes, offsets, times)

    def _append(self, hashes: list[int], offsets: list[int], times: list[int]) -> None:
        try:
            while hashes:
                f = self.files[-1] if self.files and not self.files[-1].full else \
                    self._new(offsets[0])
                n = f.room()
                f.add(hashes[:n], offsets[:n], times[:n])
                self._dirty.add(f)
                hashes, offsets, times = hashes[n:], offsets[n:], times[n:]
        except OSError as exc:
            if not self._failed:
                log.error("the key index could not be written (%s): messages are stored, "
                          "lookups by key will miss them", exc)
            self._failed = True

    def add_batch(self, topic: bytes, keys: list[bytes], offsets: list[int], ts: int) -> None:
        """``add`` for one stored batch (one topic, one store time): the
        master's hot path, one hash per record when each has a single key."""
        if offsets[0] <= self.last_phys or \
                len(b" ".join(keys).split()) != len(keys):   # several keys in some record
            self.add([(topic, k, p, ts) for k, p in zip(keys, offsets, strict=True)])
            return
        seed, crc32 = topic_seed(topic), zlib.crc32
        self._append([crc32(k, seed) for k in keys], offsets, [ts] * len(keys))

    def _new(self, phys: int) -> IndexFile:
        f = IndexFile(os.path.join(self.dir, f"{phys:020d}"), self.slot_count, self.max_entries)
        with self._lock:
            self.files.append(f)
        return f

    # ------------------------------------------------------------ read
    def candidates(self, topic: bytes, key: bytes, begin_ms: int, end_ms: int):
        """Commit-log offsets that may hold ``key`` in ``topic``, stored within
        ``[begin_ms, end_ms]``, newest first."""
        h = key_hash(topic, key)
        with self._lock:
            files = self.files[::-1]
        for f in files:
            if f.count and f.end_ts >= begin_ms and f.begin_ts <= end_ms + 999:
                yield from f.chain(h, begin_ms, end_ms)

    # ------------------------------------------------------------ shrink
    def truncate(self, phys: int) -> int:
        """Forget records at or past ``phys`` (a slave's log was cut there)."""
        dropped = 0
        with self._lock:
            while self.files and self.files[-1].begin_phys >= phys:
                f = self.files.pop()
                dropped += f.count
                self._dirty.discard(f)
                f.destroy()
            if self.files:
                dropped += self.files[-1].truncate(phys)
                self._dirty.add(self.files[-1])
        return dropped

    def delete_below(self, min_phys: int) -> int:
        """Delete files whose every record is below ``min_phys`` (retention
        removed them), never the newest."""
        with self._lock:
            n = 0
            while n < len(self.files) - 1 and self.files[n].end_phys < min_phys:
                n += 1
            gone, self.files = self.files[:n], self.files[n:]
            for f in gone:
                self._dirty.discard(f)
                f.destroy()
        return len(gone)

    def flush(self) -> None:
        with self._lock:
            for f in list(self._dirty):
                self._dirty.discard(f)
                f.flush()

    def close(self) -> None:
        for f in self.files:
            f.close()
        self.files = []
