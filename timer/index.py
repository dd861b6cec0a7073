"""The timer index: where each pending timer message lies in the commit log,
found by when it comes due (RIP-43's timer log and timer wheel, on disk).

- The timer log (``timerlog``): 32-byte entries, appended in the order
  timers are indexed: its delivery time (ms, 8 bytes), the record's
  commit-log offset (8) and size (4), its kind (4: a timer, or the recall of
  one), and the entry before it in the same slot (8; -1: none).
- The wheel (``wheel``): a ring of ``slots`` slots of ``slot_ms`` each; a
  time's slot is ``(t // slot_ms) % slots``, holding the slot's start (8; a
  start of another turn of the ring: the slot is empty), its last entry
  (8) and how many it has (8). A slot's entries are read back along the
  chain from the last.
- The checkpoint (``checkpoint``): how far indexing went (``position``, in
  whatever the caller indexes, a queue offset of the timer topic), the timer
  log's length then, and the slots changed since the checkpoint before (a
  journal of them, so that the wheel file is only ever written with what a
  checkpoint names). After a crash the journal is applied again, the log cut
  back to its length, and indexing resumes at ``position``: no timer indexed
  twice, none lost.

Memory: the slots changed since the last checkpoint; nothing per pending
timer. Pure I/O on three files; no thread of its own."""

from __future__ import annotations

import mmap
import os
import struct
import zlib
from dataclasses import dataclass

from duomq.common.atomic_file import write_atomically

TIMER, RECALL = 1, 2                 # an entry's kind
ENTRY = struct.Struct(">qqiiq")      # deliver_at, phys, size, kind, prev
SLOT = struct.Struct(">qqq")         # start, last entry, count
_HEAD = struct.Struct(">qqi")        # journal: position, timer log length, slots changed
_CHANGE = struct.Struct(">qqqq")     # journal: slot index, start, last, count
EMPTY = -1


@dataclass(frozen=True)
class TimerEntry:
    deliver_at: int                  # epoch ms
    phys: int                        # the timer record's commit-log offset
    size: int
    kind: int                        # TIMER or RECALL (of the timer at phys)


class TimerIndexError(Exception):
    """The index's files cannot be used (a wheel of another shape)."""


class TimerIndex:
    """The index in ``directory`` (made if absent), its wheel ``slots`` of
    ``slot_ms``: a span of ``slots * slot_ms`` ms ahead of the earliest
    pending timer (a timer further ahead shares a slot with earlier ones:
    ``slot_start`` tells them apart by time)."""

    def __init__(self, directory: str, slot_ms: int = 1000, slots: int = 7 * 86400 + 3600):
        if slot_ms <= 0 or slots <= 0:
            raise ValueError("slot_ms and slots must be positive")
        os.makedirs(directory, exist_ok=True)
        self.directory, self.slot_ms, self.slots = directory, slot_ms, slots
        self._dirty: dict[int, tuple[int, int, int]] = {}   # slot index -> (start, last, count)
        self._log = os.open(self._path("timerlog"), os.O_RDWR | os.O_CREAT, 0o644)
        self._wheel_fd = os.open(self._path("wheel"), os.O_RDWR | os.O_CREAT, 0o644)
        size = slots * SLOT.size
        have = os.fstat(self._wheel_fd).st_size
        if have not in (0, size):
            raise TimerIndexError(f"{self._path('wheel')} holds {have // SLOT.size} slots, not "
                              f"{slots}: remove the timer index to build it again")
        if have == 0:
            os.ftruncate(self._wheel_fd, size)        # sparse: untouched slots take no disk
        self._wheel = mmap.mmap(self._wheel_fd, size)
        self.position, self.log_length = self._recover()

    def _path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    # ------------------------------------------------------------ writing
    def add(self, deliver_at: int, phys: int, size: int, kind: int = TIMER) -> None:
        """Index one timer (or a recall of the timer at ``phys``)."""
        i, start = self._slot_of(deliver_at)
        s_start, last, count = self._slot(i)
        if s_start != start:                  # empty, or a slot of another turn
            last, count = EMPTY, 0
        at = self.log_length
        os.pwrite(self._log, ENTRY.pack(deliver_at, phys, size, kind, last), at)
        self.log_length = at + ENTRY.size
        self._dirty[i] = (start, at, count + 1)

    def checkpoint(self, position: int) -> None:
        """Everything added so far is durable, and indexing resumes at
        ``position`` after a crash."""
        os.fsync(self._log)
        changes = sorted(self._dirty.items())
        body = _HEAD.pack(position, self.log_length, len(changes)) + b"".join(
            _CHANGE.pack(i, *slot) for i, slot in changes)
        write_atomically(self._path("checkpoint"), body + struct.pack(">I", zlib.crc32(body)))
        self._apply(changes)
        self._dirty.clear()
        self.position = position

    # ------------------------------------------------------------ reading
    def slot_start(self, t: int) -> int:
        """The start of the slot holding time ``t``."""
        return t - t % self.slot_ms

    def entries(self, slot_start: int) -> list[TimerEntry]:
        """The entries of the slot starting at ``slot_start``, in the order
        they were added (a slot of another turn of the ring: none)."""
        i, start = self._slot_of(slot_start)
        s_start, last, count = self._slot(i)
        if s_start != start:
            return []
        out: list[TimerEntry] = []
        at = last
        while at != EMPTY and len(out) < count:
            deliver_at, phys, size, kind, prev = ENTRY.unpack(os.pread(self._log, ENTRY.size, at))
            out.append(TimerEntry(deliver_at, phys, size, kind))
            at = prev
        out.reverse()
        return out

    def count(self, slot_start: int) -> int:
        i, start = self._slot_of(slot_start)
        s_start, _last, count = self._slot(i)
        return count if s_start == start else 0

    def close(self) -> None:
        self._wheel.close()
        os.close(self._wheel_fd)
        os.close(self._log)

    # ------------------------------------------------------------ inside
    def _slot_of(self, t: int) -> tuple[int, int]:
        start = self.slot_start(t)
        return (start // self.slot_ms) % self.slots, start

    def _slot(self, i: int) -> tuple[int, int, int]:
        got = self._dirty.get(i)
        if got is not None:
            return got
        start, last, count = SLOT.unpack_from(self._wheel, i * SLOT.size)
        if count == 0:                        # never written (a sparse file's zeros)
            return EMPTY, EMPTY, 0
        return start, last, count

    def _apply(self, changes) -> None:
        for i, (start, last, count) in changes:
            SLOT.pack_into(self._wheel, i * SLOT.size, start, last, count)
        self._wheel.flush()

    def _recover(self) -> tuple[int, int]:
        """The checkpoint's journal applied to the wheel again, the log cut
        back to its length: (position, log length). No checkpoint: empty."""
        try:
            with open(self._path("checkpoint"), "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            raw = b""
        body, crc = raw[:-4], raw[-4:]
        if len(raw) < _HEAD.size + 4 or struct.unpack(">I", crc)[0] != zlib.crc32(body):
            position, length, changes = 0, 0, []
            self._wheel[:] = bytes(len(self._wheel))   # nothing can be trusted: start over
        else:
            position, length, n = _HEAD.unpack_from(body)
            changes = [(i, (start, last, count)) for i, start, last, count in
                       (_CHANGE.unpack_from(body, _HEAD.size + k * _CHANGE.size)
                        for k in range(n))]
        self._apply(changes)
        os.ftruncate(self._log, length)
        return position, length

