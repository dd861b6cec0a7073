"""A connection to one broker without ZeroMQ's I/O thread: a DEALER
speaking ZMTP 3.1 (``transport.zmtp``, NULL mechanism) over a plain
non-blocking socket that the thread using it reads and writes itself: a
client's (``transport = "native"``; with credentials the client uses libzmq
and CURVE) and a slave's replication link (``ha_transport``, ``whole``
messages: a transfer's header and log bytes).

A request through libzmq is handed to its I/O thread, and its answer handed
back: on the 2-core machine each hop wakes a sleeping thread on the other
vCPU, about 35 us at the median (``bench/latency_floor.py``: a relay's end
to end 185 -> 35 us with both the clients and the broker speaking ZMTP
themselves). It talks to any ZeroMQ ROUTER, the broker's native port or
libzmq's.

It keeps the part of a pyzmq DEALER the client uses (``send``, ``recv`` and
``get(EVENTS)`` that never block, a ``fileno`` to poll, stable across
reconnects: an epoll set over the socket). It connects on the first send
after it was closed, queueing until the handshake is done; a connection that
dies, or fails to open, counts as *lost* (``take_lost``: what libzmq's
monitor says with DISCONNECTED), and what was queued for it is dropped (the
client fails those requests). One thread only.
"""

from __future__ import annotations

import errno
import select
import socket
import threading
import time
from collections import deque
from typing import Any

import zmq

from duomq.transport import zmtp
from duomq.transport.fd_poll import FdPoller

READ_BYTES = 1024 * 1024
_reading = threading.local()  # each thread's read buffer, shared by its connections
MAX_QUEUED = 100_000          # requests queued for one broker (libzmq's SNDHWM here)
UNBOUNDED = 1 << 62
_POLLIN, _EVENTS = int(zmq.POLLIN), int(zmq.EVENTS)
_IN, _OUT = select.EPOLLIN, select.EPOLLOUT
CLOSED, CONNECTING, GREETING, HANDSHAKE, OPEN = range(5)


def split_address(address: str) -> tuple[str, int]:
    """("host", port) of "tcp://host:port" ("[v6]" brackets removed)."""
    rest = address.removeprefix("tcp://")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"not a tcp://host:port address: {address!r}")
    return host.strip("[]"), int(port)


class ZmtpDealer:
    """A DEALER connection of the calling thread's own (``links.Dealer``)."""

    native = True

    def __init__(self, address: str, whole: bool = False):
        self.address = address
        self.whole = whole                     # keep every frame of a message (recv_multipart)
        self.host, self.port = split_address(address)
        self.ep = select.epoll()
        self.sock: socket.socket | None = None
        self.state = CLOSED
        self.reader = zmtp.reader()            # C, or the Python reference (zmtp.use)
        self.inq: deque = deque()              # messages: their last frame, or all (whole)
        self.out: deque[list] = deque()         # requests (their buffers) not yet written
        self.hello: bytes | memoryview = b""   # this side's greeting and READY, unwritten
        self.mask = 0
        self.lost = False                      # a connection died since take_lost
        self.why = ""                          # ... and why, as far as known
        self.dialled_at = 0.0                  # when the last connect started (monotonic)
        self.opens = 0                         # handshakes completed (connections opened)
        self.heard_at = 0.0                    # when the peer last sent anything (monotonic)
        self.pinged_at = 0.0                   # when this side last sent a PING

    # ---------------------------------------------------------------- DEALER surface
    def fileno(self) -> int:
        return self.ep.fileno()

    def poll_key(self) -> int:
        return self.ep.fileno()

    def poller(self) -> FdPoller:
        return FdPoller()              # its key is a plain descriptor: one poll(2) a wait

    def send(self, data: bytes, flags: int = 0) -> None:
        """Queue one single-frame message; written now when the connection
        is open. zmq.Again past MAX_QUEUED."""
        if len(self.out) >= MAX_QUEUED:
            raise zmq.Again()
        if self.state == CLOSED:
            self._connect()
            if self.state == CLOSED:           # not even started: dropped, take_lost says so
                return
        self.out.append(zmtp.message([data]))
        if self.state == OPEN and len(self.out) == 1:
            self._write()

    def get(self, option: int) -> int:
        if option != _EVENTS:
            raise zmq.ZMQError(errno.EINVAL, f"option {option} is not kept here")
        if not self.inq:
            self.pump()
        return _POLLIN if self.inq else 0

    def spin_read(self, until_ns: int) -> bool:
        """Whether a message arrived, or the connection was lost, before
        ``time.perf_counter_ns()`` reaches ``until_ns``: a busy poll's
        question (``BusyPoll.spin_with``), asked by reads one after another
        in the reader (``fill_until``), not a Python call a look; what the
        reads bring is parsed as ``pump`` parses it."""
        while not (self.inq or self.lost):
            if self.sock is not None and self.mask == _IN and self.state == OPEN:
                self._read(until_ns)
            else:
                self.pump()          # a connect, a handshake, writes waiting: one look
            if not (self.inq or self.lost) and time.perf_counter_ns() >= until_ns:
                return False
        return True

    def recv(self, flags: int = 0) -> bytes:
        if not self.inq:
            self.pump()
            if not self.inq:
                raise zmq.Again()
        return self.inq.popleft()

    def recv_multipart(self, flags: int = 0, copy: bool = True) -> list[bytes]:
        """A whole message's frames (``whole``); zmq.Again when none waits."""
        msg: Any = self.recv()
        return msg if self.whole else [msg]

    @property
    def is_open(self) -> bool:
        return self.state == OPEN

    def ping(self) -> None:
        """A ZMTP PING (a ROUTER answers PONG): traffic that shows the
        connection lives while no message needs to travel."""
        if self.state == OPEN:
            self.pinged_at = time.monotonic()
            self.out.append([zmtp.ping()])
            if len(self.out) == 1:
                self._write()

    def reset(self, why: str) -> None:
        """Close the connection now (a silent or slow one); what was queued
        goes with it and the next send dials again."""
        self._close(why)

    def keep_alive(self, now: float, beat_s: float) -> bool:
        """What libzmq's HEARTBEAT_IVL (half a beat), HEARTBEAT_TIMEOUT (two
        beats) and CONNECT_TIMEOUT (half a beat) do for its DEALER: a PING
        when the connection has carried nothing for half a beat (a ROUTER
        answers PONG), closed when it carried nothing for two or is not open
        half a beat after its dial. True when it is closed: the next send
        dials again (``take_lost`` says whether one died)."""
        if self.state == OPEN:
            quiet = now - max(self.heard_at, self.dialled_at)
            if quiet <= 2 * beat_s:
                if quiet > beat_s / 2 and now - self.pinged_at >= beat_s / 2:
                    self.ping()
                return False
            self._close(f"silent for {quiet:.1f} s")
        elif self.state != CLOSED:
            if now - self.dialled_at <= beat_s / 2:
                return False
            self._close(f"not open {beat_s / 2:g} s after the dial")
        return True

    def poll_keys(self) -> tuple[int]:
        return (self.ep.fileno(),)

    def opening_for(self, now: float) -> float:
        """How long a connect has been under way without opening (0: none is)."""
        return now - self.dialled_at if self.state not in (CLOSED, OPEN) else 0.0

    def silent_for(self, now: float) -> float:
        """How long an open connection has heard nothing (0: not open)."""
        return now - self.heard_at if self.state == OPEN else 0.0

    def take_lost(self) -> bool:
        """Whether a connection died (or failed to open) since last asked."""
        lost, self.lost = self.lost, False
        return lost

    def wait_open(self, timeout_s: float) -> bool:
        """Connect if closed and wait for the handshake, at most ``timeout_s``;
        False when it failed (``why`` says how) or took longer."""
        if self.state == CLOSED:
            self._connect()
        deadline = time.monotonic() + timeout_s
        while self.state in (CONNECTING, GREETING, HANDSHAKE):
            left = deadline - time.monotonic()
            if left <= 0:
                self.why = f"no connection in {timeout_s:g} s"
                return False
            self.ep.poll(left)
            self.pump()
        return self.state == OPEN

    def send_when_open(self, data: bytes, timeout_s: float) -> bool:
        """Send ``data`` once the connection is open, dialling if it is
        closed and waiting at most ``timeout_s`` for the handshake: False
        when it failed or took longer (``why`` says which). A drop while
        idle is read first and forgotten: this send reconnects."""
        self.pump()
        self.take_lost()
        if not self.wait_open(timeout_s):
            self.take_lost()
            return False
        self.send(data)
        return True

    def close(self, linger: int | None = None) -> None:
        self._close("closed")
        self.ep.close()

    # ---------------------------------------------------------------- I/O
    def pump(self) -> None:
        """Finish a connect, read and write whatever the socket is ready for."""
        if self.sock is None:
            return
        if self.mask == _IN and self.state == OPEN:
            # nothing waits to be written: read at once (a read that finds nothing
            # costs what asking the epoll set would; one that finds the answer
            # saves that question, a system call a request)
            self._read()
            return
        for _fd, ev in self.ep.poll(0):
            if self.state == CONNECTING:
                self._connected()
            elif ev & _OUT:
                self._write()
            if ev & ~_OUT and self.sock is not None:
                self._read()

    def _connect(self) -> None:
        self.dialled_at = time.monotonic()
        try:
            family, kind, proto, _, addr = socket.getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM)[0]
        except OSError as exc:
            self._fail(f"cannot resolve {self.host}: {exc}")
            return
        s = socket.socket(family, kind, proto)
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        err = s.connect_ex(addr)
        if err not in (0, errno.EINPROGRESS):
            s.close()
            self._fail(f"cannot connect to {self.address}: {errno.errorcode.get(err, err)}")
            return
        self.sock, self.state, self.reader = s, CONNECTING, zmtp.reader()
        self.mask = _IN | _OUT
        self.ep.register(s.fileno(), self.mask)

    def _connected(self) -> None:
        assert self.sock is not None
        err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            self._close(f"cannot connect to {self.address}: {errno.errorcode.get(err, err)}")
            return
        self.state = GREETING
        self.hello = zmtp.greeting(as_server=False) + zmtp.ready(b"DEALER")
        self._write()

    def _read(self, until_ns: int = 0) -> None:
        """One read (``until_ns``: reading again while nothing comes, until
        then: ``spin_read``)."""
        assert self.sock is not None
        view = getattr(_reading, "view", None)
        if view is None:          # one buffer per thread, read into again and again: a
            view = _reading.view = memoryview(bytearray(READ_BYTES))   # fresh 1 MiB bytes
        had = self.reader.pending()
        # (into the thread's buffer: a fresh 1 MiB bytes per read was an mmap and a munmap)
        why = self.reader.fill_until(self.sock.fileno(), view, until_ns)
        if self.reader.pending() > had:
            self.heard_at = time.monotonic()
        if why is not None:
            self._close("the broker closed the connection" if why == zmtp.EOF else why)
            return
        try:
            self._frames()
        except zmtp.ZmtpError as exc:
            self._close(str(exc))

    def _frames(self) -> None:
        reader = self.reader
        if self.state == GREETING:
            if not reader.greeting():
                return
            self.state = HANDSHAKE
        while self.state == HANDSHAKE and (got := reader.frame()) is not None:
            if not got[0] & zmtp.COMMAND:
                raise zmtp.ZmtpError("a message before the READY command")
            self._command(got[1])
        # answers are one frame (the last is kept), a transfer's all (whole); no bound
        # here (the reader keeps no bytes that nothing would parse)
        while self.state == OPEN and (got := reader.messages(self.inq, None, self.whole,
                                                             UNBOUNDED)) is not None:
            self._command(got[1])

    def _command(self, body: bytes) -> None:
        name, rest = zmtp.parse_command(body)
        if name == b"READY" and self.state == HANDSHAKE:
            kind = zmtp.parse_properties(rest).get("socket-type", b"")
            if kind != b"ROUTER":
                raise zmtp.ZmtpError(f"the broker's socket is a {kind!r}, not a ROUTER")
            self.state = OPEN
            self.opens += 1
            self._write()
        elif name == b"PING":
            self.out.append([zmtp.pong(rest)])
            if len(self.out) == 1:
                self._write()
        elif name == b"ERROR":
            raise zmtp.ZmtpError(f"the broker refused the connection: {rest[1:]!r}")

    def _write(self) -> None:
        """Write this side's handshake, then (once OPEN) what is queued, until
        the kernel takes no more; watch for room when some is left."""
        sock = self.sock
        if sock is None:
            return
        try:
            if self.hello:
                self.hello = memoryview(self.hello)[sock.send(self.hello):]
            if not self.hello and self.state == OPEN:
                self._write_out(sock)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            self._close(str(exc))
            return
        want = (_IN | _OUT) if self.hello or (self.out and self.state == OPEN) else _IN
        if want != self.mask and self.sock is not None:
            self.mask = want
            self.ep.modify(self.sock.fileno(), want)

    def _write_out(self, sock: socket.socket) -> None:
        zmtp.write_out(sock.fileno(), self.out)

    def _fail(self, why: str) -> None:
        self.why = why
        self.lost = True
        self.out.clear()

    def _close(self, why: str) -> None:
        """The connection is gone: queued requests with it (their senders
        learn it from ``take_lost``); the next send connects again."""
        if self.state in (GREETING, HANDSHAKE) and "CURVE" not in why:
            why += (" during the handshake (a broker with auth = true refuses a client "
                    "without credentials)")
        if self.sock is not None:
            try:
                self.ep.unregister(self.sock.fileno())
            except (OSError, ValueError):
                pass
            self.sock.close()
            self.sock = None
            self._fail(why)
        self.state = CLOSED
        self.hello = b""
