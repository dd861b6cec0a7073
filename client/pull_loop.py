"""A push consumer's pulls: one long poll in flight per held queue. An
answer is decoded on the remoting I/O thread, handed to the consume service
and the next pull issued at once; a queue over its flow-control limits, or
whose pull failed, is pulled again later from the timer thread."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from duomq.client.consumer import PullConsumer, PullStatus, pull_result
from duomq.client.process_queue import ProcessQueue
from duomq.common.delay import RETRY_TOPIC
from duomq.common.errors import ReplicaLagError
from duomq.common.subscription import Subscription
from duomq.proto import pb

log = logging.getLogger(__name__)
PULL_RETRY_S = 1.0
FLOW_CONTROL_RETRY_S = 0.05


class PullLoop:
    def __init__(self, consumer: PullConsumer, topics: dict[str, Subscription],
                 retry_topic: str | None, consume, running: Callable[[], bool]):
        self.consumer = consumer
        self.topics = topics               # topic -> subscription
        self.retry_topic = retry_topic
        self.consume = consume             # ConcurrentService | OrderlyService
        self.running = running
        cfg = consumer.config
        self.threshold = cfg.pull_threshold_for_queue
        self.threshold_bytes = cfg.pull_threshold_size_for_queue_mib << 20

    def pull(self, pq: ProcessQueue) -> None:
        c = self.consumer
        if not pq.pulling or not self.running():
            return
        if pq.inflight >= self.threshold or pq.inflight_bytes >= self.threshold_bytes \
                or self.consume.paused(pq):
            c.timer.call_later(FLOW_CONTROL_RETRY_S, self.pull, pq)
            return
        try:
            address = c.read_address(pq.mq)
        except Exception:
            c.timer.call_later(PULL_RETRY_S, self.pull, pq)
            return
        cfg = c.config
        wait_ms = cfg.long_polling_timeout_ms
        req = pb.PullRequest(consumer_group=c.group, topic=pq.mq.topic, queue_id=pq.mq.queue_id,
                             queue_offset=pq.next_pull, max_messages=cfg.pull_batch_size,
                             max_wait_ms=wait_ms, subscription=self.topics[pq.mq.topic].expression,
                             max_replica_lag_ms=cfg.max_replica_lag_ms)
        fut = c.remoting.request(address, pb.PULL, req, c.timeout_s + wait_ms / 1000)
        t0 = time.perf_counter()
        fut.add_done_callback(lambda f: self._on_pulled(pq, f, t0))

    def _on_pulled(self, pq: ProcessQueue, fut, t0: float) -> None:
        """Runs on the I/O thread: decode, hand over, pull again."""
        c = self.consumer
        if not pq.pulling:      # let go, or being handed over: the next owner reads this
            return
        try:
            status, error, resp = fut.result()
            result = pull_result(pq.mq, status, error, resp, self.topics[pq.mq.topic])
        except Exception as exc:
            if c.metrics is not None:
                c.count_pull(pq.mq, t0, None, exc)
            if self.running():
                c.note_read_failure(pq.mq, exc)
                if isinstance(exc, ReplicaLagError) and c.config.read_from == "slave_preferred" \
                        and c.has_master(pq.mq.broker_group):
                    log.info("pull of %s: %s; reading the master meanwhile", pq.mq, exc)
                    self.pull(pq)          # read_address now tries the master first
                    return
                retriable = c.after_failure(exc, pq.mq.topic, pq.mq.broker_group)
                (log.warning if retriable else log.error)("pull of %s failed: %s", pq.mq, exc)
                c.timer.call_later(PULL_RETRY_S, self.pull, pq)
            return
        pq.pulls += 1
        pq.max_offset = result.max_offset
        if c.metrics is not None:
            c.count_pull(pq.mq, t0, result, None)
        c.note_advice(pq.mq, result)
        if result.status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MESSAGE):
            # filtered-out entries count as consumed once the messages before them are
            nbytes = sum(len(m.body) for m in result.messages)    # once per batch
            if pq.mq.topic == self.retry_topic:                   # retries: as first sent
                for m in result.messages:
                    m.topic = m.properties.get(RETRY_TOPIC, m.topic)
            self.consume.dispatch(pq, result.messages, result.next_offset, nbytes)
        elif result.status is PullStatus.OFFSET_ILLEGAL:
            log.warning("offset %d of %s is illegal; moving to %d", pq.next_pull, pq.mq,
                        result.next_offset)
            pq.skip_to(result.next_offset)
        self.pull(pq)
