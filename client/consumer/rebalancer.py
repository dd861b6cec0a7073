"""Which queues a push consumer holds (RocketMQ's ``RebalanceImpl``): on
every membership or route change, and every ``rebalance_interval_ms``, each
subscribed topic's queues are split among the group's members by the
allocation strategy (broadcasting: every member holds every queue).

Clustering, a queue changes hands in order (``handoff``): its old owner stops
pulling it, consumes what it has in hand, commits, unlocks it (orderly) and
deletes its owner node in ZooKeeper (``queue_owners``); the new owner takes
the node, and only then reads the committed offset and pulls. So a member
joining or leaving re-delivers nothing; a member that dies is taken over when
its session expires, from its last commit. Operator offset resets are
applied here too, between commits.

Runs on the timer thread only; ``assigned`` is read by any thread under
``lock``."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from duomq.client.cluster.queue_owners import QueueOwners
from duomq.client.consumer.allocate import Strategy
from duomq.client.consumer.handoff import Releaser
from duomq.client.consumer.offset_committer import OffsetCommitter
from duomq.client.consumer.process_queue import ProcessQueue
from duomq.client.consumer.pull import PullConsumer
from duomq.client.consumer.pull_loop import PULL_RETRY_S, PullLoop
from duomq.client.consumer.queue_locker import QueueLocker
from duomq.common.errors import TopicNotExistError
from duomq.common.message import MessageQueue
from duomq.common.names import RETRY_PREFIX

log = logging.getLogger(__name__)
RELEASE_WAIT_S = 1.0        # orderly: wait for the message in hand before unlocking
HANDOFF_RECHECK_S = 1.0     # a queue waited for is looked at again this often, besides watches


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
                 retry_soon: Callable[[float], None], running: Callable[[], bool],
                 owners: QueueOwners | None, handoff_timeout_s: float,
                 schedule: Callable[[float, Callable[[], object]], None]):
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
        self.owners = owners               # clustering: the owner nodes that order hand-offs
        self.releaser = Releaser(
            handoff_timeout_s, committer.commit,
            (lambda pqs: locker.unlock([pq.mq for pq in pqs])) if locker else None,
            owners.release if owners else (lambda mqs: []),
            lambda delay: schedule(delay, self.releaser.poll), lambda: retry_soon(0.0))
        self._wanted_since: dict[MessageQueue, float] = {}   # wall time, queues waited for
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
            except TopicNotExistError:
                if topic.startswith(RETRY_PREFIX):      # made at the group's first send back:
                    c.routes.watch(topic)               # its route wakes a rebalance
                else:
                    log.warning("rebalance of %s: topic %s does not exist", c.group, topic)
                continue
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
            dropped = [self.assigned.pop(mq) for mq in current - mine]
            # a queue still being released waits for its release to end
            added = {mq for mq in mine - current if mq not in self.releaser}
            for mq in set(self._wanted_since) - mine:
                del self._wanted_since[mq]
        if not dropped and not added:
            return
        self.rebalances += 1
        if self.owners is None:          # broadcasting: every member reads every queue
            for pq in dropped:
                pq.drop()
            if dropped:
                self.committer.commit(dropped)
        else:
            self.releaser.start(dropped)
        taken = self._take(added)
        locks = self.locker.lock(taken) if self.locker else {}
        if self.locker and any(mq not in locks for mq in taken):
            # a last owner has not let its queue go yet: try again soon
            self.retry_soon(PULL_RETRY_S)
        starts = self._start_offsets(sorted(mq for mq in taken
                                            if not self.locker or mq in locks))
        for mq in sorted(starts):
            start, from_broker = starts[mq]
            # a start chosen by consume_from is committed on the next round, so
            # the group keeps its starting position even before any message
            pq = ProcessQueue(mq, start, committed=start if from_broker else -1)
            pq.locked_until = locks.get(mq, 0.0)
            with self.lock:
                if mq in self.assigned or not self.running():
                    continue
                self.assigned[mq] = pq
                since = self._wanted_since.pop(mq, None)
            self._note_acquired(mq, since)
            self.pulls.pull(pq)
        log.info("consumer %s of %s now holds %d queues (members %d)", c.client_id, c.group,
                 len(self.assigned), len(self.members()))

    def _start_offsets(self, mqs: list[MessageQueue]) -> dict[MessageQueue, tuple[int, bool]]:
        """Where each of ``mqs`` starts, asked in bulk per topic and broker
        group; queues whose start cannot be found now are left out (the next
        round tries them again)."""
        runs: dict[tuple[str, str], list[MessageQueue]] = {}
        for mq in mqs:
            runs.setdefault((mq.topic, mq.broker_group), []).append(mq)
        out = {}
        for (topic, group), run in runs.items():
            try:
                out.update(self.committer.start_offsets(run))
            except Exception as exc:
                log.warning("cannot find the start offsets of %d queues of %s on %s (%s); "
                            "retrying", len(run), topic, group, exc)
                self.retry_soon(PULL_RETRY_S)
        return out

    def _take(self, added: set[MessageQueue]) -> set[MessageQueue]:
        """The queues of ``added`` this member may read now: all of them when
        broadcasting; else those whose owner node it holds. The others are
        someone else's until released: a watch wakes the next round then."""
        if self.owners is None or not added:
            return added
        taken, held = self.owners.acquire(added)
        now = time.time()
        with self.lock:
            for mq in added:
                self._wanted_since.setdefault(mq, now)
        if held:
            log.info("consumer %s of %s waits for %d queues their owners release (%s)",
                     self.consumer.client_id, self.consumer.group, len(held),
                     ", ".join(sorted(set(held.values()))))
            self.retry_soon(HANDOFF_RECHECK_S)      # besides the watches
        return taken

    def _note_acquired(self, mq: MessageQueue, since: float | None) -> None:
        if since is None or self.owners is None:
            return
        self.releaser.stats.note_acquired(mq, since)

    def release(self, pqs: list[ProcessQueue]) -> None:
        """Broadcasting, or a queue reset: commit where ``pqs`` stopped."""
        self.committer.commit(pqs)

    def hand_back(self, timeout_s: float) -> None:
        """Shutting down: release every held queue (its messages in hand
        consumed, its position committed, then its owner node deleted), so
        the members that take over start exactly where this one stopped."""
        with self.lock:
            pqs = list(self.assigned.values())
            self.assigned.clear()
        if self.owners is None:
            for pq in pqs:
                pq.drop()
            self.release(pqs)
            return
        self.releaser.start(pqs)
        self.releaser.finish(timeout_s)

    def forget_all(self) -> None:
        """The ZooKeeper session was lost, and with it every owner node: stop
        at once (another member may already read these queues) and take the
        queues again, from their commits, once the session is back."""
        with self.lock:
            pqs = list(self.assigned.values())
            self.assigned.clear()
        for pq in pqs + self.releaser.forget():
            pq.drop()
        if pqs:
            log.warning("consumer %s of %s lost its ZooKeeper session: %d queues let go",
                        self.consumer.client_id, self.consumer.group, len(pqs))

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
