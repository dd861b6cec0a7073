"""Answers to a client that does not read are bounded in bytes: its pipe holds
a few, the outbox the rest up to a limit, then it is muted and later forgotten.
Real ZeroMQ sockets over TCP, against both client ports (libzmq's ROUTER and
the native one)."""

import time

import pytest
import zmq

from duomq.broker.outbox import PIPE_MESSAGES, Outbox
from duomq.transport.router import ZmtpRouter


def _recv(router, timeout_s: float = 2.0) -> list[bytes]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            return router.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            time.sleep(0.001)
    raise AssertionError("no request came")


@pytest.fixture(params=["zeromq", "native"])
def pair(request):
    """A ROUTER as the broker's client port is (libzmq's, or the serving
    thread's own: transport.router) and a DEALER that reads slowly."""
    ctx = zmq.Context()
    if request.param == "native":
        router = ZmtpRouter(64, PIPE_MESSAGES)
        port = router.bind("127.0.0.1", 0)
    else:
        router = ctx.socket(zmq.ROUTER)
        router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        router.setsockopt(zmq.SNDHWM, PIPE_MESSAGES)
        router.setsockopt(zmq.SNDBUF, 65536)
        port = router.bind_to_random_port("tcp://127.0.0.1")
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.RCVHWM, 1)
    dealer.setsockopt(zmq.RCVBUF, 65536)
    dealer.connect(f"tcp://127.0.0.1:{port}")
    dealer.send(b"hello")
    identity, _ = _recv(router)
    yield router, dealer, identity
    router.close(0)
    dealer.close(0)
    ctx.term()


def test_a_peer_that_does_not_read_is_muted_and_its_answers_freed(pair):
    router, dealer, identity = pair
    box = Outbox(router, limit_bytes=4 << 20, mute_s=0.2)
    answer = bytes(256 << 10)
    for _ in range(200):                       # 50 MiB of answers nobody reads
        box.send(identity, answer, time.monotonic())
        if identity in box.muted:
            break
    assert identity in box.muted and identity not in box.waiting and box.mutes == 1
    assert not box.accepts(identity) and box.dropped_requests == 1
    assert box.expire(time.monotonic()) == []
    time.sleep(0.25)
    assert box.expire(time.monotonic()) == [identity]
    assert box.accepts(identity)


def test_a_reading_peer_gets_every_answer_in_order(pair):
    router, dealer, identity = pair
    box = Outbox(router, limit_bytes=64 << 20, mute_s=1.0)
    n = 300
    for i in range(n):                         # a burst past the pipe's 16 messages
        box.send(identity, i.to_bytes(4, "big") + bytes(64 << 10), time.monotonic())
    assert box.waiting                         # some had to wait for room
    got = []
    deadline = time.monotonic() + 10
    while len(got) < n and time.monotonic() < deadline:
        box.flush()
        if isinstance(router, ZmtpRouter):
            # the serving loop's turn: what its pipe holds is written as the
            # socket makes room (without it the last answers could wait forever
            # once the kernel's buffers were full, as they were once under load)
            router.pump()
        while dealer.poll(1):
            got.append(int.from_bytes(dealer.recv()[:4], "big"))
    assert got == list(range(n)) and not box.waiting and not box.muted


def test_an_answer_for_a_peer_that_is_gone_is_dropped(pair):
    router, _dealer, _identity = pair
    box = Outbox(router, limit_bytes=1 << 20, mute_s=1.0)
    box.send(b"\x00nobody", b"answer", time.monotonic())
    assert not box.waiting and not box.muted
