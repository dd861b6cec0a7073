"""Random garbage and mutated valid frames: every one gets an answer with an
error status (or is valid), and the broker keeps serving."""

import random
import socket

import pytest
import zmq

from duomq.auth.acl import Policy
from duomq.auth.credentials import Credentials, init_cluster_keys
from duomq.auth.user import User
from duomq.auth.users import UserAdmin
from duomq.common.curve import KeyPair
from duomq.common.message import decode_records
from duomq.coordinator import zk as zkutil
from duomq.format import record as rec
from duomq.proto import codec, pb
from duomq.transport import zmtp

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


def raw_streams(rnd: random.Random, n: int) -> list[bytes]:
    """Byte streams for a plain TCP connection to the client port: random
    bytes, then a valid ZMTP opening followed by damage of each kind."""
    opening = zmtp.greeting(False) + zmtp.ready(b"DEALER")
    valid = b"".join(b"".join(zmtp.message([f])) for f in valid_frames())
    out = []
    for i in range(n):
        kind = i % 5
        if kind == 0:
            out.append(rnd.randbytes(rnd.randrange(1, 300)))
        elif kind == 1:                   # a valid opening, then random bytes
            out.append(opening + rnd.randbytes(rnd.randrange(1, 300)))
        elif kind == 2:                   # valid requests with some bytes flipped
            data = bytearray(opening + valid)
            for _ in range(rnd.randrange(1, 6)):
                data[rnd.randrange(len(data))] = rnd.randrange(256)
            out.append(bytes(data))
        elif kind == 3:                   # a frame claiming more than max_frame_bytes
            out.append(opening + zmtp.frame_head(rnd.randrange(17 << 20, 1 << 62)))
        else:                             # cut anywhere
            data = opening + valid
            out.append(data[:rnd.randrange(1, len(data))])
    return out


def test_plain_tcp_garbage_at_the_client_port_leaves_the_broker_serving(local_cluster,
                                                                        small_store):
    """The native client port (the serving thread reads the sockets itself):
    whatever arrives on a connection, the broker closes that one or answers
    it, and goes on serving everyone else; nothing damaged is stored."""
    b = local_cluster.add_broker("broker-a", **small_store)
    local_cluster.create_topic("Fuzz", queues=1)
    host, port = b.address.removeprefix("tcp://").rsplit(":", 1)
    ctx = zmq.Context()
    sock = dealer(ctx, b.address)
    try:
        still_serving(sock)
        conns = []
        for data in raw_streams(random.Random(20261127), 200):
            c = socket.create_connection((host, int(port)))
            c.sendall(data)
            conns.append(c)
            if len(conns) == 20:          # some left open, some closed at once
                for c in conns:
                    c.close()
                conns = []
                still_serving(sock)
        for c in conns:
            c.close()
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
