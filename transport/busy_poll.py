"""A busy poll (``busy_poll_us``; Linux's ``net.core.busy_poll`` for
sockets, the spinning idle strategies of Aeron and the JVM's adaptive
locks): the broker's serving loop after a turn, and a client's blocking
call (a producer's send) before it sleeps on its answer.

A thread asleep in ``poll`` is woken by its ZeroMQ I/O thread through an
eventfd and the scheduler, and on a VM an idle vCPU must be woken too: on
the 2-core machine here that costs more than the broker's whole handling of
a send (a one-outstanding send to a lone master 175 -> 130 us at the median
with 100 us of busy poll, ``bench/latency_floor.py``). So after a turn that
served something, the loop asks its sockets for a while before it sleeps.

A spin burns CPU a client on the same host may want, so the loop spins
only while at least half of its recent waits (an average over about
eight) were short enough for a spin to catch: a spin's outcome counts, and
so does a wait it did not spin on that was short enough for a spin even
with the wake-up in it. A long wait it did not spin on is not counted: a
thread asleep measures its own wake-up too (20-60 us on a VM), so with the
wake-up in it a wait a spin would have caught can look too long, and
counted as a miss it kept the spin off for good once a few slow answers
(a moment's contention) had turned it off (a one-outstanding send stuck at
the sleeping thread's ~170 us where the spin took ~110). So while it does
not spin, every ``PROBE_EVERY``-th wait is spun on anyway, a probe that
measures what a spin would catch now. One outstanding request keeps it
spinning; a consumer busy with batches, or a producer at its own slow
pace, does not (its probes cost a sixteenth of a spin a wait). Asking holds the GIL between
questions (pyzmq's getsockopt does not release it); other threads get it
at the interpreter's switch interval, and ``poll`` releases it (a native
socket's question is an ``epoll_wait`` of 0, which releases it too).

A client's side: its answer comes back on a thread that went to sleep in
``poll``; waking it costs the thread's own wake-up and makes the broker's
``sendmsg`` wake a sleeping peer (20-50 us on each side on the 2-core
machine). A producer sending one message at a time to a lone ASYNC_FLUSH
master: 5,740-5,993 -> 8,192-8,982 sends a second with 100-200 us of spin.
A send whose answer waits on a fsync or a slave (about a millisecond) is
not caught by a 100 us spin, so after a few such sends the call no longer
spins. A blocking call on a native connection spins in one call
(``spin_with`` and ``ZmtpDealer.spin_read``): its reader reads again and
again in C with the GIL let go, a ``recv`` every microsecond or so instead
of a Python round of questions every few.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from duomq.transport.zsend import readable

PAYS = 0.5      # the share of recent waits a spin must catch for the loop to spin
WEIGHT = 8      # the hit rate is an average over about this many waits
PROBE_EVERY = 16   # while a spin does not pay, every this-many waits is spun on anyway


class BusyPoll:
    def __init__(self, budget_us: int):
        self.max_ns = budget_us * 1000
        self.since_ns = 0                # when the last turn ended
        self.rate = 1.0                  # share of recent waits a spin caught, or would have
        self.spun = False                # this wait was spun on (and so already counted)
        self.skipped = 0                 # waits not spun on since the last spin
        # spins, the ones a message ended, and the time spent spinning (the
        # metrics duomq_busy_poll_*: what the spin costs, and how often it pays)
        self.spins = self.caught = self.spent_ns = 0

    def spin(self, *sockets: Any) -> bool:
        """After a turn that served something: ask ``sockets`` until one has
        a message (True) or the budget is spent (False); no spin while
        fewer than ``PAYS`` of recent waits were short enough to catch."""
        return self.spin_until(lambda: any(readable(sock) for sock in sockets))

    def spin_until(self, news: Callable[[], bool]) -> bool:
        """``spin`` on any question: ``news()`` until it says yes (a
        message, or a connection's death) or the budget is spent."""
        now = time.perf_counter_ns()
        end = self._begin(now)
        if end is None:
            return False
        while (t := time.perf_counter_ns()) < end:
            if news():
                return self._end(now, t, True)
        return self._end(now, t, False)

    def spin_with(self, wait: Callable[[int], bool]) -> bool:
        """``spin_until`` with the whole spin in one call: ``wait(end_ns)``
        asks until it has news (True) or ``time.perf_counter_ns()`` reaches
        ``end_ns`` (False), as ``ZmtpDealer.spin_read`` does in its reader."""
        now = time.perf_counter_ns()
        end = self._begin(now)
        if end is None:
            return False
        caught = wait(end)
        return self._end(now, time.perf_counter_ns(), caught)

    def _begin(self, now: int) -> int | None:
        """A spin's end (perf_counter ns), or None when this wait is not
        spun on (no budget, or a spin does not pay and this is no probe)."""
        self.since_ns = now
        self.spun = False
        if not self.max_ns:
            return None
        if self.rate < PAYS:
            self.skipped += 1
            if self.skipped < PROBE_EVERY:
                return None
        self.skipped = 0                 # spinning, or a probe
        self.spun = True
        self.spins += 1
        return now + self.max_ns

    def _end(self, began: int, now: int, caught: bool) -> bool:
        """A spin's outcome counted: its time, and whether it caught news."""
        self.spent_ns += now - began
        if caught:
            self.caught += 1
        self._count(1.0 if caught else 0.0)
        return caught

    def woke(self) -> None:
        """``poll`` returned with news: a wait the loop did not spin on
        counts as caught if it was short enough for a spin, wake-up and all;
        a longer one is not counted (the wake-up may be what made it long:
        the probes measure that)."""
        if not self.spun and self.since_ns and \
                time.perf_counter_ns() - self.since_ns <= self.max_ns:
            self._count(1.0)
        self.spun = False

    def _count(self, hit: float) -> None:
        self.rate += (hit - self.rate) / WEIGHT
