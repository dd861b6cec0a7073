"""Queue selection for producers (pure)."""

from __future__ import annotations

import itertools
import zlib

from duomq.common.message import MessageQueue

NONE: frozenset[str] = frozenset()


class RoundRobinSelector:
    """Round robin over writable queues, skipping groups that just failed."""

    def __init__(self):
        self._counter = itertools.count()

    def select(self, queues: list[MessageQueue], avoid: set[str] | frozenset[str]) -> MessageQueue:
        candidates = [q for q in queues if q.broker_group not in avoid] or queues \
            if avoid else queues
        return candidates[next(self._counter) % len(candidates)]


class FaultAvoidance:
    """Broker groups that failed a send are avoided for ``avoid_s`` seconds
    (RocketMQ's latency fault tolerance), so one dead master costs one failed
    attempt, not one per send until ZooKeeper notices. Pure: the clock is passed in."""

    def __init__(self, avoid_s: float):
        self.avoid_s = avoid_s
        self._until: dict[str, float] = {}

    def failed(self, group: str, now: float) -> None:
        self._until[group] = now + self.avoid_s

    def forgive(self, group: str) -> None:
        """The group has a new master: the failure was the old one's."""
        self._until.pop(group, None)

    def avoided(self, now: float) -> set[str] | frozenset[str]:
        if not self._until:
            return NONE
        return {g for g, until in list(self._until.items()) if until > now}


def select_by_key(queues: list[MessageQueue], key: str) -> MessageQueue:
    """The same key always lands on the same queue while the queue set holds."""
    return queues[zlib.crc32(key.encode()) % len(queues)]
