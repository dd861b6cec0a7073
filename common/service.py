"""Background loops share one base (RocketMQ's ``ServiceThread``): named,
started and stopped the same way, woken early with ``wakeup()``."""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger(__name__)
REPEAT_LOG_S = 60.0        # a periodic task failing the same way is logged once a minute


class ServiceThread:
    name = "service"

    def __init__(self):
        self._event = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        try:
            self.run()
        except Exception:  # a dying service must be loud
            log.exception("%s died", self.name)

    def run(self) -> None:  # override
        raise NotImplementedError

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def wakeup(self) -> None:
        self._event.set()

    def wait_for_running(self, interval_s: float) -> None:
        """Sleep up to ``interval_s`` or until woken or stopped."""
        self._event.wait(interval_s)
        self._event.clear()

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self._stopped.set()
        self._event.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)


class PeriodicService(ServiceThread):
    """Calls ``task`` every ``interval_s`` (after the first wait, or at once
    with ``run_first``), logging a failure and going on."""

    def __init__(self, name: str, interval_s: float, task, *, run_first: bool = False):
        super().__init__()
        self.name = name
        self.interval_s = interval_s
        self.task = task
        self.run_first = run_first

    def run(self) -> None:
        if not self.run_first:
            self.wait_for_running(self.interval_s)
        failing, told = "", 0.0    # the failure going on, when it was last logged
        while not self.stopped:
            try:
                self.task()
                if failing:
                    log.info("%s works again", self.name)
                failing = ""
            except Exception as exc:
                now, what = time.monotonic(), f"{type(exc).__name__}: {exc}"
                if what != failing:             # a new failure: with its traceback
                    log.exception("%s failed; trying again every %.1f s", self.name,
                                  self.interval_s)
                    failing, told = what, now
                elif now - told >= REPEAT_LOG_S:   # the same one: a line a minute
                    log.warning("%s still fails (%s)", self.name, what)
                    told = now
            self.wait_for_running(self.interval_s)
