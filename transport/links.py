"""A DEALER connection to one peer (a slave's replication link to its
master), as one interface over its two kinds, chosen once when it is made:
the calling thread's own (``dealer.ZmtpDealer``, made by its owner) and libzmq's
(``LibzmqDealer``, where CURVE is wanted). What differs stays inside:
libzmq keeps its connection alive with its own heartbeats and reconnects by
itself, a native dealer does both when its owner asks (``keep_alive``)."""

from __future__ import annotations

from typing import Any, Protocol

import zmq


class Dealer(Protocol):
    """A DEALER of either kind (see the module docstring)."""

    native: bool
    address: str
    opens: int                   # connections opened so far (a native one counts them)
    why: str                     # why the last one was closed, as far as known
    dialled_at: float            # when the last connect started (monotonic s)

    def poll_key(self) -> Any: ...     # what a poller watches (a descriptor, a socket)
    def send(self, data: bytes, flags: int = 0) -> Any: ...
    def recv(self, flags: int = 0) -> Any: ...      # bytes (a libzmq Frame with copy=False)
    def recv_multipart(self, flags: int = 0, copy: bool = True) -> Any: ...
    def get(self, option: int) -> Any: ...
    def keep_alive(self, now: float, beat_s: float) -> bool: ...
    def take_lost(self) -> bool: ...
    def close(self, linger: int | None = None) -> None: ...


class LibzmqDealer:
    """libzmq's DEALER socket ``sock``, connected to ``address``, as a
    ``Dealer``: its heartbeats and reconnects are libzmq's (options set when
    it is made), so ``keep_alive`` has nothing to do and no loss is told.
    The socket's own send, recv and get are this object's: no call in between."""

    native = False
    opens = 0
    why = ""
    dialled_at = 0.0

    def __init__(self, sock: zmq.Socket, address: str):
        self.socket, self.address = sock, address
        self.send, self.recv = sock.send, sock.recv
        self.get = sock.get
        self.close = sock.close

    def poll_key(self) -> zmq.Socket:
        return self.socket             # (its FD alone is edge-triggered: not the same)

    def recv_multipart(self, flags: int = 0, copy: bool = True) -> Any:
        return self.socket.recv_multipart(flags, copy=copy)

    def keep_alive(self, now: float, beat_s: float) -> bool:
        return False

    def take_lost(self) -> bool:
        return False

