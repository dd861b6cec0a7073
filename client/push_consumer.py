"""``PushConsumer``: cluster consumption in a consumer group.

The consumer joins the group in ZooKeeper, splits the topic's queues among
the members with the average strategy on every membership or route change,
long-polls each of its queues, hands messages to ``on_message`` on a consume
thread, and commits offsets to the brokers every ``offset_commit_interval_ms``
and on shutdown (at-least-once: a message may be seen twice around a
rebalance or a crash, never skipped).

Threads: the remoting I/O thread (pull answers are decoded there and the next
pull issued at once), one consume thread, a scheduler for delayed retries, and
a rebalance/commit service.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time
from dataclasses import dataclass
from typing import Callable

from duomq.client.allocate import Strategy, strategy
from duomq.client.offset_file import LocalOffsetStore, default_path
from duomq.client.consumer import PullConsumer, PullStatus, pull_result
from duomq.client.scheduler import Scheduler
from duomq.common.config import ConsumerConfig
from duomq.common.message import MessageExt, MessageQueue
from duomq.common.service import ServiceThread
from duomq.common.subscription import parse
from duomq.coordinator.membership import GroupMembership
from duomq.proto import pb

log = logging.getLogger(__name__)
PULL_RETRY_S = 1.0
FLOW_CONTROL_RETRY_S = 0.05
SUSPEND_ON_FAILURE_S = 1.0


@dataclass(eq=False)
class ProcessQueue:
    """Local state of one assigned queue."""

    mq: MessageQueue
    next_pull: int                 # offset of the next pull
    consumed: int                  # next offset to consume; what gets committed
    committed: int = -1
    inflight: int = 0              # messages pulled, not yet consumed
    inflight_bytes: int = 0        # ... and their bodies' bytes
    dropped: bool = False
    pulls: int = 0


class PushConsumer(PullConsumer):
    def __init__(self, group: str, topic: str, on_message: Callable[[MessageExt], object], *,
                 subscription: str = "*", allocate: Strategy | None = None,
                 zookeeper: str | None = None, cluster: str | None = None,
                 config: ConsumerConfig | None = None, zk=None, **overrides):
        super().__init__(zookeeper, cluster, group, config=config, zk=zk, **overrides)
        self.topic = topic
        self.subscription = parse(subscription)    # `*` or `TagA || TagB`
        # a user's function, else config.allocate_strategy by name
        self.allocate = strategy(allocate or self.config.allocate_strategy)
        self.pull_threshold_bytes = self.config.pull_threshold_size_for_queue_mib << 20
        self.broadcasting = self.config.message_model == "broadcasting"
        # broadcasting: every member reads every queue and keeps its own offsets
        self.local_offsets = LocalOffsetStore(default_path(
            self.config.offset_store_dir, self.cluster, group,
            self.config.instance_name or socket.gethostname())) if self.broadcasting else None
        self.on_message = on_message
        self.assigned: dict[MessageQueue, ProcessQueue] = {}
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._scheduler = Scheduler()
        self._membership: GroupMembership | None = None
        self._service = _RebalanceService(self)
        self._consume_thread = threading.Thread(target=self._consume_loop, daemon=True,
                                                name=f"duomq-consume-{group}")
        self._lock = threading.RLock()
        self._running = False
        self.consumed_count = 0
        self.rebalances = 0

    # ------------------------------------------------------------ lifecycle
    def start(self) -> "PushConsumer":
        self.queues(self.topic)  # fails early for an unknown topic
        self._running = True
        self._consume_thread.start()
        self._service.start()
        self.routes.add_listener(lambda topic: topic == self.topic and self._service.wakeup())
        self._membership = GroupMembership(
            self.zk, self.cluster, self.group, self.client_id,
            {"topic": self.topic, "model": self.config.message_model.upper()},
            lambda members: self._service.wakeup())
        self._membership.join()
        self._service.wakeup()
        return self

    def shutdown(self) -> None:
        """Stop pulling, finish the messages in hand, commit, then leave the
        group: the member that takes over our queues starts where we stopped."""
        if not self._running:
            return
        self._running = False
        self._service.shutdown()
        with self._lock:
            for pq in self.assigned.values():
                pq.dropped = True
        self._inbox.put(None)
        self._consume_thread.join(10)
        self.commit_offsets()
        if self._membership:
            self._membership.leave()
        self._scheduler.close()
        self.close()

    def __exit__(self, *exc):
        self.shutdown()

    # ------------------------------------------------------------ rebalance
    def rebalance(self) -> None:
        if not self._running:
            return
        members = self._membership.members if self._membership else []
        try:
            queues = self.queues(self.topic)
        except Exception as exc:
            log.warning("rebalance of %s: no route (%s)", self.group, exc)
            queues = []
        known = set(queues)
        mine = known if self.broadcasting else set(self.allocate(queues, members, self.client_id))
        if not mine <= known:
            log.warning("allocation of %s named queues the topic does not have: %s", self.group,
                        sorted(mine - known))
            mine &= known
        with self._lock:
            current = set(self.assigned)
            if mine == current:
                return
            removed = current - mine
            added = mine - current
            dropped = [self.assigned.pop(mq) for mq in removed]
        self.rebalances += 1
        for pq in dropped:
            pq.dropped = True
        if dropped:
            self._commit([pq for pq in dropped])
        for mq in sorted(added):
            try:
                start, from_broker = self._start_offset(mq)
            except Exception as exc:
                log.warning("cannot find the start offset of %s (%s); retrying", mq, exc)
                self._service.wakeup_later(PULL_RETRY_S)
                continue
            # a start chosen by consume_from is committed on the next round, so
            # the group keeps its starting position even before any message
            pq = ProcessQueue(mq, start, start, committed=start if from_broker else -1)
            with self._lock:
                if mq in self.assigned or not self._running:
                    continue
                self.assigned[mq] = pq
            self._pull(pq)
        log.info("consumer %s of %s now holds %d queues (members %d)", self.client_id, self.group,
                 len(self.assigned), len(members))

    def _start_offset(self, mq: MessageQueue) -> tuple[int, bool]:
        """(offset, came from the committed offsets)."""
        off = self.local_offsets.committed(mq) if self.broadcasting else self.committed(mq)
        if off >= 0:
            return off, True
        if self.config.consume_from == "first":
            return self.min_offset(mq), False
        if self.config.consume_from == "timestamp":
            return self.offset_by_time(mq, self.config.consume_timestamp_ms), False
        return self.max_offset(mq), False

    # ------------------------------------------------------------ pulling
    def _pull(self, pq: ProcessQueue) -> None:
        if pq.dropped or not self._running:
            return
        if pq.inflight >= self.config.pull_threshold_for_queue or \
                pq.inflight_bytes >= self.pull_threshold_bytes:
            self._scheduler.call_later(FLOW_CONTROL_RETRY_S, self._pull, pq)
            return
        try:
            address = self.read_address(pq.mq)
        except Exception:
            self._scheduler.call_later(PULL_RETRY_S, self._pull, pq)
            return
        wait_ms = self.config.long_polling_timeout_ms
        req = pb.PullRequest(consumer_group=self.group, topic=pq.mq.topic, queue_id=pq.mq.queue_id,
                             queue_offset=pq.next_pull, max_messages=self.config.pull_batch_size,
                             max_wait_ms=wait_ms, subscription=self.subscription.expression)
        fut = self.remoting.request(address, pb.PULL, req, self.timeout_s + wait_ms / 1000)
        fut.add_done_callback(lambda f: self._on_pulled(pq, f))

    def _on_pulled(self, pq: ProcessQueue, fut) -> None:
        """Runs on the I/O thread: decode, hand over, pull again."""
        if pq.dropped:
            return
        try:
            result = pull_result(pq.mq, *fut.result(), self.subscription)
        except Exception as exc:
            if self._running:
                log.warning("pull of %s failed: %s", pq.mq, exc)
                self._scheduler.call_later(PULL_RETRY_S, self._pull, pq)
            return
        pq.pulls += 1
        self.note_advice(pq.mq, result)
        if result.status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MESSAGE):
            # filtered-out entries count as consumed once the batch before them is
            pq.next_pull = result.next_offset
            pq.inflight += len(result.messages)
            nbytes = sum(len(m.body) for m in result.messages)    # once per batch
            pq.inflight_bytes += nbytes
            self._inbox.put((pq, result.messages, result.next_offset, nbytes))
        elif result.status is PullStatus.OFFSET_ILLEGAL:
            log.warning("offset %d of %s is illegal; moving to %d", pq.next_pull, pq.mq,
                        result.next_offset)
            pq.next_pull = result.next_offset
            if pq.inflight == 0:
                pq.consumed = result.next_offset
        self._pull(pq)

    # ------------------------------------------------------------ consuming
    def _consume_loop(self) -> None:
        inbox = self._inbox
        handler = self.on_message
        while True:
            item = inbox.get()
            if item is None:
                return
            pq, messages, next_offset, nbytes = item
            for i, msg in enumerate(messages):
                if pq.dropped:
                    break
                while True:
                    try:
                        handler(msg)
                        break
                    except Exception:
                        log.exception("on_message failed for %s; retrying in place", msg.msg_id)
                        time.sleep(SUSPEND_ON_FAILURE_S)
                        if pq.dropped or not self._running:
                            break
                pq.consumed = msg.queue_offset + 1
            else:
                if not pq.dropped:
                    pq.consumed = max(pq.consumed, next_offset)   # past filtered entries
            pq.inflight -= len(messages)
            pq.inflight_bytes -= nbytes
            self.consumed_count += len(messages)

    # ------------------------------------------------------------ offsets
    def commit_offsets(self) -> None:
        with self._lock:
            pqs = list(self.assigned.values())
        self._commit(pqs)

    def _commit(self, pqs: list[ProcessQueue]) -> None:
        dirty = {pq.mq: pq.consumed for pq in pqs if pq.consumed != pq.committed}
        if not dirty:
            return
        try:
            (self.local_offsets.commit if self.broadcasting else self.commit)(dirty)
        except Exception as exc:
            log.warning("offset commit of %s failed: %s", self.group, exc)
            return
        for pq in pqs:
            pq.committed = dirty.get(pq.mq, pq.committed)


class _RebalanceService(ServiceThread):
    """Rebalances when woken (membership or route change) and every
    ``rebalance_interval`` as a safety net; commits offsets on its interval."""

    name = "duomq-rebalance"

    def __init__(self, consumer: PushConsumer):
        super().__init__()
        self.consumer = consumer
        self._next_commit = 0.0
        self._next_rebalance = 0.0

    def wakeup_later(self, delay_s: float):
        self.consumer._scheduler.call_later(delay_s, self.wakeup)

    def run(self):
        c = self.consumer
        interval = c.config.offset_commit_interval_ms / 1000
        while not self.stopped:
            now = time.monotonic()
            woken = self._event.is_set()
            self._event.clear()
            if woken or now >= self._next_rebalance:
                self._next_rebalance = now + c.config.rebalance_interval_ms / 1000
                try:
                    c.rebalance()
                except Exception:
                    log.exception("rebalance failed")
                    self.wakeup_later(PULL_RETRY_S)
            if now >= self._next_commit:
                self._next_commit = now + interval
                c.commit_offsets()
            self._event.wait(min(interval, 1.0))
