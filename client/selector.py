"""Queue selection for producers (pure)."""

from __future__ import annotations

import itertools
import zlib

from duomq.common.message import MessageQueue


class RoundRobinSelector:
    """Round robin over writable queues, skipping groups that just failed."""

    def __init__(self):
        self._counter = itertools.count()

    def select(self, queues: list[MessageQueue], avoid: set[str]) -> MessageQueue:
        candidates = [q for q in queues if q.broker_group not in avoid] or queues
        return candidates[next(self._counter) % len(candidates)]


def select_by_key(queues: list[MessageQueue], key: str) -> MessageQueue:
    """The same key always lands on the same queue while the queue set holds."""
    return queues[zlib.crc32(key.encode()) % len(queues)]
