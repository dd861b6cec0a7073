"""A wait over plain file descriptors with zmq.Poller's surface: a
client's blocking call on its native connection (``client.waiters``) and
the broker's serving loop when both its ports are native."""

from __future__ import annotations

import select
from typing import Any

import zmq

_POLLIN = int(zmq.POLLIN)


class FdPoller:
    """zmq.Poller's ``register`` and ``poll`` over plain file descriptors
    (or objects with a ``fileno``: a native connection's or port's epoll
    set), with one poll(2) a wait: libzmq's zmq_poll, which only a libzmq
    socket needs, asks twice when nothing is ready yet (a pass without a
    timeout first) and costs a Python call of pyzmq's more. Any event
    (readable, an error, a hang-up) is POLLIN: the owner reads and learns
    which."""

    __slots__ = ("_poll", "_by_fd")

    def __init__(self):
        self._poll = select.poll()
        self._by_fd: dict[int, Any] = {}

    def register(self, obj: Any, events: int = zmq.POLLIN) -> None:
        fd = obj if isinstance(obj, int) else obj.fileno()
        self._by_fd[fd] = obj
        self._poll.register(fd, select.POLLIN)

    def poll(self, timeout_ms: int) -> list[tuple[Any, int]]:
        return [(self._by_fd[fd], _POLLIN) for fd, _ev in self._poll.poll(timeout_ms)]
