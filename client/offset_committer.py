"""Where a push consumer starts each queue and what it commits: the
consumed offset of every held queue (its window's low end), to the master
(clustering) or to the local offset file (broadcasting), every
``offset_commit_interval_ms``, when a queue is let go, and on shutdown.
Runs on the timer thread (and on the shutting-down thread once the timer is
idle), the only writer of ``ProcessQueue.committed``."""

from __future__ import annotations

import logging

from duomq.client.consumer import PullConsumer
from duomq.client.offset_file import LocalOffsetStore
from duomq.client.process_queue import ProcessQueue
from duomq.common.message import MessageQueue

log = logging.getLogger(__name__)


class OffsetCommitter:
    def __init__(self, consumer: PullConsumer, local: LocalOffsetStore | None):
        self.consumer = consumer
        self.local = local          # broadcasting: this member's own offsets

    def start_offset(self, mq: MessageQueue) -> tuple[int, bool]:
        """(offset, came from the committed offsets): else ``consume_from``."""
        c = self.consumer
        off = self.local.committed(mq) if self.local is not None else c.committed(mq)
        if off >= 0:
            return off, True
        if c.config.consume_from == "first":
            return c.min_offset(mq), False
        if c.config.consume_from == "timestamp":
            return c.offset_by_time(mq, c.config.consume_timestamp_ms), False
        return c.max_offset(mq), False

    def commit(self, pqs: list[ProcessQueue]) -> bool:
        """Commit the consumed offset of each of ``pqs`` that moved; True once
        acked (or nothing moved), False when the commit failed (logged)."""
        dirty = {}
        for pq in pqs:
            off = pq.consumed_offset()
            if off != pq.committed:
                dirty[pq.mq] = off
        if not dirty:
            return True
        try:
            (self.local.commit if self.local is not None else self.consumer.commit)(dirty)
        except Exception as exc:
            log.warning("offset commit of %s failed: %s", self.consumer.group, exc)
            return False
        for pq in pqs:
            pq.committed = dirty.get(pq.mq, pq.committed)
        return True
