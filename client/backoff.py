"""Spacing of a producer's retries against a broker group whose master
refused a write (its lease lapsed, it is handing over, its disk is full):
Kafka's ``retry.backoff.ms`` growing to ``retry.backoff.max.ms``, shared by
every send of the producer so that a hundred sends in flight do not turn
into a hundred retries a millisecond.

Each refusal doubles the group's delay (``MIN_S`` up to ``MAX_S``); each
retry takes the group's next turn, one ``delay`` after the one before, so
the producer tries a refusing group at most ``1 / delay`` times a second
however many sends wait. A write the group stores resets it. Pure logic
over a clock the caller passes; the producer waits for its turn on the
topic's route, so a new master ends the wait at once.
"""

from __future__ import annotations

import threading

MIN_S = 0.1
MAX_S = 1.0


class RefusalBackoff:
    def __init__(self, min_s: float = MIN_S, max_s: float = MAX_S):
        self.min_s, self.max_s = min_s, max_s
        self._lock = threading.Lock()
        self._delay: dict[str, float] = {}       # group -> the delay its next refusal doubles
        self._next: dict[str, float] = {}        # group -> when its next retry may go

    def refused(self, group: str) -> None:
        """``group`` refused a write: space the next retries further apart."""
        with self._lock:
            d = self._delay.get(group)
            self._delay[group] = self.min_s if d is None else min(self.max_s, d * 2)

    def turn(self, group: str, now: float) -> float:
        """Seconds until this retry of ``group`` may go (0: now), taking that turn."""
        with self._lock:
            delay = self._delay.get(group)
            if delay is None:
                return 0.0
            slot = max(now + delay, self._next.get(group, 0.0))
            self._next[group] = slot + delay
            return slot - now

    def stored(self, group: str) -> None:
        """``group`` took a write: its retries go at once again."""
        if group in self._delay:
            with self._lock:
                self._delay.pop(group, None)
                self._next.pop(group, None)

    def waiting(self) -> bool:
        return bool(self._delay)
