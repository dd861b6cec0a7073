"""``PushConsumer``: cluster or broadcast consumption in a consumer group.

The consumer joins the group in ZooKeeper, splits the topic's queues among
the members with its allocation strategy on every membership or route change,
long-polls each of its queues, runs ``on_message`` on a pool of consume
threads (concurrently, or orderly per queue: ``consume_service``), and commits
each queue's consumed offset (``process_queue``: the low end of its window)
every ``offset_commit_interval_ms`` and on shutdown. At-least-once: a message
may be seen twice around a rebalance or a crash, never skipped.

Threads: the remoting I/O thread (pull answers are decoded there, handed to
the consume service and the next pull issued at once), ``consume_threads``
consume threads, a scheduler for delayed work, and a rebalance/commit service.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable

from duomq.client.allocate import Strategy, strategy
from duomq.client.base import raise_for
from duomq.client.consume_service import ConcurrentService, OrderlyService
from duomq.client.consumer import EVERYTHING, PullConsumer, PullStatus, by_broker_group, pull_result
from duomq.client.offset_file import LocalOffsetStore, default_path
from duomq.client.process_queue import ProcessQueue
from duomq.client.scheduler import Scheduler
from duomq.common.config import ConsumerConfig
from duomq.common.delay import RETRY_TOPIC
from duomq.common.message import MessageExt, MessageQueue
from duomq.common.names import DLQ_PREFIX, RETRY_PREFIX
from duomq.common.service import ServiceThread
from duomq.common.subscription import parse
from duomq.coordinator.membership import GroupMembership
from duomq.coordinator.offset_reset import ResetWatch
from duomq.coordinator.topics import TopicAdmin
from duomq.proto import pb

log = logging.getLogger(__name__)
PULL_RETRY_S = 1.0
FLOW_CONTROL_RETRY_S = 0.05
LOCK_RENEW_S = 20.0         # orderly: renew queue locks this often
CLIENT_LOCK_TTL_S = 30.0    # ... and consume a queue this long after its last renewal
                            # (the broker keeps a lock 60 s)
RELEASE_WAIT_S = 1.0        # orderly: wait for the message in hand before unlocking


def _wait_idle(pqs: list[ProcessQueue]) -> None:
    """Orderly: let the message in hand of each queue finish (at most
    RELEASE_WAIT_S) before its position is committed or moved."""
    deadline = time.monotonic() + RELEASE_WAIT_S
    while any(pq.busy for pq in pqs) and time.monotonic() < deadline:
        time.sleep(0.01)


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
        # clustering: failed messages come back through the group's retry topic
        self.retry_topic = None if self.broadcasting else RETRY_PREFIX + group
        self.topics = {topic: self.subscription}          # topic -> subscription
        if self.retry_topic:
            self.topics[self.retry_topic] = EVERYTHING
        self.orderly = self.config.consume_mode == "orderly"
        self.locking = self.orderly and not self.broadcasting   # queue locks on the master
        self.assigned: dict[MessageQueue, ProcessQueue] = {}
        self._scheduler = Scheduler()
        self.call_later = self._scheduler.call_later
        self._membership: GroupMembership | None = None
        self._reset_watch: ResetWatch | None = None
        self._pending_reset: dict[MessageQueue, int] | None = None
        self.resets = 0
        self._service = _RebalanceService(self)
        self._consume = (OrderlyService if self.orderly else ConcurrentService)(self)
        self._lock = threading.RLock()
        self._running = False
        self.rebalances = 0
        self.sent_back = [0, 0]        # to the retry topic, to the dead-letter topic

    def held(self, topic: str | None = None) -> list[MessageQueue]:
        """The queues of ``topic`` (default: the subscribed topic, not the
        group's retry topic) this consumer holds now."""
        topic = topic or self.topic
        with self._lock:
            return sorted(mq for mq in self.assigned if mq.topic == topic)

    @property
    def consumed_count(self) -> int:
        return self._consume.consumed

    # ------------------------------------------------------------ lifecycle
    def start(self) -> PushConsumer:
        self.queues(self.topic)  # fails early for an unknown topic
        if self.retry_topic:
            self._ensure_group_topics()
        self._running = True
        self._service.start()
        self.routes.add_listener(self._on_route)
        self._membership = GroupMembership(
            self.zk, self.cluster, self.group, self.client_id,
            {"topic": self.topic, "model": self.config.message_model.upper()},
            lambda members: self._service.wakeup())
        self._membership.join()
        self._reset_watch = ResetWatch(self.zk, self.cluster, self.group, self.topic,
                                       self._on_reset)
        self._service.wakeup()
        return self

    def _on_route(self, topic: str) -> None:
        if topic in self.topics:
            self._service.wakeup()

    def shutdown(self) -> None:
        """Stop pulling, finish the messages in hand, commit, then leave the
        group: the member that takes over our queues starts where we stopped."""
        if not self._running:
            return
        self._running = False
        if self._reset_watch:
            self._reset_watch.close()
        self._service.shutdown()
        with self._lock:
            for pq in self.assigned.values():
                pq.dropped = True
        self._consume.shutdown(10)     # each thread ends its message in hand
        with self._lock:
            held = list(self.assigned.values())
        self._release(held)
        if self._membership:
            self._membership.leave()
        self._scheduler.close()
        self.close()

    def __exit__(self, *exc):
        self.shutdown()

    def _ensure_group_topics(self) -> None:
        """The group's retry and dead-letter topics, one queue on every broker
        group of the topic (a failed message goes back to the group it came from)."""
        admin = TopicAdmin(self.zk, self.cluster)
        groups = sorted(admin.describe(self.topic).queues)
        for name in (RETRY_PREFIX + self.group, DLQ_PREFIX + self.group):
            admin.ensure_system(name, groups)

    # ------------------------------------------------------------ rebalance
    def rebalance(self) -> None:
        if not self._running:
            return
        members = self._membership.members if self._membership else []
        mine, known = set(), set()
        for topic in self.topics:          # each topic split on its own, as RocketMQ does
            try:
                queues = self.queues(topic)
            except Exception as exc:
                log.warning("rebalance of %s: no route to %s (%s)", self.group, topic, exc)
                continue
            known.update(queues)
            mine.update(queues if self.broadcasting
                        else self.allocate(queues, members, self.client_id))
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
            self._release(dropped)
        locks = self._lock_queues(added) if self.locking else {}
        for mq in sorted(added):
            if self.locking and mq not in locks:
                # its last owner has not let it go yet: try again soon
                self._service.wakeup_later(PULL_RETRY_S)
                continue
            try:
                start, from_broker = self._start_offset(mq)
            except Exception as exc:
                log.warning("cannot find the start offset of %s (%s); retrying", mq, exc)
                self._service.wakeup_later(PULL_RETRY_S)
                continue
            # a start chosen by consume_from is committed on the next round, so
            # the group keeps its starting position even before any message
            pq = ProcessQueue(mq, start, committed=start if from_broker else -1)
            pq.locked_until = locks.get(mq, 0.0)
            with self._lock:
                if mq in self.assigned or not self._running:
                    continue
                self.assigned[mq] = pq
            self._pull(pq)
        log.info("consumer %s of %s now holds %d queues (members %d)", self.client_id, self.group,
                 len(self.assigned), len(members))

    # ------------------------------------------------------------ offset resets
    def _on_reset(self, offsets: dict[MessageQueue, int]) -> None:
        """An operator reset the group's offsets (a ZooKeeper watch thread):
        the rebalance service applies it, between its own commits."""
        with self._lock:
            self._pending_reset = offsets
        self._service.wakeup()

    def apply_reset(self) -> None:
        """Move every held queue named by a pending reset to its new offset:
        a fresh window from there (the old one is dropped: its pulls and
        messages in hand are forgotten), committed at once."""
        with self._lock:
            offsets, self._pending_reset = self._pending_reset, None
            if not offsets or not self._running:
                return
            moved, olds = [], []
            for mq, old in list(self.assigned.items()):
                if mq in offsets:
                    old.dropped = True
                    pq = ProcessQueue(mq, offsets[mq])
                    pq.locked_until = old.locked_until
                    self.assigned[mq] = pq
                    moved.append(pq)
                    olds.append(old)
        if self.orderly:     # one thread per queue: let the message in hand finish first
            _wait_idle(olds)
        self.resets += 1
        log.info("offset reset of %s: %d queues moved", self.group, len(moved))
        self._commit(moved)
        for pq in moved:
            self._pull(pq)

    def _release(self, pqs: list[ProcessQueue]) -> None:
        """Queues no longer ours: commit where they stopped; orderly, first let
        the message in hand finish and, after the commit, unlock them, so the
        next owner starts exactly there."""
        if self.locking:
            _wait_idle(pqs)
        self._commit(pqs)
        if self.locking:
            # a queue still busy keeps its lock until it expires on the broker
            self._unlock_queues([pq.mq for pq in pqs if not pq.busy])

    # ------------------------------------------------------------ orderly: queue locks
    def _lock_queues(self, mqs) -> dict[MessageQueue, float]:
        """Lock ``mqs`` on their masters; return those held and until when
        (monotonic) this client may consume them without renewing."""
        held: dict[MessageQueue, float] = {}
        for items in by_broker_group(mqs).values():
            until = time.monotonic() + CLIENT_LOCK_TTL_S
            resp = self._locks_request(pb.LOCK_QUEUES, items)
            if resp is not None:
                got = {(q.topic, q.queue_id) for q in resp.locked}
                held.update((mq, until) for mq in items if (mq.topic, mq.queue_id) in got)
        return held

    def _unlock_queues(self, mqs: list[MessageQueue]) -> None:
        for items in by_broker_group(mqs).values():
            self._locks_request(pb.UNLOCK_QUEUES, items)

    def _locks_request(self, type_: int, items: list[MessageQueue]):
        """LOCK_QUEUES or UNLOCK_QUEUES for queues of one broker group; the
        answer, or None (logged) when it failed."""
        req = pb.LockQueuesRequest(consumer_group=self.group, client_id=self.client_id)
        for mq in items:
            req.queues.add(topic=mq.topic, queue_id=mq.queue_id)
        group = items[0].broker_group
        try:
            status, error, resp = self.remoting.call(
                self.master_address(group, items[0].topic), type_, req, self.timeout_s)
            raise_for(status, error)
        except Exception as exc:
            log.warning("%s of %s on %s failed: %s", pb.RequestType.Name(type_), self.group,
                        group, exc)
            return None
        return resp

    def renew_locks(self) -> None:
        """Renew the locks of every queue held; a queue whose lock is lost stops
        being consumed once its time is up, and resumes when it is taken again."""
        with self._lock:
            pqs = {pq.mq: pq for pq in self.assigned.values()}
        held = self._lock_queues(pqs)
        for mq, pq in pqs.items():
            if mq in held:
                pq.locked_until = held[mq]
                if isinstance(self._consume, OrderlyService):
                    self._consume.schedule(pq)
            else:
                log.warning("queue %s of %s is not locked by this consumer", mq, self.group)

    def _start_offset(self, mq: MessageQueue) -> tuple[int, bool]:
        """(offset, came from the committed offsets)."""
        off = self.local_offsets.committed(mq) if self.local_offsets is not None else self.committed(mq)
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
                pq.inflight_bytes >= self.pull_threshold_bytes or self._consume.paused(pq):
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
                             max_wait_ms=wait_ms,
                             subscription=self.topics[pq.mq.topic].expression)
        fut = self.remoting.request(address, pb.PULL, req, self.timeout_s + wait_ms / 1000)
        fut.add_done_callback(lambda f: self._on_pulled(pq, f))

    def _on_pulled(self, pq: ProcessQueue, fut) -> None:
        """Runs on the I/O thread: decode, hand over, pull again."""
        if pq.dropped:
            return
        try:
            status, error, resp = fut.result()
            result = pull_result(pq.mq, status, error, resp, self.topics[pq.mq.topic])
        except Exception as exc:
            if self._running:
                retriable = self.after_failure(exc, pq.mq.topic, pq.mq.broker_group)
                (log.warning if retriable else log.error)("pull of %s failed: %s", pq.mq, exc)
                self._scheduler.call_later(PULL_RETRY_S, self._pull, pq)
            return
        pq.pulls += 1
        self.note_advice(pq.mq, result)
        if result.status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MESSAGE):
            # filtered-out entries count as consumed once the messages before them are
            nbytes = sum(len(m.body) for m in result.messages)    # once per batch
            if pq.mq.topic == self.retry_topic:                   # retries: as first sent
                for m in result.messages:
                    m.topic = m.properties.get(RETRY_TOPIC, m.topic)
            self._consume.dispatch(pq, result.messages, result.next_offset, nbytes)
        elif result.status is PullStatus.OFFSET_ILLEGAL:
            log.warning("offset %d of %s is illegal; moving to %d", pq.next_pull, pq.mq,
                        result.next_offset)
            pq.skip_to(result.next_offset)
        self._pull(pq)

    # ------------------------------------------------------------ failures
    def handle_failure(self, msg: MessageExt, exc: Exception, attempts: int) -> bool:
        """``on_message`` raised: True when the message is dealt with (sent
        back for a delayed retry, or to the dead-letter queue after
        ``max_reconsume_times`` retries), False to try it again here after
        ``suspend_current_queue_ms`` (the send back failed; broadcasting,
        where there is no retry topic, up to ``max_reconsume_times``)."""
        if self.broadcasting:
            if attempts > self.config.max_reconsume_times:
                log.error("on_message failed %d times for %s; giving it up: %s", attempts,
                          msg.msg_id, exc)
                return True
            log.warning("on_message failed for %s (attempt %d): %s", msg.msg_id, attempts, exc)
            return False
        log.info("on_message failed for %s (retried %d times): %s", msg.msg_id,
                 msg.reconsume_times, exc)
        return self._send_back(msg, dead_letter=False)

    def dead_letter(self, msg: MessageExt, exc: Exception) -> bool:
        """Orderly consumption gave ``msg`` up; True once it is set aside."""
        log.error("orderly consumption gives %s up after %d attempts: %s", msg.msg_id,
                  self.config.max_reconsume_times + 1, exc)
        return self.broadcasting or self._send_back(msg, dead_letter=True)

    def _send_back(self, msg: MessageExt, dead_letter: bool) -> bool:
        req = pb.SendBackRequest(consumer_group=self.group, physical_offset=msg.physical_offset,
                                 max_reconsume_times=self.config.max_reconsume_times,
                                 dead_letter=dead_letter)
        try:
            status, error, resp = self.remoting.call(
                self.master_address(msg.broker_group, msg.topic), pb.SEND_BACK, req,
                self.timeout_s)
            raise_for(status, error)
            to_dlq = resp.topic.startswith(DLQ_PREFIX)
        except Exception as exc:
            log.warning("cannot send %s back to %s: %s; trying it again here", msg.msg_id,
                        msg.broker_group, exc)
            return False
        with self._lock:
            self.sent_back[to_dlq] += 1
        return True

    # ------------------------------------------------------------ offsets
    def commit_offsets(self) -> None:
        with self._lock:
            pqs = list(self.assigned.values())
        self._commit(pqs)

    def _commit(self, pqs: list[ProcessQueue]) -> None:
        dirty = {}
        for pq in pqs:
            off = pq.consumed_offset()
            if off != pq.committed:
                dirty[pq.mq] = off
        if not dirty:
            return
        try:
            (self.local_offsets.commit if self.local_offsets is not None else self.commit)(dirty)
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
        self._next_lock = time.monotonic() + LOCK_RENEW_S

    def wakeup_later(self, delay_s: float):
        self.consumer._scheduler.call_later(delay_s, self.wakeup)

    def run(self):
        c = self.consumer
        interval = c.config.offset_commit_interval_ms / 1000
        while not self.stopped:
            now = time.monotonic()
            woken = self._event.is_set()
            self._event.clear()
            c.apply_reset()
            if woken or now >= self._next_rebalance:
                self._next_rebalance = now + c.config.rebalance_interval_ms / 1000
                try:
                    c.rebalance()
                except Exception:
                    log.exception("rebalance failed")
                    self.wakeup_later(PULL_RETRY_S)
            if c.locking and now >= self._next_lock:
                self._next_lock = now + LOCK_RENEW_S
                c.renew_locks()
            if now >= self._next_commit:
                self._next_commit = now + interval
                c.commit_offsets()
            self._event.wait(min(interval, 1.0))
