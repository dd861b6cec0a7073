"""What waits for an answer in ``client.remoting``: a calling thread's own
connection to a broker (blocking calls), and the light stand-in for a
Future that many outstanding pulls use."""

from __future__ import annotations

import logging
from typing import Any

import zmq

from duomq.transport.busy_poll import BusyPoll
from duomq.transport.links import Dealer

log = logging.getLogger(__name__)


class Direct:
    """A calling thread's connection to one broker: its dealer (either kind,
    ``transport.links.Dealer``), a poller over every key the dealer's news
    comes on plus the thread's wake-up eventfd (registered with ``abort``
    for as long as the connection lives, not per call), and the busy poll
    of a call's wait for its answer."""

    __slots__ = ("sock", "poller", "busy")

    def __init__(self, sock: Dealer, wake_fd: int, busy: BusyPoll | None = None):
        self.sock = sock
        self.busy = busy or BusyPoll(0)
        self.poller: Any = sock.poller()
        for key in sock.poll_keys():
            self.poller.register(key, zmq.POLLIN)
        self.poller.register(wake_fd, zmq.POLLIN)

    def close(self) -> None:
        self.sock.close(linger=0)


class Answer:
    """In place of a Future for ``request_then``: ``fn(*args, result,
    exception)`` runs once, on the I/O thread, when the answer comes (or the
    request fails). No lock, condition or callback list: a consumer of 1,000
    queues keeps a pull of each waiting, and each Future was ten more
    objects for the garbage collector to walk."""

    __slots__ = ("fn", "args", "finished")

    def __init__(self, fn, args: tuple):
        self.fn = fn
        self.args = args
        self.finished = False

    def set_running_or_notify_cancel(self) -> bool:
        return True

    def done(self) -> bool:
        return self.finished

    def set_result(self, result) -> None:
        self._call(result, None)

    def set_exception(self, exc: BaseException) -> None:
        self._call(None, exc)

    def _call(self, result, exc) -> None:
        if self.finished:
            return
        self.finished = True
        try:
            self.fn(*self.args, result, exc)
        except Exception:
            log.exception("a request's answer callback failed")
