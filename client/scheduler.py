"""A client's one timer thread: delayed work (a pull retried after an error,
a paused queue re-checked) and periodic work (heartbeats; a push consumer's
rebalance, offset commits and lock renewals), run one at a time in time
order. A periodic task can be woken to run at once (coalesced: many wake-ups
before it runs make one run), after which its period starts again."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Periodic:
    """A task the scheduler runs every ``interval_s``; ``wake()`` runs it soon."""

    def __init__(self, scheduler: Scheduler, interval_s: float, fn: Callable[[], object]):
        self._scheduler = scheduler
        self.interval_s = interval_s
        self.fn = fn
        self._generation = 0            # runs queued under an older generation are skipped
        self._woken = False
        self._due = 0.0                 # monotonic time of the run queued last
        self.cancelled = False

    def wake(self, delay_s: float = 0.0) -> None:
        """Run within ``delay_s`` (then every ``interval_s`` again)."""
        self._scheduler._reschedule(self, delay_s, woken=True)

    def cancel(self) -> None:
        self.cancelled = True


class Scheduler:
    def __init__(self, name: str = "duomq-timer"):
        self._heap: list = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def call_later(self, delay_s: float, fn, *args) -> None:
        with self._cond:
            self._push(delay_s, fn, args)

    def every(self, interval_s: float, fn: Callable[[], object], *,
              first_s: float | None = None) -> Periodic:
        """Run ``fn`` every ``interval_s``, the first time after ``first_s``
        (default: one interval)."""
        task = Periodic(self, interval_s, fn)
        self._reschedule(task, interval_s if first_s is None else first_s, woken=False)
        return task

    def _push(self, delay_s: float, fn, args) -> None:
        heapq.heappush(self._heap, (time.monotonic() + delay_s, next(self._seq), fn, args))
        self._cond.notify()

    def _reschedule(self, task: Periodic, delay_s: float, woken: bool) -> None:
        with self._cond:
            due = time.monotonic() + delay_s
            if woken:
                if task._woken and task._due <= due:
                    return                     # a run is already due by then
                task._woken = True
            task._due = due
            task._generation += 1
            self._push(delay_s, self._run_periodic, (task, task._generation))

    def _run_periodic(self, task: Periodic, generation: int) -> None:
        with self._cond:
            if task.cancelled or generation != task._generation:
                return
            task._woken = False
        try:
            task.fn()
        finally:
            with self._cond:
                if not task.cancelled and not task._woken:   # woken meanwhile: that run is due
                    task._generation += 1
                    self._push(task.interval_s, self._run_periodic, (task, task._generation))

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (not self._heap or self._heap[0][0] > time.monotonic()):
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cond.wait(timeout)
                if self._closed:
                    return
                _, _, fn, args = heapq.heappop(self._heap)
            try:
                fn(*args)
            except Exception:
                log.exception("scheduled task failed")

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait until the task running now and every task due by now are done."""
        if self._thread is threading.current_thread():
            return
        done = threading.Event()
        self.call_later(0, done.set)
        done.wait(timeout_s)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not threading.current_thread():
            self._thread.join(5)
