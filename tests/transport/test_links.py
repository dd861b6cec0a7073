"""Both kinds of DEALER behind one interface (transport/links.py) against a
real libzmq ROUTER: a request and its answer, then the peer's death told by
``take_lost`` (the native dealer sees the EOF itself, libzmq's through its
socket monitor), with nothing asked of the caller about which it holds."""

from __future__ import annotations

import socket
import time

import pytest
import zmq

from duomq.client.monitor_events import WATCHED, _lost
from duomq.transport.dealer import ZmtpDealer
from duomq.transport.links import Dealer, LibzmqDealer
from duomq.transport.zsend import readable


def make(ctx, native: bool, address: str, immediate: bool = False) -> Dealer:
    """Either kind of dealer; libzmq's queues only to a live connection with
    ``immediate``, as a blocking call's does."""
    if native:
        return ZmtpDealer(address)
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    if immediate:
        sock.setsockopt(zmq.IMMEDIATE, 1)
    monitor = sock.get_monitor_socket(WATCHED)
    sock.connect(address)
    return LibzmqDealer(sock, address, monitor, _lost)


@pytest.mark.parametrize("native", [True, False], ids=["native", "libzmq"])
def test_a_dealer_talks_then_tells_its_peers_death_once(native):
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    d = make(ctx, native, f"tcp://127.0.0.1:{port}")
    try:
        assert d.native is native and len(d.poll_keys()) == (1 if native else 2)
        d.send(b"ping")
        deadline = time.monotonic() + 5
        while not router.poll(10) and time.monotonic() < deadline:
            readable(d)                         # a native dealer connects and writes here
        identity, body = router.recv_multipart()
        assert body == b"ping"
        router.send_multipart([identity, b"pong"])
        deadline = time.monotonic() + 5
        while not readable(d) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert d.recv() == b"pong"
        now = time.monotonic()
        assert d.opening_for(now) == 0.0 and not d.keep_alive(now, 1.0)
        assert not d.take_lost()
        router.close(linger=0)                  # the peer dies
        deadline = time.monotonic() + 5
        told = False
        while not told and time.monotonic() < deadline:
            readable(d)                         # a native dealer reads its EOF here
            told = d.take_lost()
            time.sleep(0.01)
        assert told, "the peer's death was not told"
        assert not d.take_lost()                # once
    finally:
        d.close(linger=0)
        router.close(linger=0)
        ctx.term()


@pytest.mark.parametrize("native", [True, False], ids=["native", "libzmq"])
def test_a_blocking_send_waits_for_a_connection_and_its_answer_through_its_own_poller(native):
    """What ``RemotingClient.call`` asks of either kind: ``send_when_open``
    refuses within its timeout where nobody listens (``why`` says so) and
    sends once a ROUTER does; the answer wakes the dealer's own ``poller``
    over its ``poll_keys`` and ``spin_read`` sees it waiting."""
    ctx = zmq.Context()
    # a port bound but not listening: a connect is refused, and no other
    # process takes it meanwhile (a port closed at once was taken by a
    # broker another test started, once, on a loaded run)
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    port = held.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    d = make(ctx, native, address, immediate=True)
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    try:
        t0 = time.monotonic()
        assert not d.send_when_open(b"lost", 0.3)
        assert time.monotonic() - t0 < 2.0 and d.why
        d.take_lost()
        held.close()
        router.bind(address)
        deadline = time.monotonic() + 5
        while not d.send_when_open(b"ping", 0.3):
            assert time.monotonic() < deadline, d.why
            d.take_lost()
        deadline = time.monotonic() + 5
        while not router.poll(10) and time.monotonic() < deadline:
            readable(d)                          # a native dealer writes what it queued here
        identity, body = router.recv_multipart()
        assert body == b"ping"
        router.send_multipart([identity, b"pong"])
        poller = d.poller()
        for key in d.poll_keys():
            poller.register(key, zmq.POLLIN)
        assert poller.poll(5000), "the answer woke nothing"
        deadline = time.monotonic() + 5          # (libzmq's monitor may have woken it first)
        while not d.spin_read(time.perf_counter_ns() + 10_000_000):
            assert time.monotonic() < deadline, "spin_read never saw the answer"
            poller.poll(100)
        assert d.recv(zmq.NOBLOCK) == b"pong"
    finally:
        held.close()
        d.close(linger=0)
        router.close(linger=0)
        ctx.term()
