"""Random garbage and mutated valid frames: every one gets an answer with an
error status (or is valid), and the broker keeps serving."""

import random

import pytest
import zmq

from duomq.common.message import decode_records
from duomq.format import record as rec
from duomq.proto import codec, pb

pytestmark = pytest.mark.integration


def valid_frames():
    records = b"".join(rec.encode_record(b"Fuzz", b"t", b"k", b"", b"body%d" % i, 1)
                       for i in range(3))
    return [
        codec.encode_request(1, pb.SEND, pb.SendRequest(topic="Fuzz", queue_id=0, count=3,
                                                        records=records)),
        codec.encode_request(2, pb.PULL, pb.PullRequest(topic="Fuzz", queue_id=0, max_messages=5)),
        codec.encode_request(3, pb.COMMIT_OFFSET, pb.CommitOffsetRequest(
            consumer_group="g", offsets=[pb.QueueOffset(topic="Fuzz", queue_id=0, offset=1)])),
        codec.encode_request(4, pb.QUERY_OFFSET, pb.QueryOffsetRequest(topic="Fuzz",
                                                                       query=pb.BY_TIME)),
    ]


def test_broker_survives_random_and_mutated_frames(local_cluster, small_store):
    b = local_cluster.add_broker("broker-a", **small_store)
    local_cluster.create_topic("Fuzz", queues=1)
    rnd = random.Random(20261122)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 5000)
    sock.connect(b.address)
    base = valid_frames()
    try:
        for i in range(600):
            if i % 3 == 0:
                data = rnd.randbytes(rnd.randint(0, 300))
            else:
                data = bytearray(rnd.choice(base))
                for _ in range(rnd.randint(1, 6)):
                    data[rnd.randrange(len(data))] = rnd.randrange(256)
                data = bytes(data)
            sock.send(data)
            answer = codec.decode_frame(sock.recv())      # every frame is answered
            assert answer.status in pb.Status.values()
            if answer.status != pb.OK and answer.status not in (pb.NO_NEW_MESSAGE,
                                                                 pb.OFFSET_ILLEGAL):
                assert answer.error
        # still serving, and the log is readable and valid
        sock.send(base[0])
        assert codec.decode_frame(sock.recv()).status == pb.OK
        sock.send(codec.encode_request(9, pb.PULL, pb.PullRequest(topic="Fuzz", queue_id=0,
                                                                  max_messages=1000)))
        pulled = codec.decode_frame(sock.recv())
        resp = codec.decode_response(pulled)
        msgs = decode_records(resp.records)
        assert len(msgs) == resp.count >= 3
        assert all(m.topic == "Fuzz" for m in msgs)
    finally:
        sock.close(0)
        ctx.term()
    assert b.alive()
