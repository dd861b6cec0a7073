"""The serving loop's busy poll (``busy_poll_us``; Linux's
``net.core.busy_poll`` for sockets, the spinning idle strategies of Aeron
and the JVM's adaptive locks).

A thread asleep in ``poll`` is woken by its ZeroMQ I/O thread through an
eventfd and the scheduler, and on a VM an idle vCPU must be woken too: on
the 2-core machine here that costs more than the broker's whole handling of
a send (a one-outstanding send to a lone master 175 -> 130 us at the median
with 100 us of busy poll, ``bench/latency_floor.py``). So after a turn that
served something, the loop asks its sockets for a while before it sleeps.

A spin burns CPU a client on the same host may want, so the loop stops
spinning after ``MISSES`` spins in a row that caught nothing (a consumer
busy with batches, a producer at its own slow pace), and spins again after
a wait short enough for a spin to have caught it (one outstanding request,
a consumer's next pull). Asking holds the GIL between questions (pyzmq's
getsockopt does not release it); other threads get it at the interpreter's
switch interval, and ``poll`` releases it.
"""

from __future__ import annotations

import time

import zmq

from duomq.common.zsend import readable

MISSES = 8     # spins in a row that caught nothing: the loop stops spinning


class BusyPoll:
    def __init__(self, budget_us: int):
        self.max_ns = budget_us * 1000
        self.since_ns = 0                # when the last turn ended
        self.misses = 0                  # spins in a row that caught nothing
        self.spins = self.caught = 0     # spins, and the ones a message ended

    def spin(self, *sockets: zmq.Socket) -> bool:
        """After a turn that served something: ask ``sockets`` until one has
        a message (True) or the budget is spent (False). After ``MISSES``
        fruitless spins in a row it does not spin, until a wait short
        enough for a spin to catch (``woke``)."""
        now = self.since_ns = time.perf_counter_ns()
        if self.misses >= MISSES or not self.max_ns:
            return False
        self.spins += 1
        end = now + self.max_ns
        while time.perf_counter_ns() < end:
            for sock in sockets:
                if readable(sock):
                    self.caught += 1
                    self.misses = 0
                    return True
        self.misses += 1
        return False

    def woke(self) -> None:
        """``poll`` returned with news: a wait a spin would have caught
        brings the spinning back."""
        if self.misses >= MISSES and time.perf_counter_ns() - self.since_ns <= self.max_ns:
            self.misses = 0
