"""News for the serving thread from any other thread: one PUSH socket per
posting thread (ZeroMQ sockets are not shared between threads) into the
loop's PULL socket. A note is ``(kind, a, b)``:

  ``f`` offset       the flush service fsynced the log up to ``offset``
  ``w``              only a wake-up (the loop re-reads what moved)
  ``P`` ``F`` ``D`` ``H`` ``L``   the HA controller's orders (``coordinator.ha_controller``)
"""

from __future__ import annotations

import struct
import threading

import zmq

NOTE = struct.Struct(">cqq")   # kind, a, b


class LoopNotifier:
    def __init__(self, ctx: zmq.Context, endpoint: str):
        self.ctx = ctx
        self.endpoint = endpoint
        self._local = threading.local()
        self._sockets: list[zmq.Socket] = []
        self._lock = threading.Lock()

    def post(self, kind: bytes, a: int, b: int = 0) -> None:
        sock = getattr(self._local, "sock", None)
        if sock is None:
            sock = self._local.sock = self.ctx.socket(zmq.PUSH)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(self.endpoint)
            with self._lock:
                self._sockets.append(sock)
        sock.send(NOTE.pack(kind, a, b))

    def flushed(self, offset: int) -> None:
        self.post(b"f", offset)

    def wake(self) -> None:
        self.post(b"w", 0)

    def close(self) -> None:
        with self._lock:
            for s in self._sockets:
                s.close(linger=0)


def read_notes(sock: zmq.Socket):
    """The notes waiting on the loop's PULL socket, without blocking."""
    while True:
        try:
            yield NOTE.unpack(sock.recv(zmq.NOBLOCK))
        except zmq.Again:
            return
