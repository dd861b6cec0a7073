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

import array
import mmap
import os
import struct
import sys

HEADER = struct.Struct("<qqqqII")
ENTRY = struct.Struct("<IqiI")
SLOT = struct.Struct("<I")
HEADER_SIZE = HEADER.size     # 40
ENTRY_SIZE = ENTRY.size       # 20


def file_size(slot_count: int, max_entries: int) -> int:
    return HEADER_SIZE + slot_count * SLOT.size + max_entries * ENTRY_SIZE


class IndexFile:
    __slots__ = ("path", "slot_count", "max_entries", "fd", "mm", "begin_ts", "end_ts",
                 "begin_phys", "end_phys", "count", "_entries_at")

    def __init__(self, path: str, slot_count: int, max_entries: int):
        self.path = path
        self.slot_count = slot_count
        self.max_entries = max_entries
        size = file_size(slot_count, max_entries)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            have = os.fstat(fd).st_size
            if have == 0:
                os.ftruncate(fd, size)           # sparse: no disk until written ...
                os.posix_fallocate(fd, 0, HEADER_SIZE + slot_count * SLOT.size)  # ... but these
            elif have != size:
                raise ValueError(f"index file {path} has size {have}, expected {size}: were "
                                 f"index_slot_count or index_max_entries changed?")
            self.mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self._entries_at = HEADER_SIZE + slot_count * SLOT.size
        (self.begin_ts, self.end_ts, self.begin_phys, self.end_phys, self.count,
         _) = HEADER.unpack_from(self.mm, 0)
        if self.count > max_entries:
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

    def add(self, items) -> None:
        """Append entries ``(key_hash, phys, store_ts_ms)``, in commit-log order,
        at most ``room()`` of them."""
        if not items:
            return
        if self.count == 0:
            self.begin_ts, self.begin_phys = items[0][2], items[0][1]
        mm, base_ts = self.mm, self.begin_ts
        first = n = self.count
        parts = []
        slot_count = self.slot_count
        unpack_slot, pack = SLOT.unpack_from, ENTRY.pack
        heads = {}                                   # slot -> newest entry of this batch
        for key_hash, phys, ts in items:
            n += 1
            at = HEADER_SIZE + 4 * (key_hash % slot_count)
            prev = heads.get(at)
            if prev is None:
                prev = unpack_slot(mm, at)[0]
            parts.append(pack(key_hash, phys, max(0, (ts - base_ts) // 1000), prev))
            heads[at] = n
        self._pwrite(b"".join(parts), self._entries_at + first * ENTRY_SIZE)
        pack_slot = SLOT.pack_into                   # the entries are in: point the slots at them
        for at, head in heads.items():
            pack_slot(mm, at, head)
        self.count = n
        self.end_phys, self.end_ts = items[-1][1], max(self.end_ts, items[-1][2])
        self._write_header()

    def _write_header(self) -> None:
        HEADER.pack_into(self.mm, 0, self.begin_ts, self.end_ts, self.begin_phys,
                         self.end_phys, self.count, 0)

    def _pwrite(self, data, pos: int) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, pos)
            view = view[n:]
            pos += n

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
        slots = array.array("I", self.mm[HEADER_SIZE:self._entries_at])
        if sys.byteorder == "big":
            slots.byteswap()
        for slot, head in enumerate(slots):
            if head > keep:
                while head > keep:
                    head = self.entry(head)[3]
                SLOT.pack_into(self.mm, HEADER_SIZE + 4 * slot, head)
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
        try:
            self.mm.close()
        except (BufferError, ValueError):
            pass
        os.close(self.fd)

    def destroy(self) -> None:
        self.close()
        os.unlink(self.path)
