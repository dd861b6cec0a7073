"""Queue allocation among the members of a consumer group (pure), as
aiokafka's assignors: ``allocate(queues, members, me) -> my queues``."""

from __future__ import annotations

from duomq.common.message import MessageQueue


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
