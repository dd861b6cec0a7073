"""Sending on a ROUTER_MANDATORY socket with a small high-water mark, and
asking whether a message waits before reading it."""

from __future__ import annotations

from typing import Any, Protocol

import zmq

_EVENTS, _POLLIN = int(zmq.EVENTS), int(zmq.POLLIN)   # plain ints: no enum arithmetic


class Asked(Protocol):
    """What can be asked whether a message waits: a libzmq socket, a port."""

    def get(self, option: int) -> Any: ...


class Sent(Protocol):
    """What sends multipart messages: a libzmq socket, a port."""

    def send_multipart(self, frames: list, flags: int = 0, copy: bool = True) -> Any: ...
    def getsockopt(self, option: int) -> Any: ...


def readable(socket: Asked) -> bool:
    """Whether a message waits on ``socket``. The hot loops ask this before
    each non-blocking read instead of reading until zmq.Again: raising and
    catching pyzmq's Again cost about 10 us a turn in the serving loop
    (docs/benchmarks.md, issue 41), the question 1-2 us."""
    return bool(int(socket.get(_EVENTS)) & _POLLIN)


def send_now(socket: Sent, frames: list, copy: bool = True) -> None:
    """Send without blocking; zmq.Again only when the peer's queue is really
    full. libzmq learns that its I/O thread has drained a queue from commands
    the socket reads at most about once a millisecond while it is not
    blocking, so with a small high-water mark a send can find a queue "full"
    that is empty: on Again the commands are read (ZMQ_EVENTS does) and the
    send is tried once more."""
    try:
        socket.send_multipart(frames, zmq.NOBLOCK, copy=copy)
    except zmq.Again:
        socket.getsockopt(zmq.EVENTS)
        socket.send_multipart(frames, zmq.NOBLOCK, copy=copy)
