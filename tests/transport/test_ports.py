"""Both kinds of serving-thread port behind one interface (transport/ports.py),
against real libzmq DEALERs: what the serving loop does with a port (poll it,
take a turn's requests, answer, count connections, refuse a taken port) is
the same whichever it holds."""

from __future__ import annotations

import socket
import time

import pytest
import zmq

from duomq.transport.ports import Port, PortError, listening
from duomq.transport.zsend import readable

KINDS = [pytest.param(True, id="native"), pytest.param(False, id="libzmq")]


@pytest.fixture
def ctx():
    c = zmq.Context()
    yield c
    c.term()


def served(port: Port, want: int, timeout_s: float = 5.0) -> list:
    """Requests taken in turns, as the loop takes them, polling between."""
    poller = zmq.Poller()
    poller.register(port.poll_key(), zmq.POLLIN)
    got: list = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        if not port.backlogged():
            poller.poll(50)
        got.extend(port.requests(2))           # at most two a turn: the rest waits
    return got


@pytest.mark.parametrize("native", KINDS)
def test_a_port_takes_requests_in_turns_and_answers_them(ctx, native):
    port = listening(ctx, native, 1000, 1000, 1 << 20)
    try:
        number = port.bind("127.0.0.1", 0)
        assert number > 0 and port.native is native
        assert (port.libzmq is None) is native
        dealer = ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(f"tcp://127.0.0.1:{number}")
        for i in range(5):
            dealer.send(b"ask-%d" % i)
        got = served(port, 5)
        assert [frames[1:] for frames, _ in got] == [[b"ask-%d" % i] for i in range(5)]
        assert {who for _, who in got} == {None}
        identity = got[0][0][0]
        port.send_multipart([identity, b"answer"])
        assert dealer.poll(5000) and dealer.recv() == b"answer"
        assert not readable(port)
        if native:
            assert port.connections() == (1, 1, 0)
        else:
            assert port.connections() is None
        with pytest.raises(zmq.ZMQError) as gone:    # ROUTER_MANDATORY's, both kinds
            port.send_multipart([b"\x00nobody", b"x"])
        assert gone.value.errno == zmq.EHOSTUNREACH
        dealer.close()
    finally:
        port.close(linger=0)


@pytest.mark.parametrize("native", KINDS)
def test_a_port_that_cannot_listen_says_why(ctx, native):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = listening(ctx, native, 10, 10, 1 << 20)
    try:
        with pytest.raises(PortError, match="(?i)in use"):
            port.bind("127.0.0.1", taken.getsockname()[1])
    finally:
        port.close(linger=0)
        taken.close()
