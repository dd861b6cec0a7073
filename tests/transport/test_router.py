"""The native client port (transport.router) against real libzmq peers:
DEALERs and REQs talk to it as to libzmq's ROUTER, and what breaks the
protocol closes that connection only (the port goes on serving)."""

import socket
import time

import pytest
import zmq

from duomq.transport import zmtp
from duomq.transport.router import READ_BYTES, ZmtpRouter

pytestmark = pytest.mark.usefixtures("zmtp_both_ways")   # C framing, then Python


class Sockets:
    """A context whose sockets are closed when the test ends (a socket
    dropped open would hold up the context's term)."""

    def __init__(self):
        self.ctx = zmq.Context()
        self.made: list[zmq.Socket] = []

    def socket(self, kind: int) -> zmq.Socket:
        self.made.append(self.ctx.socket(kind))
        return self.made[-1]

    def close(self) -> None:
        for s in self.made:
            s.close(linger=0)
        self.ctx.term()


@pytest.fixture
def ctx():
    c = Sockets()
    yield c
    c.close()


@pytest.fixture
def router():
    r = ZmtpRouter(rcvhwm=64, sndhwm=16, max_frame=1 << 20)
    r.port = r.bind("127.0.0.1", 0)
    yield r
    r.close()


def take(router, n: int = 1, timeout_s: float = 5.0) -> list[list[bytes]]:
    """``n`` requests, polling the router's fd as the serving loop does."""
    poller = zmq.Poller()
    poller.register(router.fileno(), zmq.POLLIN)
    got: list[list[bytes]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        if not router.backlogged():
            poller.poll(50)
        while len(got) < n and router.get(zmq.EVENTS) & zmq.POLLIN:
            got.append(router.recv_multipart(zmq.NOBLOCK))
    assert len(got) == n, f"{len(got)} of {n} requests came"
    return got


def dealer(ctx, router, **opts) -> zmq.Socket:
    d = ctx.socket(zmq.DEALER)
    for k, v in opts.items():
        d.setsockopt(getattr(zmq, k), v)
    d.connect(f"tcp://127.0.0.1:{router.port}")
    return d


def answers(sock: zmq.Socket, n: int, router=None) -> list[list[bytes]]:
    got = []
    deadline = time.monotonic() + 5
    while len(got) < n and time.monotonic() < deadline:
        if sock.poll(10):
            got.append(sock.recv_multipart())
        elif router is not None:
            router.pump()                   # writes the kernel had no room for
    return got


def test_dealers_get_their_own_answers_in_order(ctx, router):
    socks = [dealer(ctx, router) for _ in range(3)]
    for i in range(300):
        for k, s in enumerate(socks):
            s.send_multipart([b"%d" % k, b"%d" % i])
    by_peer: dict[bytes, list] = {}
    for identity, k, i in take(router, 900):
        by_peer.setdefault(identity, []).append((k, int(i)))
    assert len(by_peer) == 3
    for identity, got in by_peer.items():
        assert [i for _, i in got] == list(range(300)) and len({k for k, _ in got}) == 1
        for k, i in got:
            big = bytes([i % 256]) * (70_000 if i % 50 == 0 else 10)
            router.send_multipart([identity, k, b"%d" % i, big])
            router.pump()
    for k, s in enumerate(socks):
        got = answers(s, 300, router)
        assert [int(a[1]) for a in got] == list(range(300))
        assert all(a[0] == b"%d" % k and len(a[2]) in (10, 70_000) for a in got)


def test_req_sockets_and_chosen_identities(ctx, router):
    req = ctx.socket(zmq.REQ)
    req.connect(f"tcp://127.0.0.1:{router.port}")
    req.send(b"ask")
    (identity, empty, body), = take(router)
    assert (empty, body) == (b"", b"ask")
    router.send_multipart([identity, b"", b"told"])
    assert req.recv() == b"told"
    named = dealer(ctx, router, ROUTING_ID=b"me")
    named.send(b"x")
    assert take(router) == [[b"me", b"x"]]
    twin = dealer(ctx, router, ROUTING_ID=b"me")   # taken: the twin gets a made-up name
    twin.send(b"y")
    (other, y), = take(router)
    assert y == b"y" and other != b"me" and other[0] == 0


def test_heartbeats_are_answered(ctx, router):
    d = dealer(ctx, router, HEARTBEAT_IVL=20, HEARTBEAT_TIMEOUT=100, HEARTBEAT_TTL=200)
    d.send(b"first")
    (identity, _), = take(router)
    t = time.monotonic()
    while time.monotonic() - t < 0.6:      # idle for six timeouts: the PONGs keep it up
        router.pump()
        time.sleep(0.005)
    d.send(b"second")
    assert take(router)[0] == [identity, b"second"]     # the same connection


def test_a_frame_past_the_bound_closes_only_that_connection(ctx, router):
    good = dealer(ctx, router)
    bad = dealer(ctx, router, RECONNECT_IVL=10_000)
    good.send(b"good")
    bad.send(b"bad")
    ids = {body: ident for ident, body in take(router, 2)}   # in either order (epoll's)
    a, b = ids[b"good"], ids[b"bad"]
    bad.send(bytes((1 << 20) + 1))
    deadline = time.monotonic() + 5
    while b in router.by_id and time.monotonic() < deadline:
        router.pump()
        time.sleep(0.01)
    assert b not in router.by_id and a in router.by_id
    with pytest.raises(zmq.ZMQError) as exc:
        router.send_multipart([b, b"late"])
    assert exc.value.errno == zmq.EHOSTUNREACH
    good.send(b"still")
    assert take(router) == [[a, b"still"]]
    assert (len(router.conns), router.opened, router.refused) == (1, 2, 1)


@pytest.mark.parametrize("junk", [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + bytes(64),       # not ZMTP
    zmtp.greeting(False)[:10] + b"\x02" + bytes(53),         # ZMTP 2
    zmtp.greeting(False) + zmtp.message([b"no READY first"])[0],
    zmtp.greeting(False) + zmtp.ready(b"PUB"),                # a PUB cannot talk to a ROUTER
    zmtp.greeting(False) + zmtp.ready(b"DEALER") + b"\xf0\x01x",   # reserved flag bits
])
def test_garbage_closes_its_connection_and_the_port_serves_on(ctx, router, junk):
    raw = socket.create_connection(("127.0.0.1", router.port))
    raw.sendall(junk)
    raw.settimeout(0.02)
    closed = False
    deadline = time.monotonic() + 5
    while not closed and time.monotonic() < deadline:
        router.pump()
        try:
            while data := raw.recv(4096):
                assert data
            closed = True
        except TimeoutError:
            pass
        except ConnectionResetError:
            closed = True
    assert closed and not router.by_id and not router.backlogged()
    assert (len(router.conns), router.opened, router.refused) == (0, 1, 1)
    raw.close()
    d = dealer(ctx, router)
    d.send(b"ok")
    assert take(router)[0][1] == b"ok"
    assert (len(router.conns), router.opened, router.refused) == (1, 2, 1)


def test_a_curve_client_is_refused(ctx, router):
    public, secret = zmq.curve_keypair()
    d = dealer(ctx, router, CURVE_SERVERKEY=public, CURVE_PUBLICKEY=public,
               CURVE_SECRETKEY=secret)
    d.send(b"sealed")
    t = time.monotonic()
    while time.monotonic() - t < 0.5:
        router.pump()
        time.sleep(0.01)
    assert not router.backlogged() and not router.by_id


def test_requests_of_a_peer_that_left_are_still_served(ctx, router):
    d = dealer(ctx, router)
    d.send(b"one")
    (identity, _), = take(router)
    d.send(b"two")
    d.send(b"three")
    time.sleep(0.1)
    router.pump()                          # read, then the peer goes
    d.close(linger=0)
    time.sleep(0.1)
    router.pump()
    assert [m[1] for m in take(router, 2)] == [b"two", b"three"]
    with pytest.raises(zmq.ZMQError):
        router.send_multipart([identity, b"answer"])


def test_a_peer_past_the_receive_mark_is_not_read_until_taken(ctx, router):
    d = dealer(ctx, router, SNDHWM=100_000)
    n = 20_000
    for i in range(n):
        d.send(i.to_bytes(4, "big") + bytes(200))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:     # nobody takes: reading stops at the mark
        router.pump()
        time.sleep(0.01)
    (conn,) = router.conns.values()
    assert not conn.mask & 1                           # EPOLLIN off: TCP pushes back
    # what it holds is bounded: the mark's requests parsed, one read's bytes not
    assert len(conn.inq) == 64 and conn.reader.pending() <= READ_BYTES
    got = take(router, n, timeout_s=20)
    assert [int.from_bytes(m[1][:4], "big") for m in got] == list(range(n))


def test_a_new_connection_on_a_closed_ones_fd_is_not_mistaken_for_it(ctx):
    """A connection past its receive mark closes while requests of it wait;
    a new one gets its file descriptor. The old one's requests are served,
    answers to it fail, and the new one is read and answered as itself."""
    router = ZmtpRouter(rcvhwm=4, sndhwm=16)
    port = router.bind("127.0.0.1", 0)
    try:
        a = socket.create_connection(("127.0.0.1", port))
        a.sendall(zmtp.greeting(False) + zmtp.ready(b"DEALER")
                  + b"".join(b"".join(zmtp.message([b"a%d" % i])) for i in range(10)))
        deadline = time.monotonic() + 5
        while not router.backlogged() and time.monotonic() < deadline:
            router.pump()
        (old,) = router.conns.values()
        assert not old.mask & 1                    # past its mark: not read
        b = ctx.socket(zmq.DEALER)                 # its own fds taken before a's is freed
        a.close()
        first = [router.recv_multipart() for _ in range(7)]   # below the mark: read again
        deadline = time.monotonic() + 5
        while old.fd in router.conns and time.monotonic() < deadline:
            router.pump()                          # ... and its EOF seen
        assert old.fd not in router.conns
        b.connect(f"tcp://127.0.0.1:{port}")
        b.send(b"from b")
        got = take(router, 4)
        assert [m[1] for m in first + got[:3]] == [b"a%d" % i for i in range(10)]
        (new,) = router.conns.values()
        assert got[3][1] == b"from b" and new is not old and new.fd == old.fd
        with pytest.raises(zmq.ZMQError):
            router.send_multipart([first[0][0], b"to a"])
        router.send_multipart([got[3][0], b"to b"])
        assert b.poll(5000) and b.recv() == b"to b"
        b.send(b"again")                           # b is still watched for reading
        assert take(router)[0][1] == b"again"
    finally:
        router.close()


def test_pings_from_a_peer_that_reads_nothing_do_not_pile_up(router):
    """A peer sends PINGs and never reads: the PONGs it is owed stop at the
    send mark instead of growing with every PING."""
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)   # and its window stays small
    raw.connect(("127.0.0.1", router.port))
    try:
        raw.sendall(zmtp.greeting(False) + zmtp.ready(b"DEALER"))
        deadline = time.monotonic() + 2
        while not router.by_id and time.monotonic() < deadline:
            router.pump()
        (conn,) = router.conns.values()
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)   # little room
        ping = zmtp.command(b"PING", b"\x00\x00" + bytes(16))
        for _ in range(50):
            raw.sendall(ping * 2000)
            router.pump()
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            router.pump()
        assert len(conn.out) <= router.sndhwm
    finally:
        raw.close()
