"""Orderly consumption's queue locks on the masters (RocketMQ's
``RebalanceLockManager`` seen from the client): LOCK_QUEUES before a queue is
consumed, renewed every ``LOCK_RENEW_S``, UNLOCK_QUEUES once its position is
committed, so the next owner starts exactly there. Called on the timer thread
only (rebalances and renewals); consume threads read ``locked_until``."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from duomq.client.base import ClientBase, raise_for
from duomq.client.consumer.pull import by_broker_group
from duomq.common.message import MessageQueue
from duomq.proto import pb

log = logging.getLogger(__name__)
LOCK_RENEW_S = 20.0         # renew queue locks this often
CLIENT_LOCK_TTL_S = 30.0    # ... and consume a queue this long after its last renewal
                            # (the broker keeps a lock 60 s)


class QueueLocker:
    def __init__(self, client: ClientBase, group: str, timeout_s: float):
        self.client = client
        self.group = group
        self.timeout_s = timeout_s

    def lock(self, mqs: Iterable[MessageQueue]) -> dict[MessageQueue, float]:
        """Lock ``mqs`` on their masters; return those held and until when
        (monotonic) this client may consume them without renewing."""
        held: dict[MessageQueue, float] = {}
        for items in by_broker_group(mqs).values():
            until = time.monotonic() + CLIENT_LOCK_TTL_S
            resp = self._request(pb.LOCK_QUEUES, items)
            if resp is not None:
                got = {(q.topic, q.queue_id) for q in resp.locked}
                held.update((mq, until) for mq in items if (mq.topic, mq.queue_id) in got)
        return held

    def unlock(self, mqs: Iterable[MessageQueue]) -> None:
        for items in by_broker_group(mqs).values():
            self._request(pb.UNLOCK_QUEUES, items)

    def _request(self, type_: int, items: list[MessageQueue]):
        """LOCK_QUEUES or UNLOCK_QUEUES for queues of one broker group; the
        answer, or None (logged) when it failed."""
        req = pb.LockQueuesRequest(consumer_group=self.group, client_id=self.client.client_id)
        for mq in items:
            req.queues.add(topic=mq.topic, queue_id=mq.queue_id)
        group = items[0].broker_group
        try:
            status, error, resp = self.client.remoting.call(
                self.client.master_address(group, items[0].topic), type_, req, self.timeout_s)
            raise_for(status, error)
        except Exception as exc:
            log.warning("%s of %s on %s failed: %s", pb.RequestType.Name(type_), self.group,
                        group, exc)
            return None
        return resp
