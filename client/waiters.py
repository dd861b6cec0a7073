"""What waits for an answer in ``client.remoting``: a calling thread's own
connection to a broker (blocking calls), and the light stand-in for a
Future that many outstanding pulls use."""

from __future__ import annotations

import logging
from typing import Any

import zmq

from duomq.transport.busy_poll import BusyPoll
from duomq.transport.fd_poll import FdPoller

log = logging.getLogger(__name__)


class Direct:
    """A calling thread's connection to one broker: the DEALER, its monitor
    and a poller over both plus the thread's wake-up eventfd (registered
    with ``abort`` for as long as the connection lives, not per call), the
    send timeout last set on the DEALER, and the busy poll of a call's wait
    for its answer (native sockets)."""

    __slots__ = ("sock", "monitor", "poller", "sndtimeo", "busy")

    def __init__(self, sock: Any, monitor: zmq.Socket | None, wake_fd: int,
                 busy: BusyPoll | None = None):
        self.sock, self.monitor = sock, monitor     # native (ZmtpDealer): no monitor
        self.sndtimeo = -1
        self.busy = busy or BusyPoll(0)
        self.poller: Any = zmq.Poller() if monitor is not None else FdPoller()
        self.poller.register(sock, zmq.POLLIN)
        if monitor is not None:
            self.poller.register(monitor, zmq.POLLIN)
        self.poller.register(wake_fd, zmq.POLLIN)

    def close(self) -> None:
        if self.monitor is None:
            self.sock.close()
            return
        self.sock.disable_monitor()
        self.monitor.close(linger=0)
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
