"""The client's own ZMTP socket (transport.dealer) against real libzmq
ROUTERs: it talks, keeps a heartbeating ROUTER's connection up, and says
when a connection dies or cannot open, without blocking its thread."""

import time

import pytest
import zmq

from duomq.transport.dealer import ZmtpDealer, split_address

pytestmark = pytest.mark.usefixtures("zmtp_both_ways")   # C framing, then Python


@pytest.fixture
def router():
    ctx = zmq.Context()
    made = []

    def make(**opts) -> tuple[zmq.Socket, str]:
        r = ctx.socket(zmq.ROUTER)
        for k, v in opts.items():
            r.setsockopt(getattr(zmq, k), v)
        port = r.bind_to_random_port("tcp://127.0.0.1")
        made.append(r)
        return r, f"tcp://127.0.0.1:{port}"
    yield make
    for r in made:
        r.close(0)
    ctx.term()


def answer(d: ZmtpDealer, timeout_s: float = 5.0) -> bytes:
    poller = zmq.Poller()
    poller.register(d.fileno(), zmq.POLLIN)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            return d.recv()
        except zmq.Again:
            poller.poll(20)
    raise AssertionError("no answer")


def test_requests_and_answers_of_any_size(router):
    r, address = router()
    d = ZmtpDealer(address)
    try:
        d.send(b"queued before the connection opened")
        big = bytes(range(256)) * 40_000                # 10 MiB: written in many pieces
        d.send(big)
        assert d.wait_open(2)
        identity, first = r.recv_multipart()
        got = b""
        while not got:                                  # the rest is written as room comes
            d.pump()
            if r.poll(10):
                got = r.recv_multipart()[1]
        assert first == b"queued before the connection opened" and got == big
        for size in (0, 1, 255, 256, 3 << 20):
            r.send_multipart([identity, b"x" * size])
            assert answer(d) == b"x" * size
    finally:
        d.close()


def test_a_heartbeating_router_keeps_the_connection(router):
    r, address = router(HEARTBEAT_IVL=20, HEARTBEAT_TIMEOUT=100, HEARTBEAT_TTL=200)
    d = ZmtpDealer(address)
    try:
        d.send(b"one")
        assert d.wait_open(2)
        first = r.recv_multipart()[0]
        t = time.monotonic()
        while time.monotonic() - t < 0.6:              # six timeouts: PONGs keep it up
            d.pump()
            time.sleep(0.005)
        d.send(b"two")
        assert r.recv_multipart()[0] == first and not d.take_lost()
    finally:
        d.close()


def test_a_refused_connection_is_lost_at_once():
    d = ZmtpDealer("tcp://127.0.0.1:1")
    try:
        t = time.monotonic()
        assert not d.wait_open(2)
        assert time.monotonic() - t < 1 and "ECONNREFUSED" in d.why and d.take_lost()
        assert not d.take_lost()                       # said once
    finally:
        d.close()


def test_a_dead_broker_is_lost_and_the_next_send_reconnects(router):
    r, address = router()
    d = ZmtpDealer(address)
    try:
        d.send(b"hi")
        assert d.wait_open(2)
        r.recv_multipart()
        r.close(0)
        deadline = time.monotonic() + 5
        while not d.lost and time.monotonic() < deadline:
            d.pump()
            time.sleep(0.01)
        assert d.take_lost() and "closed" in d.why
        r2 = zmq.Context.instance().socket(zmq.ROUTER)
        r2.bind(address)
        try:
            d.send(b"again")                          # a new connection
            assert d.wait_open(2)
            assert r2.poll(5000) and r2.recv_multipart()[1] == b"again"
        finally:
            r2.close(0)
    finally:
        d.close()


def test_a_curve_router_is_refused_with_the_reason(router):
    _public, secret = zmq.curve_keypair()
    _r, address = router(CURVE_SERVER=1, CURVE_SECRETKEY=secret)
    d = ZmtpDealer(address)
    try:
        assert not d.wait_open(2)
        # libzmq may reset before its greeting names its mechanism: either says why
        assert ("CURVE" in d.why or "auth = true" in d.why) and d.take_lost()
    finally:
        d.close()


def test_addresses():
    assert split_address("tcp://broker-0.broker:10911") == ("broker-0.broker", 10911)
    assert split_address("tcp://[::1]:5") == ("::1", 5)
    with pytest.raises(ValueError):
        split_address("ipc:///tmp/x")


def test_a_request_queued_on_a_connection_that_failed_is_never_sent_later():
    """A request queued while connecting fails with its connection (the
    client is told it was lost); it must not go out on the next connection,
    where it would be stored after its sender was told it failed."""
    probe = zmq.Context.instance().socket(zmq.ROUTER)
    port = probe.bind_to_random_port("tcp://127.0.0.1")
    probe.close(0)                                     # nothing listens there now
    time.sleep(0.05)
    d = ZmtpDealer(f"tcp://127.0.0.1:{port}")
    try:
        d.send(b"first: its connection is refused")
        assert not d.wait_open(2) and d.take_lost()
        r = zmq.Context.instance().socket(zmq.ROUTER)
        r.bind(f"tcp://127.0.0.1:{port}")
        try:
            d.send(b"second")
            assert d.wait_open(2)
            assert r.poll(5000) and r.recv_multipart()[1] == b"second"
            assert not r.poll(200)                     # and nothing else
        finally:
            r.close(0)
    finally:
        d.close()


def test_whole_messages_keep_every_frame_and_reset_dials_anew(router):
    """A replication link's socket (``whole``): a transfer's header and log
    bytes come as one message, in order, big or empty; ``reset`` closes
    the connection (counted as lost) and the next send opens a new one,
    which the ROUTER sees as a new peer."""
    r, address = router()
    d = ZmtpDealer(address, whole=True)
    try:
        d.send(b"report")
        assert d.wait_open(2) and d.is_open and d.opens == 1
        identity, report = r.recv_multipart()
        assert report == b"report"
        sent = [[b"h1", bytes(range(256)) * 8192], [b"h2", b""], [b"h3"], [b"a", b"b", b"c"]]
        for frames in sent:
            r.send_multipart([identity, *frames])
        got = []
        deadline = time.monotonic() + 5
        while len(got) < len(sent) and time.monotonic() < deadline:
            try:
                got.append(d.recv_multipart())
            except zmq.Again:
                time.sleep(0.005)
        assert got == sent
        d.reset("silent for 2.0 s")
        assert not d.is_open and d.take_lost() and d.why.startswith("silent")
        d.send(b"again")
        assert d.wait_open(2) and d.opens == 2
        again, data = r.recv_multipart()
        assert data == b"again" and again != identity
    finally:
        d.close()
    plain = ZmtpDealer(address)                    # a client's: the last frame only
    try:
        plain.send(b"q")
        assert plain.wait_open(2)
        who, _ = r.recv_multipart()
        r.send_multipart([who, b"head", b"answer"])
        assert answer(plain) == b"answer"
        r.send_multipart([who, b"solo"])
        deadline = time.monotonic() + 5
        while not plain.get(zmq.EVENTS) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert plain.recv_multipart() == [b"solo"]
    finally:
        plain.close()


def test_a_ping_is_answered_and_counts_as_heard(router):
    """PING to a libzmq ROUTER (the master's port under auth, or zeromq):
    its PONG is read as traffic (``heard_at``), not as a message."""
    r, address = router()
    d = ZmtpDealer(address, whole=True)
    try:
        d.send(b"hello")
        assert d.wait_open(2)
        r.recv_multipart()
        time.sleep(0.05)
        d.pump()
        before = d.heard_at
        d.ping()
        assert d.pinged_at > before
        deadline = time.monotonic() + 5
        while d.heard_at <= d.pinged_at and time.monotonic() < deadline:
            d.pump()
            time.sleep(0.005)
        assert d.heard_at > d.pinged_at and not d.inq and d.is_open
    finally:
        d.close()


def test_a_spin_read_ends_with_the_answer_the_death_or_its_time(router):
    """``spin_read`` (a blocking call's busy poll, its reads in the reader):
    True as soon as the answer is read (not at its end) and the answer is
    there to take; False at its end with nothing come; True at once when
    the connection dies while it reads (the broker gone); and a connection
    not open yet is opened on the way (a send queued before its handshake
    is written, then answered)."""
    import threading
    r, address = router()
    d = ZmtpDealer(address)
    try:
        d.send(b"before the handshake")
        assert d.spin_read(time.perf_counter_ns() + 300_000_000) is False   # opened, sent
        assert r.poll(5000)
        identity, got = r.recv_multipart()
        assert got == b"before the handshake" and d.is_open
        later = threading.Timer(0.05, r.send_multipart, ([identity, b"answer"],))
        later.start()
        t0 = time.perf_counter_ns()
        assert d.spin_read(t0 + 20_000_000_000) is True
        later.join()
        assert 40_000_000 <= time.perf_counter_ns() - t0 < 5_000_000_000
        assert d.recv() == b"answer" and not d.take_lost()
        t0 = time.perf_counter_ns()
        assert d.spin_read(t0 + 30_000_000) is False
        assert time.perf_counter_ns() - t0 >= 30_000_000 and not d.inq
        threading.Timer(0.05, r.close, (0,)).start()
        t0 = time.perf_counter_ns()
        assert d.spin_read(t0 + 20_000_000_000) is True
        assert time.perf_counter_ns() - t0 < 5_000_000_000
        assert d.take_lost() and not d.inq
    finally:
        d.close()


def test_a_spin_read_takes_a_large_answer_that_comes_in_pieces_between_pings(router):
    """An answer of several MiB reaches the spin in many reads, with the
    ROUTER's heartbeat PINGs among them: the spin goes on through the
    pieces (a part of a frame is no answer), answers the PINGs, and ends
    with the whole answer, once."""
    import threading
    r, address = router(HEARTBEAT_IVL=5, HEARTBEAT_TIMEOUT=5000)
    d = ZmtpDealer(address)
    try:
        d.send(b"ask")
        assert d.wait_open(2) and r.poll(5000)
        identity, _ = r.recv_multipart()
        big = bytes(range(256)) * (12 << 12)             # 12 MiB
        later = threading.Timer(0.05, r.send_multipart, ([identity, big],))
        later.start()
        assert d.spin_read(time.perf_counter_ns() + 20_000_000_000) is True
        later.join()
        assert d.recv() == big and not d.inq and not d.take_lost()
        assert d.spin_read(time.perf_counter_ns() + 50_000_000) is False   # PINGs are not news
        assert d.is_open and not d.take_lost()
    finally:
        d.close()
