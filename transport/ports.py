"""A port the broker's serving thread owns (the client port, the replication
port), as one interface over its two implementations, chosen once when the
port is made (``listening``): the thread's own ROUTER (``router.ZmtpRouter``,
no libzmq I/O thread between the wire and the loop) or libzmq's ROUTER
(``LibzmqPort``; CURVE is libzmq's, so a secured broker's ports are these).

What the loop does with a port is the same for both: poll ``poll_key``, ask
``backlogged`` whether requests it already read wait (a native port reads a
whole batch per look), take a turn's ``requests``, send answers with
``send_multipart`` (ROUTER_MANDATORY's errors: EHOSTUNREACH for a peer that is
gone, zmq.Again while its pipe is full), and ask ``get(zmq.EVENTS)``
(``zsend.readable``). As kazoo's ``IHandler``: callers never ask which one they have.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import zmq

from duomq.transport.fd_poll import FdPoller
from duomq.transport.router import ZmtpRouter
from duomq.transport.zsend import readable


class PortError(Exception):
    """A port that cannot listen where it was told (taken, no such address)."""


class Port(Protocol):
    """A listening ROUTER port of the serving thread (see the module docstring)."""

    native: bool                    # poll_key is a plain descriptor (poll(2) can watch it)
    libzmq: zmq.Socket | None       # libzmq's socket, where CURVE options go (None: native)

    def bind(self, host: str, port: int) -> int: ...
    def poll_key(self) -> Any: ...
    def backlogged(self) -> bool: ...
    def requests(self, limit: int) -> Iterator[tuple[list[bytes], str | None]]: ...
    def get(self, option: int) -> int: ...
    def getsockopt(self, option: int) -> int: ...
    def recv_multipart(self, flags: int = 0, copy: bool = True) -> list: ...
    def send_multipart(self, frames: list, flags: int = 0, copy: bool = True) -> None: ...
    def connections(self) -> tuple[int, int, int] | None: ...
    def close(self, linger: int | None = None) -> None: ...


class NativePort(ZmtpRouter):
    """The serving thread's own ROUTER as a ``Port``."""

    native = True
    libzmq: zmq.Socket | None = None

    def bind(self, host: str, port: int) -> int:
        try:
            return super().bind("0.0.0.0" if host == "*" else host, port)
        except OSError as exc:
            raise PortError(exc.strerror or str(exc)) from None

    def poll_key(self) -> int:
        return self.fileno()

    def requests(self, limit: int) -> Iterator[tuple[list[bytes], str | None]]:
        """Up to ``limit`` requests: those read already, with one look at the
        sockets first when none was (what arrives meanwhile is the next
        turn's: its poll sees it, not a second epoll_wait finding nothing)."""
        if not self.ready:
            self.pump()
        ready, take = self.ready, self.take
        for _ in range(limit):
            if not ready:
                return
            yield take(), None

    def connections(self) -> tuple[int, int, int]:
        """(open now, accepted in all, closed for breaking the protocol)."""
        return len(self.conns), self.opened, self.refused


class LibzmqPort:
    """libzmq's ROUTER (ROUTER_MANDATORY, bounded by its high-water marks and
    MAXMSGSIZE) as a ``Port``. ``authenticated``: CURVE is on, each request
    is read with its frames' properties to learn the User-Id ZAP gave its
    connection. The socket's own methods are this object's: no call in between."""

    native = False

    def __init__(self, ctx: zmq.Context, rcvhwm: int, sndhwm: int, max_frame: int,
                 authenticated: bool = False):
        sock = self.libzmq = ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, rcvhwm)
        sock.setsockopt(zmq.SNDHWM, sndhwm)
        sock.setsockopt(zmq.MAXMSGSIZE, max_frame)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)   # a full or gone peer raises, never drops
        self.authenticated = authenticated
        self.get = self.getsockopt = sock.get
        self.recv_multipart = sock.recv_multipart
        self.send_multipart = sock.send_multipart
        self.close = sock.close

    def bind(self, host: str, port: int) -> int:
        try:
            if port == 0:
                return self.libzmq.bind_to_random_port(f"tcp://{host}")
            self.libzmq.bind(f"tcp://{host}:{port}")
        except zmq.ZMQError as exc:
            raise PortError(str(exc)) from None
        return port

    def poll_key(self) -> zmq.Socket:
        return self.libzmq

    def backlogged(self) -> bool:
        return False         # libzmq's queue is asked through poll and get(EVENTS)

    def requests(self, limit: int) -> Iterator[tuple[list[bytes], str | None]]:
        sock = self.libzmq
        for _ in range(limit):
            if not readable(sock):     # asked first: no zmq.Again to raise (zsend.readable)
                return
            try:
                if not self.authenticated:
                    yield sock.recv_multipart(zmq.NOBLOCK), None
                    continue
                frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            # the User-Id ZAP gave the connection: checked on every request
            who = frames[-1].get("User-Id")
            yield [f.bytes for f in frames], who if isinstance(who, str) else None

    def connections(self) -> None:
        return None          # libzmq does not say


def listening(ctx: zmq.Context, native: bool, rcvhwm: int, sndhwm: int, max_frame: int,
              peer: str = "client", authenticated: bool = False) -> Port:
    """A port of either kind (``native``: the serving thread's own)."""
    if native:
        return NativePort(rcvhwm, sndhwm, max_frame, peer)
    return LibzmqPort(ctx, rcvhwm, sndhwm, max_frame, authenticated)


def poller_for(*ports: Port) -> Any:
    """A poller that can watch every one of ``ports`` (and plain descriptors
    beside them): when all are native, one poll(2) a wait over plain
    descriptors (libzmq's zmq_poll asks twice, and only a libzmq socket
    needs it); otherwise zmq.Poller."""
    return FdPoller() if all(p.native for p in ports) else zmq.Poller()
