"""The timer service (RocketMQ 5's ``TimerMessageStore``, the firing half):
on the master, timer messages that come due are written from the timer
topic to their topics, at their time (``timer.wheel``), from the index every
broker keeps (``timer.indexer``).

It runs on the broker's loop, which owns every write to the store. Its
progress is two consumer offsets of ``TIMER_GROUP``, committed only once
what fired before them is visible (flushed, and held by the in-sync slaves
under SYNC replication): queue 1, the time the wheel fired through (every
timer due before it fired, ms), and queue 0, the timer topic's queue offset
below which no timer indexed late is left unfired. They reach slaves with
the replication stream, so the next master resumes there: it walks its own
wheel from that time, and reads the timer topic from the queue offset to
the end for timers due before it (indexed late) that are still to fire. A
timer fired just before a crash may fire again (its copy keeps the id its
producer was given: ``ORIGIN_MESSAGE_ID``), none is lost.
"""

from __future__ import annotations

import logging
import time
from collections import deque

from duomq.common import delay as d
from duomq.common.errors import BadRequestError
from duomq.common.message import decode_records
from duomq.common.names import TIMER_TOPIC
from duomq.format.record import parse_msg_id_epoch
from duomq.master import requeue
from duomq.timer.counts import BUCKET_MS
from duomq.timer.index import TIMER, TimerEntry
from duomq.timer.indexer import TimerIndexer, entry_of, entry_time, record_sizes
from duomq.timer.wheel import Wheel

log = logging.getLogger(__name__)
BATCH = 2048               # most timers fired per pump
INDEX_MOST = 16_384        # most timer records indexed per pump
RESCAN_MOST = 4096         # most records read again per pump when resuming
MAX_PENDING = 10_000       # progress points waiting to be visible (then merged)
RECOUNT_MOST = 20_000      # timers fired of the resumed minute recounted at most
P_QUEUE, Q_QUEUE = 1, 0    # TIMER_GROUP's offsets: the time fired through, the late scan's


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class TimerService:
    def __init__(self, store, offsets, indexer: TimerIndexer, config, broker_group: str,
                 counters, now: int | None = None):
        """Resume where the group's last master left off: the index
        caught up to the log's end, the wheel at the slot it reached, the
        timers it had not fired of earlier slots read again. ``counters``:
        the broker's metrics (timers fired, their lag, recalled)."""
        self.store, self.offsets, self.indexer = store, offsets, indexer
        self.config, self.broker_group = config, broker_group
        self.wheel_started = False
        index = indexer.hand_over(store)
        now = now_ms() if now is None else now
        p = offsets.fetch(d.TIMER_GROUP, TIMER_TOPIC, P_QUEUE)
        q = offsets.fetch(d.TIMER_GROUP, TIMER_TOPIC, Q_QUEUE)
        self.wheel = Wheel(index, p if p > 0 else now, config.timer_memory_timers)
        self.resumed_at = self.wheel.through
        cq = store.find_queue(TIMER_TOPIC, 0)
        low = cq.min_offset if cq is not None else 0
        self._rescan, self._rescan_end = max(q, low, 0), indexer.next
        self._unfired: list[tuple[int | None, TimerEntry]] = []   # a write that failed
        self._pending: deque[tuple[int, int, int]] = deque()      # (log end, slot, queue offset)
        self._marked = (p, q)
        self.counters = counters
        self._fired_through = 0           # the latest time an entry the wheel gave fired for
        self._minute = 0                  # the minute of the last fired (ms // BUCKET_MS)
        self._fired_in: dict[str, int] = {}    # topic -> timers of that minute fired
        self._recount_minute()
        log.info("timers resume at %d with the timer topic read again from %d to %d",
                 self.resumed_at, self._rescan, self._rescan_end)

    # ------------------------------------------------------------ the loop's
    def pump(self, now: int, visible_end: int) -> int:
        """Index what arrived, fire what is due, commit the progress that is
        visible. Returns the number of records written."""
        wheel = self.wheel
        self.indexer.catch_up(self.store, INDEX_MOST, wheel.indexed)
        self._read_again()
        todo = self._unfired + wheel.due(now, BATCH)
        self._unfired = []
        written = self._fire(todo, now) if todo else 0
        self._mark()
        self._commit(visible_end)
        return written

    def recall(self, topic: str, msg_id: str, at: int, now: int) -> tuple[str, int, bytes]:
        """The record that recalls the timer ``msg_id`` of ``topic`` due at
        ``at`` (a handle's parts), checked against what is stored: it must
        be that timer, not due yet, not recalled before. BadRequestError
        names why not; nothing is written here."""
        group, phys, _epoch = parse_msg_id_epoch(msg_id)     # (the id checks the epoch)
        if group != self.broker_group:
            raise BadRequestError(f"the recall handle is of broker group {group!r}, not "
                                  f"{self.broker_group!r}: nothing recalled")
        view = self.store.read_record(phys)
        if view is None and phys < self.store.commitlog.min_offset:
            raise BadRequestError(
                f"timer message {msg_id} was sent before the oldest record the commit log "
                f"keeps (file_reserved_hours): its copy rolled forward cannot be checked "
                f"against the handle, nothing recalled (recall within "
                f"{self.indexer.roll * 2 / 3_600_000:g} hours of the send)")
        msg = decode_records(view, group)[0] if view is not None else None
        if msg is None or msg.topic != TIMER_TOPIC or msg.msg_id != msg_id or \
                msg.properties.get(d.REAL_TOPIC) != topic or \
                msg.properties.get(d.DELIVER_AT) != str(at) or d.RECALL_OF in msg.properties:
            raise BadRequestError(f"no timer message of topic {topic!r} is stored for this "
                                  f"recall handle ({msg_id}, due at {at}): nothing recalled")
        fired_by = max(now, self._fired_through, self.wheel.through - 1)
        if at <= fired_by:              # (the wheel's progress too: a clock stepped back)
            raise BadRequestError(f"timer message {msg_id} came due {(fired_by - at) / 1000:.1f}"
                                  f" s ago and was delivered: too late to recall")
        if self.wheel.is_recalled(phys, at):
            raise BadRequestError(f"timer message {msg_id} was recalled before: nothing changed")
        return requeue.recall(topic, phys, at, now)

    def sent(self, queue_offset: int, phys: list[int], sizes: list[int], ats: list[int],
             topic: str, stored_ms: int) -> None:
        """A batch of timers of ``topic`` a producer sent, just stored at
        ``phys`` (``sizes`` bytes each) from ``queue_offset`` of the timer
        topic at ``stored_ms``: indexed now, without reading it back (when
        the index is at that offset; else the next catch-up reads it)."""
        w = self.wheel
        self.indexer.sent(queue_offset, phys, sizes, ats, topic, stored_ms, w.indexed,
                          w.near())

    def recalled(self, origin: int, at: int) -> None:
        """A recall was written: the timer does not fire, from now on."""
        self.wheel.ask_recall(origin, at)
        self.counters.timers_recalled += 1

    def pending(self) -> dict[str, int]:
        """Each topic's timers not fired or recalled yet (``timer.counts``)."""
        through = self.wheel.through
        fired = self._fired_in if self._minute == through // BUCKET_MS else None
        return self.indexer.counts.pending(through, fired)

    def next_due(self) -> int:
        """When the next timer may come due (epoch ms; 0: now)."""
        if self._rescan < self._rescan_end:
            return 0
        return self.wheel.next_due()        # (what a full disk refused: every round)

    # ------------------------------------------------------------ inside
    def _recount_minute(self, most: int = RECOUNT_MOST) -> None:
        """What the last master fired of the minute it resumes in (the
        timers of its slots before ``through``, not recalled), by topic, so
        that the pending counts do not count them again; past ``most`` of
        them, left out (the counts are high until the minute passes)."""
        index, through = self.indexer.opened(), self.wheel.through
        minute = through // BUCKET_MS
        fired: dict[str, int] = {}
        seen = 0
        for start in range(minute * BUCKET_MS, index.slot_start(through) + 1, index.slot_ms):
            recalled = {r.origin for r in index.recalls(start)}
            for e in index.entries(start):
                if e.deliver_at >= through or e.origin in recalled:
                    continue
                seen += 1
                if seen > most:
                    return
                view = self.store.read_record(e.phys)
                props = decode_records(view)[0].properties if view is not None else {}
                if props.get(d.DELIVER_AT) == str(e.deliver_at):     # fired, not rolled
                    topic = props.get(d.REAL_TOPIC, "")
                    fired[topic] = fired.get(topic, 0) + 1
        self._minute, self._fired_in = minute, fired

    def _read_again(self) -> None:
        """Resuming: timers the last master indexed late and may not have
        fired (due before the time it fired through, from its late scan's
        offset on) join the late ones, a bounded number at a time."""
        if self._rescan >= self._rescan_end or len(self.wheel.late) >= RESCAN_MOST:
            return
        got = self.store.get_messages(TIMER_TOPIC, 0, self._rescan,
                                      min(RESCAN_MOST, self._rescan_end - self._rescan),
                                      8 << 20, self.store.commitlog.max_offset)
        if not got.count:                  # (below the queue's start: from there; else done)
            self._rescan = got.next_offset if got.next_offset > self._rescan else self._rescan_end
            return
        records = got.records
        for q, (msg, size) in enumerate(zip(decode_records(records), record_sizes(records),
                                            strict=True), self._rescan):
            e = entry_of(msg, size, self.indexer.roll)
            if e is not None and e.kind == TIMER and e.deliver_at < self.resumed_at:
                self.wheel.late.append((q, e))
        self._rescan = got.next_offset

    def _fire(self, todo: list[tuple[int | None, TimerEntry]], now: int) -> int:
        self._fired_through = max(self._fired_through, max(e.deliver_at for _q, e in todo))
        placed, read, fired, rolled = [], self.store.read_record, [], 0
        for _q, e in todo:
            view = read(e.phys)
            onward = self._onward(e, view) if view is not None else None
            if onward is None:
                if view is None:
                    log.error("timer at %d of %s is gone from the log (retention, or a cut): "
                              "not fired", e.phys, TIMER_TOPIC)
                continue
            placed.append(onward)
            if onward[0] == TIMER_TOPIC:
                rolled += 1
            else:
                fired.append((onward[0], e.deliver_at))
        if not placed:
            return 0
        try:
            self.store.put_records(placed)
        except OSError as exc:             # a full disk: fired on a later pump, none lost
            log.error("cannot fire %d timers now: %s", len(placed), exc)
            self._unfired = todo
            return 0
        self._count(fired, now)
        self.counters.timers_rolled += rolled
        return len(placed)

    def _count(self, fired: list[tuple[str, int]], now: int) -> None:
        c = self.counters
        c.timers_fired += len(fired)
        observe = c.timer_lag.observe
        for topic, at in fired:
            observe(max(0, now - at) / 1000)
            minute = at // BUCKET_MS
            if minute > self._minute:
                self._minute, self._fired_in = minute, {}
            if minute == self._minute:
                self._fired_in[topic] = self._fired_in.get(topic, 0) + 1

    def _onward(self, e: TimerEntry, view):
        """Where a due timer goes: ``(topic, queue_id, record)`` (a copy
        rolled forward goes to the timer topic again), or None (logged)
        when the record is not that timer or cannot be delivered."""
        msg = decode_records(view, self.broker_group)[0]
        try:
            at = int(msg.properties[d.DELIVER_AT]) if msg.topic == TIMER_TOPIC else -1
        except (KeyError, ValueError):
            at = -1
        if e.deliver_at not in (at, entry_time(at, msg.store_timestamp_ms, self.indexer.roll)):
            log.error("the record at %d is not the timer indexed there (%s): not fired", e.phys,
                      msg.topic)
            return None
        try:                               # getting old before it is due: a new copy
            topic, qid, record = requeue.rolled(msg, e.origin) if at > e.deliver_at else \
                requeue.fired(msg)
        except BadRequestError as exc:
            error = str(exc)
        else:
            if len(record) <= self.store.config.max_message_bytes:
                return topic, qid, record
            error = (f"{'copied' if topic == TIMER_TOPIC else 'delivered'} it is "
                     f"{len(record)} bytes, over max_message_bytes "
                     f"({self.store.config.max_message_bytes})")
        log.error("timer message %s cannot be delivered and stays in %s: %s", msg.msg_id,
                  TIMER_TOPIC, error)
        return None

    def _mark(self) -> None:
        """A progress point: the time the wheel fired through and the
        oldest timer indexed late not fired yet, made good once the log's
        end now is visible."""
        slot = min([self.wheel.through] + [e.deliver_at for q, e in self._unfired if q is None])
        lows = [q for q, _e in self.wheel.late] + [q for q, _e in self._unfired if q is not None]
        low = min([self.indexer.next, self._rescan if self._rescan < self._rescan_end
                   else self.indexer.next] + lows)
        if (slot, low) == self._marked or self.store.find_queue(TIMER_TOPIC, 0) is None:
            return                    # (no timer ever: no %TIMER% offsets, no group counted)
        self._marked = (slot, low)
        point = (self.store.commitlog.max_offset, slot, low)
        if len(self._pending) >= MAX_PENDING:
            self._pending[-1] = point          # merged: made good a little later
        else:
            self._pending.append(point)

    def _commit(self, visible_end: int) -> None:
        pending, last = self._pending, None
        while pending and pending[0][0] <= visible_end:
            last = pending.popleft()
        if last is not None:
            _end, slot, low = last
            self.offsets.commit(d.TIMER_GROUP, TIMER_TOPIC, Q_QUEUE, low)
            self.offsets.commit(d.TIMER_GROUP, TIMER_TOPIC, P_QUEUE, slot)
