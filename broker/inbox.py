"""News for the serving thread from any other thread. A note is a typed
value (the HA controller's orders, ``coordinator.orders``; ``Flushed`` from
the flush service; ``ScrapeWanted`` from a metrics scrape; ``Wake``): it is
appended to a queue (``collections.deque`` appends and pops are atomic),
then one byte on the posting thread's own PUSH socket wakes the loop's PULL
socket (ZeroMQ sockets are not shared between threads). The loop reads the
wake-ups first and the queue second, so a note is never left behind: one
posted after the read sends its wake-up after it is queued."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

import zmq

from duomq.common.zsend import readable


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
    def __init__(self, ctx: zmq.Context, endpoint: str):
        self.ctx = ctx
        self.endpoint = endpoint
        self._notes: deque[object] = deque()
        self._local = threading.local()
        self._sockets: list[zmq.Socket] = []
        self._lock = threading.Lock()

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
        sock = getattr(self._local, "sock", None)
        if sock is None:
            sock = self._local.sock = self.ctx.socket(zmq.PUSH)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(self.endpoint)
            with self._lock:
                self._sockets.append(sock)
        sock.send(b"")

    def take(self, pull: zmq.Socket) -> list[object]:
        """The serving thread: the wake-ups read, every note queued so far."""
        while readable(pull):
            try:
                pull.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
        notes = self._notes
        return [notes.popleft() for _ in range(len(notes))]

    def close(self) -> None:
        with self._lock:
            for s in self._sockets:
                s.close(linger=0)
