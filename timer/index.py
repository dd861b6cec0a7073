"""The timer index: where each pending timer message lies in the commit log,
found by when it comes due (RIP-43's timer log and timer wheel, on disk).

- The timer log (``timerlog``): 40-byte entries, appended in the order
  timers are indexed: its delivery time (ms, 8 bytes), the record's
  commit-log offset (8) and size (4), its kind (4: a timer, or the recall of
  one), the entry before it of the same kind in the same slot (8; -1: none)
  and the timer's first copy (8: the offset a recall names).
- The wheel (``wheel``): a ring of ``slots`` slots of ``slot_ms`` each; a
  time's slot is ``(t // slot_ms) % slots``, holding the slot's start (8; a
  start of another turn of the ring: the slot is empty), its last timer
  (8), how many timers it has (8) and its last recall (8). A slot's timers
  (and, apart, its recalls) are read back along the chain from the last:
  a slot's recalls are read before its timers are fired.
- The checkpoint (``checkpoint``): how far indexing went (``position``, in
  whatever the caller indexes, a queue offset of the timer topic), the timer
  log's length then, and the slots changed since the checkpoint before (a
  journal of them, so that the wheel file is only ever written with what a
  checkpoint names), then what the caller keeps beside (``extra``: the
  timer counts, as of ``position``). After a crash the journal is applied again, the log cut
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
from typing import Any

from duomq.common.atomic_file import write_atomically
from duomq.format import native

TIMER, RECALL = 1, 2                 # an entry's kind
ENTRY = struct.Struct(">qqiiqq")     # deliver_at, phys, size, kind, prev, origin
SLOT = struct.Struct(">qqqq")        # start, last timer, timers, last recall
_HEAD = struct.Struct(">qqqi")       # journal: position, timer log length, slot_ms, slots changed
_CHANGE = struct.Struct(">qqqqq")    # journal: slot index, start, last, count, last recall
EMPTY = -1
_NO_SLOT = (EMPTY, EMPTY, 0, EMPTY)


def entry_time(at: int, stored_ms: int, roll: int) -> int:
    """When a timer copy stored at ``stored_ms`` for ``at`` comes up in the
    wheel: at its time, or, further ahead than ``roll``, when it is rolled."""
    return at if at - stored_ms <= roll else stored_ms + roll


@dataclass(frozen=True)
class TimerEntry:
    deliver_at: int                  # epoch ms
    phys: int                        # the timer record's commit-log offset
    size: int
    kind: int                        # TIMER or RECALL
    origin: int                      # the timer's first copy (a recall's target)


class TimerIndexError(Exception):
    """The index's files cannot be used (a wheel of another shape)."""


def remove(directory: str) -> None:
    """Remove an index's files (it is built again from the timer topic)."""
    for name in ("checkpoint", "wheel", "timerlog"):
        try:
            os.unlink(os.path.join(directory, name))
        except FileNotFoundError:
            pass


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
        self._dirty: dict[int, tuple[int, int, int, int]] = {}   # slot index -> its slot
        self._log = os.open(self._path("timerlog"), os.O_RDWR | os.O_CREAT, 0o644)
        self._wheel_fd = os.open(self._path("wheel"), os.O_RDWR | os.O_CREAT, 0o644)
        size = slots * SLOT.size
        have = os.fstat(self._wheel_fd).st_size
        if have not in (0, size):
            raise TimerIndexError(f"{self._path('wheel')} holds {have // SLOT.size} slots, not "
                                  f"{slots}: the index is built again")
        if have == 0:
            os.ftruncate(self._wheel_fd, size)        # sparse: untouched slots take no disk
        self._wheel = mmap.mmap(self._wheel_fd, size)
        self.extra = b""                 # the caller's, with the last checkpoint
        self._unwritten = bytearray()    # entries added and not written yet (one pwrite)
        self.position, self.log_length = self._recover()

    def _path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    # ------------------------------------------------------------ writing
    def add(self, deliver_at: int, phys: int, size: int, kind: int = TIMER,
            origin: int | None = None) -> None:
        """Index one timer at ``phys`` (``origin``: its first copy, if this
        is not it), or a recall (at ``phys``) of the timer first stored at
        ``origin``."""
        i, start = self._slot_of(deliver_at)
        s_start, last, count, recall = self._slot(i)
        if s_start != start:                  # empty, or a slot of another turn
            last, count, recall = EMPTY, 0, EMPTY
        at = self.log_length
        prev = recall if kind == RECALL else last
        self._unwritten += ENTRY.pack(deliver_at, phys, size, kind, prev,
                                      phys if origin is None else origin)
        self.log_length = at + ENTRY.size
        self._dirty[i] = (start, at, count + 1, recall) if kind != RECALL else \
            (start, last, count, at)

    def add_sent(self, ats: list[int], stored_ms: int, roll: int, phys: list[int],
                 sizes: list[int], near: int = 1 << 62) -> list[int]:
        """``add`` of each timer of a batch just stored at ``stored_ms`` (its
        own first copy, due at ``ats[k]``, at ``phys[k]``, ``sizes[k]``
        bytes), at its wheel time (``entry_time``); the positions ``k`` whose
        wheel time is before ``near``. The send path's: one C loop
        (``format/csrc/wheel.c``), or this one, names bound once."""
        done = _wheel_add(ats, stored_ms, roll, phys, sizes, self.slot_ms, self.slots,
                          self._dirty, self._slot, self._unwritten, self.log_length, near)
        if done is not None:
            self.log_length, soon = done
            return soon
        slot_ms, slots, dirty, unwritten = self.slot_ms, self.slots, self._dirty, self._unwritten
        get, read, pack, size_e = dirty.get, self._slot, ENTRY.pack, ENTRY.size
        if not len(ats) == len(phys) == len(sizes):
            raise ValueError("ats, phys and sizes differ in length")
        whens = [due if due - stored_ms <= roll else stored_ms + roll for due in ats]
        at = self.log_length
        soon = []
        for k, (when, p, size) in enumerate(zip(whens, phys, sizes, strict=True)):
            start = when - when % slot_ms
            i = (start // slot_ms) % slots
            slot = get(i) or read(i)
            if slot[0] == start:
                last, count, recall = slot[1], slot[2], slot[3]
            else:                             # empty, or a slot of another turn
                last, count, recall = EMPTY, 0, EMPTY
            unwritten += pack(when, p, size, TIMER, last, p)
            dirty[i] = (start, at, count + 1, recall)
            at += size_e
            if when < near:
                soon.append(k)
        self.log_length = at
        return soon

    def checkpoint(self, position: int, extra: bytes = b"") -> None:
        """Everything added so far is durable, and indexing resumes at
        ``position`` after a crash, with ``extra`` (``self.extra`` then)."""
        self._write()
        os.fsync(self._log)
        changes = sorted(self._dirty.items())
        body = _HEAD.pack(position, self.log_length, self.slot_ms, len(changes)) + b"".join(
            _CHANGE.pack(i, *slot) for i, slot in changes) + extra
        write_atomically(self._path("checkpoint"), body + struct.pack(">I", zlib.crc32(body)))
        self._apply(changes)
        self._dirty.clear()
        self.position, self.extra = position, extra

    # ------------------------------------------------------------ reading
    def slot_start(self, t: int) -> int:
        """The start of the slot holding time ``t``."""
        return t - t % self.slot_ms

    def head(self, slot_start: int) -> tuple[int, int]:
        """``(last timer, timers)`` of the slot starting at ``slot_start``
        (``(EMPTY, 0)``: none, or only a slot of another turn of the ring)."""
        i, start = self._slot_of(slot_start)
        s_start, last, count, _recall = self._slot(i)
        return (last, count) if s_start == start else (EMPTY, 0)

    def read_chain(self, at: int, most: int) -> tuple[list[TimerEntry], int]:
        """Up to ``most`` entries along a chain from the entry at ``at``
        (newest first), and where the chain goes on (EMPTY: its end)."""
        out: list[TimerEntry] = []
        unwritten = self._unwritten
        written = self.log_length - len(unwritten)   # (the rest is read from memory: a
        while at != EMPTY and len(out) < most:       # read never writes, nor fails on a full disk)
            raw = unwritten[at - written:at - written + ENTRY.size] if at >= written else \
                os.pread(self._log, ENTRY.size, at)
            deliver_at, phys, size, kind, prev, origin = ENTRY.unpack(raw)
            out.append(TimerEntry(deliver_at, phys, size, kind, origin))
            at = prev
        return out, at

    def entries(self, slot_start: int) -> list[TimerEntry]:
        """The timers of the slot starting at ``slot_start``, in the order
        they were added (a slot of another turn of the ring: none)."""
        last, count = self.head(slot_start)
        out, _ = self.read_chain(last, count)
        out.reverse()
        return out

    def recalls(self, slot_start: int) -> list[TimerEntry]:
        """The recalls of the slot starting at ``slot_start``, newest first."""
        i, start = self._slot_of(slot_start)
        s_start, _last, _count, recall = self._slot(i)
        if s_start != start:
            return []
        return self.read_chain(recall, 1 << 62)[0]

    def last(self) -> TimerEntry | None:
        """The entry indexed last (None: none)."""
        if self.log_length < ENTRY.size:
            return None
        return self.read_chain(self.log_length - ENTRY.size, 1)[0][0]

    def count(self, slot_start: int) -> int:
        return self.head(slot_start)[1]

    def close(self) -> None:
        try:
            self._write()
        except OSError:                  # (a full disk: the next start indexes them again)
            pass
        self._wheel.close()
        os.close(self._wheel_fd)
        os.close(self._log)

    # ------------------------------------------------------------ inside
    def _write(self) -> None:
        """The entries added since the last write, in one pwrite."""
        if self._unwritten:
            n = len(self._unwritten)
            at = self.log_length - n
            view = memoryview(self._unwritten)
            while view:
                done = os.pwrite(self._log, view, at)
                view, at = view[done:], at + done
            self._unwritten = bytearray()

    def _slot_of(self, t: int) -> tuple[int, int]:
        start = self.slot_start(t)
        return (start // self.slot_ms) % self.slots, start

    def _slot(self, i: int) -> tuple[int, int, int, int]:
        got = self._dirty.get(i)
        if got is not None:
            return got
        start, last, count, recall = SLOT.unpack_from(self._wheel, i * SLOT.size)
        if start == 0 and count == 0:         # never written (a sparse file's zeros)
            return _NO_SLOT
        return start, last, count, recall

    def _apply(self, changes) -> None:
        """Slots written with pwrite, never through the map: a page of the
        sparse file that a full disk cannot allocate is ENOSPC, not SIGBUS."""
        for i, slot in changes:
            os.pwrite(self._wheel_fd, SLOT.pack(*slot), i * SLOT.size)
        if changes:
            os.fdatasync(self._wheel_fd)

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
            size = len(self._wheel)          # nothing can be trusted: start over
            os.ftruncate(self._wheel_fd, 0)  # (zeros again, sparse: nothing to allocate)
            os.ftruncate(self._wheel_fd, size)
        else:
            position, length, slot_ms, n = _HEAD.unpack_from(body)
            if slot_ms != self.slot_ms:
                raise TimerIndexError(f"{self._path('checkpoint')} is of slots of {slot_ms} ms, "
                                      f"not {self.slot_ms}: the index is built again")
            changes = [(k[0], k[1:]) for k in
                       (_CHANGE.unpack_from(body, _HEAD.size + j * _CHANGE.size)
                        for j in range(n))]
            self.extra = body[_HEAD.size + n * _CHANGE.size:]
        self._apply(changes)
        os.ftruncate(self._log, length)
        return position, length


_wheel_add: Any = native.declined     # bound by _bind: the C loop, or declining all


@native.chosen
def _bind(loops: Any) -> None:
    global _wheel_add
    _wheel_add = loops.wheel_add if loops is not None else native.declined
