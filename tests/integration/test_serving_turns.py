"""The serving loop's turns under bursts (issue 41's shortcuts): it looks at
the client sockets once a turn (what arrives meanwhile is the next turn's),
and an ASYNC send's update of the visible offsets before its ack stands
for the turn's own. Neither may strand a request: requests piled past a
connection's receive mark, from many connections at once, with held pulls
answered by the sends between them, are all answered, each once, and the
pulls see every message."""

import random
import socket
import time

import pytest
import zmq

from duomq.common.message import decode_records
from duomq.format import record as rec
from duomq.proto import codec, pb
from duomq.transport import zmtp

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


STAGED = "Staged"


def held_pull(rid: int, qid: int, offset: int, wait_ms: int = 10_000, max_messages: int = 32,
              sub: str = "*") -> bytes:
    return codec.encode_request(rid, pb.PULL, pb.PullRequest(
        consumer_group="g", topic=STAGED, queue_id=qid, queue_offset=offset,
        max_messages=max_messages, max_wait_ms=wait_ms, subscription=sub))


@pytest.mark.parametrize("transport", ["native", "zeromq"])
def test_pulls_held_at_a_queues_end_see_every_message_once_whichever_way_answered(
        local_cluster, transport):
    """An ASYNC send answers a PULL held at its queue's end from its staged
    batch, before the ack and the batch's second half; other holds (a tag
    filter, a smaller limit, a PULL_MANY) the usual way. Readers of each
    kind, on a master taking batches of 1 to 4 records on two queues: each
    sees exactly what it should, once, in order. The end reader first reads
    alone (the ack then goes before the offsets are computed), and after
    every answer asks again at once without waiting (a pull right behind the
    early answer: never OFFSET_ILLEGAL, never a message twice)."""
    broker = local_cluster.add_broker("broker-a", 0, flush="ASYNC_FLUSH",
                                      client_transport=transport)
    local_cluster.create_topic(STAGED, queues=2)
    local_cluster.create_topic("Noise", queues=1)
    ctx = zmq.Context()

    def dealer():
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(broker.address)
        return s

    class Reader:
        def __init__(self, name, offsets, **kind):
            self.name, self.sock, self.offsets, self.kind = name, dealer(), dict(offsets), kind
            self.rid, self.seen, self.probing = 0, [], False
            self.ask()

        def ask(self, wait_ms=10_000):
            self.rid += 1
            if len(self.offsets) > 1:
                self.sock.send(codec.encode_request(self.rid, pb.PULL_MANY, pb.PullManyRequest(
                    max_wait_ms=wait_ms, pulls=[pb.PullRequest(
                        consumer_group="g", topic=STAGED, queue_id=q, queue_offset=o,
                        max_messages=32) for q, o in sorted(self.offsets.items())])))
            else:
                (q, o), = self.offsets.items()
                self.sock.send(held_pull(self.rid, q, o, wait_ms, **self.kind))

        def take(self, qid, status, resp):
            assert status in (pb.OK, pb.NO_NEW_MESSAGE, pb.NO_MATCHED_MESSAGE), \
                (self.name, status)
            if status == pb.OK:
                got = [(qid, m.body) for m in decode_records(resp.records, "broker-a")]
                assert len(got) == resp.count <= self.kind.get("max_messages", 32), self.name
                self.seen += got
            self.offsets[qid] = resp.next_offset

        def read(self):
            frame = codec.decode_frame(self.sock.recv())
            assert frame.request_id == self.rid, self.name
            resp = codec.decode_response(frame)
            if len(self.offsets) > 1:
                assert frame.status == pb.OK, frame.error
                for p, e in zip(sorted(self.offsets), resp.entries, strict=True):
                    self.take(p, e.status, e.response)
            else:
                (q, _o), = self.offsets.items()
                self.take(q, frame.status, resp)
            if self.name == "end" and not self.probing:
                self.probing = True          # at once, no wait: right behind its answer
                self.ask(wait_ms=0)
            else:
                self.probing = False
                self.ask()

    try:
        producer, burst = dealer(), dealer()
        noise = codec.encode_request(0, pb.PULL, pb.PullRequest(   # writes nothing: the
            consumer_group="g", topic="Noise", queue_id=0, queue_offset=0))  # batch stays staged
        sent: list[tuple[int, bytes, bytes]] = []          # (queue, body, tag) in order
        readers = [Reader("end", {0: 0})]
        rng = random.Random(7)

        def expected(r, start):
            got = [(q, b) for q, b, tag in sent[start:]
                   if q in r.offsets and (r.kind.get("sub", "*") == "*" or tag == b"TagA")]
            return sorted(got, key=lambda x: x[0]) if len(r.offsets) > 1 else got

        starts = {"end": 0}
        time.sleep(0.3)                                    # its pull held
        for i in range(240):
            if i == 80:                                    # the other kinds join
                q0 = sum(1 for q, _b, _t in sent if q == 0)
                q1 = len(sent) - q0
                readers += [Reader("tagged", {0: q0}, sub="TagA"),
                            Reader("one", {0: q0}, max_messages=1),
                            Reader("many", {0: q0, 1: q1})]
                starts.update(tagged=len(sent), one=len(sent), many=len(sent))
                time.sleep(0.3)
            qid = 0 if i < 80 or i % 3 else 1
            n = rng.randint(1, 4)
            batch = []
            for k in range(n):
                tag = b"TagA" if rng.random() < 0.5 else b"TagB"
                body = b"%d/%d" % (i, k)
                batch.append(rec.encode_record(STAGED.encode(), tag, b"", b"", body, 1))
                sent.append((qid, body, tag))
            producer.send(codec.encode_request(i, pb.SEND, pb.SendRequest(
                topic=STAGED, queue_id=qid, count=n, records=b"".join(batch))))
            for _ in range(40):              # the broker busy after the send, in the same turn
                burst.send(noise)
            if qid == 0:                     # the end reader's answer, and at once its probe
                assert readers[0].sock.poll(10_000)
                readers[0].read()
            frame, _resp = recv_answer(producer, i)
            assert frame.status == pb.OK, frame.error
            deadline = time.monotonic() + 10
            for r in readers:                              # each catches up, then holds again
                want = expected(r, starts[r.name])
                while (sorted(r.seen, key=lambda x: x[0]) if len(r.offsets) > 1
                       else r.seen) != want or r.probing:
                    assert len(r.seen) <= len(want), (r.name, r.seen[len(want):])
                    assert time.monotonic() < deadline, (r.name, len(r.seen), len(want))
                    if r.sock.poll(100):
                        r.read()
            for _ in range(40):
                assert burst.poll(10_000)
                burst.recv()
            time.sleep(0.002)
        for r in readers:
            assert len(r.seen) == len(set(r.seen)), r.name
    finally:
        ctx.destroy(linger=0)


class RawDealer:
    """A DEALER spoken over a plain TCP socket (``transport.zmtp``), so that
    several requests leave in one ``sendall`` and reach the broker in one
    read: served in one turn of its loop."""

    def __init__(self, address: str):
        host, port = address.removeprefix("tcp://").rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.sock.sendall(zmtp.greeting(as_server=False) + zmtp.ready(b"DEALER"))
        self.reader = zmtp.FrameReader()
        while not self.reader.greeting():
            self.reader.feed(self.sock.recv(65536))
        flags, _body = self._frame()             # the ROUTER's READY
        assert flags & zmtp.COMMAND

    def _frame(self) -> tuple[int, bytes]:
        while (got := self.reader.frame()) is None:
            data = self.sock.recv(65536)
            assert data, "the broker closed the connection"
            self.reader.feed(data)
        return got

    def send_together(self, *requests: bytes) -> None:
        self.sock.sendall(b"".join(b"".join(zmtp.py_message([r])) for r in requests))

    def answer(self) -> tuple[int, int]:
        """The next answer's (request id, status)."""
        while True:
            flags, body = self._frame()
            if not flags & zmtp.COMMAND:           # (a PING's PONG is not asked for)
                frame = codec.decode_frame(body)
                return frame.request_id, frame.status


@pytest.mark.parametrize("transport", ["native", "zeromq"])
def test_an_ack_that_woke_a_consumer_leaves_at_the_turns_end_and_others_at_once(
        local_cluster, transport):
    """An ASYNC send whose answer woke a consumer (a PULL held at its
    queue's end, answered from the staged batch) is acked at the end of the
    loop's turn (``visibility.before_answer``): after the pull's answer and
    after the answers to requests served later in the same turn; a send
    that woke no one is acked at once. On one connection, a SEND and a PULL
    of another queue (no wait) written together, so both are read in one
    turn: the held pull's answer, the other pull's, then the ack; and with
    no pull held, the ack before the other pull's answer. Every ack comes
    (none is stranded past its turn), each once."""
    broker = local_cluster.add_broker("broker-a", 0, flush="ASYNC_FLUSH",
                                      client_transport=transport)
    local_cluster.create_topic(STAGED, queues=2)
    d = RawDealer(broker.address)
    try:
        late = at_once = 0
        offset = 0
        for i in range(60):
            held = i % 2 == 0
            rid = 1000 * (i + 1)
            if held:                       # a consumer at queue 0's end, its pull held
                d.send_together(held_pull(rid + 1, 0, offset))
                time.sleep(0.02)
            d.send_together(codec.encode_request(rid + 2, pb.SEND, pb.SendRequest(
                topic=STAGED, queue_id=0, count=1, records=rec.encode_record(
                    STAGED.encode(), b"", b"", b"", b"%d" % i, 1))),
                held_pull(rid + 3, 1, 0, wait_ms=0))          # queue 1: nothing, answered now
            got = [d.answer() for _ in range(3 if held else 2)]
            assert all(status in (pb.OK, pb.NO_NEW_MESSAGE) for _r, status in got), got
            order = [r - rid for r, _status in got]
            offset += 1
            if held:
                assert sorted(order) == [1, 2, 3] and order[0] == 1, order
                late += order == [1, 3, 2]
            else:
                at_once += order == [2, 3]
        # both requests are read in one turn nearly always; never may a
        # send that woke no one wait for the turn's end
        assert at_once == 30, at_once
        assert late >= 25, f"the ack left before the turn's other answers in {30 - late} of 30"
    finally:
        d.sock.close()


def test_a_sync_ack_comes_after_the_pull_it_released_and_is_never_stranded(local_cluster):
    """Under SYNC replication a send is acked when the slave holds it; the
    turn that learns so answers the pulls its offset releases first, and
    then (held to the turn's end when a pull was answered: the producer
    woken mid-turn took the serving thread's CPU) the acks. On one
    connection, a held pull at queue 0's end and a send to it: the pull's
    answer with the message, then the ack; a send with no pull held is
    acked too. Every ack comes, each once."""
    local_cluster.add_broker("broker-a", 0, flush="ASYNC_FLUSH", replication="SYNC")
    local_cluster.add_broker("broker-a", 1, flush="ASYNC_FLUSH", replication="SYNC")
    local_cluster.create_topic(STAGED, queues=2)
    master = local_cluster.brokers[0]
    ctx = zmq.Context()
    try:
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(master.address)

        def send(rid, body):
            s.send(codec.encode_request(rid, pb.SEND, pb.SendRequest(
                topic=STAGED, queue_id=0, count=1, records=rec.encode_record(
                    STAGED.encode(), b"", b"", b"", body, 1))))

        def answer():
            assert s.poll(10_000), "no answer"
            frame = codec.decode_frame(s.recv())
            return frame.request_id, frame.status, codec.decode_response(frame)

        deadline = time.monotonic() + 30     # until the slave is in sync: the first stored
        rid, status = 0, pb.SLAVE_NOT_AVAILABLE
        while status != pb.OK:
            assert time.monotonic() < deadline, "the slave never came in sync"
            rid += 1
            send(rid, b"warm")
            got, status, _resp = answer()
            assert got == rid
        offset = 0
        while offset < rid:                  # queue 0's end (the warm-ups stored there)
            s.send(held_pull(10**6 + offset, 0, offset, wait_ms=0))
            _got, st, resp = answer()
            offset = resp.next_offset if st == pb.OK else rid
        for i in range(40):
            base = 1000 * (i + 1)
            held = i % 2 == 0
            if held:
                s.send(held_pull(base + 1, 0, offset))
                time.sleep(0.02)
            send(base + 2, b"%d" % i)
            got = [answer() for _ in range(2 if held else 1)]
            assert [g[0] - base for g in got] == ([1, 2] if held else [2]), got
            assert got[-1][1] == pb.OK, got[-1]
            if held:
                assert got[0][1] == pb.OK
                bodies = [m.body for m in decode_records(got[0][2].records, "broker-a")]
                assert bodies == [b"%d" % i], bodies
            offset += 1
        assert not s.poll(200), "an answer more than asked for"
    finally:
        ctx.destroy(linger=0)
