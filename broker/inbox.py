"""News for the serving thread from any other thread. A note is a typed
value (the HA controller's orders, ``controller.orders``; ``Flushed`` from
the flush service; ``ScrapeWanted`` from a metrics scrape; ``Wake``): it is
appended to a queue (``collections.deque`` appends and pops are atomic),
then a write to an eventfd wakes the loop, which polls it beside its ports
(issue 41: an inproc ZeroMQ PUSH/PULL pair did, and a ZeroMQ socket in the
loop's poll made each wait two poll(2) calls and a Python call of pyzmq's).
The loop reads the wake-ups first and the queue second, so a note is never
left behind: one posted after the read writes its wake-up after it is
queued. The eventfd is closed only under the lock its writers take, so a
late post never writes to a number the kernel has given another file."""

from __future__ import annotations

import os
import threading
from collections import deque
from dataclasses import dataclass, field

import zmq

_POLLIN = int(zmq.POLLIN)


@dataclass(frozen=True)
class Flushed:
    """The flush service fsynced the log up to ``offset``."""
    offset: int


@dataclass(frozen=True)
class Wake:
    """Only a wake-up: the loop re-reads what moved (a held pull's data)."""


@dataclass(frozen=True, eq=False)
class ScrapeWanted:
    """A metrics scrape asks the loop for the detailed snapshot (queues,
    consumer lag), which only the serving thread may read from the store;
    ``done`` is set once ``broker.snapshot`` holds it."""
    done: threading.Event = field(default_factory=threading.Event)


class Inbox:
    def __init__(self):
        self._notes: deque[object] = deque()
        self._fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._lock = threading.Lock()          # writers against close
        self._closed = False

    def fileno(self) -> int:
        """What the serving loop polls."""
        return self._fd

    def post(self, note: object) -> None:
        """Queue ``note`` for the serving thread and wake it (any thread)."""
        self._notes.append(note)
        self._wake()

    def wake(self) -> None:
        """Wake the serving thread without a note."""
        self._wake()

    def flushed(self, offset: int) -> None:
        self.post(Flushed(offset))

    def _wake(self) -> None:
        with self._lock:
            if not self._closed:
                os.eventfd_write(self._fd, 1)

    def get(self, option: int) -> int:
        """ZMQ_EVENTS as a socket answers it (a busy poll asks): POLLIN
        while a note waits."""
        return _POLLIN if self._notes else 0

    def take(self) -> list[object]:
        """The serving thread: the wake-ups read, every note queued so far."""
        try:
            os.eventfd_read(self._fd)
        except BlockingIOError:
            pass
        notes = self._notes
        return [notes.popleft() for _ in range(len(notes))]

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                os.close(self._fd)
