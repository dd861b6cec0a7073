"""Sends waiting for their durability condition (RocketMQ's GroupCommitRequest
list). Appends happen in order, so end offsets rise: a deque released from
the front. Pure bookkeeping."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(slots=True)
class AckWaiter:
    end_offset: int          # the send is durable once the flushed offset reaches it
    deadline: float          # monotonic seconds
    identity: bytes
    request_id: int
    response: object         # the SendResponse to send on success


class AckWaiters:
    def __init__(self):
        self._q: deque[AckWaiter] = deque()

    def __len__(self):
        return len(self._q)

    def add(self, w: AckWaiter) -> None:
        self._q.append(w)

    def release(self, reached: int) -> list[AckWaiter]:
        out = []
        q = self._q
        while q and q[0].end_offset <= reached:
            out.append(q.popleft())
        return out

    def expire(self, now: float) -> list[AckWaiter]:
        """Remove waiters past their deadline (any position: deadlines rise too,
        so this is also a front scan)."""
        out = []
        q = self._q
        while q and q[0].deadline <= now:
            out.append(q.popleft())
        return out

    def drain(self) -> list[AckWaiter]:
        out = list(self._q)
        self._q.clear()
        return out

    def next_deadline(self) -> float | None:
        return self._q[0].deadline if self._q else None
