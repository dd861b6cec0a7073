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
