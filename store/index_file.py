"""One key-index file (RocketMQ's ``IndexFile``): a hash table of message keys
whose buckets are chains of entries, newest first.

Layout, little-endian::

    header   begin_ts_ms q, end_ts_ms q, begin_phys q, end_phys q, count I, pad I   (40 B)
    slots    slot_count x I: the number of the newest entry in the slot (0: empty)
    entries  max_entries x (key_hash I, phys q, ts_diff_s i, prev I)             (20 B each)

Entries are numbered from 1 in the order they were added, which is commit-log
order, so a file covers ``[begin_phys, end_phys]`` and each entry's ``prev``
is an older entry of its slot. ``ts_diff_s`` is the record's store time in
seconds after ``begin_ts_ms``. The header and slots are reserved on disk
when the file is created (fallocate) and written through a shared ``mmap``;
the entries part is sparse, takes disk as it fills and is written with one
``os.pwrite`` per batch, so a full disk is an ``OSError``, never a SIGBUS.
"""

from __future__ import annotations

import mmap
import os
import struct

import numpy as np

from duomq.store.segment import preallocate, pwrite_all

HEADER = struct.Struct("<qqqqII")
ENTRY = struct.Struct("<IqiI")
SLOT = struct.Struct("<I")
HEADER_SIZE = HEADER.size     # 40
ENTRY_SIZE = ENTRY.size       # 20
ENTRIES = np.dtype([("hash", "<u4"), ("phys", "<i8"), ("ts_diff_s", "<i4"), ("prev", "<u4")])
assert ENTRIES.itemsize == ENTRY_SIZE


def file_size(slot_count: int, max_entries: int) -> int:
    return HEADER_SIZE + slot_count * SLOT.size + max_entries * ENTRY_SIZE


class IndexFile:
    __slots__ = ("path", "slot_count", "max_entries", "fd", "mm", "slots", "begin_ts", "end_ts",
                 "begin_phys", "end_phys", "count", "_entries_at")

    def __init__(self, path: str, slot_count: int, max_entries: int):
        self.path = path
        self.slot_count = slot_count
        self.max_entries = max_entries
        size = file_size(slot_count, max_entries)
        created = not os.path.exists(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            have = os.fstat(fd).st_size
            if have == 0:
                os.ftruncate(fd, size)           # sparse: no disk until written ...
            elif have != size:
                raise ValueError(f"index file {path} has size {have}, expected {size}: were "
                                 f"index_slot_count or index_max_entries changed?")
            # ... but the header and slots, written through the mapping, always
            # (at every open: a file left sparse by a full disk is completed or refused)
            preallocate(fd, path, HEADER_SIZE + slot_count * SLOT.size)
            self.mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            if created:
                os.unlink(path)
            raise
        self.fd = fd
        self._entries_at = HEADER_SIZE + slot_count * SLOT.size
        self.slots = np.frombuffer(self.mm, "<u4", slot_count, HEADER_SIZE)   # a view: writes
                                                                             # go to the file
        (self.begin_ts, self.end_ts, self.begin_phys, self.end_phys, self.count,
         _) = HEADER.unpack_from(self.mm, 0)
        if self.count > max_entries:
            self.close()
            raise ValueError(f"index file {path} claims {self.count} entries, over "
                             f"{max_entries}")
        if self.count == 0:
            self.begin_phys = self.end_phys = -1

    # ------------------------------------------------------------ write
    @property
    def full(self) -> bool:
        return self.count >= self.max_entries

    def room(self) -> int:
        return self.max_entries - self.count

    def add(self, hashes: list[int], phys: list[int], ts: list[int]) -> None:
        """Append entries (key hash, commit-log offset, store time in ms), in
        commit-log order, at most ``room()`` of them: one vector pass, one
        write of the entries, then the slots point at them."""
        k = len(hashes)
        if not k:
            return
        if self.count == 0:
            self.begin_ts, self.begin_phys = ts[0], phys[0]
        first = self.count
        h = np.array(hashes, np.uint32)
        slot = (h % self.slot_count).astype(np.intp)
        nums = np.arange(first + 1, first + k + 1, dtype=np.uint32)
        # each entry's prev: the entry before it in its slot, from this batch
        # (a stable sort keeps batch order within a slot) or the slot's head
        order = np.argsort(slot, kind="stable")
        by_slot, nums_by_slot = slot[order], nums[order]
        starts = np.ones(k, bool)
        starts[1:] = by_slot[1:] != by_slot[:-1]
        prev = np.empty(k, np.uint32)
        prev[1:] = nums_by_slot[:-1]
        prev[starts] = self.slots[by_slot[starts]]
        e = np.empty(k, ENTRIES)
        e["hash"] = h
        e["phys"] = phys
        e["ts_diff_s"] = np.maximum(0, (np.array(ts, np.int64) - self.begin_ts) // 1000)
        e["prev"][order] = prev
        pwrite_all(self.fd, e.tobytes(), self._entries_at + first * ENTRY_SIZE)
        ends = np.ones(k, bool)                          # the newest entry of each slot
        ends[:-1] = starts[1:]
        self.slots[by_slot[ends]] = nums_by_slot[ends]   # the entries are in: point at them
        self.count = first + k
        self.end_phys, self.end_ts = phys[-1], max(self.end_ts, ts[-1])
        self._write_header()

    def _write_header(self) -> None:
        HEADER.pack_into(self.mm, 0, self.begin_ts, self.end_ts, self.begin_phys,
                         self.end_phys, self.count, 0)

    # ------------------------------------------------------------ read
    def entry(self, n: int) -> tuple[int, int, int, int]:
        """Entry number ``n`` (1-based): key hash, phys, store time (ms, to the
        second below), prev."""
        key_hash, phys, diff, prev = ENTRY.unpack_from(self.mm, self._entries_at
                                                       + (n - 1) * ENTRY_SIZE)
        return key_hash, phys, self.begin_ts + diff * 1000, prev

    def chain(self, key_hash: int, begin_ms: int, end_ms: int):
        """Commit-log offsets of the entries with ``key_hash`` stored within
        ``[begin_ms, end_ms]``, newest first. Stops at the first entry stored
        more than a second before ``begin_ms``."""
        n = SLOT.unpack_from(self.mm, HEADER_SIZE + 4 * (key_hash % self.slot_count))[0]
        count = self.count
        while 0 < n <= count:
            h, phys, ts, prev = self.entry(n)
            if ts + 999 < begin_ms:
                return
            if h == key_hash and ts <= end_ms:
                yield phys
            if prev >= n:                        # chains only go back: a damaged entry
                return
            n = prev

    # ------------------------------------------------------------ shrink
    def truncate(self, phys: int) -> int:
        """Drop the entries of records at or past ``phys`` (the commit log was
        cut there); returns how many. Slots whose chains started past the cut
        are pointed at their newest surviving entry."""
        lo, hi = 0, self.count                       # entries are in commit-log order
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entry(mid + 1)[1] < phys:
                lo = mid + 1
            else:
                hi = mid
        keep, dropped = lo, self.count - lo
        if not dropped:
            return 0
        for slot in np.flatnonzero(self.slots > keep):
            head = int(self.slots[slot])
            while head > keep:
                head = self.entry(head)[3]
            self.slots[slot] = head
        self.count = keep                            # entries past the count are never read
        if keep:
            self.end_phys = self.entry(keep)[1]
            self.end_ts = max(self.entry(i)[2] for i in range(max(1, keep - 64), keep + 1))
        else:
            self.begin_ts = self.end_ts = 0
            self.begin_phys = self.end_phys = -1
        self._write_header()
        return dropped

    def flush(self) -> None:
        self.mm.flush(0, self._entries_at)           # header and slots (msync) ...
        os.fdatasync(self.fd)                        # ... and the entries

    def close(self) -> None:
        del self.slots                               # the view holds the mapping
        try:
            self.mm.close()
        except (BufferError, ValueError):
            pass
        os.close(self.fd)

    def destroy(self) -> None:
        self.close()
        os.unlink(self.path)
