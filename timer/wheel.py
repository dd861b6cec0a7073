"""Which timers come due when, on a master (no I/O but the index's reads).

The wheel is walked slot by slot in time order from the fire progress
(``through``: every timer indexed so far that is due before it has fired,
but those indexed late, which are counted apart). A slot is opened when
its start comes: its recalls are read first, then its timers along their
chain, each fired at its time: held until then in a heap of at most
``hold`` timers (a slot with more fires the rest as the heap empties, at
most a slot late: memory is bounded by the setting, not by the timers
pending). Once the slot's end has passed and all of it fired, the next one
opens. Timers indexed for a slot already open join its heap; timers due
before ``through`` when indexed (their record was indexed late: a timer a
few ms ahead, or a master resuming) are ``late`` and fire at once.

What has fired is never told to the index: the master's progress is
``through`` and the oldest late timer not yet fired (``TimerService``
commits both once what fired is visible); a master resuming at a
``through`` within a slot skips the slot's timers due before it."""

from __future__ import annotations

import heapq
from collections import deque

from duomq.timer.index import EMPTY, RECALL, TimerEntry, TimerIndex

_READ = 1024                      # entries read along a chain at a time


class Wheel:
    def __init__(self, index: TimerIndex, progress_ms: int, hold: int):
        self.index = index
        self.slot_ms = index.slot_ms
        self.slot = index.slot_start(progress_ms)   # the slot being fired
        self.through = progress_ms             # every timer due before it has fired
        self._skip_below = progress_ms         # the open slot's timers due before it: fired
        self.hold = hold
        self._heap: list[tuple[int, int, TimerEntry]] = []   # (deliver_at, tie, entry)
        self._tie = 0
        self._cursor: int | None = None        # where the open slot's chain goes on (None:
                                               # not open yet)
        self._recalled: set[int] = set()       # the open slot's recalled timers (origins)
        self.asked: dict[int, int] = {}        # recalls taken, not indexed yet: origin -> slot
        self.late: deque[tuple[int, TimerEntry]] = deque()   # (queue offset, entry)
        self.recalled = 0                      # timers not fired because recalled

    # ------------------------------------------------------------ what the indexer found
    def indexed(self, entry: TimerEntry, queue_offset: int) -> None:
        """An entry just indexed (the index has it in its slot already)."""
        start = self.index.slot_start(entry.deliver_at)
        if entry.kind == RECALL:
            self.asked.pop(entry.origin, None)
            if start == self.slot and self._cursor is not None:
                self._recalled.add(entry.origin)
            return
        if entry.deliver_at < self.through:
            self.late.append((queue_offset, entry))
        elif start == self.slot and self._cursor is not None:
            self._push(entry)                  # the open slot's chain was read from before it

    def near(self) -> int:
        """The time before which a timer just indexed matters to the wheel
        (late, or of the open slot); ``indexed`` of any later one does nothing."""
        return max(self.through, self.slot + self.slot_ms)

    def ask_recall(self, origin: int, deliver_at: int) -> None:
        """A recall just written (it is indexed on a later turn): the timer
        does not fire meanwhile."""
        start = self.index.slot_start(deliver_at)
        self.asked[origin] = start
        if start == self.slot and self._cursor is not None:
            self._recalled.add(origin)

    def is_recalled(self, origin: int, deliver_at: int) -> bool:
        """Whether the timer first stored at ``origin`` was recalled."""
        start = self.index.slot_start(deliver_at)
        if origin in self.asked:
            return True
        if start == self.slot and self._cursor is not None:
            return origin in self._recalled
        return any(r.origin == origin for r in self.index.recalls(start))

    # ------------------------------------------------------------ what is due
    def due(self, now_ms: int, most: int) -> list[tuple[int | None, TimerEntry]]:
        """Up to ``most`` timers to fire now, each with its queue offset if
        it was indexed late (None: from the open slot): late ones first,
        then the open slot's that are due; slots are opened and passed as
        time goes."""
        out: list[tuple[int | None, TimerEntry]] = []
        while self.late and len(out) < most:
            q, e = self.late.popleft()
            if self.is_recalled(e.origin, e.deliver_at):
                self.recalled += 1
            else:
                out.append((q, e))
        while len(out) < most:
            if self._cursor is None:
                if now_ms < self.slot:
                    break
                self._open()
            self._read(now_ms, out, most)
            heap = self._heap
            while heap and heap[0][0] <= now_ms and len(out) < most:
                e = heapq.heappop(heap)[2]
                if e.origin in self._recalled or e.origin in self.asked:
                    self.recalled += 1
                else:
                    out.append((None, e))
            if self._cursor != EMPTY or heap or now_ms < self.slot + self.slot_ms:
                break
            self.slot += self.slot_ms            # all of it fired and its time is over
            self.through = max(self.through, self.slot)
            self._cursor = None
            self._recalled = set()
        if len(out) < most:                      # nothing due is left
            if self._cursor is None:
                self.through = max(self.through, min(self.slot, now_ms + 1))
            elif self._cursor == EMPTY:
                top = self._heap[0][0] if self._heap else self.slot + self.slot_ms
                self.through = max(self.through, min(now_ms + 1, top))
        return out

    def next_due(self) -> int:
        """When the next timer may come due (epoch ms): a late one now, the
        open slot's earliest held, else the next slot's start."""
        if self.late:
            return 0
        if self._cursor is None:
            return self.slot
        if self._cursor != EMPTY and len(self._heap) < self.hold:
            return 0                              # more of the slot to read
        return self._heap[0][0] if self._heap else self.slot + self.slot_ms

    def oldest_late(self) -> int | None:
        """The queue offset of the oldest late timer not fired yet."""
        return self.late[0][0] if self.late else None

    def held(self) -> int:
        return len(self._heap) + len(self.late)

    # ------------------------------------------------------------ inside
    def _open(self) -> None:
        self._recalled = {r.origin for r in self.index.recalls(self.slot)}
        self._cursor = self.index.head(self.slot)[0]
        self._skip_below = self.through

    def _read(self, now_ms: int, out: list[tuple[int | None, TimerEntry]], most: int) -> None:
        """Read along the open slot's chain while the heap has room: due
        timers go out at once, the others are held."""
        while self._cursor != EMPTY and len(self._heap) < self.hold and len(out) < most:
            assert self._cursor is not None
            got, self._cursor = self.index.read_chain(
                self._cursor, min(_READ, self.hold - len(self._heap), most - len(out)))
            now_due = []
            for e in got:
                if e.deliver_at < self._skip_below:
                    continue                      # fired before (a master resuming here)
                if e.origin in self._recalled or e.origin in self.asked:
                    self.recalled += 1
                elif e.deliver_at <= now_ms:
                    now_due.append(e)
                else:
                    self._push(e)
            now_due.sort(key=lambda e: e.deliver_at)      # (the chain is newest first)
            out.extend((None, e) for e in now_due)

    def _push(self, e: TimerEntry) -> None:
        self._tie += 1
        heapq.heappush(self._heap, (e.deliver_at, self._tie, e))
