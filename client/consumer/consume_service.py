"""How a push consumer runs its handler: on a pool of consume threads, either
concurrently (any thread takes any chunk; the committed offset is the window's
low end) or orderly (one thread at a time per queue, in queue order, only
while the queue is locked on its master).

``accept`` is called on the remoting I/O thread with each pull answer, and
``start`` once the queue's next pull is on its way (``pull_loop``);
handler failures go to ``consumer.handle_failure`` (send back for a retry),
else the message is tried again after ``suspend_current_queue_ms``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time

from duomq.client.consumer.process_queue import Chunk, ProcessQueue
from duomq.client.metrics import FAILURE, SUCCESS
from duomq.common.metrics import Histogram

log = logging.getLogger(__name__)
CHUNK_MIN = 32                 # fewer messages per task cost more than they win
MAX_TIME_CONTINUOUSLY_S = 1.0  # orderly: a thread gives a queue up this often (fairness)


class ConsumePool:
    """Up to ``threads`` daemon threads running ``fn(arg)`` tasks from one
    queue. A thread is started only when a task arrives and none is idle (as
    ``concurrent.futures.ThreadPoolExecutor`` does), so an idle consumer holds
    no consume thread and a busy one as many as its load keeps busy.

    With ``threads`` 0 a task runs at once on the thread that submits it: the
    client's I/O thread for a pull answer (as Kafka's poll loop and the
    Redis and NATS clients call the handler), the timer thread for a retry."""

    def __init__(self, threads: int, name: str):
        self.max_threads = threads
        self.name = name
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()
        self._closed = False

    @property
    def inline(self) -> bool:
        return self.max_threads == 0

    def submit(self, fn, arg) -> None:
        if self.max_threads == 0:
            if not self._closed:
                try:
                    fn(arg)
                except Exception:
                    log.exception("consume task failed")
            return
        self._tasks.put((fn, arg))
        with self._lock:
            if self._idle > 0:           # an idle thread takes it (reserved: one per task)
                self._idle -= 1
                return
            if len(self._threads) >= self.max_threads or self._closed:
                return
            t = threading.Thread(target=self._work, name=f"{self.name}-{len(self._threads)}",
                                 daemon=True)
            self._threads.append(t)
        t.start()

    @property
    def size(self) -> int:
        return len(self._threads)

    @property
    def idle(self) -> int:
        return self._idle

    def _work(self) -> None:
        get = self._tasks.get
        while True:
            task = get()
            if task is None:
                return
            fn, arg = task
            try:
                fn(arg)
            except Exception:
                log.exception("consume task failed")
            with self._lock:
                self._idle += 1

    def shutdown(self, timeout_s: float) -> None:
        """Finish the tasks already queued, then stop."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._tasks.put(None)
        deadline = time.monotonic() + timeout_s
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))


class _Service:
    def __init__(self, consumer):
        self.consumer = consumer
        cfg = consumer.config
        self.threads = cfg.consume_threads
        self.suspend_s = cfg.suspend_current_queue_ms / 1000
        self.pool = ConsumePool(self.threads, f"duomq-consume-{cfg.group}")
        self.consumed = 0
        self._count_lock = threading.Lock()

    def _timers(self, chunk: Chunk) -> tuple[Histogram, Histogram] | None:
        """With ``metrics_port``: the chunk's wait for a thread is observed
        (once), and the calling thread's process-time histograms for its
        queue (success, failure) come back; else None."""
        m = self.consumer.metrics
        if m is None:
            return None
        shard = m.shard()
        labels = (chunk.pq.mq.topic, self.consumer.group)
        if chunk.since:
            shard.histogram(("await_time", *labels)).observe(time.perf_counter() - chunk.since)
            chunk.since = 0.0
        return (shard.histogram(("process_time", *labels, SUCCESS)),
                shard.histogram(("process_time", *labels, FAILURE)))

    def _finish(self, chunk: Chunk) -> None:
        n = len(chunk.messages)
        chunk.pq.finish(chunk)
        with self._count_lock:
            self.consumed += n

    def shutdown(self, timeout_s: float) -> None:
        self.pool.shutdown(timeout_s)


class ConcurrentService(_Service):
    """Chunks of a pull go to any consume thread; a failed message is sent
    back for a later retry (or retried here after a pause if that fails),
    and holds the queue's committed offset until it is through."""

    def accept(self, pq: ProcessQueue, messages, next_offset: int, nbytes: int) -> list[Chunk]:
        """Record a pull answer in ``pq``; its chunks, for ``start``."""
        size = max(CHUNK_MIN, -(-len(messages) // max(1, self.threads)))
        return pq.add(messages, next_offset, nbytes, size)

    def start(self, pq: ProcessQueue, chunks: list[Chunk]) -> None:
        """Hand the chunks to the consume threads."""
        for chunk in chunks:
            if chunk.messages:
                self.pool.submit(self._run, chunk)

    def paused(self, pq: ProcessQueue) -> bool:
        return pq.span() > self.consumer.config.consume_concurrently_max_span

    def _run(self, chunk: Chunk) -> None:
        pq = chunk.pq
        if self.consumer.halted or not pq.begin(chunk):
            return       # stopping, or being handed over: the next owner reads this chunk
        try:
            self._consume(chunk)
        finally:
            pq.leave()

    def _consume(self, chunk: Chunk) -> None:
        pq = chunk.pq
        handler = self.consumer.on_message
        timers = self._timers(chunk)
        messages = chunk.messages
        i = chunk.i
        for msg in messages[i:] if i else messages:
            if pq.dropped or pq.halted:   # no longer ours, or stopping: the rest stays
                return
            t = time.perf_counter() if timers else 0.0
            try:
                handler(msg)
                if timers:
                    timers[0].observe(time.perf_counter() - t)
            except Exception as exc:
                if timers:
                    timers[1].observe(time.perf_counter() - t)
                chunk.attempts += 1
                if not self.consumer.handle_failure(msg, exc, chunk.attempts):
                    # not passed on: this message holds the window until it is through
                    self.consumer.timer.call_later(self.suspend_s, self.pool.submit, self._run,
                                                   chunk)
                    return
                chunk.attempts = 0
            i += 1
            chunk.i = i
        self._finish(chunk)


class OrderlyService(_Service):
    """One consume thread at a time per queue, messages in queue order, and
    only while the consumer holds the queue's lock on its master (clustering);
    a failure suspends the queue and retries the message in place, up to
    ``max_reconsume_times``, then sends it to the dead-letter queue."""

    def __init__(self, consumer):
        super().__init__(consumer)
        self._lock = threading.Lock()
        self.needs_lock = not consumer.broadcasting

    def accept(self, pq: ProcessQueue, messages, next_offset: int, nbytes: int) -> list[Chunk]:
        return pq.add(messages, next_offset, nbytes, max(CHUNK_MIN, len(messages)))

    def start(self, pq: ProcessQueue, chunks: list[Chunk]) -> None:
        self.schedule(pq)

    def paused(self, pq: ProcessQueue) -> bool:
        return False

    def schedule(self, pq: ProcessQueue) -> None:
        with self._lock:
            if pq.busy or pq.dropped or time.monotonic() < pq.suspended_until:
                return
            pq.busy = True
        self.pool.submit(self._run, pq)

    def _suspend(self, pq: ProcessQueue) -> None:
        with self._lock:
            pq.suspended_until = time.monotonic() + self.suspend_s
        self.consumer.timer.call_later(self.suspend_s, self.schedule, pq)

    def _run(self, pq: ProcessQueue) -> None:
        try:
            if not self.consumer.halted:
                self._consume(pq)
        finally:
            with self._lock:
                pq.busy = False
                resume = time.monotonic() >= pq.suspended_until
            # a pull answer that came while we were busy has its chunks queued
            # (a queue being handed over begins no new chunk)
            if resume and pq.pulling and pq.first_pending() is not None:
                self.schedule(pq)

    def _consume(self, pq: ProcessQueue) -> None:
        handler = self.consumer.on_message
        give_up_at = time.monotonic() + MAX_TIME_CONTINUOUSLY_S
        while not (pq.dropped or pq.halted):
            if self.needs_lock and pq.locked_until < time.monotonic():
                # not (or no longer) ours on the master: wait for the lock renewal
                self._suspend(pq)
                return
            chunk = pq.first_pending()
            if chunk is None or not pq.begin(chunk):     # none, or left to the next owner
                return
            try:
                self._consume_chunk(pq, chunk, handler)
            finally:
                pq.leave()
            if not chunk.finished:
                return              # suspended after a failure, or dropped
            if time.monotonic() > give_up_at:
                return          # _run reschedules: other queues get a thread too

    def _consume_chunk(self, pq: ProcessQueue, chunk: Chunk, handler) -> None:
        timers = self._timers(chunk)
        messages = chunk.messages
        while chunk.i < len(messages):
            if pq.dropped or pq.halted:
                return
            msg = messages[chunk.i]
            t = time.perf_counter() if timers else 0.0
            try:
                handler(msg)
                if timers:
                    timers[0].observe(time.perf_counter() - t)
            except Exception as exc:
                if timers:
                    timers[1].observe(time.perf_counter() - t)
                chunk.attempts += 1
                if chunk.attempts <= self.consumer.config.max_reconsume_times or \
                        not self.consumer.dead_letter(msg, exc):
                    log.warning("orderly consumption of %s failed (%d times): %s; queue %s "
                                "suspended for %g s", msg.msg_id, chunk.attempts, exc, pq.mq,
                                self.suspend_s)
                    self._suspend(pq)
                    return
            chunk.attempts = 0
            chunk.i += 1
        self._finish(chunk)
