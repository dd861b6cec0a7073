"""Where a push consumer starts each queue and what it commits: the
consumed offset of every held queue (its window's low end), to the master
(clustering) or to the local offset file (broadcasting), every
``offset_commit_interval_ms``, when a queue is let go, and on shutdown.
Runs on the timer thread (and on the shutting-down thread once the timer is
idle), the only writer of ``ProcessQueue.committed``."""

from __future__ import annotations

import logging

from duomq.client.consumer.offset_file import LocalOffsetStore
from duomq.client.consumer.process_queue import ProcessQueue
from duomq.client.consumer.pull import PullConsumer
from duomq.common.errors import AuthenticationError, AuthorizationError
from duomq.common.message import MessageQueue
from duomq.common.names import RETRY_PREFIX
from duomq.proto import pb

log = logging.getLogger(__name__)


class OffsetCommitter:
    def __init__(self, consumer: PullConsumer, local: LocalOffsetStore | None):
        self.consumer = consumer
        self.local = local          # broadcasting: this member's own offsets

    def start_offsets(self, mqs: list[MessageQueue]) -> dict[MessageQueue, tuple[int, bool]]:
        """Where each of ``mqs`` starts: ``(offset, came from the committed
        offsets)``, else where ``consume_from`` says. One request per broker
        group for the commits, one per topic and group for the rest: a member
        taking 1,000 queues asks a few times, not 2,000."""
        c = self.consumer
        if self.local is not None:
            committed = {mq: self.local.committed(mq) for mq in mqs}
        else:
            committed = c.committed_many(mqs)
        out = {mq: (off, True) for mq, off in committed.items() if off >= 0}
        # the group's retry topic from its first message, whatever consume_from
        # says (RocketMQ's too): it is made at the group's first send back, so
        # a member may take its queue after the first retry arrived
        retries = [mq for mq in mqs if mq not in out and mq.topic.startswith(RETRY_PREFIX)]
        if retries:
            for mq, off in c.offsets(retries, pb.MIN_OFFSET, 0).items():
                out[mq] = (off, False)
        rest = [mq for mq in mqs if mq not in out]
        if rest:
            how = c.config.consume_from
            query, ts = ((pb.MIN_OFFSET, 0) if how == "first" else
                         (pb.BY_TIME, c.config.consume_timestamp_ms) if how == "timestamp" else
                         (pb.MAX_OFFSET, 0))
            for mq, off in c.offsets(rest, query, ts).items():
                out[mq] = (off, False)
        return out

    def commit(self, pqs: list[ProcessQueue]) -> bool | None:
        """Commit the consumed offset of each of ``pqs`` that moved; True once
        acked (or nothing moved), False when the commit failed (logged), None
        when a broker that knows its users refuses this consumer's commits
        (its credentials or its permissions: trying again changes nothing; a
        key refused at the handshake is tried again, False: a broker of an
        earlier release refused every key while it started, and one that
        could not read its users within ``auth.zap.USERS_WAIT_S`` does)."""
        dirty = {}
        for pq in pqs:
            off = pq.consumed_offset()
            if off != pq.committed:
                dirty[pq.mq] = off
        if not dirty:
            return True
        try:
            (self.local.commit if self.local is not None else self.consumer.commit)(dirty)
        except (AuthenticationError, AuthorizationError) as exc:
            if isinstance(exc, AuthenticationError) and exc.at_handshake:   # maybe: again
                log.warning("offset commit of %s failed: %s", self.consumer.group, exc)
                return False
            log.error("offset commit of %s refused: %s", self.consumer.group, exc)
            return None
        except Exception as exc:
            log.warning("offset commit of %s failed: %s", self.consumer.group, exc)
            return False
        for pq in pqs:
            pq.committed = dirty.get(pq.mq, pq.committed)
        return True
