"""Sends waiting for their durability conditions (RocketMQ's GroupCommitRequest
and GroupTransferService): the flush (SYNC_FLUSH) and the replication (SYNC),
each with its own deadline. Appends happen in order, so end offsets and
deadlines rise: a deque served from the front. Pure bookkeeping."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from duomq.proto import pb

NEVER = float("inf")


@dataclass(slots=True)
class AckWaiter:
    end_offset: int              # durable once the conditions reach this offset
    flush_deadline: float        # monotonic s; NEVER when no flush is awaited
    repl_deadline: float         # monotonic s; NEVER when no replication is awaited
    identity: bytes
    request_id: int
    response: object             # the answer to send (a SendResponse, a SendBackResponse)
    type: int = pb.SEND          # the request's type, which the answer repeats
    since: float = 0.0           # monotonic s it began waiting (the ack-wait histogram)


class AckWaiters:
    def __init__(self):
        self._q: deque[AckWaiter] = deque()
        self.queue = self._q          # read only: ``len`` of it, without a Python call

    def __len__(self):
        return len(self._q)

    def add(self, w: AckWaiter) -> None:
        self._q.append(w)

    def release(self, flushed: float, replicated: float) -> list[AckWaiter]:
        """Waiters whose record is both flushed and replicated (pass NEVER for
        a condition that is not awaited; a waiter that awaits no replication,
        its ``repl_deadline`` NEVER, needs only the flush)."""
        out: list[AckWaiter] = []
        q = self._q
        reached = min(flushed, replicated)
        while q and q[0].end_offset <= (flushed if q[0].repl_deadline == NEVER else reached):
            out.append(q.popleft())
        return out

    def expire(self, now: float, flushed: float, replicated: float) -> list[tuple[AckWaiter, int]]:
        """Waiters past a deadline with that condition unmet, with the status to
        answer: FLUSH_DISK_TIMEOUT or FLUSH_SLAVE_TIMEOUT."""
        out: list[tuple[AckWaiter, int]] = []
        q = self._q
        while q:
            w = q[0]
            if w.end_offset > flushed and now >= w.flush_deadline:
                out.append((q.popleft(), pb.FLUSH_DISK_TIMEOUT))
            elif w.end_offset > replicated and now >= w.repl_deadline:
                out.append((q.popleft(), pb.FLUSH_SLAVE_TIMEOUT))
            else:
                break
        return out

    def drain(self) -> list[AckWaiter]:
        out = list(self._q)
        self._q.clear()
        return out
