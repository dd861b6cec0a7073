"""A blocking call's busy poll (client/remoting.py, transport/busy_poll.py):
on a native socket it spins on its answer before it sleeps while answers
come that fast, and stops spinning (no CPU spent) once they do not: a
SYNC send's answer, a millisecond away, is never worth a spin."""

import threading
import time

import pytest
import zmq

from duomq.client.remoting import RemotingClient
from duomq.common.client_config import ProducerConfig
from duomq.common.errors import BrokerUnreachableError, ConfigError
from duomq.proto import codec, pb


@pytest.fixture
def echo():
    """A ROUTER answering every request after ``delay[0]`` seconds."""
    ctx = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    delay = [0.0]
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            if not router.poll(20):
                continue
            who, data = router.recv_multipart()
            if delay[0]:
                time.sleep(delay[0])
            frame = codec.decode_frame(data)
            router.send_multipart([who, codec.encode_response(
                frame.request_id, frame.type, pb.OK, "", None)])
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield f"tcp://127.0.0.1:{port}", delay, router
    stop.set()
    t.join(5)
    router.close(0)


def status(r, address, timeout_s=5):
    return r.call(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), timeout_s)[0]


def busy(r, address):
    return r._local.socks[address].busy


def test_fast_answers_are_caught_spinning(echo):
    address, _delay, _ = echo
    r = RemotingClient("spin", transport="native", busy_poll_us=2000)
    try:
        for _ in range(50):
            assert status(r, address) == pb.OK
        b = busy(r, address)
        assert b.spins == 50 and b.caught >= 40      # (a slow scheduler may miss a few)
    finally:
        r.close()


def test_the_counts_are_counters_over_every_connection_closed_ones_too(echo):
    """busy_poll_counts (the producer's duomq_client_busy_poll_* and
    run_all's spins): a dropped connection's spins stay counted."""
    address, _delay, _ = echo
    r = RemotingClient("spin", transport="native", busy_poll_us=2000)
    try:
        for _ in range(10):
            assert status(r, address) == pb.OK
        spins, caught, seconds = r.busy_poll_counts()
        assert spins == 10 and caught == busy(r, address).caught and seconds > 0
        r._drop_direct_socket(address)                 # as a lost connection does
        assert r.busy_poll_counts() == (spins, caught, seconds)
        for _ in range(5):                             # a new connection adds to them
            assert status(r, address) == pb.OK
        assert r.busy_poll_counts()[0] == 15
    finally:
        r.close()


def test_slow_answers_stop_the_spin(echo):
    """Answers 3 ms away: a 100 us spin never catches one, and after a few
    misses the call sleeps at once (the spins stop, not the calls)."""
    address, delay, _ = echo
    delay[0] = 0.003
    r = RemotingClient("spin", transport="native", busy_poll_us=100)
    try:
        for _ in range(40):
            assert status(r, address) == pb.OK
        b = busy(r, address)
        # each spin ran out its budget; the time is wall time (a spin the
        # scheduler preempted counts the wait: 8 spins took 4.8 ms once on a
        # loaded host), so the spins are counted, not timed
        assert b.caught == 0 and 0 < b.spins <= 8 and b.spent_ns >= b.spins * 100_000
    finally:
        r.close()


def test_no_spin_when_off_or_on_libzmq(echo):
    address, _delay, _ = echo
    for kwargs in ({"transport": "native", "busy_poll_us": 0},
                   {"transport": "zeromq", "busy_poll_us": 100}):
        r = RemotingClient("spin", **kwargs)
        try:
            for _ in range(5):
                assert status(r, address) == pb.OK
            assert busy(r, address).spins == 0
        finally:
            r.close()


def test_a_connection_that_dies_mid_spin_fails_at_once():
    """The broker goes while the call spins on its answer: the call fails
    as unreachable within the spin, not at its timeout."""
    import socket

    from duomq.transport import zmtp
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"

    def serve_then_die():
        c, _ = listener.accept()
        c.sendall(zmtp.greeting(as_server=True) + zmtp.ready(b"ROUTER"))
        reader, greeted = zmtp.FrameReader(), False
        while True:                        # the handshake, then the request: then go
            reader.feed(c.recv(65536))
            greeted = greeted or reader.take(zmtp.GREETING_SIZE) is not None
            frames = []
            while greeted and (got := reader.frame()) is not None:
                frames.append(got)
            if any(not flags & zmtp.COMMAND for flags, _ in frames):
                break
        c.close()
    t = threading.Thread(target=serve_then_die, daemon=True)
    t.start()
    r = RemotingClient("spin", transport="native", busy_poll_us=1_000_000)    # 1 s of spin
    try:
        t0 = time.monotonic()
        with pytest.raises(BrokerUnreachableError):
            status(r, address, timeout_s=10)
        assert time.monotonic() - t0 < 0.5
    finally:
        r.close()
        t.join(5)
        listener.close()


def test_the_setting_is_checked():
    assert ProducerConfig().busy_poll_us == 250
    with pytest.raises(ConfigError, match="busy_poll_us"):
        ProducerConfig(busy_poll_us=-1)
