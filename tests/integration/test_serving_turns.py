"""The serving loop's turns under bursts (issue 41's shortcuts): it looks at
the client sockets once a turn (what arrives meanwhile is the next turn's),
and an ASYNC send's update of the visible offsets before its ack stands
for the turn's own. Neither may strand a request: requests piled past a
connection's receive mark, from many connections at once, with held pulls
answered by the sends between them, are all answered, each once, and the
pulls see every message."""

import time

import pytest
import zmq

from duomq.common.message import decode_records
from duomq.format import record as rec
from duomq.proto import codec, pb

pytestmark = pytest.mark.integration

CLIENTS, EACH = 6, 300       # each client writes its EACH sends at once: past the mark (64)
TOPIC = "Burst"


def send_frame(rid: int, client: int) -> bytes:
    body = b"%d/%d" % (client, rid)
    records = rec.encode_record(TOPIC.encode(), b"", b"", b"", body, int(time.time() * 1000))
    return codec.encode_request(rid, pb.SEND, pb.SendRequest(
        topic=TOPIC, queue_id=0, count=1, records=records))


def pull_frame(rid: int, offset: int) -> bytes:
    return codec.encode_request(rid, pb.PULL, pb.PullRequest(
        consumer_group="g", topic=TOPIC, queue_id=0, queue_offset=offset, max_messages=32,
        max_wait_ms=10_000))


def test_bursts_from_many_connections_are_all_answered_and_pulls_see_every_message(
        local_cluster):
    broker = local_cluster.add_broker("broker-a", 0, flush="ASYNC_FLUSH")
    local_cluster.create_topic(TOPIC, queues=1)
    ctx = zmq.Context()
    try:
        consumer = ctx.socket(zmq.DEALER)
        consumer.setsockopt(zmq.LINGER, 0)
        consumer.connect(broker.address)
        consumer.send(pull_frame(1, 0))          # held: nothing is stored yet
        time.sleep(0.3)
        producers = []
        for _ in range(CLIENTS):
            s = ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 0)
            s.setsockopt(zmq.SNDHWM, 0)
            s.setsockopt(zmq.RCVHWM, 0)
            s.connect(broker.address)
            producers.append(s)
        for c, s in enumerate(producers):        # every burst queued before any is answered
            for rid in range(EACH):
                s.send(send_frame(rid, c))
        answered = {c: set() for c in range(CLIENTS)}
        seen: list[bytes] = []
        offset, pull_rid = 0, 1
        poller = zmq.Poller()
        for s in (*producers, consumer):
            poller.register(s, zmq.POLLIN)
        deadline = time.monotonic() + 60
        total = CLIENTS * EACH
        while (sum(map(len, answered.values())) < total or len(seen) < total) \
                and time.monotonic() < deadline:
            for s, _ in poller.poll(1000):
                frame = codec.decode_frame(s.recv())
                if s is consumer:
                    assert frame.request_id == pull_rid
                    resp = codec.decode_response(frame)
                    if frame.status == pb.OK:
                        seen += [m.body for m in decode_records(resp.records, "broker-a")]
                        offset = resp.next_offset
                    pull_rid += 1
                    consumer.send(pull_frame(pull_rid, offset))
                    continue
                c = producers.index(s)
                assert frame.status == pb.OK, frame.error
                assert frame.request_id not in answered[c], "answered twice"
                answered[c].add(frame.request_id)
        assert {c: len(a) for c, a in answered.items()} == {c: EACH for c in range(CLIENTS)}
        assert sorted(seen) == sorted(b"%d/%d" % (c, r) for c in range(CLIENTS)
                                      for r in range(EACH))
    finally:
        ctx.destroy(linger=0)


def recv_answer(sock, rid: int):
    """The answer to request ``rid`` (within 10 s)."""
    assert sock.poll(10_000), f"no answer to request {rid}"
    frame = codec.decode_frame(sock.recv())
    assert frame.request_id == rid
    return frame, codec.decode_response(frame)


@pytest.mark.parametrize("transport", ["native", "zeromq"])
def test_a_pull_sent_after_an_ack_finds_the_message(local_cluster, transport):
    """An ASYNC send acked with no pull held has its visibility computed
    after the ack: a pull a client sends once it has the ack must still
    find the message. The pull is made to arrive while the broker is still
    serving the turn that acked it (a burst from another connection queued
    behind the send; libzmq's port reads what arrives meanwhile in the same
    turn), with no wait (answered at once, never held)."""
    broker = local_cluster.add_broker("broker-a", 0, flush="ASYNC_FLUSH",
                                      client_transport=transport)
    local_cluster.create_topic(TOPIC, queues=1)
    local_cluster.create_topic("Noise", queues=1)
    ctx = zmq.Context()
    try:
        producer, burst, reader = (ctx.socket(zmq.DEALER) for _ in range(3))
        for s in (producer, burst, reader):
            s.setsockopt(zmq.LINGER, 0)
            s.connect(broker.address)
        noise = codec.encode_request(0, pb.SEND, pb.SendRequest(
            topic="Noise", queue_id=0, count=1, records=rec.encode_record(
                b"Noise", b"", b"", b"", b"n", int(time.time() * 1000))))
        empty = 0
        for n in range(150):
            producer.send(send_frame(n, 0))
            for _ in range(40):                  # served after the send, in the same turn
                burst.send(noise)
            frame, resp = recv_answer(producer, n)
            assert frame.status == pb.OK, frame.error
            assert resp.queue_offset == n
            reader.send(codec.encode_request(n, pb.PULL, pb.PullRequest(
                consumer_group="g", topic=TOPIC, queue_id=0, queue_offset=n, max_messages=1,
                max_wait_ms=0)))
            frame, resp = recv_answer(reader, n)
            if frame.status != pb.OK:
                empty += 1
            else:
                assert [m.body for m in decode_records(resp.records, "broker-a")] == \
                    [b"0/%d" % n]
            for _ in range(40):
                assert burst.poll(10_000)
                burst.recv()
        assert empty == 0, f"{empty} of 150 pulls sent after their send's ack found nothing"
    finally:
        ctx.destroy(linger=0)
