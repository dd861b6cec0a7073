"""A DEALER connection to one peer (a slave's replication link to its
master, a client's connection to a broker), as one interface over its two
kinds, chosen once when it is made:
the calling thread's own (``dealer.ZmtpDealer``, made by its owner) and libzmq's
(``LibzmqDealer``, where CURVE is wanted). What differs stays inside:
libzmq keeps its connection alive with its own heartbeats and reconnects by
itself, a native dealer does both when its owner asks (``keep_alive``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import zmq

from duomq.transport.zsend import readable


class Dealer(Protocol):
    """A DEALER of either kind (see the module docstring)."""

    native: bool
    address: str
    opens: int                   # connections opened so far (a native one counts them)
    why: str                     # why the last one was closed, as far as known
    dialled_at: float            # when the last connect started (monotonic s)
    lost: bool                   # a connection died that take_lost has not told yet

    inq: Any                     # messages read and not yet received (libzmq's: its own)

    def poll_key(self) -> Any: ...     # what a poller watches (a descriptor, a socket)
    def poller(self) -> Any: ...       # a poller that can watch its poll_keys
    def send(self, data: bytes, flags: int = 0) -> Any: ...
    def recv(self, flags: int = 0) -> Any: ...      # bytes (a libzmq Frame with copy=False)
    def recv_multipart(self, flags: int = 0, copy: bool = True) -> Any: ...
    def get(self, option: int) -> Any: ...
    def poll_keys(self) -> tuple: ...  # every key its news comes on (a libzmq monitor too)
    def keep_alive(self, now: float, beat_s: float) -> bool: ...
    def opening_for(self, now: float) -> float: ...
    def silent_for(self, now: float) -> float: ...
    def reset(self, why: str) -> None: ...
    def take_lost(self) -> bool: ...
    def send_when_open(self, data: bytes, timeout_s: float) -> bool: ...
    def spin_read(self, until_ns: int) -> bool: ...  # news before perf_counter_ns() is until_ns
    def close(self, linger: int | None = None) -> None: ...


class LibzmqDealer:
    """libzmq's DEALER socket ``sock``, connected to ``address``, as a
    ``Dealer``: its heartbeats and reconnects are libzmq's (options set when
    it is made), so ``keep_alive`` and ``reset`` have nothing to do. With a
    ``monitor`` (its socket monitor) and ``read_monitor`` (reads the
    monitor's pending events: True when a connection died; it may raise, as
    a refused handshake does), ``take_lost`` tells of a death; without, none
    is told. The socket's own send, recv and get are this object's: no call
    in between."""

    native = False
    opens = 0
    why = ""
    dialled_at = 0.0
    lost = False
    inq = ()                           # what libzmq read waits in libzmq

    def __init__(self, sock: zmq.Socket, address: str, monitor: zmq.Socket | None = None,
                 read_monitor: Callable[[zmq.Socket], bool] | None = None):
        self.socket, self.address = sock, address
        self.monitor, self._read_monitor = monitor, read_monitor
        self.send, self.recv = sock.send, sock.recv
        self.get = sock.get
        self._sndtimeo = -1

    def poll_key(self) -> zmq.Socket:
        return self.socket             # (its FD alone is edge-triggered: not the same)

    def poller(self) -> zmq.Poller:
        return zmq.Poller()

    def poll_keys(self) -> tuple:
        return (self.socket,) if self.monitor is None else (self.socket, self.monitor)

    def recv_multipart(self, flags: int = 0, copy: bool = True) -> Any:
        return self.socket.recv_multipart(flags, copy=copy)

    def keep_alive(self, now: float, beat_s: float) -> bool:
        return False

    def opening_for(self, now: float) -> float:
        return 0.0                     # libzmq's connect timeout and reconnects

    def silent_for(self, now: float) -> float:
        return 0.0                     # libzmq's heartbeats, where they are set

    def reset(self, why: str) -> None:
        pass

    def take_lost(self) -> bool:
        if self.monitor is None or self._read_monitor is None or \
                not readable(self.monitor):
            return False
        return self._read_monitor(self.monitor)

    def send_when_open(self, data: bytes, timeout_s: float) -> bool:
        """Send ``data`` once a connection is open, waiting at most
        ``timeout_s`` for one: False when none opened (a socket made with
        IMMEDIATE queues only to a live connection). News of a drop while
        idle is read first (the send reconnects); a refused handshake
        raises as ``read_monitor`` raises."""
        self.take_lost()
        ms = max(1, int(timeout_s * 1000))
        if ms != self._sndtimeo:
            self.socket.setsockopt(zmq.SNDTIMEO, ms)
            self._sndtimeo = ms
        try:
            self.socket.send(data)
        except zmq.Again:
            if self.monitor is not None and self._read_monitor is not None:
                self._read_monitor(self.monitor)      # the handshake refused: it raises
            self.why = f"none opened in {timeout_s:g} s"
            return False
        return True

    def spin_read(self, until_ns: int) -> bool:
        """Whether a message waits (one look: libzmq's I/O thread reads)."""
        return bool(int(self.socket.get(zmq.EVENTS)) & zmq.POLLIN)

    def close(self, linger: int | None = 0) -> None:
        if self.monitor is not None:
            self.socket.disable_monitor()
            self.monitor.close(linger=0)
        self.socket.close(linger=linger)
