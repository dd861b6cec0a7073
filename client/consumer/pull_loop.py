"""A push consumer's pulls: one long poll in flight per held queue. An
answer is decoded on the remoting I/O thread, handed to the consume service
and the next pull issued at once; a queue over its flow-control limits, or
whose pull failed, is pulled again later from the timer thread.

Queues with messages waiting are pulled together: gathered until the I/O
thread has handed over the answers it read, then those of one broker go in
one request (a PULL_MANY, as Kafka's fetch names several partitions of a
broker). A queue pulled to its end waits in a PULL of its own, held at the
broker until a message arrives in it: a message wakes only its queue's
pull. (A drain of 1,000 queues of 100 messages takes about 16 requests and
answers instead of 1,000.)"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from duomq.client.consumer.process_queue import ProcessQueue
from duomq.client.consumer.pull import PullConsumer, PullStatus, pull_result
from duomq.common.delay import RETRY_TOPIC
from duomq.common.errors import BrokerSystemError, ReplicaLagError, for_status
from duomq.common.subscription import Subscription
from duomq.proto import pb

log = logging.getLogger(__name__)
PULL_RETRY_S = 1.0
# queues with messages waiting pulled in one PULL_MANY (the broker takes up to 1,000): 64
# queues of 256 messages of 100 bytes fill 1.6 MiB of the broker's 4 MiB an answer
QUEUES_PER_REQUEST = 64
SPREAD = 4                     # ... and in at least this many requests (if there are as many)
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
        self._lock = threading.Lock()
        self._ready: dict[str, list[ProcessQueue]] = {}   # address -> queues to pull next
        self._flush_due = False                           # a _flush is on its way
        self._turn = 0

    def pull(self, pq: ProcessQueue) -> None:
        """Pull ``pq`` next. A queue known to hold more than was pulled (or
        not pulled yet) is gathered with the others of its broker and sent
        once the I/O thread has handed over the answers it read, in one
        request (a PULL_MANY that does not wait); a queue pulled to its end
        gets a PULL of its own, held at the broker until it has something."""
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
        if pq.pulls and pq.max_offset <= pq.next_pull:       # at its end: a long poll
            self._send(address, [pq])
            return
        with self._lock:
            self._ready.setdefault(address, []).append(pq)
            if self._flush_due:
                return
            self._flush_due = True
        c.remoting.call_soon(self._flush)

    def _flush(self) -> None:
        """On the I/O thread: send what ``pull`` gathered."""
        with self._lock:
            ready, self._ready = self._ready, {}
            self._flush_due = False
        self._turn += 1
        for address, pqs in ready.items():
            # a full answer leaves the queues at its end unread: each request
            # starts at another place (Kafka's fetch rotates its partitions)
            k = self._turn % len(pqs)
            pqs = pqs[k:] + pqs[:k]
            # in at least SPREAD requests: the broker reads one answer while
            # this thread decodes another
            per = min(QUEUES_PER_REQUEST, -(-len(pqs) // SPREAD))
            for lo in range(0, len(pqs), per):
                self._send(address, pqs[lo:lo + per])

    def _send(self, address: str, pqs: list[ProcessQueue]) -> None:
        """One queue: a PULL held at the broker until it has something;
        several: a PULL_MANY answered at once."""
        c = self.consumer
        cfg = c.config
        wait_ms = cfg.long_polling_timeout_ms if len(pqs) == 1 else 0
        reqs = [pb.PullRequest(consumer_group=c.group, topic=pq.mq.topic,
                               queue_id=pq.mq.queue_id, queue_offset=pq.next_pull,
                               max_messages=cfg.pull_batch_size, max_wait_ms=wait_ms,
                               subscription=self.topics[pq.mq.topic].expression,
                               max_replica_lag_ms=cfg.max_replica_lag_ms) for pq in pqs]
        timeout_s = c.timeout_s + wait_ms / 1000
        t0 = time.perf_counter()
        if len(pqs) == 1:
            c.remoting.request_then(address, pb.PULL, reqs[0], timeout_s, self._on_pulled,
                                    pqs[0], t0)
        else:
            c.remoting.request_then(address, pb.PULL_MANY, pb.PullManyRequest(pulls=reqs),
                                    timeout_s, self._on_pulled_many, pqs, t0)

    def _on_pulled(self, pq: ProcessQueue, t0: float, answer, exc) -> None:
        """Runs on the I/O thread: decode, hand over, pull again."""
        if exc is not None:
            self._answered(pq, t0, exc)
            return
        status, error, resp = answer
        self._answered(pq, t0, None, status, error, resp)

    def _on_pulled_many(self, pqs: list[ProcessQueue], t0: float, answer, exc) -> None:
        """Runs on the I/O thread: each queue's entry as a PULL's answer."""
        entries: list = []
        if exc is None:
            status, error, resp = answer
            if status != pb.OK:
                exc = for_status(status, error)
            else:
                entries = list(resp.entries)
                if len(entries) != len(pqs):
                    exc = BrokerSystemError(f"a PULL_MANY of {len(pqs)} queues was answered "
                                            f"with {len(entries)} entries")
        if exc is not None:
            for pq in pqs:
                self._answered(pq, t0, exc)
            return
        for pq, e in zip(pqs, entries, strict=True):
            self._answered(pq, t0, None, e.status, e.error,
                           e.response if e.HasField("response") else None)

    def _answered(self, pq: ProcessQueue, t0: float, exc: Exception | None,
                  status: int = 0, error: str = "", resp=None) -> None:
        c = self.consumer
        if not pq.pulling:      # let go, or being handed over: the next owner reads this
            return
        if exc is None:
            try:
                result = pull_result(pq.mq, status, error, resp, self.topics[pq.mq.topic])
            except Exception as e:
                exc = e
        if exc is not None:
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
        chunks = None
        if result.status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MESSAGE):
            # filtered-out entries count as consumed once the messages before them are
            nbytes = sum(len(m.body) for m in result.messages)    # once per batch
            if pq.mq.topic == self.retry_topic:                   # retries: as first sent
                for m in result.messages:
                    m.topic = m.properties.get(RETRY_TOPIC, m.topic)
            chunks = self.consume.accept(pq, result.messages, result.next_offset, nbytes)
        elif result.status is PullStatus.OFFSET_ILLEGAL:
            log.warning("offset %d of %s is illegal; moving to %d", pq.next_pull, pq.mq,
                        result.next_offset)
            pq.skip_to(result.next_offset)
        if chunks is not None and self.consume.pool.inline:
            # the handler runs here first: the next pull leaves only once the
            # answers read are handed over, so making it first only delayed
            # the handler (by ~25 us at 2,000 msg/s)
            try:
                self.consume.start(pq, chunks)
            finally:
                self.pull(pq)
            return
        try:
            self.pull(pq)
        finally:
            if chunks is not None:
                # the consume threads last: a woken thread waits for this one
                # to let go of the interpreter, so what this thread still does
                # after the hand-over delays the handler
                self.consume.start(pq, chunks)
