"""Random garbage and mutated valid frames: every one gets an answer with an
error status (or is valid), and the broker keeps serving."""

import random

import pytest
import zmq

from duomq.auth.acl import Policy
from duomq.auth.users import User, UserAdmin
from duomq.common.credentials import Credentials, KeyPair, init_cluster_keys
from duomq.common.message import decode_records
from duomq.coordinator import zk as zkutil
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


def fuzz(sock, rnd: random.Random, n: int = 600) -> dict[int, int]:
    """``n`` random and mutated frames: each must be answered, an error with
    its text. Returns the statuses seen (how many of each)."""
    base = valid_frames()
    seen: dict[int, int] = {}
    for i in range(n):
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
        seen[answer.status] = seen.get(answer.status, 0) + 1
        if answer.status != pb.OK and answer.status not in (pb.NO_NEW_MESSAGE,
                                                             pb.OFFSET_ILLEGAL):
            assert answer.error
    return seen


def still_serving(sock) -> None:
    """A valid send is stored, and the log reads back whole and valid."""
    base = valid_frames()
    sock.send(base[0])
    assert codec.decode_frame(sock.recv()).status == pb.OK
    sock.send(codec.encode_request(9, pb.PULL, pb.PullRequest(topic="Fuzz", queue_id=0,
                                                              max_messages=1000)))
    pulled = codec.decode_frame(sock.recv())
    resp = codec.decode_response(pulled)
    msgs = decode_records(resp.records)
    assert len(msgs) == resp.count >= 3
    assert all(m.topic == "Fuzz" for m in msgs)


def dealer(ctx, address: str, credentials: Credentials | None = None):
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 5000)
    if credentials is not None:
        sock.curve_secretkey = credentials.keys.secret
        sock.curve_publickey = credentials.keys.public
        sock.curve_serverkey = credentials.broker_public_key
    sock.connect(address)
    return sock


def test_broker_survives_random_and_mutated_frames(local_cluster, small_store):
    b = local_cluster.add_broker("broker-a", **small_store)
    local_cluster.create_topic("Fuzz", queues=1)
    ctx = zmq.Context()
    sock = dealer(ctx, b.address)
    try:
        fuzz(sock, random.Random(20261122))
        still_serving(sock)
    finally:
        sock.close(0)
        ctx.term()
    assert b.alive()


def test_a_secured_broker_survives_fuzz_with_and_without_credentials(local_cluster,
                                                                     small_store, tmp_path,
                                                                     monkeypatch):
    keys = str(tmp_path / "keys")
    path = init_cluster_keys(keys)
    admin = Credentials.load(path)
    monkeypatch.setenv("DUOMQ_CREDENTIALS", path)      # the harness's ZooKeeper reads
    b = local_cluster.add_broker("broker-a", auth=True, auth_dir=keys, **small_store)
    conn = zkutil.connect(local_cluster.zookeeper)
    try:
        pair = KeyPair.new()
        UserAdmin(conn, local_cluster.cluster).add(
            User("fuzzer", pair.public, Policy.parse(["Topic:Fuzz:Sub", "Group:*:Sub"])))
        limited = Credentials("fuzzer", pair, admin.broker_public_key)
    finally:
        zkutil.close(conn)
    local_cluster.create_topic("Fuzz", queues=1)
    ctx = zmq.Context()
    rnd = random.Random(20261123)
    socks = [dealer(ctx, b.address),                      # plaintext
             dealer(ctx, b.address, Credentials("x", KeyPair.new(), admin.broker_public_key)),
             dealer(ctx, b.address, limited), dealer(ctx, b.address, admin)]
    try:
        # without credentials, and with a key no user holds: no answer at all
        for stranger in socks[:2]:
            for _ in range(50):
                try:     # a refused handshake leaves no connection to queue on
                    stranger.send(rnd.randbytes(rnd.randint(0, 300)), zmq.NOBLOCK)
                except zmq.Again:
                    pass
            assert not stranger.poll(1000)
        # a user who may only read: every frame answered, sends refused
        seen = fuzz(socks[2], rnd)
        assert seen.get(pb.NOT_AUTHORIZED, 0) > 0
        # the admin: every frame answered, and the broker still serves
        fuzz(socks[3], rnd)
        still_serving(socks[3])
    finally:
        for s in socks:
            s.close(0)
        ctx.term()
    assert b.alive()
