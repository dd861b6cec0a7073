"""Requests in flight fail at once when their connection dies or when the
route says their broker no longer leads its group (client/remoting.py), in
the blocking and the asynchronous paths, over both kinds of client socket."""

import threading
import time

import pytest
import zmq

from duomq.client.remoting import RemotingClient
from duomq.common.errors import BrokerGoneError, BrokerUnreachableError
from duomq.proto import pb


@pytest.fixture
def silent_broker():
    """A ROUTER that reads requests and never answers."""
    ctx = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    yield router, f"tcp://127.0.0.1:{port}"
    router.close(0)


@pytest.fixture(params=["native", "zeromq"])
def remoting(request):
    """Both kinds of client socket: its own ZMTP (transport.dealer), libzmq's."""
    r = RemotingClient("fail-fast-test", transport=request.param, busy_poll_us=100)
    yield r
    r.close()


def after(seconds, fn):
    t = threading.Timer(seconds, fn)
    t.start()
    return t


def timed_call(remoting, address):
    t0 = time.monotonic()
    with pytest.raises(BrokerUnreachableError) as err:
        remoting.call(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 10)
    return time.monotonic() - t0, err.value


def test_blocking_call_fails_when_the_connection_dies(silent_broker, remoting):
    router, address = silent_broker
    after(0.3, lambda: router.close(0))
    took, err = timed_call(remoting, address)
    assert took < 2 and "died" in str(err) and not isinstance(err, BrokerGoneError)


def test_blocking_call_fails_when_the_route_moves_on(silent_broker, remoting):
    _router, address = silent_broker
    after(0.3, lambda: remoting.abort(address, "broker-a has a new master"))
    took, err = timed_call(remoting, address)
    assert took < 2 and isinstance(err, BrokerGoneError)
    assert "broker-a has a new master" in str(err)


def test_an_abort_for_another_address_leaves_a_call_waiting(silent_broker, remoting):
    _router, address = silent_broker
    after(0.2, lambda: remoting.abort("tcp://127.0.0.1:1", "elsewhere"))
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        remoting.call(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 1.0)
    assert time.monotonic() - t0 >= 0.9


def test_async_requests_fail_on_abort_and_on_a_dead_connection(silent_broker, remoting):
    router, address = silent_broker
    gone = remoting.request(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 10)
    assert router.poll(2000)                       # it reached the broker
    remoting.abort(address, "fenced")
    with pytest.raises(BrokerGoneError):
        gone.result(2)
    lost = remoting.request(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 10)
    time.sleep(0.2)
    router.close(0)
    with pytest.raises(BrokerUnreachableError, match="died"):
        lost.result(2)


def test_an_answer_sent_just_before_the_connection_died_is_returned(silent_broker, remoting):
    from duomq.proto import codec
    router, address = silent_broker

    def answer_then_die():
        ident, data = router.recv_multipart()
        frame = codec.decode_frame(data)
        router.send_multipart([ident, codec.encode_response(
            frame.request_id, frame.type, pb.OK, "", pb.BrokerStatusResponse(broker_id=7))])
        time.sleep(0.05)
        router.close(0)
    t = threading.Thread(target=answer_then_die)
    t.start()
    status, _err, resp = remoting.call(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 5)
    t.join()
    assert status == pb.OK and resp.broker_id == 7


def test_request_then_calls_back_once_on_the_io_thread(silent_broker, remoting):
    from duomq.proto import codec
    router, address = silent_broker
    got, done = [], threading.Event()

    def answered(tag, result, exc):
        got.append((tag, result, exc, threading.current_thread().name))
        done.set()

    remoting.request_then(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 10, answered, "a")
    assert router.poll(2000)
    ident, data = router.recv_multipart()
    frame = codec.decode_frame(data)
    router.send_multipart([ident, codec.encode_response(
        frame.request_id, frame.type, pb.OK, "", pb.BrokerStatusResponse(broker_id=3))])
    assert done.wait(2)
    (tag, (status, _err, resp), exc, thread), = got
    assert (tag, status, resp.broker_id, exc, thread) == ("a", pb.OK, 3, None, "fail-fast-test")
    # a failure: the exception, once
    done.clear()
    remoting.request_then(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 10, answered, "b")
    assert router.poll(2000)
    remoting.abort(address, "fenced")
    assert done.wait(2)
    time.sleep(0.1)
    assert len(got) == 2 and got[1][0] == "b" and got[1][1] is None
    assert isinstance(got[1][2], BrokerGoneError)


@pytest.fixture
def answering_broker():
    """A ROUTER that answers every request with an empty BROKER_STATUS."""
    from duomq.proto import codec
    ctx = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            if router.poll(50):
                identity, data = router.recv_multipart()
                frame = codec.decode_frame(data)
                router.send_multipart([identity, codec.encode_response(
                    frame.request_id, frame.type, pb.OK, "", pb.BrokerStatusResponse())])
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield f"tcp://127.0.0.1:{port}"
    stop.set()
    t.join(2)
    router.close(0)


def test_an_abort_while_no_call_waits_does_not_fail_the_next_call(answering_broker, remoting):
    """A thread's wake-up stays registered for its connection between calls:
    an abort that comes while it is idle wakes nobody, and the next call,
    made after it, reads that stale wake-up and goes on; an abort during a
    call still fails it."""
    address = answering_broker
    status, _err, _resp = remoting.call(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 5)
    assert status == pb.OK
    remoting.abort(address, "a new master, before this call")
    for _ in range(3):
        status, _err, _resp = remoting.call(address, pb.BROKER_STATUS,
                                            pb.BrokerStatusRequest(), 5)
        assert status == pb.OK


def test_an_abort_or_a_request_racing_close_writes_no_closed_fd(silent_broker):
    """A route change (kazoo's thread) or a timer's request may come while
    the client closes: neither writes the eventfds close() has closed (an
    EBADF, or 8 bytes into whatever file took the number since)."""
    _router, address = silent_broker
    errors: list[BaseException] = []
    for round_ in range(150):
        r = RemotingClient("close-race", transport="native" if round_ % 2 else "zeromq")
        go = threading.Event()

        def hammer(r=r, go=go):
            try:
                go.wait()
                while not r._closed:
                    r.abort(address, "moved")
                    r.request(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 1)
                for _ in range(50):                     # and just after
                    r.abort(address, "moved")
                    r.request(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 1)
            except BaseException as e:                  # noqa: BLE001 (the test's finding)
                errors.append(e)
        threads = [threading.Thread(target=hammer) for _ in range(2)]
        for t in threads:
            t.start()
        go.set()
        r.close()
        for t in threads:
            t.join(10)
        assert not errors, errors[:3]
