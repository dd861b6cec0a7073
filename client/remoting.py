"""Request/response over ZeroMQ for clients (aiokafka's ``sender``): one I/O
thread owns a DEALER socket per broker address; callers hand it requests
through a queue plus an eventfd wake-up and get a ``concurrent.futures.Future``
resolved with ``(status, error, response_message)``. Blocking calls
(``call``) skip the I/O thread and use a socket of the calling thread.

The DEALERs are the client's own ZMTP sockets (``transport.dealer``:
read and written by the thread that owns them, no libzmq I/O thread in
between) unless the client has credentials, whose CURVE is libzmq's
(``transport``: auto, native, zeromq; auto reads ``$DUOMQ_TRANSPORT``).

Many requests may be outstanding on one socket (long polls included); answers
are matched by request id. A request with no answer by its deadline fails with
RequestTimeoutError.

Failing fast: an answer can no longer come when the connection it would
travel on dies (a killed broker closes its sockets: every libzmq socket has a
ZeroMQ monitor for DISCONNECTED, a native one sees it itself) or when the
route says the broker no longer leads its group (``abort``, called by the
client's route watch). Requests in flight then fail at once with
BrokerUnreachableError or BrokerGoneError, blocking calls included, instead
of waiting out their timeout.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import zmq

from duomq.auth.credentials import Credentials
from duomq.client import liveness
from duomq.client.monitor_events import MISMATCH, WATCHED, KeyMismatch, _lost
from duomq.client.waiters import Answer, Direct
from duomq.common.config_fields import TRANSPORTS
from duomq.common.errors import (
    AuthenticationError,
    BrokerGoneError,
    BrokerUnreachableError,
    ClientClosedError,
    ConfigError,
    NotConnectedError,
    RequestTimeoutError,
)
from duomq.proto import codec, pb
from duomq.transport.busy_poll import BusyPoll
from duomq.transport.dealer import ZmtpDealer
from duomq.transport.links import Dealer, LibzmqDealer
from duomq.transport.zsend import readable

log = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 1.0      # longest a blocking call waits for a connection to its broker
_NOBLOCK = zmq.NOBLOCK
PUSHES = frozenset({pb.CHECK_TRANSACTION_STATE})   # what a broker sends unasked


class RemotingClient:
    def __init__(self, name: str = "duomq-io", credentials: Credentials | None = None,
                 server_key: Callable[[str], bytes] | None = None,
                 dial: Callable[[str], str] | None = None, transport: str = "auto",
                 busy_poll_us: int = 0):
        self.ctx: zmq.Context = zmq.Context.instance()
        self.credentials = credentials      # CURVE on every socket (a secured cluster)
        if transport not in TRANSPORTS or (transport == "native" and credentials is not None):
            raise ConfigError(f"transport {transport!r}: one of {', '.join(TRANSPORTS)}; "
                              f"not native with credentials (CURVE is libzmq's)")
        if transport == "auto":           # $DUOMQ_TRANSPORT, except native in a secured cluster
            transport = os.environ.get("DUOMQ_TRANSPORT", "").strip().lower() or "auto"
            if transport not in TRANSPORTS:
                raise ConfigError(f"$DUOMQ_TRANSPORT {transport!r}: one of "
                                  f"{', '.join(TRANSPORTS)}")
        # the client's own ZMTP sockets (transport.dealer), or libzmq's DEALERs
        self.native = credentials is None and transport in ("native", "auto")
        # a blocking call on a native socket spins this long on its answer
        # before it sleeps (transport.busy_poll; adaptive, per calling thread)
        self.busy_poll_us = busy_poll_us
        self._keys: dict[Any, Dealer] = {}   # the I/O thread's sockets, by what poll reports
        # the broker key an address serves with, as its member node says (b"":
        # unknown); among the keys the credentials trust, that one is tried first
        self.server_key = server_key
        # where a broker known by ``address`` is dialled (an external client:
        # the external address its member node registers); the sockets and
        # everything else keep the address itself
        self.dial = dial or (lambda address: address)
        self._misses: dict[str, int] = {}   # address -> CURVE handshakes failed
        self._watched = WATCHED | (MISMATCH if credentials is not None else 0)
        self._ids = itertools.count(1)
        self._outbox: deque = deque()
        self._soon: deque = deque()         # functions to run on the I/O thread
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._sockets: dict[str, Dealer] = {}      # ZmtpDealers, or libzmq's (LibzmqDealer)
        self._by_socket: dict[Dealer, str] = {}
        self._pending: dict[int, tuple[Future, float, int, str]] = {}
        self._closed = False
        # a broker's push on a connection (request id 0: a check-back), handed
        # over on the I/O thread: (address, frame)
        self.on_push: Callable[[str, pb.Frame], None] | None = None
        self._local = threading.local()          # per-thread sockets of blocking calls
        self._direct: list[Direct] = []
        self._busy_retired = (0, 0, 0)   # busy_poll_counts of dropped connections (ns)
        self._direct_lock = threading.Lock()
        # abort(): per address, how many times it was declared gone and why;
        # the blocking calls waiting on it (their threads' wake-up eventfds)
        self._gone: dict[str, tuple[int, str]] = {}
        self._waiting: dict[str, set[int]] = {}
        self._aborts: deque = deque()             # (address, why) for the I/O thread
        self._wakes: list[int] = []               # every calling thread's wake-up eventfd
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ caller side
    def request(self, address: str, type_: int, message, timeout_s: float) -> Future:
        """Send a request; the future resolves to (status, error, response or None)."""
        fut: Future = Future()
        self._enqueue(address, type_, message, timeout_s, fut)
        return fut

    def request_then(self, address: str, type_: int, message, timeout_s: float, fn,
                     *args) -> None:
        """Send a request; ``fn(*args, (status, error, response), None)``, or
        ``fn(*args, None, exception)``, runs on the I/O thread once, with no
        Future made (for requests that many are outstanding of: pulls)."""
        self._enqueue(address, type_, message, timeout_s, Answer(fn, args))

    def _enqueue(self, address: str, type_: int, message, timeout_s: float,
                 waiter: Future | Answer) -> None:
        if self._closed:
            waiter.set_exception(ClientClosedError("client is closed"))
            return
        rid = next(self._ids)
        data = codec.encode_request(rid, type_, message)
        self._outbox.append((address, rid, data, waiter, time.monotonic() + timeout_s, type_))
        self._wake()

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the I/O thread once the answers it has read so far
        are handed over, before it sends its outbox (a caller gathering the
        requests those answers lead to, to send them as one)."""
        self._soon.append(fn)
        self._wake()

    def _wake(self) -> None:
        if threading.get_ident() != self._thread.ident:   # the I/O thread sees it anyway
            with self._direct_lock:                       # before it polls again;
                if not self._closed:                      # close() may have closed the fd
                    os.eventfd_write(self._wake_fd, 1)    # (its number then reused)

    def call(self, address: str, type_: int, message, timeout_s: float):
        """Blocking request on the caller's own socket: (status, error, response).

        A blocking call does its own I/O on a DEALER socket that belongs to the
        calling thread, skipping two thread hand-offs through the I/O thread
        (about half the round trip of a one-outstanding send)."""
        if self._closed:
            raise ClientClosedError("client is closed")
        conn = self._direct_socket(address)
        sock = conn.sock
        gone = self._gone.get(address, (0, ""))[0]
        rid = next(self._ids)
        data: Any = codec.encode_request(rid, type_, message)
        try:
            sent = sock.send_when_open(data, min(timeout_s, CONNECT_TIMEOUT_S))
        except (AuthenticationError, KeyMismatch) as exc:   # a refused handshake: say so,
            self._dropped(address, exc)                      # not "unreachable"
            raise
        if not sent:
            self._drop_direct_socket(address)   # the next call dials afresh (liveness)
            raise NotConnectedError(f"no connection to {address}: {sock.why}")
        deadline = time.monotonic() + timeout_s
        wake = self._local.wake       # in _waiting[address] while the connection lives
        ready: Any = ()
        while True:
            data = None
            if sock.inq or ready:         # (no look before the first wait: too soon)
                try:
                    data = sock.recv(_NOBLOCK)
                except zmq.Again:
                    pass
            if data is not None:          # an answer that arrived wins over news of a death
                answer = codec.matched(data, rid, type_)
                if answer is not None:
                    return answer
                continue
            try:
                lost = sock.take_lost()
            except (AuthenticationError, KeyMismatch) as exc:   # (libzmq's monitor says)
                self._dropped(address, exc)
                raise
            if lost:
                self._drop_direct_socket(address)
                raise BrokerUnreachableError(
                    f"the connection to {address} died while {pb.RequestType.Name(type_)} "
                    f"waited for its answer ({sock.why or 'closed by its peer'})")
            # the answer caught awake (or the connection's death: said above)
            if not ready and conn.busy.spin_with(sock.spin_read):
                ready = (sock,)
                continue
            ready = self._wait(conn, deadline, address, type_, timeout_s)
            conn.busy.woke()
            if wake in ready:
                self._check_gone(wake, address, gone, type_)

    def _wait(self, conn: Direct, deadline: float, address: str, type_: int,
              timeout_s: float) -> dict:
        """Poll the calling thread's sockets until ``deadline``; none ready times out."""
        left_ms = int((deadline - time.monotonic()) * 1000)
        ready = dict(conn.poller.poll(left_ms)) if left_ms > 0 else {}
        if not ready:
            self._drop_direct_socket(address)    # the late answer would come here
            raise RequestTimeoutError(
                f"no answer from {address} to {pb.RequestType.Name(type_)} in "
                f"{timeout_s:g} s")
        return ready

    def _check_gone(self, wake, address: str, gone: int, type_: int) -> None:
        """Woken while waiting: raise if ``address`` was given up on since
        ``gone``, or the client was closed (its wake-ups with it)."""
        if self._closed:
            raise ClientClosedError("client is closed")
        _clear(wake)
        count, why = self._gone.get(address, (0, ""))
        if count != gone:
            self._drop_direct_socket(address)
            raise BrokerGoneError(f"{pb.RequestType.Name(type_)} to {address} "
                                  f"abandoned: {why}")

    def _dropped(self, address: str, exc: Exception) -> None:
        """The calling thread's socket to ``address`` failed its handshake."""
        self._drop_direct_socket(address)
        if isinstance(exc, KeyMismatch):
            self._misses[address] = self._misses.get(address, 0) + 1

    def _secure(self, sock: zmq.Socket, address: str) -> None:
        c = self.credentials
        if c is not None:
            sock.curve_secretkey = c.keys.secret
            sock.curve_publickey = c.keys.public
            sock.curve_serverkey = self._expected_key(c, address)

    def _expected_key(self, c: Credentials, address: str) -> bytes:
        """The broker key to expect at ``address``: of the keys the
        credentials trust, the one its member node names first, then the
        others in turn after each failed handshake."""
        keys = c.broker_keys
        if len(keys) == 1:
            return keys[0]
        hint = self.server_key(address) if self.server_key is not None else b""
        order = ([hint] if hint in keys else []) + [k for k in keys if k != hint]
        return order[self._misses.get(address, 0) % len(order)]

    def abort(self, address: str, why: str) -> None:
        """The broker at ``address`` no longer leads its group (the route
        says so): fail every request waiting on it now, blocking calls too."""
        with self._direct_lock:       # (close() closes the fds under it: a route
            if self._closed:          # change on kazoo's thread may come after)
                return
            count = self._gone.get(address, (0, ""))[0]
            self._gone[address] = (count + 1, why)
            for fd in self._waiting.get(address, ()):
                os.eventfd_write(fd, 1)
            self._aborts.append((address, why))
            os.eventfd_write(self._wake_fd, 1)

    def _direct_socket(self, address: str) -> Direct:
        socks = getattr(self._local, "socks", None)
        if socks is None:
            socks = self._local.socks = {}
            self._local.wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            with self._direct_lock:
                self._wakes.append(self._local.wake)
        conn = socks.get(address)
        if conn is None:
            busy = BusyPoll(self.busy_poll_us if self.native else 0)
            conn = socks[address] = Direct(self._dealer(address, blocking=True),
                                           self._local.wake, busy)
            with self._direct_lock:
                self._direct.append(conn)
                # abort() wakes this thread from now on: a wake-up while no
                # call waits is read by the next call and found stale
                self._waiting.setdefault(address, set()).add(self._local.wake)
        return conn

    def busy_poll_counts(self) -> tuple[int, int, float]:
        """The blocking calls' spins on their answers (busy_poll_us), over
        every connection this client opened, closed ones too: (spins, spins
        an answer ended, seconds spent spinning). Counters: they only grow."""
        spins, caught, spent = self._busy_retired
        with self._direct_lock:
            for conn in self._direct:
                if conn.busy is not None:
                    spins += conn.busy.spins
                    caught += conn.busy.caught
                    spent += conn.busy.spent_ns
        return spins, caught, spent / 1e9

    def _drop_direct_socket(self, address: str) -> None:
        conn = self._local.socks.pop(address)
        with self._direct_lock:
            self._direct.remove(conn)
            if conn.busy is not None:          # its counts stay in busy_poll_counts
                s, c, t = self._busy_retired
                self._busy_retired = (s + conn.busy.spins, c + conn.busy.caught,
                                      t + conn.busy.spent_ns)
            self._waiting[address].discard(self._local.wake)
        conn.close()

    def close(self) -> None:
        with self._direct_lock:       # no other thread writes a wake fd from now on
            if self._closed:
                return
            self._closed = True
        os.eventfd_write(self._wake_fd, 1)
        self._thread.join(5)
        with self._direct_lock:
            os.close(self._wake_fd)
            for conn in self._direct:
                conn.close()
            self._direct.clear()
            for fd in self._wakes:
                os.close(fd)
            self._wakes.clear()

    # ------------------------------------------------------------ I/O thread
    def _socket(self, address: str) -> Dealer:
        sock = self._sockets.get(address)
        if sock is None:
            sock = self._dealer(address)
            self._sockets[address] = sock
            self._by_socket[sock] = address
            for key in sock.poll_keys():
                self._keys[key] = sock
                self._poller.register(key, zmq.POLLIN)
        return sock

    def _dealer(self, address: str, blocking: bool = False) -> Dealer:
        """A new connection to ``address``, of the kind this client speaks:
        its own ZMTP, or libzmq's DEALER (CURVE, with credentials) with a
        monitor for its connection's death and a refused handshake. A
        blocking call's (``blocking``) queues only to a live connection, so
        that a send to a dead broker fails within CONNECT_TIMEOUT_S instead
        of waiting for its answer's timeout; the I/O thread's queues deep."""
        if self.native:
            return ZmtpDealer(self.dial(address))
        sock = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        if blocking:
            sock.setsockopt(zmq.IMMEDIATE, 1)
        else:
            sock.setsockopt(zmq.SNDHWM, 100_000)
            sock.setsockopt(zmq.RCVHWM, 100_000)
        sock.setsockopt(zmq.RECONNECT_IVL, 100)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, 2000)
        self._secure(sock, address)
        monitor = sock.get_monitor_socket(self._watched)
        sock.connect(self.dial(address))
        return LibzmqDealer(sock, address, monitor, _lost)

    def _run(self) -> None:
        self._poller = zmq.Poller()
        self._poller.register(self._wake_fd, zmq.POLLIN)
        next_expiry = time.monotonic() + 0.1
        try:
            while not self._closed:
                # a request made on this thread after the outbox was sent (an
                # expiry's callback) wrote no wake-up: do not sleep on it
                events = self._poller.poll(0 if self._outbox or self._soon else 100)
                for key, _ in events:
                    if key == self._wake_fd:
                        try:
                            os.eventfd_read(self._wake_fd)
                        except BlockingIOError:
                            pass
                    elif (sock := self._keys.get(key)) is not None:   # (not closed a moment ago)
                        self._serve(sock)
                while self._aborts:
                    address, why = self._aborts.popleft()
                    self._fail_address(address, BrokerGoneError(
                        f"request to {address} abandoned: {why}"))
                soon = self._soon
                while soon:
                    try:
                        soon.popleft()()
                    except Exception:
                        log.exception("a call on the I/O thread failed")
                self._send_outbox()
                now = time.monotonic()
                if now >= next_expiry:
                    next_expiry = now + 0.05
                    self._expire(now)
                    self._redial_stuck(now)
        finally:
            self._fail_all(ClientClosedError("client closed"))
            for s in self._sockets.values():
                s.close(linger=0)

    def _redial_stuck(self, now: float) -> None:
        """Close a connection still being opened after ``CONNECT_TIMEOUT_S``
        (``liveness``: the next request dials again)."""
        for sock in liveness.not_opening(list(self._sockets.values()), now, CONNECT_TIMEOUT_S):
            sock.reset(f"no connection in {CONNECT_TIMEOUT_S:g} s")
            self._serve(sock)

    def _close_socket(self, address: str) -> None:
        sock = self._sockets.pop(address)
        del self._by_socket[sock]
        for key in sock.poll_keys():
            del self._keys[key]
            self._poller.unregister(key)
        sock.close(linger=0)

    def _send_outbox(self) -> None:
        out = self._outbox
        while out:
            address, rid, data, fut, deadline, type_ = out.popleft()
            if not fut.set_running_or_notify_cancel():
                continue
            self._pending[rid] = (fut, deadline, type_, address)
            sock = self._socket(address)
            try:
                sock.send(data, zmq.NOBLOCK)
            except zmq.ZMQError as exc:
                self._pending.pop(rid, None)
                fut.set_exception(RequestTimeoutError(f"cannot send to {address}: {exc}"))
            if sock.lost:                 # could not even connect
                self._serve(sock)

    def _serve(self, sock: Dealer) -> None:
        """Answers a connection has, then its death if it died (or, libzmq's
        under CURVE, the broker refused the handshake: the next socket to it
        expects another broker key after a mismatch)."""
        self._drain(sock)
        address = self._by_socket[sock]
        try:
            lost: Exception | None = BrokerUnreachableError(
                f"the connection to {address} died while the request waited for its "
                f"answer" + (f" ({sock.why})" if sock.why else "")) if sock.take_lost() else None
        except AuthenticationError as exc:
            lost = exc
        except KeyMismatch as exc:
            lost = exc
            self._misses[address] = self._misses.get(address, 0) + 1
        if lost is not None:
            self._fail_address(address, lost)
            if isinstance(lost, KeyMismatch):
                self._close_socket(address)

    def _drain(self, sock) -> None:
        pending = self._pending
        while readable(sock):        # asked first: no zmq.Again to raise (zsend.readable)
            try:
                data = sock.recv(_NOBLOCK)
            except zmq.Again:
                return
            pulled = codec.read_pull_answer(data)     # the common answer, read in C
            if pulled is not None and (entry := pending.pop(pulled[0], None)) is not None:
                try:
                    entry[0].set_result(pulled[1:])
                except Exception as exc:  # as below: it fails its request only
                    entry[0].set_exception(exc)
                continue
            try:
                frame = codec.decode_frame(data)
            except codec.FrameError:
                log.warning("undecodable answer from %s dropped", self._by_socket.get(sock))
                continue
            entry = pending.pop(frame.request_id, None)
            if entry is None:
                if frame.request_id == 0 and frame.type in PUSHES:
                    if self.on_push is not None:
                        self.on_push(self._by_socket.get(sock, ""), frame)
                elif frame.request_id == 0 and frame.status != pb.OK:
                    log.warning("broker %s rejected a request: %s", self._by_socket.get(sock),
                                frame.error)
                continue
            fut = entry[0]
            try:
                # an empty payload is a valid all-default message (offset 0 ...)
                message = codec.decode_response(frame) if frame.type in codec.MESSAGES else None
                fut.set_result((frame.status, frame.error, message))
            except Exception as exc:  # a broken answer fails its request only
                fut.set_exception(exc)

    def _fail_address(self, address: str, exc: Exception) -> None:
        """Fail the requests waiting for an answer from ``address``."""
        lost = [rid for rid, entry in self._pending.items() if entry[3] == address]
        for rid in lost:
            fut = self._pending.pop(rid)[0]
            if not fut.done():
                fut.set_exception(exc)

    def _expire(self, now: float) -> None:
        late = [rid for rid, (_, deadline, _, _) in self._pending.items() if deadline <= now]
        used = []
        for rid in late:
            fut, _, type_, address = self._pending.pop(rid)
            fut.set_exception(RequestTimeoutError(
                f"no answer from {address} to {pb.RequestType.Name(type_)} in time"))
            used.append(self._sockets.get(address))
        for sock in liveness.silent(used, now, CONNECT_TIMEOUT_S):   # (client/liveness.py)
            sock.reset(f"silent for {sock.silent_for(now):.1f} s while a request timed out")
            self._serve(sock)

    def _fail_all(self, exc) -> None:
        for fut, *_ in self._pending.values():
            if not fut.done():
                fut.set_exception(exc)
        self._pending.clear()
        while self._outbox:
            fut = self._outbox.popleft()[3]
            if not fut.done():
                fut.set_exception(exc)


def _clear(fd: int) -> None:
    try:
        os.eventfd_read(fd)
    except BlockingIOError:
        pass
