"""A small timer thread for delayed client work (a pull retried after an
error, a paused queue re-checked)."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time

log = logging.getLogger(__name__)


class Scheduler:
    def __init__(self, name: str = "duomq-scheduler"):
        self._heap: list = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def call_later(self, delay_s: float, fn, *args) -> None:
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + delay_s, next(self._seq), fn, args))
            self._cond.notify()

    def _run(self):
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

    def close(self):
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(5)
