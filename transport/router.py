"""The client port (and the replication port) served by the serving
thread itself: a ROUTER speaking ZMTP 3.1 (``transport.zmtp``) over its own
non-blocking sockets, with no ZeroMQ I/O thread between the wire and the
thread that handles a request (``client_transport``, ``ha_transport``).
ZeroMQ's DEALERs connect to it unchanged.

On the 2-core machine a message's hop through a ZeroMQ I/O thread costs
about 35 us at the median: the thread is asleep and must be woken on the
other vCPU. A request and its answer cross two of them in the broker, a
message from a producer to a waiting consumer three (``bench/latency_floor.py``:
a relay's end to end 185 -> 135 us with this side native, 35 us with both).

It keeps the surface the serving loop uses of a pyzmq ROUTER (bind,
``get(EVENTS)``, ``recv_multipart``, ``send_multipart`` with ROUTER_MANDATORY's
errors, a ``fileno`` to poll) and ZeroMQ's bounds: a frame larger than
``max_frame`` closes its connection (MAXMSGSIZE), a connection with
``rcvhwm`` requests unread is not read from (TCP pushes back), and one
with ``sndhwm`` answers unsent raises zmq.Again (the outbox keeps the rest).
The ``fileno`` is an epoll set over the listener and the connections, level
triggered, so the loop's poll wakes while any of them has news; requests
read but not yet taken (``backlogged``) are the loop's to ask for.
Without auth only: CURVE and ZAP stay ZeroMQ's (``broker.security``).
Serving thread only.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import select
import socket
import time
from collections import deque

import zmq

from duomq.transport import zmtp

log = logging.getLogger(__name__)

READ_BYTES = 256 * 1024      # read at most this much from one connection per look
ACCEPT_WARN_S = 10.0         # a failing accept (EMFILE) is logged at most this often
PEER_TYPES = {b"DEALER", b"REQ", b"ROUTER"}    # what a ROUTER accepts (libzmq's check)
_POLLIN, _EVENTS = int(zmq.POLLIN), int(zmq.EVENTS)
_IN, _OUT = select.EPOLLIN, select.EPOLLOUT
GREETING, HANDSHAKE, OPEN, GONE = range(4)


class _Conn:
    __slots__ = ("sock", "fd", "reader", "state", "identity", "inq", "out", "mask", "peer")

    def __init__(self, sock: socket.socket, max_frame: int, peer: str):
        self.sock = sock
        self.fd = sock.fileno()
        self.reader = zmtp.reader(max_frame)   # C, or the Python reference (zmtp.use)
        self.state = GREETING
        self.identity = b""
        self.inq: deque[list[bytes]] = deque()  # whole requests not yet taken
        self.out: deque[list] = deque()        # answers (their buffers) not yet written
        self.mask = _IN
        self.peer = peer


class ZmtpRouter:
    def __init__(self, rcvhwm: int, sndhwm: int, max_frame: int = -1, peer: str = "client"):
        self.peer = peer                       # who connects, as logs name them
        self.rcvhwm = rcvhwm
        self.sndhwm = sndhwm
        self.max_frame = max_frame
        self.ep = select.epoll()
        self.listener: socket.socket | None = None
        self.conns: dict[int, _Conn] = {}
        self.by_id: dict[bytes, _Conn] = {}
        self.ready: deque[_Conn] = deque()     # connections with requests to take, in turn
        self._ids = itertools.count(int.from_bytes(os.urandom(4), "big") & 0x7FFFFFFF)
        self.closed = False
        self._accept_warned = -ACCEPT_WARN_S
        self.opened = 0                        # connections accepted (metrics)
        self.refused = 0                       # closed for breaking the protocol
        self.rview = memoryview(bytearray(READ_BYTES))   # every read lands here first
                                               # (no allocation of READ_BYTES per read)

    # ---------------------------------------------------------------- socket surface
    def fileno(self) -> int:
        return self.ep.fileno()

    def bind(self, host: str, port: int) -> int:
        """Listen on host:port (0: a free port); returns the port."""
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            s.close()
            raise
        s.listen(1024)
        s.setblocking(False)
        self.listener = s
        self.ep.register(s.fileno(), _IN)
        return s.getsockname()[1]

    def backlogged(self) -> bool:
        """Requests read and not yet taken: the loop must not sleep on them."""
        return bool(self.ready)

    def get(self, option: int) -> int:
        """ZMQ_EVENTS: POLLIN when a request waits (reading what the
        sockets have first when none does)."""
        if option != _EVENTS:
            raise zmq.ZMQError(errno.EINVAL, f"option {option} is not kept here")
        if not self.ready:
            self.pump()
        return _POLLIN if self.ready else 0

    getsockopt = get

    def recv_multipart(self, flags: int = 0, copy: bool = True) -> list[bytes]:
        """The next request as [identity, *frames]; zmq.Again when none waits
        (never blocks)."""
        if not self.ready:
            self.pump()
            if not self.ready:
                raise zmq.Again()
        return self.take()

    def take(self) -> list[bytes]:
        """The next request already read (``backlogged``), as [identity,
        *frames]: the sockets are not looked at."""
        conn = self.ready.popleft()
        msg = conn.inq.popleft()
        if conn.reader.pending():              # what was read and not parsed, to the mark
            try:
                self._frames(conn)
            except zmtp.ZmtpError as exc:
                self._refuse(conn, exc)
        if conn.inq:
            self.ready.append(conn)            # fair: each connection in turn
        if not conn.mask & _IN and len(conn.inq) < self.rcvhwm and conn.state != GONE:
            self._watch(conn, conn.mask | _IN)
        return msg

    def send_multipart(self, frames: list, flags: int = 0, copy: bool = True) -> None:
        """Send frames[1:] to the connection named frames[0]. As
        ROUTER_MANDATORY: EHOSTUNREACH for a connection that is gone,
        zmq.Again while ``sndhwm`` answers wait for it."""
        conn = self.by_id.get(bytes(frames[0]))
        if conn is None:
            raise zmq.ZMQError(errno.EHOSTUNREACH, "no such peer")
        if len(conn.out) >= self.sndhwm:
            self.pump()
            if conn.state == GONE:
                raise zmq.ZMQError(errno.EHOSTUNREACH, "no such peer")
            if len(conn.out) >= self.sndhwm:
                raise zmq.Again()
        conn.out.append(zmtp.message(frames[1:]))
        if len(conn.out) == 1:
            self._write(conn)

    def close(self, linger: int | None = None) -> None:
        if self.closed:
            return
        self.closed = True
        for conn in list(self.conns.values()):
            self._drop(conn, None)
        if self.listener is not None:
            self.listener.close()
        self.ep.close()

    # ---------------------------------------------------------------- I/O
    def pump(self) -> None:
        """Accept, read and write whatever the sockets are ready for."""
        if self.closed:
            return
        listen_fd = self.listener.fileno() if self.listener is not None else -1
        for fd, ev in self.ep.poll(0):
            if fd == listen_fd:
                self._accept()
                continue
            conn = self.conns.get(fd)
            if conn is None:
                continue
            if ev & _OUT:
                self._write(conn)
            if ev & ~_OUT and conn.state != GONE:
                self._read(conn)

    def _accept(self) -> None:
        assert self.listener is not None
        while True:
            try:
                sock, addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:             # EMFILE and the like: try again next look
                now = time.monotonic()
                if now >= self._accept_warned + ACCEPT_WARN_S:
                    self._accept_warned = now
                    log.warning("%s port: cannot accept a connection: %s", self.peer, exc)
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(sock, self.max_frame, f"{addr[0]}:{addr[1]}")
            self.conns[conn.fd] = conn
            self.opened += 1
            self.ep.register(conn.fd, _IN)
            conn.out.append([zmtp.greeting(as_server=True) + zmtp.ready(b"ROUTER")])
            self._write(conn)

    def _read(self, conn: _Conn) -> None:
        why = conn.reader.fill(conn.fd, self.rview)
        if why is not None:
            self._drop(conn, None if why == zmtp.EOF else why)
            return
        had = bool(conn.inq)
        try:
            self._frames(conn)
        except zmtp.ZmtpError as exc:
            self._refuse(conn, exc)
        if conn.inq and not had:
            self.ready.append(conn)
        if len(conn.inq) >= self.rcvhwm and conn.mask & _IN and conn.state != GONE:
            self._watch(conn, conn.mask & ~_IN)    # not read until taken below the mark

    def _frames(self, conn: _Conn) -> None:
        reader = conn.reader
        if conn.state == GREETING:
            if not reader.greeting():
                return
            conn.state = HANDSHAKE
        if conn.state == HANDSHAKE:
            if (got := reader.frame()) is None:
                return
            self._handshake(conn, *got)
        # parsed only up to the receive mark: the rest stays bytes in the reader
        # (at most one read's worth), not thousands of small objects per read
        while (got := reader.messages(conn.inq, conn.identity, False, self.rcvhwm)) is not None:
            self._command(conn, got[1])

    def _handshake(self, conn: _Conn, flags: int, body: bytes) -> None:
        if not flags & zmtp.COMMAND:
            raise zmtp.ZmtpError("a message before the READY command")
        name, rest = zmtp.parse_command(body)
        if name == b"ERROR":
            raise zmtp.ZmtpError(f"the peer refused the handshake: {rest[1:]!r}")
        if name != b"READY":
            raise zmtp.ZmtpError(f"expected READY, got {name!r}")
        props = zmtp.parse_properties(rest)
        kind = props.get("socket-type", b"")
        if kind not in PEER_TYPES:
            raise zmtp.ZmtpError(f"a {kind.decode(errors='replace') or 'nameless'} socket "
                                 f"cannot talk to a ROUTER")
        wanted = props.get("identity", b"")
        # a peer's own name, unless taken or in the range names made up here use
        if wanted and wanted[0] != 0 and len(wanted) <= zmtp.MAX_IDENTITY \
                and wanted not in self.by_id:
            conn.identity = wanted
        else:
            conn.identity = b"\x00" + next(self._ids).to_bytes(4, "big")
        self.by_id[conn.identity] = conn
        conn.state = OPEN

    def _command(self, conn: _Conn, body: bytes) -> None:
        name, rest = zmtp.parse_command(body)
        if name == b"PING":
            if len(conn.out) >= self.sndhwm:   # a peer that reads nothing gets no PONG: its
                return                         # PINGs must not pile up answers here
            conn.out.append([zmtp.pong(rest)])
            if len(conn.out) == 1:
                self._write(conn)
        elif name == b"ERROR":
            raise zmtp.ZmtpError(f"the peer sent ERROR {rest[1:]!r}")
        # PONG and commands of other socket types (SUBSCRIBE) mean nothing here

    def _write(self, conn: _Conn) -> None:
        """Write what waits for ``conn`` until the kernel takes no more;
        watch for room when some is left."""
        out = conn.out
        try:
            zmtp.write_out(conn.fd, out)
        except OSError as exc:
            self._drop(conn, str(exc))
            return
        want = (conn.mask | _OUT) if out else (conn.mask & ~_OUT)
        if want != conn.mask:
            self._watch(conn, want)

    def _watch(self, conn: _Conn, mask: int) -> None:
        conn.mask = mask
        self.ep.modify(conn.fd, mask)

    def _refuse(self, conn: _Conn, exc: zmtp.ZmtpError) -> None:
        """Close a connection that broke the protocol (counted)."""
        if conn.state != GONE:
            self.refused += 1
        self._drop(conn, str(exc))

    def _drop(self, conn: _Conn, why: str | None) -> None:
        """Close a connection; requests already read stay to be served (as
        ZeroMQ's), answers to it fail with EHOSTUNREACH."""
        if conn.state == GONE:                # once: its fd may be a new connection's now
            return
        conn.state = GONE
        if why:
            log.warning("%s %s (%s): connection closed: %s", self.peer,
                        conn.identity.hex() or "-", conn.peer, why)
        del self.conns[conn.fd]
        if self.by_id.get(conn.identity) is conn:
            del self.by_id[conn.identity]
        try:
            self.ep.unregister(conn.fd)
        except (OSError, ValueError):
            pass
        conn.out.clear()
        conn.sock.close()
