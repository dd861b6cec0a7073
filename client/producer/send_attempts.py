"""What a send comes back with (``SendStatus``, ``SendResult``) and the retry
policy of one send (``SendAttempts``), shared by the producer's blocking and
asynchronous paths."""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from duomq.client.producer.selector import FaultAvoidance
from duomq.common import recall_handle
from duomq.common.client_config import ProducerConfig
from duomq.common.errors import NoRouteError, for_status
from duomq.common.message import MessageQueue, make_msg_id
from duomq.proto import pb

log = logging.getLogger("duomq.client.producer.producer")
ATTEMPT_GRACE_S = 2.0   # an attempt waits the broker's ack wait plus this, if retries remain


class SendStatus(str, enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"     # stored, not fsynced in time
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"   # stored, no slave confirmed in time
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"   # stored, no in-sync slave to confirm


_STORED: dict[int, SendStatus] = {
    pb.OK: SendStatus.SEND_OK, pb.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    pb.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    pb.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE}


@dataclass
class SendResult:
    status: SendStatus
    msg_id: str                               # the first message of the batch
    queue: MessageQueue
    queue_offset: int                         # queue offset of the first message
    physical_offsets: Sequence[int] = ()      # commit-log offset of every message
    broker_group: str = ""
    in_sync_replicas: int = 0                 # the master's slaves in sync when it acked
    degraded: bool = False                    # SYNC acked with fewer than sync_replicas
                                              # slaves (the group's min_sync_replicas)
    epoch: int = 0                            # the epoch of the group's master that answered
    duplicate: bool = False                   # a retry of a batch stored before: not stored
                                              # again (offsets: the first store's, if known)
    stored_epoch: int = 0                     # a duplicate's first store's epoch, when it was
                                              # another master's (0: ``epoch`` stored it)
    deliver_at_ms: int = 0                    # a timer message's delivery time (the first's)

    @property
    def recall_handle(self) -> str:
        """What ``Producer.recall`` takes to cancel the (first) message, a
        timer message, before it comes due ("": not a timer message)."""
        if not self.deliver_at_ms or not self.physical_offsets:
            return ""
        return recall_handle.make(self.queue.topic, self.msg_ids[0], self.deliver_at_ms)

    @property
    def ok(self) -> bool:
        return self.status is SendStatus.SEND_OK

    @property
    def msg_ids(self) -> list[str]:
        """Every message id of the batch (formatted on demand: most callers
        never read them, and formatting 256 ids costs as much as a send)."""
        group, epoch = self.broker_group, self.stored_epoch or self.epoch
        return [make_msg_id(group, p, epoch) for p in self.physical_offsets]



class SendAttempts:
    """The retry policy of one send, shared by the blocking and the
    asynchronous paths: which failures are retried, on which groups, until when."""

    def __init__(self, config: ProducerConfig, timeout_s: float, retries: int, pinned: bool,
                 faults: FaultAvoidance,
                 after_failure: Callable[[Exception, MessageQueue | None], bool]):
        self.config = config
        self.faults = faults
        self.after_failure = after_failure   # ClientBase.after_failure: refresh, retriable?
        self.left = retries
        self.pinned = pinned            # a chosen queue or key: never moved to another group
        self.avoid: set[str] = set()    # groups that failed this send
        self.deadline = time.monotonic() + timeout_s
        self.stored: SendResult | None = None   # a stored-but-not-durable earlier answer
        self.sequenced: MessageQueue | None = None  # an idempotent send's queue, once chosen
        self.sequenced_batch = None                 # ... and its numbered batch
        self.unnumbered = None      # an idempotent send's batch that cannot be numbered
        self.maybe_stored = False   # an attempt's outcome is unknown (it timed out)
        self.pinned_by_caller = pinned

    def left_s(self) -> float:
        return max(0.001, self.deadline - time.monotonic())

    def attempt_s(self, broker_wait_s: float) -> float:
        """One attempt's timeout: the broker's longest ack wait plus a grace,
        so that an attempt lost with a dead broker leaves time to retry."""
        if self.left <= 0:
            return self.left_s()
        return min(self.left_s(), broker_wait_s + ATTEMPT_GRACE_S)

    def _take_retry(self, mq: MessageQueue | None) -> bool:
        if self.left <= 0 or time.monotonic() >= self.deadline:
            return False
        self.left -= 1
        if mq is not None and not self.pinned:
            self.avoid.add(mq.broker_group)
        return True

    def retry_after_error(self, exc: Exception, mq: MessageQueue | None) -> bool:
        retriable = self.after_failure(exc, mq)
        if retriable and mq is not None:
            self.faults.failed(mq.broker_group, time.monotonic())
        if retriable and mq is None and isinstance(exc, NoRouteError) \
                and time.monotonic() < self.deadline:
            return True        # no broker was tried: wait for a master, no attempt spent
        if retriable and self._take_retry(mq):
            log.info("send failed (%s); retrying on another broker group", exc)
            return True
        return False

    def give_up(self, exc: Exception) -> SendResult:
        if self.stored is not None:
            return self.stored          # it was stored earlier, just not durable
        raise exc

    def judge(self, status: int, error: str, resp, mq: MessageQueue) -> SendResult | None:
        """The result of an answer, or None to retry elsewhere; raises for errors."""
        send_status = _STORED.get(status)
        if send_status is None:
            raise for_status(status, error)
        if resp is None:
            result = SendResult(send_status, "", mq, -1)
        else:
            offsets = resp.physical_offsets
            stored = resp.stored_epoch
            result = SendResult(send_status,
                                make_msg_id(resp.broker_group, offsets[0], stored or resp.epoch)
                                if offsets else "",
                                mq, resp.queue_offset, offsets, resp.broker_group,
                                resp.in_sync_replicas, resp.degraded, resp.epoch,
                                resp.duplicate, stored)
        if (send_status is not SendStatus.SEND_OK and not self.pinned
                and self.config.retry_another_broker_when_not_store_ok and self._take_retry(mq)):
            self.stored = result
            log.info("send stored but %s on %s; retrying on another group", send_status.value,
                     mq.broker_group)
            return None
        return result
