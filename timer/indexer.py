"""The timer index kept current on every broker, master or slave: each record
of the timer topic (a timer message, or a recall of one) indexed by when it
comes due, as the log reaches the broker, so that a promoted slave fires from
its own index at once and a restart resumes from the index's checkpoint
instead of reading every pending timer again.

It runs on the serving thread (``catch_up``, a bounded number of records a
turn; a master calls it before it fires). A log cut past what was indexed
(the broker follows a new master; a damaged tail cut at start-up) or an
index of another shape (``timer_slot_ms`` changed) builds the index again
from the timer topic: the only case that reads every timer."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from duomq.common import delay as d
from duomq.common.message import decode_records
from duomq.common.names import TIMER_TOPIC
from duomq.format import record as rec
from duomq.timer.counts import TimerCounts
from duomq.timer.index import (
    ENTRY,
    RECALL,
    TIMER,
    TimerEntry,
    TimerIndex,
    TimerIndexError,
    entry_time,
    remove,
)

log = logging.getLogger(__name__)
CHECKPOINT_S = 1.0                 # how often what was indexed is made durable
Listener = Callable[[TimerEntry, int], None]    # an entry just indexed, its queue offset


ROLL_MAX_MS = 86_400_000           # a timer's copy is rolled forward at least daily


def roll_ms(file_reserved_hours: float) -> int:
    """How long after it was stored a timer's copy is rolled forward (a new
    copy stored, the old one left to retention): half the commit log's
    retention, at most a day, so that no pending timer's record is ever
    older than retention keeps (RocketMQ 5's timer roll)."""
    return max(1000, int(min(ROLL_MAX_MS, file_reserved_hours * 3_600_000 / 2)))


def entry_of(msg, size: int, roll: int = ROLL_MAX_MS) -> TimerEntry | None:
    """The index entry of a record of the timer topic, ``size`` bytes
    (None: not one a timer index holds: logged). A timer further ahead than
    ``roll`` is indexed when it is to be rolled; a rolled copy names its
    first copy (``origin``, what a recall names); a recall at the timer's time."""
    props = msg.properties
    try:
        at = int(props[d.DELIVER_AT])
        if d.RECALL_OF in props:
            return TimerEntry(at, msg.physical_offset, size, RECALL, int(props[d.RECALL_OF]))
        origin = int(props.get(d.TIMER_ORIGIN, msg.physical_offset))
    except (KeyError, ValueError):
        log.error("record %s of %s has no valid %s: not a timer, left alone", msg.msg_id,
                  TIMER_TOPIC, d.DELIVER_AT)
        return None
    return TimerEntry(entry_time(at, msg.store_timestamp_ms, roll), msg.physical_offset, size,
                      TIMER, origin)


def record_sizes(records) -> list[int]:
    """The size of each record of concatenated ``records``."""
    out, pos, n = [], 0, len(records)
    while pos < n:
        size = rec.SIZE_MAGIC.unpack_from(records, pos)[0]
        out.append(size)
        pos += size
    return out


class TimerIndexer:
    def __init__(self, directory: str, slot_ms: int, max_delay_ms: int,
                 roll: int = ROLL_MAX_MS):
        self.directory = directory
        self.slot_ms = slot_ms
        self.roll = roll
        # a turn of the ring covers the longest delay from the slot being fired, and an hour
        self.slots = -(-(max_delay_ms + 3_600_000) // slot_ms)
        self.index: TimerIndex | None = None      # opened at the first catch_up (the store started)
        self.next = 0                             # the timer topic's next queue offset to index
        self._checkpoint_at = 0.0
        self.rebuilds = 0
        self.counts = TimerCounts()               # pending by topic and minute, as indexed
        self.cannot_checkpoint = ""               # why the last checkpoint failed (a full disk)

    @classmethod
    def of(cls, config) -> TimerIndexer:
        """A broker's, by its settings."""
        return cls(index_dir(config.data_dir), config.timer_slot_ms, config.timer_max_delay_ms,
                   roll_ms(config.file_reserved_hours))

    def _open(self) -> TimerIndex:
        try:
            idx = TimerIndex(self.directory, self.slot_ms, self.slots)
            self.counts = TimerCounts.decode(idx.extra) if idx.position else TimerCounts()
        except (TimerIndexError, ValueError) as exc:
            log.warning("timer index: %s", exc)
            remove(self.directory)
            self.rebuilds += 1
            idx = TimerIndex(self.directory, self.slot_ms, self.slots)
            self.counts = TimerCounts()
        self.next = idx.position
        log.info("timer index opened: %d timer records indexed (checkpoint), %d entries",
                 idx.position, idx.log_length // ENTRY.size)
        return idx

    def opened(self) -> TimerIndex:
        if self.index is None:
            self.index = self._open()
        return self.index

    def check(self, store) -> None:
        """Build the index again if it names what the log no longer holds
        (called once the store started, and after every cut of the log):
        the last timer it indexed must still be there, and the timer topic
        as long as what it indexed."""
        idx = self.opened()
        cq = store.find_queue(TIMER_TOPIC, 0)
        last = idx.last()
        if cq is None and self.next == 0:
            return
        ends = cq.max_offset if cq is not None else 0
        gone = last is not None and last.phys >= store.commitlog.min_offset and \
            store.read_record(last.phys) is None          # (below the log's start: retention's)
        if self.next > ends or gone:
            self._rebuild(f"the log no longer holds all it indexed ({ends} timer records, "
                          f"{self.next} indexed)")

    def catch_up(self, store, most: int = 4096, listener: Listener | None = None) -> bool:
        """Index up to ``most`` records of the timer topic beyond what was
        indexed (``listener`` is told of each); whether it is at the end."""
        idx = self.opened()
        cq = store.find_queue(TIMER_TOPIC, 0)
        if cq is None:
            return True
        offset, end, done = max(self.next, cq.min_offset), store.commitlog.max_offset, 0
        if offset >= cq.max_offset:                 # (the send path indexed the rest)
            self._maybe_checkpoint()
            return True
        add, count, roll = idx.add, self.counts.add, self.roll
        while done < most:
            got = store.get_messages(TIMER_TOPIC, 0, offset, min(1024, most - done), 8 << 20, end)
            if not got.count:
                if got.next_offset > offset:
                    offset = got.next_offset
                    continue
                break
            records = got.records
            for q, (msg, size) in enumerate(zip(decode_records(records), record_sizes(records),
                                                strict=True), offset):
                e = entry_of(msg, size, roll)
                if e is not None:
                    add(e.deliver_at, e.phys, e.size, e.kind, e.origin)
                    props = msg.properties
                    if e.kind == RECALL or d.TIMER_ORIGIN not in props:   # (not a copy)
                        count(props.get(d.REAL_TOPIC, ""), int(props[d.DELIVER_AT]),
                              -1 if e.kind == RECALL else 1)
                    if listener is not None:
                        listener(e, q)
            done += got.count
            offset = got.next_offset
        self.next = offset
        self._maybe_checkpoint()
        return done < most

    def _maybe_checkpoint(self) -> None:
        now = time.monotonic()
        if now >= self._checkpoint_at:
            self.checkpoint(now)

    def sent(self, queue_offset: int, phys: list[int], sizes: list[int], ats: list[int],
             topic: str, stored_ms: int, listener: Listener | None = None,
             near: int = 1 << 62) -> None:
        """Timers of ``topic`` just stored at ``phys`` (``sizes`` bytes) at
        ``stored_ms`` from ``queue_offset`` of the timer topic, due at
        ``ats``: the entries ``catch_up`` would make of them, made without
        reading them back (the master's send path), when the index is at
        ``queue_offset`` (else ``catch_up`` reads them in their turn);
        ``listener`` is told of those due before ``near`` only (the wheel
        cares for no other)."""
        if self.index is None or queue_offset != self.next:
            return
        soon = self.index.add_sent(ats, stored_ms, self.roll, phys, sizes, near)
        self.counts.add_many(topic, ats)
        if listener is not None:
            for k in soon:
                p = phys[k]
                listener(TimerEntry(entry_time(ats[k], stored_ms, self.roll), p, sizes[k], TIMER,
                                    p), queue_offset + k)
        self.next = queue_offset + len(phys)

    def hand_over(self, store, listener: Listener | None = None) -> TimerIndex:
        """The index at the log's end (a promotion: the tail indexed now)."""
        while not self.catch_up(store, 1 << 16, listener):
            pass
        return self.opened()

    def checkpoint(self, now: float | None = None) -> None:
        self._checkpoint_at = (time.monotonic() if now is None else now) + CHECKPOINT_S
        if self.index is not None and (self.index.position != self.next or self.index._dirty):
            self.counts.prune(time.time_ns() // 1_000_000)
            try:
                self.index.checkpoint(self.next, self.counts.encode())
            except OSError as exc:     # a full disk: kept in memory, checkpointed when it can
                if not self.cannot_checkpoint:
                    log.error("timer index: cannot checkpoint (%s): what was indexed since "
                              "is kept in memory and checkpointed once the disk has room", exc)
                self.cannot_checkpoint = str(exc)
                return
            if self.cannot_checkpoint:
                log.info("timer index: checkpointed again")
                self.cannot_checkpoint = ""

    def _rebuild(self, why: str) -> None:
        log.warning("timer index built again from %s: %s", TIMER_TOPIC, why)
        if self.index is not None:
            self.index.close()
        self.index = None
        remove(self.directory)
        self.rebuilds += 1

    def close(self) -> None:
        if self.index is not None:
            self.checkpoint()
            self.index.close()
            self.index = None


def index_dir(data_dir: str) -> str:
    return os.path.join(data_dir, "timer")
