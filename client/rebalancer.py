"""Which queues a push consumer holds (RocketMQ's ``RebalanceImpl``): on
every membership or route change, and every ``rebalance_interval_ms``, each
subscribed topic's queues are split among the group's members by the
allocation strategy (broadcasting: every member holds every queue); queues
no longer ours are let go (their position committed and, orderly, their lock
released), new ones start from the committed offset and are pulled. Operator
offset resets are applied here too, between commits.

Runs on the timer thread only; ``assigned`` is read by any thread under
``lock``."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from duomq.client.allocate import Strategy
from duomq.client.consumer import PullConsumer
from duomq.client.offset_committer import OffsetCommitter
from duomq.client.process_queue import ProcessQueue
from duomq.client.pull_loop import PULL_RETRY_S, PullLoop
from duomq.client.queue_locker import QueueLocker
from duomq.common.message import MessageQueue

log = logging.getLogger(__name__)
RELEASE_WAIT_S = 1.0        # orderly: wait for the message in hand before unlocking


def wait_idle(pqs: list[ProcessQueue]) -> None:
    """Orderly: let the message in hand of each queue finish (at most
    RELEASE_WAIT_S) before its position is committed or moved."""
    deadline = time.monotonic() + RELEASE_WAIT_S
    while any(pq.busy for pq in pqs) and time.monotonic() < deadline:
        time.sleep(0.01)


class Rebalancer:
    def __init__(self, consumer: PullConsumer, topics: list[str], allocate: Strategy,
                 broadcasting: bool, members: Callable[[], list[str]],
                 committer: OffsetCommitter, pulls: PullLoop, locker: QueueLocker | None,
                 retry_soon: Callable[[float], None], running: Callable[[], bool]):
        self.consumer = consumer
        self.topics = topics
        self.allocate = allocate
        self.broadcasting = broadcasting
        self.members = members
        self.committer = committer
        self.pulls = pulls
        self.locker = locker               # orderly clustering: queue locks on the masters
        self.retry_soon = retry_soon       # run another rebalance within this many seconds
        self.running = running
        self.assigned: dict[MessageQueue, ProcessQueue] = {}
        self.lock = threading.RLock()
        self.rebalances = 0
        self.resets = 0
        self._pending_reset: dict[MessageQueue, int] | None = None

    def held(self) -> list[ProcessQueue]:
        with self.lock:
            return list(self.assigned.values())

    # ------------------------------------------------------------ the split
    def wanted(self) -> set[MessageQueue]:
        """The queues this member should hold now."""
        c = self.consumer
        members = self.members()
        mine: set[MessageQueue] = set()
        known: set[MessageQueue] = set()
        for topic in self.topics:          # each topic split on its own, as RocketMQ does
            try:
                queues = c.queues(topic)
            except Exception as exc:
                log.warning("rebalance of %s: no route to %s (%s)", c.group, topic, exc)
                continue
            known.update(queues)
            mine.update(queues if self.broadcasting
                        else self.allocate(queues, members, c.client_id))
        if not mine <= known:
            log.warning("allocation of %s named queues the topic does not have: %s", c.group,
                        sorted(mine - known))
            mine &= known
        return mine

    def rebalance(self) -> None:
        if not self.running():
            return
        c = self.consumer
        mine = self.wanted()
        with self.lock:
            current = set(self.assigned)
            if mine == current:
                return
            dropped = [self.assigned.pop(mq) for mq in current - mine]
            added = mine - current
        self.rebalances += 1
        for pq in dropped:
            pq.drop()
        if dropped:
            self.release(dropped)
        locks = self.locker.lock(added) if self.locker else {}
        for mq in sorted(added):
            if self.locker and mq not in locks:
                # its last owner has not let it go yet: try again soon
                self.retry_soon(PULL_RETRY_S)
                continue
            try:
                start, from_broker = self.committer.start_offset(mq)
            except Exception as exc:
                log.warning("cannot find the start offset of %s (%s); retrying", mq, exc)
                self.retry_soon(PULL_RETRY_S)
                continue
            # a start chosen by consume_from is committed on the next round, so
            # the group keeps its starting position even before any message
            pq = ProcessQueue(mq, start, committed=start if from_broker else -1)
            pq.locked_until = locks.get(mq, 0.0)
            with self.lock:
                if mq in self.assigned or not self.running():
                    continue
                self.assigned[mq] = pq
            self.pulls.pull(pq)
        log.info("consumer %s of %s now holds %d queues (members %d)", c.client_id, c.group,
                 len(self.assigned), len(self.members()))

    def release(self, pqs: list[ProcessQueue]) -> None:
        """Queues no longer ours: commit where they stopped; orderly, first let
        the message in hand finish and, after the commit, unlock them, so the
        next owner starts exactly there."""
        if self.locker:
            wait_idle(pqs)
        self.committer.commit(pqs)
        if self.locker:
            # a queue still busy keeps its lock until it expires on the broker
            self.locker.unlock([pq.mq for pq in pqs if not pq.busy])

    def drop_all(self) -> list[ProcessQueue]:
        """Shutting down: every held queue stops; returns them."""
        with self.lock:
            pqs = list(self.assigned.values())
        for pq in pqs:
            pq.drop()
        return pqs

    # ------------------------------------------------------------ orderly: locks
    def renew_locks(self, resume: Callable[[ProcessQueue], None]) -> None:
        """Renew the locks of every queue held; a queue whose lock is lost stops
        being consumed once its time is up, and resumes when it is taken again."""
        if self.locker is None:
            return
        with self.lock:
            pqs = {pq.mq: pq for pq in self.assigned.values()}
        held = self.locker.lock(pqs)
        for mq, pq in pqs.items():
            if mq in held:
                pq.locked_until = held[mq]
                resume(pq)
            else:
                log.warning("queue %s of %s is not locked by this consumer", mq,
                            self.consumer.group)

    # ------------------------------------------------------------ offset resets
    def request_reset(self, offsets: dict[MessageQueue, int]) -> None:
        """An operator reset the group's offsets (a ZooKeeper watch thread);
        applied by the next round."""
        with self.lock:
            self._pending_reset = offsets

    def apply_reset(self, orderly: bool) -> None:
        """Move every held queue named by a pending reset to its new offset:
        a fresh window from there (the old one is dropped: its pulls and
        messages in hand are forgotten), committed at once."""
        with self.lock:
            offsets, self._pending_reset = self._pending_reset, None
            if not offsets or not self.running():
                return
            moved, olds = [], []
            for mq, old in list(self.assigned.items()):
                if mq in offsets:
                    old.drop()
                    pq = ProcessQueue(mq, offsets[mq])
                    pq.locked_until = old.locked_until
                    self.assigned[mq] = pq
                    moved.append(pq)
                    olds.append(old)
        if orderly:     # one thread per queue: let the message in hand finish first
            wait_idle(olds)
        self.resets += 1
        log.info("offset reset of %s: %d queues moved", self.consumer.group, len(moved))
        self.committer.commit(moved)
        for pq in moved:
            self.pulls.pull(pq)
