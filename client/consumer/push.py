"""``PushConsumer``: cluster or broadcast consumption in a consumer group.

The consumer joins the group in ZooKeeper and is made of explicit parts:

  part                                 runs on                      owns
  ``rebalancer.Rebalancer``            the timer thread             which queues are held
  ``pull_loop.PullLoop``               the remoting I/O thread      one long poll per queue
                                       (answers), the timer (retries)
  ``consume_service`` (concurrent      consume threads, started     running ``on_message``
  or orderly)                          as the load needs them
  ``offset_committer.OffsetCommitter`` the timer thread             committed offsets
  ``queue_locker.QueueLocker``         the timer thread             orderly queue locks

The timer thread (``ClientBase.timer``) runs the periodic work: a rebalance
on every membership or route change and every ``rebalance_interval_ms``, the
offset commit every ``offset_commit_interval_ms``, lock renewals (orderly),
heartbeats, and delayed pulls. ZooKeeper's watch threads only wake it.
At-least-once: a message is never skipped. A queue changes hands without
re-delivery when members join or leave (``rebalancer``, ``handoff``); after a
crash, what the dead member consumed since its last commit is seen again.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from duomq.client.base import raise_for
from duomq.client.cluster.membership import GroupMembership
from duomq.client.cluster.offset_reset import ResetWatch
from duomq.client.cluster.queue_owners import QueueOwners
from duomq.client.consumer import queue_locker as queue_locker
from duomq.client.consumer.allocate import Strategy, strategy
from duomq.client.consumer.consume_service import ConcurrentService, OrderlyService
from duomq.client.consumer.offset_committer import OffsetCommitter
from duomq.client.consumer.offset_file import LocalOffsetStore, default_path
from duomq.client.consumer.process_queue import ProcessQueue
from duomq.client.consumer.pull import EVERYTHING, PullConsumer
from duomq.client.consumer.pull_loop import PullLoop
from duomq.client.consumer.rebalancer import Rebalancer
from duomq.client.shape import check_shape
from duomq.common.client_config import ConsumerConfig
from duomq.common.message import MessageExt, MessageQueue
from duomq.common.metrics import labelled
from duomq.common.names import DLQ_PREFIX, RETRY_PREFIX
from duomq.common.subscription import parse
from duomq.coordinator.group_nodes import GroupMemberNode
from duomq.proto import pb

log = logging.getLogger(__name__)
GROUP_TOPICS_WAIT_S = 5.0   # a secured cluster: how long start waits for the brokers to make
                            # the group's retry and dead-letter topics
HANDBACK_MARGIN_S = 5.0     # shutting down: time for the last commits past handoff_timeout_ms


class PushConsumer(PullConsumer):
    def __init__(self, group: str, *old: Any, topic: str | None = None,
                 on_message: Callable[[MessageExt], object] | None = None,
                 subscription: str = "*",
                 allocate: Strategy | None = None, zookeeper: str | None = None,
                 cluster: str | None = None, config: ConsumerConfig | None = None, zk=None,
                 **overrides):
        check_shape("PushConsumer", group, old, topic=topic, on_message=on_message)
        assert topic is not None and on_message is not None
        super().__init__(group, zookeeper=zookeeper, cluster=cluster, config=config, zk=zk,
                         **overrides)
        cfg = self.config
        self.topic = topic
        self.subscription = parse(subscription)    # `*` or `TagA || TagB`
        self.broadcasting = cfg.message_model == "broadcasting"
        # broadcasting: every member reads every queue and keeps its own offsets
        self.local_offsets = LocalOffsetStore(default_path(
            cfg.offset_store_dir, self.cluster, group,
            cfg.instance_name or socket.gethostname())) if self.broadcasting else None
        self.on_message = on_message
        # clustering: failed messages come back through the group's retry topic
        self.retry_topic = None if self.broadcasting else RETRY_PREFIX + group
        self.topics = {topic: self.subscription}          # topic -> subscription
        if self.retry_topic:
            self.topics[self.retry_topic] = EVERYTHING
        self.orderly = cfg.consume_mode == "orderly"
        self.locking = self.orderly and not self.broadcasting   # queue locks on the master
        self._running = False
        self._membership: GroupMembership | None = None
        self._reset_watch: ResetWatch | None = None
        self._tasks: list = []
        self.sent_back = [0, 0]        # to the retry topic, to the dead-letter topic
        self._count_lock = threading.Lock()     # consume threads count send-backs
        self._consume = (OrderlyService if self.orderly else ConcurrentService)(self)
        self.pulls = PullLoop(self, self.topics, self.retry_topic, self._consume,
                              lambda: self._running)
        self.committer = OffsetCommitter(self, self.local_offsets)
        self.locker = queue_locker.QueueLocker(self, group, self.timeout_s) \
            if self.locking else None
        # a user's function, else config.allocate_strategy by name
        # clustering: owner nodes in ZooKeeper order each queue's hand-off
        self.owners = None if self.broadcasting else QueueOwners(
            self.zk, self.cluster, group, self.client_id, lambda: self._rebalance_soon(0.0))
        self.rebalancer = Rebalancer(
            self, list(self.topics), strategy(allocate or cfg.allocate_strategy),
            self.broadcasting, self._members, self.committer, self.pulls, self.locker,
            self._rebalance_soon, lambda: self._running, self.owners,
            cfg.handoff_timeout_ms / 1000, self.timer.call_later)
        self._session_lost = False
        self._halted = False          # halt(): no message more to on_message

    # ------------------------------------------------------------ what it holds
    @property
    def assigned(self) -> dict[MessageQueue, ProcessQueue]:
        return self.rebalancer.assigned

    def held(self, topic: str | None = None) -> list[MessageQueue]:
        """The queues of ``topic`` (default: the subscribed topic, not the
        group's retry topic) this consumer holds now."""
        topic = topic or self.topic
        with self.rebalancer.lock:
            return sorted(mq for mq in self.assigned if mq.topic == topic)

    @property
    def rebalances(self) -> int:
        return self.rebalancer.rebalances

    @property
    def resets(self) -> int:
        return self.rebalancer.resets

    @property
    def consumed_count(self) -> int:
        return self._consume.consumed

    def _members(self) -> list[str]:
        return self._membership.members if self._membership else []

    # ------------------------------------------------------------ lifecycle
    def start(self) -> PushConsumer:
        self.queues(self.topic)  # fails early for an unknown topic
        self._running = True
        cfg, timer = self.config, self.timer
        self._rebalance = timer.every(cfg.rebalance_interval_ms / 1000, self._rebalance_round)
        self._tasks = [self._rebalance,
                       timer.every(cfg.offset_commit_interval_ms / 1000, self.commit_offsets)]
        if self.locking:
            self._tasks.append(timer.every(queue_locker.LOCK_RENEW_S, self.renew_locks))
        self.routes.add_listener(self._on_route)
        if self.owners is not None:
            self.zk.add_listener(self._on_zk_state)
        self._membership = GroupMembership(
            self.zk, self.cluster, self.group, self.client_id,
            GroupMemberNode(self.topic, cfg.message_model.upper()),
            lambda members: self._rebalance.wake(), ask_brokers=self.send_heartbeats)
        self._membership.join()
        self._reset_watch = ResetWatch(self.zk, self.cluster, self.group, self.topic,
                                       self._on_reset)
        self._rebalance.wake()
        return self

    def _on_route(self, topic: str) -> None:
        if topic in self.topics and self._running:
            self._rebalance.wake()

    def _rebalance_soon(self, delay_s: float) -> None:
        if self._running:
            self._rebalance.wake(delay_s)

    def _on_zk_state(self, state) -> None:
        """A ZooKeeper thread: the session's end took our owner nodes with it."""
        if state == "LOST" and self._running:
            self._session_lost = True
            self._rebalance.wake()

    @property
    def handoffs(self) -> dict:
        """This member's hand-offs so far: queues released and how long the
        release took (stopped pulling to owner node deleted), queues acquired
        and how long it waited for them, messages left to the next owner unread,
        releases that ran out of time."""
        return self.rebalancer.releaser.stats.summary()

    def metric_families(self) -> Iterator[Metric]:
        """Read at a scrape: per topic, the queues held, the messages pulled
        and not yet consumed, and the lag as this member sees it (each held
        queue's end at its last pull past the consumed offset); rebalances,
        hand-offs and messages sent back."""
        rebalancer = getattr(self, "rebalancer", None)
        if rebalancer is None:           # a scrape during __init__
            return
        held: dict[str, int] = defaultdict(int)
        cached: dict[str, int] = defaultdict(int)
        lag: dict[str, int] = defaultdict(int)
        with rebalancer.lock:
            queues = list(rebalancer.assigned.values())
        for pq in queues:
            held[pq.mq.topic] += 1
            cached[pq.mq.topic] += pq.inflight
            if pq.max_offset >= 0:
                lag[pq.mq.topic] += max(0, pq.max_offset - pq.consumed_offset())
        labels = ["topic", "consumer_group"]
        for name, text, values in (
                ("duomq_consumer_queues_held", "Queues this member holds", held),
                ("duomq_consumer_cached_messages", "Messages pulled, not yet consumed", cached),
                ("duomq_consumer_client_lag_messages",
                 "Messages of the held queues past the consumed offset, as this member saw "
                 "their ends at its last pulls", lag)):
            yield labelled(GaugeMetricFamily, name, text, labels,
                           {(t, self.group): n for t, n in values.items()})
        g = [self.group]
        c = CounterMetricFamily("duomq_consumer_rebalances", "Rebalances this member ran",
                                labels=["consumer_group"])
        c.add_metric(g, rebalancer.rebalances)
        yield c
        stats = rebalancer.releaser.stats
        c = CounterMetricFamily("duomq_consumer_handoffs", "Queues this member released to "
                                "another or acquired from one", labels=["consumer_group",
                                                                        "direction"])
        c.add_metric([*g, "released"], stats.released_total)
        c.add_metric([*g, "acquired"], stats.acquired_total)
        yield c
        c = CounterMetricFamily("duomq_consumer_sent_back", "Messages whose listener failed, "
                                "sent back to the retry or the dead-letter topic",
                                labels=["consumer_group", "to"])
        c.add_metric([*g, "retry"], self.sent_back[0])
        c.add_metric([*g, "dlq"], self.sent_back[1])
        yield c

    def _rebalance_round(self) -> None:
        """The timer's rebalance task: a pending offset reset, then the split."""
        if self._halted:
            return                     # stopping: no queue taken, none consumed
        if self._session_lost:
            self._session_lost = False
            self.rebalancer.forget_all()
        self.rebalancer.apply_reset(self.orderly)
        try:
            self.rebalancer.rebalance()
        except Exception:
            log.exception("rebalance of %s failed", self.group)
            self._rebalance_soon(1.0)

    def rebalance(self) -> None:
        self.rebalancer.rebalance()

    def renew_locks(self) -> None:
        resume = self._consume.schedule if isinstance(self._consume, OrderlyService) else None
        if resume is not None:
            self.rebalancer.renew_locks(resume)

    def _on_reset(self, offsets: dict[MessageQueue, int]) -> None:
        """An operator reset the group's offsets (a ZooKeeper watch thread)."""
        self.rebalancer.request_reset(offsets)
        self._rebalance.wake()

    @property
    def halted(self) -> bool:
        return self._halted

    def halt(self) -> None:
        """Hand no message more to ``on_message``, at once (it may call this
        itself: the message it is in is the last). Pulls stop; ``shutdown``
        then commits exactly what was consumed, and what was pulled but not
        handed over stays for the group. For a consumer that takes a fixed
        number of messages (``duomq consume --count``): with one consume
        thread, what was consumed of each queue is a prefix, so the commits
        are exact; with more, messages after a gap may be consumed again."""
        self._halted = True
        for pq in self.rebalancer.held():
            pq.halt()

    def shutdown(self) -> None:
        """Stop pulling, finish the messages in hand, commit, then leave the
        group: the member that takes over our queues starts where we stopped."""
        if not self._running:
            return
        self._running = False
        if self._reset_watch:
            self._reset_watch.close()
        for task in self._tasks:
            task.cancel()
        self.timer.flush()             # a rebalance or a commit under way ends first
        if self.owners is not None:
            self.zk.remove_listener(self._on_zk_state)
        # every queue handed back: messages in hand consumed, positions
        # committed, owner nodes deleted; then the pool stops
        self.rebalancer.hand_back(self.config.handoff_timeout_ms / 1000 + HANDBACK_MARGIN_S)
        self._consume.shutdown(10)
        if self._membership:
            self._membership.leave()
        self.close()

    def __exit__(self, *exc):
        self.shutdown()

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
        with self._count_lock:
            self.sent_back[to_dlq] += 1
        return True

    # ------------------------------------------------------------ offsets
    def commit_offsets(self) -> None:
        self.committer.commit(self.rebalancer.held())
