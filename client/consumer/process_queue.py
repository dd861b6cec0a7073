"""A push consumer's local state of one queue and its consume window.

Pulled messages are cut into *chunks* (runs of messages in queue order) that
consume threads take one at a time; a chunk is consumed front to back, so its
position (the offset of its next message) says what of it is done. The
offset a queue may commit is the position of its oldest unfinished chunk: a
slow or stuck message holds the committed offset at itself however far the
other threads get (the sliding window of RocketMQ's ``ProcessQueue``, kept
per chunk instead of per message so that the work per message stays small).

Pure bookkeeping, no I/O: the consume services drive it.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from duomq.common.message import MessageExt, MessageQueue


class Chunk:
    """Messages of one queue, in offset order, consumed front to back."""

    __slots__ = ("pq", "messages", "i", "end", "nbytes", "attempts", "started", "since")

    def __init__(self, pq: ProcessQueue, messages: list[MessageExt], end: int, nbytes: int):
        self.pq = pq
        self.messages = messages
        self.i = 0              # index of the next message to consume
        self.end = end          # the offset after the chunk (past filtered-out entries too)
        self.nbytes = nbytes    # body bytes, released from flow control when finished
        self.attempts = 0       # failed attempts at messages[i] (orderly: in place)
        self.started = False    # a consume thread has taken it (``ProcessQueue.begin``)
        self.since = time.perf_counter()   # pulled at (a consumer's await_time metric)

    @property
    def finished(self) -> bool:
        return self.i >= len(self.messages)

    def position(self) -> int:
        """The first offset of this chunk not yet consumed. ``i`` is read once:
        a consume thread may move it on between a check and an index."""
        i = self.i
        return self.messages[i].queue_offset if i < len(self.messages) else self.end


class ProcessQueue:
    """One assigned queue: where to pull next and the window of pulled,
    unconsumed chunks.

    Who writes what (each field has one writer, or is written under a lock):
    the window, ``next_pull`` and the in-flight counts change under this
    queue's lock (the I/O thread adds pull answers, consume threads finish
    chunks); ``pulls`` is the I/O thread's; ``committed`` and
    ``locked_until`` are the timer thread's (commits, rebalances, lock
    renewals); ``busy`` and ``suspended_until`` change under the orderly
    consume service's lock; ``running`` (concurrent consume threads inside
    this queue's chunks) under this lock; ``stop_pulling()`` and ``drop()``
    are one-way and take this lock.

    A queue handed to another member is first *released*: ``stop_pulling()``
    (its pulls stop, answers still on the way are thrown away, and chunks no
    thread has begun are left for the next owner), then, once ``settled``
    (every chunk begun is finished) or out of time, ``drop()``. Consume
    threads begin chunks in queue order, so what is consumed is then a
    prefix of the window and its low end is exactly where the next owner
    must start: nothing is delivered twice."""

    def __init__(self, mq: MessageQueue, start: int, committed: int = -1):
        self.mq = mq
        self.next_pull = start       # offset of the next pull
        self.committed = committed   # last offset committed (-1: none yet)
        self._dropped = False        # no longer ours: stop pulling and consuming
        self._stopped = False        # being released: stop pulling, consume what is in hand
        self._halted = False         # stopping now: not one more message to the handler
        self.running = 0             # concurrent consume threads inside this queue's chunks
        self.pulls = 0
        self.max_offset = -1         # the queue's end at the broker, as the last pull said
        self.inflight = 0            # messages pulled, not yet consumed
        self.inflight_bytes = 0      # ... and their bodies' bytes
        self.locked_until = 0.0      # orderly: monotonic time the broker lock is held until
        self.busy = False            # orderly: a consume thread has this queue
        self.suspended_until = 0.0   # orderly: monotonic time a failed queue resumes at
        self._low = start            # consumed offset when no chunk is pending
        self._chunks: deque[Chunk] = deque()
        self._lock = threading.Lock()

    @property
    def dropped(self) -> bool:
        return self._dropped

    @property
    def pulling(self) -> bool:
        return not (self._stopped or self._dropped)

    @property
    def halted(self) -> bool:
        """No message more goes to the handler (``halt``)."""
        return self._halted

    def halt(self) -> None:
        """Stop now (a consumer that took all it asked for): no more pulls,
        and no message more to the handler, the one it is in finishing;
        what was consumed is a prefix of the window, so the committed offset
        is exactly past it and the rest stays for the group."""
        with self._lock:
            self._stopped = self._halted = True

    def drop(self) -> None:
        """No longer ours: pulls and consumption of this queue stop."""
        with self._lock:
            self._dropped = self._stopped = True

    def stop_pulling(self) -> None:
        """Being handed over: no more pulls; what was pulled is still consumed."""
        with self._lock:
            self._stopped = True

    def begin(self, chunk: Chunk) -> bool:
        """A consume thread takes ``chunk``: False when the queue is being
        released and the chunk was never begun (it is left to the next owner)."""
        with self._lock:
            if self._stopped and not chunk.started:
                return False
            chunk.started = True
            self.running += 1
            return True

    def leave(self) -> None:
        """The thread that began a chunk is out of it (finished or not)."""
        with self._lock:
            self.running -= 1

    @property
    def settled(self) -> bool:
        """No consume thread is in this queue and every chunk begun is finished."""
        with self._lock:
            return self.running == 0 and (self._halted or not any(
                c.started and not c.finished for c in self._chunks))

    def left_over(self) -> int:
        """Messages pulled and never begun (a release leaves them to the next owner)."""
        with self._lock:
            return sum(len(c.messages) for c in self._chunks if not c.started)

    def add(self, messages: list[MessageExt], next_offset: int, nbytes: int,
            chunk_size: int) -> list[Chunk]:
        """Record a pull answer (``messages`` may be empty when every entry was
        filtered out) and return its chunks of at most ``chunk_size``."""
        if not messages:
            chunks = [Chunk(self, messages, next_offset, 0)]
        else:
            n = len(messages)
            chunks = []
            for lo in range(0, n, chunk_size):
                part = messages[lo:lo + chunk_size]
                hi = lo + chunk_size
                end = messages[hi].queue_offset if hi < n else next_offset
                # the pull's body bytes, shared by message count (each chunk
                # releases its share when done, in whatever order they finish)
                share = nbytes * min(hi, n) // n - nbytes * lo // n
                chunks.append(Chunk(self, part, end, share))
        with self._lock:
            if self._stopped:
                return []             # being released: the next owner reads these
            self._chunks.extend(chunks)
            self.inflight += len(messages)
            self.inflight_bytes += nbytes
            self.next_pull = next_offset
        return chunks

    def finish(self, chunk: Chunk) -> None:
        """A consume thread is done with ``chunk``: its messages are let go
        at once (the chunk keeps only where it ends), and finished chunks at
        the window's low end leave it. (Kept until the next commit, the
        messages of 1,000 queues drained at once were all alive at the end:
        100,000 objects for every full garbage collection to walk.)"""
        with self._lock:
            self.inflight -= len(chunk.messages)
            self.inflight_bytes -= chunk.nbytes
            chunk.messages, chunk.i = [], 0
            self._first()

    def skip_to(self, offset: int) -> None:
        """The broker moved us (an illegal offset): pull from ``offset``, and
        commit it once everything pulled before is consumed."""
        with self._lock:
            self.next_pull = offset
            self._chunks.append(Chunk(self, [], offset, 0))

    def consumed_offset(self) -> int:
        """The offset to commit: nothing before it is left to consume."""
        with self._lock:
            first = self._first()
            return first.position() if first is not None else self._low

    def span(self) -> int:
        """Offsets between the oldest unconsumed message and the next pull."""
        return self.next_pull - self.consumed_offset()

    def first_pending(self) -> Chunk | None:
        """The oldest unfinished chunk (orderly consumption takes it next);
        finished ones before it leave the window here, as in ``consumed_offset``,
        so the look stays short however many chunks were consumed since a commit."""
        with self._lock:
            return self._first()

    def _first(self) -> Chunk | None:
        chunks = self._chunks
        while chunks and chunks[0].finished:
            self._low = chunks.popleft().end
        return chunks[0] if chunks else None
