"""Queue allocation among the members of a consumer group (pure), as
RocketMQ's AllocateMessageQueueStrategy and aiokafka's assignors:
``allocate(queues, members, me) -> my queues``. Every member computes its
share from the same inputs, so the shares never overlap."""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable

from duomq.common.config import ALLOCATE_STRATEGIES
from duomq.common.errors import ConfigError
from duomq.common.message import MessageQueue

VIRTUAL_NODES = 10          # ring points per member (consistent hash)


def allocate_averagely(queues: list[MessageQueue], members: list[str], me: str) -> list[MessageQueue]:
    """RocketMQ's AllocateMessageQueueAveragely: sorted queues cut into
    contiguous ranges, the first ``len(queues) % len(members)`` members taking
    one more. Every member computes the same split from the same inputs."""
    queues = sorted(queues)
    members = sorted(members)
    if me not in members or not queues:
        return []
    index = members.index(me)
    n, m = len(queues), len(members)
    mod = n % m
    if n <= m:
        size = 1 if index < n else 0
    else:
        size = n // m + (1 if index < mod else 0)
    start = index * size if mod and index < mod else index * size + mod
    return [queues[(start + i) % n] for i in range(size)] if size else []


def allocate_by_circle(queues: list[MessageQueue], members: list[str], me: str) -> list[MessageQueue]:
    """RocketMQ's AllocateMessageQueueAveragelyByCircle: sorted queues dealt
    out one at a time in member order, so each member's queues are spread over
    the broker groups instead of being one contiguous range."""
    queues = sorted(queues)
    members = sorted(members)
    if me not in members:
        return []
    index, m = members.index(me), len(members)
    return queues[index::m]


def allocate_consistent_hash(queues: list[MessageQueue], members: list[str], me: str,
                             virtual_nodes: int = VIRTUAL_NODES) -> list[MessageQueue]:
    """RocketMQ's AllocateMessageQueueConsistentHash: members placed on a hash
    ring ``virtual_nodes`` times each (MD5), each queue owned by the first
    member clockwise of its own hash. When a member joins or leaves, only the
    queues next to it on the ring move."""
    if me not in members or not queues:
        return []
    ring = sorted((_hash(f"{member}-{i}"), member) for member in set(members)
                  for i in range(virtual_nodes))
    points = [p for p, _ in ring]
    mine = []
    for q in sorted(queues):
        at = bisect.bisect_left(points, _hash(f"{q.topic}@{q.broker_group}@{q.queue_id}"))
        if ring[at % len(ring)][1] == me:
            mine.append(q)
    return mine


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.md5(text.encode()).digest()[:8], "big")


Strategy = Callable[[list[MessageQueue], list[str], str], list[MessageQueue]]
STRATEGIES: dict[str, Strategy] = {"average": allocate_averagely,
                                   "circle": allocate_by_circle,
                                   "consistent_hash": allocate_consistent_hash}


def strategy(name_or_function: str | Strategy) -> Strategy:
    """A strategy by name (``ALLOCATE_STRATEGIES``) or a user's function
    ``(queues, members, me) -> my queues``; every member of a group must use
    the same one."""
    if callable(name_or_function):
        return name_or_function
    try:
        return STRATEGIES[name_or_function]
    except KeyError:
        raise ConfigError(f"allocate_strategy: {name_or_function!r} is not one of "
                          f"{', '.join(ALLOCATE_STRATEGIES)} (or pass a function)") from None
