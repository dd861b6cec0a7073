"""Handing a queue to another member without re-delivering it (the old
owner's side, and what both sides measure).

A queue this member lets go is *released* in order: its pulls stop; the
chunks of messages a consume thread has begun are finished, those none has
begun are left (for at most ``handoff_timeout_ms``: past it, consumption
stops after the message in hand, and the next owner may see the rest of a
begun chunk again); its position, the low end of the window, is committed
to the master; orderly, its broker lock is released; and only then its
owner node in ZooKeeper is deleted, which lets the new owner read the
committed offset and pull. Nothing waits on a
thread: ``poll`` runs on the timer every few milliseconds until every
release is done (``finish`` does the same from a shutting-down thread).

``HandoffStats`` keeps what a user asks about a hand-off: how long the old
owner took (stopped pulling to released), how long the new owner waited for
the queue, the messages left to the next owner unread, and the releases
that ran out of time. Pure except for the callables it is given.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from duomq.client.consumer.process_queue import ProcessQueue
from duomq.common.message import MessageQueue

log = logging.getLogger(__name__)
POLL_S = 0.005              # how often releases in progress are looked at
COMMIT_RETRY_S = 0.2        # a commit that failed is tried again this often ...
COMMIT_GIVE_UP_S = 5.0      # ... for this long past the deadline, then the queue is let go


@dataclass
class Release:
    pq: ProcessQueue
    started: float                      # time.time() when its pulls stopped
    deadline: float                     # monotonic: abandon what is in hand after this
    next_try: float = 0.0               # monotonic: next commit attempt
    left: int = 0                       # messages pulled, never begun: the next owner's
    timed_out: bool = False             # begun chunks unfinished at the deadline


@dataclass
class HandoffStats:
    """Recent hand-offs of one member (the last ``KEEP`` of each kind)."""
    KEEP = 1000
    released: deque = field(default_factory=lambda: deque(maxlen=HandoffStats.KEEP))
    acquired: deque = field(default_factory=lambda: deque(maxlen=HandoffStats.KEEP))
    left: int = 0
    timed_out: int = 0
    released_total: int = 0     # every hand-off so far (the deques keep the last KEEP)
    acquired_total: int = 0

    def note_acquired(self, mq, since: float) -> None:
        now = time.time()
        self.acquired.append({"mq": str(mq), "wanted": since, "acquired": now,
                              "waited_ms": (now - since) * 1000})
        self.acquired_total += 1

    def summary(self) -> dict:
        rel = [r["ms"] for r in self.released]
        acq = [a["waited_ms"] for a in self.acquired]
        return {"released": len(rel), "release_ms_max": round(max(rel), 1) if rel else 0.0,
                "acquired": len(acq), "wait_ms_max": round(max(acq), 1) if acq else 0.0,
                "left_to_next_owner": self.left, "timed_out": self.timed_out}


class Releaser:
    def __init__(self, timeout_s: float, commit: Callable[[list[ProcessQueue]], bool | None],
                 unlock: Callable[[list[ProcessQueue]], None] | None,
                 free: Callable[[list[MessageQueue]], list[MessageQueue]],
                 schedule: Callable[[float], None], on_released: Callable[[], None]):
        self.timeout_s = timeout_s
        # commit these queues' positions: True when acked, False when it may
        # succeed later, None when the broker refuses this consumer's commits
        self.commit = commit
        self.unlock = unlock            # orderly: release the broker locks
        self.free = free                # delete the owner nodes: those it could not, back
        self.schedule = schedule        # run ``poll`` again after this many seconds
        self.on_released = on_released  # a queue became free: the next rebalance may take it
        self.pending: dict[MessageQueue, Release] = {}
        self.unfreed: set[MessageQueue] = set()   # released, owner node not deleted yet
        self.stats = HandoffStats()
        self._lock = threading.Lock()   # guards ``pending`` and ``_scheduled``
        self._polling = threading.Lock()  # one ``poll`` at a time (the timer, or ``finish``)
        self._scheduled = False

    def __contains__(self, mq: MessageQueue) -> bool:
        with self._lock:
            return mq in self.pending or mq in self.unfreed

    def start(self, pqs: list[ProcessQueue]) -> None:
        """Stop pulling ``pqs`` and release them as soon as their messages in
        hand are consumed."""
        if not pqs:
            return
        now, wall = time.monotonic(), time.time()
        with self._lock:
            for pq in pqs:
                pq.stop_pulling()
                self.pending[pq.mq] = Release(pq, wall, now + self.timeout_s)
        self._again(0.0)

    def _again(self, delay_s: float) -> None:
        with self._lock:
            if self._scheduled:
                return
            self._scheduled = True
        self.schedule(delay_s)

    def poll(self, again: bool = True) -> bool:
        """Release what is ready; True while releases remain (and, with
        ``again``, ``schedule`` has been asked to call again)."""
        with self._lock:
            self._scheduled = False
        with self._polling:
            more = self._poll()
        if more and again:
            self._again(POLL_S)
        return more

    def _poll(self) -> bool:
        now = time.monotonic()
        with self._lock:
            unfreed = list(self.unfreed)
        if unfreed:             # ZooKeeper was unreachable: delete those nodes now
            left = set(self.free(unfreed))
            with self._lock:
                self.unfreed = left | (self.unfreed - set(unfreed))
            if len(left) < len(unfreed):
                self.on_released()
        with self._lock:
            ready = [r for r in self.pending.values()
                     if now >= r.next_try and (r.pq.settled or now >= r.deadline)]
        if ready:
            for r in ready:
                if not r.pq.dropped:
                    r.timed_out = not r.pq.settled
                    r.left = r.pq.left_over()
                r.pq.drop()         # consume threads stop after the message they are in
            acked = self.commit([r.pq for r in ready])
            if acked:
                self._done(ready)
            elif acked is None:          # refused (credentials, permissions): no retry heals it
                log.warning("letting %d queues go uncommitted (the broker refuses this "
                            "consumer's commits): their next owner reads again from the last "
                            "commit", len(ready))
                self._done(ready)
            else:
                late = [r for r in ready if now >= r.deadline + COMMIT_GIVE_UP_S]
                if late:
                    log.warning("letting %d queues go uncommitted: their next owner reads "
                                "again from the last commit", len(late))
                    self._done(late)
                for r in ready:
                    r.next_try = now + COMMIT_RETRY_S
        with self._lock:
            return bool(self.pending or self.unfreed)

    def _done(self, releases: list[Release]) -> None:
        pqs = [r.pq for r in releases]
        if self.unlock is not None:
            self.unlock(pqs)
        left = self.free([pq.mq for pq in pqs])
        wall = time.time()
        with self._lock:
            self.unfreed |= set(left)
            for r in releases:
                self.pending.pop(r.pq.mq, None)
                self.stats.released.append({"mq": str(r.pq.mq), "stopped": r.started,
                                            "released": wall,
                                            "ms": (wall - r.started) * 1000})
                self.stats.released_total += 1
                self.stats.left += r.left
                if r.timed_out:
                    self.stats.timed_out += 1
                    log.warning("%s handed over with messages in hand unfinished after "
                                "handoff_timeout_ms: its next owner may see some again",
                                r.pq.mq)
        self.on_released()

    def forget(self) -> list[ProcessQueue]:
        """The owner nodes are gone (a lost session): stop every release; returns their queues."""
        with self._lock:
            pqs = [r.pq for r in self.pending.values()]
            self.pending.clear()
            self.unfreed.clear()
        return pqs

    def finish(self, timeout_s: float) -> None:
        """Shutting down: poll until every release is done (or ``timeout_s``)."""
        end = time.monotonic() + timeout_s
        while self.poll(again=False) and time.monotonic() < end:
            time.sleep(POLL_S)
