"""The schedule service (RocketMQ's ``ScheduleMessageService``): on the
master, delivers delayed messages that came due from the schedule topic's
level queues to their topics (or their next level: ``requeue.due``).

It runs on the broker's loop, which owns every write to the store. Its
progress per level is a consumer offset of ``SCHEDULE_GROUP``, committed only
once what it delivered is visible (flushed, and held by the in-sync slaves
under SYNC replication): the offsets reach slaves with the replication stream
and disk with the offset table, so after a restart or a failover the service
resumes there; a message delivered just before a crash may be delivered
again, none is lost.
"""

from __future__ import annotations

import logging
from collections import deque

from duomq.common import delay as d
from duomq.common.errors import BadRequestError
from duomq.common.message import decode_records
from duomq.format import record as rec
from duomq.master import requeue

log = logging.getLogger(__name__)
BATCH = 256               # most messages one level delivers per pump
MAX_PENDING = 100_000     # delivered but not yet visible: stop delivering past this


class ScheduleService:
    def __init__(self, store, offsets, levels: tuple[int, ...], broker_group: str):
        self.store = store
        self.offsets = offsets
        self.levels = levels
        self.broker_group = broker_group
        self._next: list[int | None] = [None] * len(levels)   # next queue offset per level
        self._due: list[int] = [0] * len(levels)              # head's due time, ms
        self._pending: deque[tuple[int, int, int]] = deque()  # (level, next offset, end)
        self.delivered = 0

    def _start(self, i: int, cq) -> int:
        off = self.offsets.fetch(d.SCHEDULE_GROUP, d.SCHEDULE_TOPIC, i)
        return max(off, cq.min_offset)

    def pump(self, now_ms: int, visible_end: int) -> int:
        """Deliver what is due; commit progress that is visible. Returns the
        number of records written."""
        if len(self._pending) >= MAX_PENDING:   # nothing becomes visible (no slave): wait
            self._commit(visible_end)
            return 0
        taken = []                             # (level, next offset, onward record or None)
        find, read = self.store.find_queue, self.store.commitlog.read
        for i, delay in enumerate(self.levels):
            if now_ms < self._due[i]:
                continue
            cq = find(d.SCHEDULE_TOPIC, i)
            if cq is None:
                continue
            off = self._next[i]
            if off is None:
                off = self._start(i, cq)
            end = min(cq.max_offset, off + BATCH)
            while off < end:
                e = cq.entry(off)
                view = read(e[0], e[1]) if e else None
                if view is None:               # not all written yet: next pump
                    break
                due_at = rec.STORE_TS.unpack_from(view, 0)[0] + delay
                if due_at > now_ms:
                    self._due[i] = due_at
                    break
                off += 1
                taken.append((i, off, self._onward(view, now_ms)))
            self._next[i] = off
        placed = [p for _i, _off, p in taken if p is not None]
        if placed:                             # one write per run bound for one queue
            end = self.store.put_records(placed)[-1].end_offset
            self.delivered += len(placed)
        else:
            end = 0                            # nothing written: progress is visible at once
        self._pending.extend((i, off, end) for i, off, _p in taken)
        self._commit(visible_end)
        return len(placed)

    def _onward(self, view, now_ms: int):
        """Where a due message goes: ``(topic, queue_id, record)``, or None
        (logged) when it cannot be delivered and stays where it is."""
        msg = decode_records(view, self.broker_group)[0]
        try:
            topic, qid, record = requeue.due(msg, self.levels, now_ms)
        except BadRequestError as exc:
            error = str(exc)
        else:
            if len(record) <= self.store.config.max_message_bytes:
                return topic, qid, record
            error = (f"with its schedule properties it is {len(record)} bytes, over "
                     f"max_message_bytes ({self.store.config.max_message_bytes})")
        log.error("scheduled message %s cannot be delivered and stays in %s: %s", msg.msg_id,
                  d.SCHEDULE_TOPIC, error)
        return None

    def _commit(self, visible_end: int) -> None:
        pending, last = self._pending, {}
        while pending and pending[0][2] <= visible_end:
            i, off, _ = pending.popleft()
            last[i] = off
        for i, off in last.items():
            self.offsets.commit(d.SCHEDULE_GROUP, d.SCHEDULE_TOPIC, i, off)
