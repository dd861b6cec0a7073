"""A master creates each consumer group's retry and dead-letter topics, a
queue on its own broker group, when the group first needs them: its first
message sent back, or dead-lettered by a share group (RocketMQ's broker makes
them in its heartbeat handler, so every peek, admin command and idle
consumer left two topics behind). Consumers start a retry topic from its
first message, so one read after it appeared misses nothing. Clients need
not create topics, so a secured cluster gives them no right to: a user
could otherwise create any topic through ZooKeeper. The ZooKeeper work runs
on a thread of its own, never on the serving loop. A group whose topics
could not be made (ZooKeeper away or refusing for a moment) is tried again
by that thread, after 0.5 s and then twice as long each time up to
``RETRY_MAX_S``: a group heard once (a pull consumer that heartbeats at its
start) would otherwise wait for a heartbeat that may never come."""

from __future__ import annotations

import logging
import queue
import time

from duomq.common.names import DLQ_PREFIX, RETRY_PREFIX, SYSTEM_PREFIXES
from duomq.common.service import ServiceThread
from duomq.coordinator.topics import TopicAdmin

log = logging.getLogger(__name__)
MAX_KNOWN = 10_000          # groups remembered as done (a heartbeat names at most a few)
RETRY_FIRST_S = 0.5         # a group whose topics could not be made: tried again after this,
RETRY_MAX_S = 30.0          # doubling each time up to this


class GroupTopics(ServiceThread):
    name = "group-topics"

    def __init__(self, zk, cluster: str, broker_group: str):
        super().__init__()
        self.admin = TopicAdmin(zk, cluster)
        self.broker_group = broker_group
        self.known: set[str] = set()        # groups done, or queued (serving loop only)
        self.todo: queue.SimpleQueue[str | None] = queue.SimpleQueue()

    def heard(self, groups) -> None:
        """Consumer groups that need their topics (the serving loop): those
        not seen before are queued for the thread."""
        for group in groups:
            if group in self.known or group.startswith(SYSTEM_PREFIXES):
                continue
            if len(self.known) >= MAX_KNOWN:
                self.known.clear()          # done again at worst: ensure_system is idempotent
            self.known.add(group)
            self.todo.put(group)

    def run(self) -> None:
        retry: dict[str, tuple[float, float]] = {}   # group -> (due, its next backoff)
        while not self.stopped:
            due = min((d for d, _b in retry.values()), default=None)
            try:
                group = self.todo.get(timeout=None if due is None else
                                      max(0.0, due - time.monotonic()))
            except queue.Empty:
                group = min(retry, key=lambda g: retry[g][0])
            if group is None:
                return
            backoff = retry.pop(group, (0.0, RETRY_FIRST_S))[1]
            try:
                for name in (RETRY_PREFIX + group, DLQ_PREFIX + group):
                    self.admin.ensure_system(name, [self.broker_group])
            except Exception as exc:
                log.warning("cannot create the retry and dead-letter topics of consumer "
                            "group %s: %s (trying again in %g s)", group, exc, backoff)
                retry[group] = (time.monotonic() + backoff, min(2 * backoff, RETRY_MAX_S))

    def stop_soon(self) -> None:
        """Stop after the ZooKeeper call under way, without waiting for it
        (the serving thread demotes at once)."""
        self.todo.put(None)
        self._stopped.set()

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self.todo.put(None)
        super().shutdown(timeout_s)
