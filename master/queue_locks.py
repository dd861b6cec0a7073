"""Queue locks for orderly consumption (RocketMQ's ``RebalanceLockManager``):
on a broker group's master, each (consumer group, topic, queue) is held by at
most one client, until it unlocks it or stops renewing it for ``ttl_s``.

Pure: the caller passes the time. Held in memory only: after a restart or a
failover the table is empty and the holders take their queues again on their
next renewal (clients renew every 20 s and stop consuming a queue they have
not renewed for 30 s, well inside the 60 s a lock lives here).
"""

from __future__ import annotations

LOCK_TTL_S = 60.0


class QueueLocks:
    def __init__(self, ttl_s: float = LOCK_TTL_S):
        self.ttl_s = ttl_s
        self._held: dict[tuple[str, str, int], tuple[str, float]] = {}  # -> (client, expiry)

    def lock(self, group: str, client: str, queues, now: float) -> list[tuple[str, int]]:
        """Take or renew each free, expired or already-ours queue; return the
        queues ``client`` now holds (of those asked for)."""
        held = self._held
        got = []
        for topic, qid in queues:
            key = (group, topic, qid)
            owner = held.get(key)
            if owner is None or owner[0] == client or owner[1] <= now:
                held[key] = (client, now + self.ttl_s)
                got.append((topic, qid))
        return got

    def unlock(self, group: str, client: str, queues) -> None:
        for topic, qid in queues:
            key = (group, topic, qid)
            owner = self._held.get(key)
            if owner is not None and owner[0] == client:
                del self._held[key]

    def holder(self, group: str, topic: str, qid: int, now: float) -> str | None:
        owner = self._held.get((group, topic, qid))
        return owner[0] if owner is not None and owner[1] > now else None

    def clear(self) -> None:
        """A role change: locks taken on another master mean nothing here."""
        self._held.clear()
