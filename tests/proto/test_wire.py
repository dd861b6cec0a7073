"""proto/_wire.c against protobuf, the reference: what parse_send accepts,
protobuf reads to the same fields (and it accepts only the common case);
frame and send_response write protobuf's bytes. Random and mutated inputs,
every prefix of a frame, and the dispatcher both ways."""

import os
import random

import pytest

from duomq.proto import PROTOCOL_VERSION, codec, pb, wire
from duomq.proto.wire import PullAnswer, SendAnswer, SendAsk

W = wire.WIRE


@pytest.fixture(autouse=True)
def c_wire():
    """A build without proto/_wire.c fails these tests, unless DUOMQ_NATIVE=0
    says to go without (then they are skipped)."""
    if W is None:
        if os.environ.get("DUOMQ_NATIVE") == "0":
            pytest.skip("DUOMQ_NATIVE=0: no C codec")
        pytest.fail("duomq.proto._wire is not built: `pip install -e .` needs a C compiler")

TEXTS = ["", "T", "TopicA", "主题-ü", "x" * 300, "DUOMQ_SYS_SCHEDULE"]
INT32 = [0, 1, 7, 127, 128, 2**31 - 1, -1, -2**31, 300]


def random_request(rng: random.Random) -> pb.SendRequest:
    req = pb.SendRequest()
    if rng.random() < 0.9:
        req.topic = rng.choice(TEXTS)
    if rng.random() < 0.8:
        req.queue_id = rng.choice(INT32)
    if rng.random() < 0.8:
        req.count = rng.choice(INT32)
    if rng.random() < 0.9:
        req.records = rng.randbytes(rng.choice([0, 1, 100, 237, 5000]))
    if rng.random() < 0.5:
        req.producer_group = rng.choice(TEXTS)
    if rng.random() < 0.3:
        req.scheduled = True
    return req


def random_frame(rng: random.Random) -> bytes:
    return pb.Frame(version=PROTOCOL_VERSION, request_id=rng.choice([0, 1, 2**63, 2**64 - 1,
                                                                    rng.getrandbits(40)]),
                    type=pb.SEND, payload=random_request(rng).SerializeToString()
                    ).SerializeToString()


def reference(data: bytes):
    """What protobuf reads: (request_id, type, version, SendRequest) or None."""
    try:
        frame = codec.decode_frame(data)
        if frame.type != pb.SEND:
            return ("other", frame.type)
        return frame.request_id, frame.type, frame.version, codec.decode_request(frame)
    except codec.FrameError:
        return None


def fields(msg) -> tuple:
    return (msg.topic, msg.queue_id, msg.count, bytes(msg.records), msg.producer_group,
            bool(msg.scheduled))


def agrees(data: bytes) -> bool:
    """The property: what C accepts, protobuf reads to the same fields."""
    got = W.parse_send(data, PROTOCOL_VERSION, pb.SEND)
    if got is None:
        return False
    ref = reference(data)
    assert ref is not None and ref[0] != "other", (data, got)
    rid, type_, version, msg = ref
    assert (got[0], type_, version) == (rid, pb.SEND, PROTOCOL_VERSION)
    assert fields(got[1]) == fields(msg)
    return True


def test_common_sends_are_read_as_protobuf_reads_them():
    rng = random.Random(41)
    for _ in range(3000):
        assert agrees(random_frame(rng))


def test_the_last_occurrence_of_a_field_wins_as_in_protobuf():
    a = pb.SendRequest(topic="A", queue_id=1, count=2, records=b"one").SerializeToString()
    b = pb.SendRequest(topic="B", queue_id=3, records=b"two", scheduled=True).SerializeToString()
    frame = pb.Frame(version=PROTOCOL_VERSION, request_id=9, type=pb.SEND,
                     payload=a + b).SerializeToString()
    assert agrees(frame)
    assert fields(W.parse_send(frame, PROTOCOL_VERSION, pb.SEND)[1]) == \
        ("B", 3, 2, b"two", "", True)
    twice = pb.Frame(version=PROTOCOL_VERSION, request_id=5).SerializeToString() + frame
    assert agrees(twice) and W.parse_send(twice, PROTOCOL_VERSION, pb.SEND)[0] == 9


def cut_and_flipped(rng: random.Random, data: bytes) -> list[bytes]:
    """Every prefix of ``data`` (50 random ones past 400 bytes) and 30 copies
    with 1 to 3 bytes changed."""
    cuts = [data[:n] for n in range(len(data))] if len(data) < 400 else \
        [data[:rng.randrange(len(data))] for _ in range(50)]
    flips = []
    for _ in range(30):
        m = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            m[rng.randrange(len(m))] = rng.randrange(256)
        flips.append(bytes(m))
    return cuts + flips


def test_every_prefix_and_every_mutation_is_read_as_protobuf_reads_it_or_left_to_it():
    rng = random.Random(44)
    accepted = left = 0
    for _ in range(300):
        data = random_frame(rng)
        inserted = [data[:i] + rng.randbytes(rng.randint(1, 4)) + data[i:]
                    for i in (rng.randrange(len(data)) for _ in range(10))]
        for candidate in cut_and_flipped(rng, data) + inserted:
            if agrees(candidate):
                accepted += 1
            else:
                left += 1
    assert accepted > 1000 and left > 1000       # both sides were exercised


@pytest.mark.parametrize("data,why", [
    (pb.Frame(version=PROTOCOL_VERSION + 1, request_id=1, type=pb.SEND,
              payload=pb.SendRequest(topic="T").SerializeToString()).SerializeToString(),
     "another protocol version"),
    (pb.Frame(version=PROTOCOL_VERSION, request_id=1, type=pb.PULL,
              payload=pb.PullRequest(topic="T").SerializeToString()).SerializeToString(),
     "another request type"),
    (pb.Frame(version=PROTOCOL_VERSION, request_id=1, type=pb.SEND, status=pb.BAD_REQUEST,
              payload=b"").SerializeToString(), "a status"),
    (pb.Frame(version=PROTOCOL_VERSION, request_id=1, type=pb.SEND, error="x",
              payload=b"").SerializeToString(), "an error text"),
    (pb.Frame(version=PROTOCOL_VERSION, request_id=1, type=pb.SEND).SerializeToString()
     + b"\x78\x01", "an unknown frame field"),
    (pb.Frame(version=PROTOCOL_VERSION, request_id=1, type=pb.SEND,
              payload=b"\x50\x01").SerializeToString(), "an unknown request field"),
    (pb.Frame(version=PROTOCOL_VERSION, request_id=1, type=pb.SEND,
              payload=b"\x10\x01\x00\x00\x00\x00").SerializeToString()[:-4], "truncated"),
    (pb.Frame(version=PROTOCOL_VERSION, request_id=1, type=pb.SEND,
              payload=b"\x0a\x02\xff\xfe").SerializeToString(), "a topic that is not UTF-8"),
    (pb.Frame(version=PROTOCOL_VERSION, request_id=1, type=pb.SEND,
              payload=b"\x0d\x01\x02\x03\x04").SerializeToString(), "the topic as fixed32"),
    (b"\x08" + b"\xff" * 11, "a varint of 12 bytes"),
    (b"", "nothing (version 0)"),
])
def test_anything_but_the_common_case_is_left_to_protobuf(data, why):
    assert W.parse_send(data, PROTOCOL_VERSION, pb.SEND) is None, why


def test_a_topic_that_is_not_utf8_is_refused_by_protobuf_in_its_words():
    data = pb.Frame(version=PROTOCOL_VERSION, request_id=1, type=pb.SEND,
                    payload=b"\x0a\x02\xff\xfe").SerializeToString()
    assert codec.parse_send(data) is None
    with pytest.raises(codec.FrameError, match="malformed SendRequest"):
        codec.decode_request(codec.decode_frame(data))


def test_frames_are_written_as_protobuf_writes_them():
    rng = random.Random(7)
    for _ in range(3000):
        rid = rng.choice([0, 1, 2**64 - 1, rng.getrandbits(50)])
        type_ = rng.choice([0, pb.SEND, pb.PULL, pb.SHARE_ACK])
        status = rng.choice([pb.OK, pb.SLAVE_NOT_AVAILABLE, pb.BAD_REQUEST, pb.RECEIPT_EXPIRED])
        error = rng.choice(["", None, "stored, but", "ü" * 40, "x" * 200])   # None: unset
        payload = rng.choice([None, b"", rng.randbytes(rng.choice([1, 127, 128, 20000]))])
        frame = pb.Frame(version=PROTOCOL_VERSION, request_id=rid, type=type_, status=status,
                         error=error)
        if payload is not None:
            frame.payload = payload
        assert W.frame(PROTOCOL_VERSION, rid, type_, status, error, payload) == \
            frame.SerializeToString()


def test_send_answers_are_written_as_protobuf_writes_them_with_and_without_c(monkeypatch):
    rng = random.Random(8)
    big = [0, 1, 127, 128, 2**31, 2**63 - 1, -1, -2**63]
    for _ in range(3000):
        a = SendAnswer(rng.choice(TEXTS), rng.choice(big),
                       [rng.choice(big) for _ in range(rng.choice([0, 1, 3, 300]))],
                       rng.choice(big), rng.random() < 0.3)
        a.in_sync_replicas = rng.choice(INT32)
        a.degraded = rng.random() < 0.3
        want = a.message().SerializeToString()
        assert a.SerializeToString() == want
        monkeypatch.setattr(wire, "WIRE", None)
        assert a.SerializeToString() == want
        monkeypatch.setattr(wire, "WIRE", W)


def test_encode_response_gives_the_same_bytes_with_and_without_c(monkeypatch):
    a = SendAnswer("broker-a", 5, [100, 337], 3)
    for status, error, message in [(pb.OK, "", a), (pb.SLAVE_NOT_AVAILABLE, "fewer", a),
                                   (pb.BAD_REQUEST, "no", None),
                                   (pb.OK, "", pb.PullResponse(count=1, records=b"r"))]:
        fast = codec.encode_response(12, pb.SEND, status, error, message)
        monkeypatch.setattr(wire, "WIRE", None)
        assert codec.encode_response(12, pb.SEND, status, error, message) == fast
        monkeypatch.setattr(wire, "WIRE", W)


def test_bad_arguments_raise_instead_of_writing_garbage():
    with pytest.raises(TypeError):
        W.frame(1, 2, 3, 4, b"not str", None)
    with pytest.raises(TypeError):
        W.send_response(0, [1], None, 0, False, 0, False)
    with pytest.raises(TypeError):
        W.send_response(0, ["x"], "g", 0, False, 0, False)
    with pytest.raises(OverflowError):
        W.send_response(2**64, [], "g", 0, False, 0, False)
    with pytest.raises(TypeError):
        W.parse_send("text", PROTOCOL_VERSION, pb.SEND)


def test_encode_request_gives_the_same_bytes_with_and_without_c(monkeypatch):
    rng = random.Random(9)
    messages = [pb.HaTransfer(), pb.HaTransfer(epoch=3, offset=2**40, confirmed_offset=7,
                                                ack_now=True),
                pb.HaReport(broker_id=1, max_offset=5, address="127.0.0.1:1"),
                pb.PullRequest(topic="T", queue_offset=9), pb.HeartbeatRequest()]
    for _ in range(300):
        messages.append(random_request(rng))
    for i, message in enumerate(messages):
        rid = [0, 1, 2**64 - 1, i][i % 4]
        type_ = [pb.HA_TRANSFER, pb.HA_REPORT, pb.SEND, pb.PULL][i % 4]
        fast = codec.encode_request(rid, type_, message)
        monkeypatch.setattr(wire, "WIRE", None)
        assert codec.encode_request(rid, type_, message) == fast
        monkeypatch.setattr(wire, "WIRE", W)


def varint(v: int) -> bytes:
    out = b""
    while v >= 0x80:
        out += bytes([v & 0x7F | 0x80])
        v >>= 7
    return out + bytes([v])


@pytest.mark.parametrize("version,type_,queue_id", [
    (1 + 2**32, pb.SEND, 1), (1, pb.SEND + 2**32, 1), (1, pb.SEND + 2**40, 1),
    (1 + 2**63, pb.SEND, 1), (1, 2**64 - 1, 1), (1, pb.SEND, 2**64 - 1), (1, pb.SEND, 2**33 + 5),
    (2**32, pb.SEND, 1),
])
def test_varints_wider_than_their_field_are_cut_as_protobuf_cuts_them(version, type_, queue_id):
    """A uint32 version and int32 type and queue id sent as 64-bit varints:
    both readers keep the low 32 bits, so C accepts exactly what protobuf
    reads as a SEND of this version, with the same queue."""
    payload = b"\x0a\x01T\x10" + varint(queue_id) + b"\x18\x01\x22\x01r"
    data = (b"\x08" + varint(version) + b"\x10\x05\x18" + varint(type_) + b"\x32"
            + varint(len(payload)) + payload)
    ref = reference(data)
    accepted = agrees(data)
    assert accepted == (ref is not None and ref[0] != "other" and ref[2] == PROTOCOL_VERSION)


# ------------------------------------------------------------ a producer's answer, read in C
BIG = [0, 1, 127, 128, 2**31, 2**63 - 1, -1, -2**63]


def random_answer(rng: random.Random, rid: int) -> bytes:
    resp = pb.SendResponse()
    if rng.random() < 0.8:
        resp.queue_offset = rng.choice(BIG)
    resp.physical_offsets.extend(rng.choice(BIG) for _ in range(rng.choice([0, 1, 3, 300])))
    if rng.random() < 0.8:
        resp.broker_group = rng.choice(TEXTS)
    if rng.random() < 0.3:
        resp.in_sync_replicas = rng.choice(INT32)
    resp.degraded = rng.random() < 0.3
    if rng.random() < 0.7:
        resp.epoch = rng.choice(BIG)
    resp.duplicate = rng.random() < 0.2
    frame = pb.Frame(version=PROTOCOL_VERSION, request_id=rid, type=pb.SEND,
                     status=rng.choice([pb.OK, pb.OK, pb.SLAVE_NOT_AVAILABLE, pb.FLUSH_DISK_TIMEOUT,
                                        pb.NOT_MASTER]),
                     error=rng.choice(["", "", "stored, but fewer", "ü" * 30]))
    if rng.random() < 0.9:
        frame.payload = resp.SerializeToString()
    return frame.SerializeToString()


def answer_fields(msg) -> tuple:
    return (msg.queue_offset, list(msg.physical_offsets), msg.broker_group,
            msg.in_sync_replicas, bool(msg.degraded), msg.epoch, bool(msg.duplicate))


def answer_agrees(data: bytes, rid: int) -> bool:
    """What C reads of an answer, protobuf reads to the same status, text
    and fields (and to the same request id, type and version)."""
    got = codec.read_send_answer(data, rid)
    if got is None:
        return False
    frame = codec.decode_frame(data)          # (C refused every other version)
    assert (frame.request_id, frame.type) == (rid, pb.SEND)
    assert (got[0], got[1]) == (frame.status, frame.error)
    assert answer_fields(got[2]) == answer_fields(codec.decode_response(frame))
    return True


def test_send_answers_are_read_as_protobuf_reads_them():
    rng = random.Random(45)
    for _ in range(3000):
        rid = rng.choice([0, 1, 2**64 - 1, rng.getrandbits(40)])
        assert answer_agrees(random_answer(rng, rid), rid)


def test_offsets_packed_or_not_and_repeated_fields_are_read_as_protobuf_reads_them():
    unpacked = b"".join(b"\x10" + bytes([v]) for v in (5, 6, 7))           # field 2, varints
    two = pb.SendResponse(queue_offset=1, broker_group="A").SerializeToString() + unpacked + \
        pb.SendResponse(queue_offset=9, physical_offsets=[8]).SerializeToString()
    data = pb.Frame(version=PROTOCOL_VERSION, request_id=3, type=pb.SEND,
                    payload=two).SerializeToString()
    assert answer_agrees(data, 3)
    assert answer_fields(codec.read_send_answer(data, 3)[2]) == (9, [5, 6, 7, 8], "A", 0,
                                                                 False, 0, False)


def test_every_prefix_and_every_mutation_of_an_answer_is_read_as_protobuf_reads_it_or_left():
    rng = random.Random(46)
    accepted = left = 0
    for _ in range(300):
        data = random_answer(rng, 77)
        for candidate in cut_and_flipped(rng, data):
            try:
                ok = answer_agrees(candidate, 77)
            except codec.FrameError:
                ok = False
                assert codec.read_send_answer(candidate, 77) is None
            if ok:
                accepted += 1
            else:
                left += 1
    assert accepted > 500 and left > 1000       # both sides were exercised


@pytest.mark.parametrize("data,why", [
    (pb.Frame(version=PROTOCOL_VERSION, request_id=2, type=pb.SEND).SerializeToString(),
     "another request's answer"),
    (pb.Frame(version=PROTOCOL_VERSION + 1, request_id=1, type=pb.SEND).SerializeToString(),
     "another protocol version"),
    (pb.Frame(version=PROTOCOL_VERSION, request_id=1, type=pb.PULL).SerializeToString(),
     "another request type"),
    (pb.Frame(version=PROTOCOL_VERSION, request_id=1, type=pb.SEND).SerializeToString()
     + b"\x78\x01", "an unknown frame field"),
    (pb.Frame(version=PROTOCOL_VERSION, request_id=1, type=pb.SEND,
              payload=b"\x50\x01").SerializeToString(), "an unknown answer field"),
    (pb.Frame(version=PROTOCOL_VERSION, request_id=1, type=pb.SEND,
              payload=b"\x1a\x02\xff\xfe").SerializeToString(), "a group that is not UTF-8"),
    (pb.Frame(version=PROTOCOL_VERSION, request_id=1, type=pb.SEND).SerializeToString()
     + b"\x2a\x02\xff\xfe", "an error text that is not UTF-8"),
    (pb.Frame(version=PROTOCOL_VERSION, request_id=1, type=pb.SEND,
              payload=b"\x0d\x01\x02\x03\x04").SerializeToString(), "a fixed32 offset"),
])
def test_any_answer_but_the_common_case_is_left_to_protobuf(data, why):
    assert codec.read_send_answer(data, 1) is None, why


def test_without_c_answers_are_left_to_protobuf(monkeypatch):
    data = random_answer(random.Random(1), 5)
    assert codec.read_send_answer(data, 5) is not None
    monkeypatch.setattr(wire, "WIRE", None)
    assert codec.read_send_answer(data, 5) is None


def test_matched_reads_a_send_answer_in_c_and_the_rest_with_protobuf(monkeypatch):
    data = pb.Frame(version=PROTOCOL_VERSION, request_id=4, type=pb.SEND, status=pb.OK,
                    payload=pb.SendResponse(queue_offset=3, physical_offsets=[10, 20],
                                            broker_group="g", epoch=2).SerializeToString()
                    ).SerializeToString()
    fast = codec.matched(data, 4, pb.SEND)
    assert isinstance(fast[2], SendAnswer)
    assert codec.matched(data, 5, pb.SEND) is None            # another request's answer
    assert codec.matched(b"\xff", 4, pb.SEND) is None         # not a frame
    monkeypatch.setattr(wire, "WIRE", None)
    slow = codec.matched(data, 4, pb.SEND)
    assert isinstance(slow[2], pb.SendResponse)
    assert (fast[0], fast[1], answer_fields(fast[2])) == (slow[0], slow[1],
                                                          answer_fields(slow[2]))
    pull = pb.Frame(version=PROTOCOL_VERSION, request_id=4, type=pb.PULL, status=pb.OK,
                    payload=pb.PullResponse(count=1).SerializeToString()).SerializeToString()
    assert codec.matched(pull, 4, pb.PULL)[2].count == 1


# ------------------------------------------------------------ a PULL's answer, written and read in C
def random_pull_answer(rng: random.Random) -> PullAnswer:
    a = PullAnswer(rng.choice(INT32), rng.randbytes(rng.choice([0, 1, 100, 5000])),
                   rng.choice(BIG), rng.choice(BIG), rng.choice(BIG))
    if rng.random() < 0.4:
        a.suggest_broker_id = rng.choice(INT32)
    if rng.random() < 0.3:
        a.advice_ttl_ms = rng.choice(INT32)
    if rng.random() < 0.4:
        a.replica_lag_ms = rng.choice(BIG)
    return a


def pull_fields(msg) -> tuple:
    return (msg.count, bytes(msg.records), msg.next_offset, msg.min_offset, msg.max_offset,
            msg.suggest_broker_id if msg.HasField("suggest_broker_id") else None,
            msg.advice_ttl_ms, msg.replica_lag_ms if msg.HasField("replica_lag_ms") else None)


def test_pull_answers_are_written_as_protobuf_writes_them_with_and_without_c(monkeypatch):
    rng = random.Random(9)
    for _ in range(3000):
        a = random_pull_answer(rng)
        want = a.message().SerializeToString()
        assert a.SerializeToString() == want
        assert pull_fields(a) == pull_fields(a.message())
        monkeypatch.setattr(wire, "WIRE", None)
        assert a.SerializeToString() == want
        monkeypatch.setattr(wire, "WIRE", W)


def pull_frame(rng: random.Random, rid: int) -> bytes:
    frame = pb.Frame(version=PROTOCOL_VERSION, request_id=rid, type=pb.PULL,
                     status=rng.choice([pb.OK, pb.NO_NEW_MESSAGE, pb.OFFSET_ILLEGAL,
                                        pb.REPLICA_LAGGING]),
                     error=rng.choice(["", "", "offset 9 is outside [0, 3]", "ü" * 30]))
    if rng.random() < 0.9:
        frame.payload = random_pull_answer(rng).message().SerializeToString()
    return frame.SerializeToString()


def pull_agrees(data: bytes) -> bool:
    got = codec.read_pull_answer(data)
    if got is None:
        return False
    frame = codec.decode_frame(data)
    assert (frame.request_id, frame.type, frame.status, frame.error) == \
        (got[0], pb.PULL, got[1], got[2])
    assert pull_fields(got[3]) == pull_fields(codec.decode_response(frame))
    return True


def test_pull_answers_are_read_as_protobuf_reads_them_every_prefix_and_mutation_too():
    rng = random.Random(47)
    for _ in range(2000):
        assert pull_agrees(pull_frame(rng, rng.choice([1, 2**64 - 1, rng.getrandbits(40)])))
    accepted = left = 0
    for _ in range(300):
        data = pull_frame(rng, 77)
        for candidate in cut_and_flipped(rng, data):
            try:
                ok = pull_agrees(candidate)
            except codec.FrameError:
                ok = False
                assert codec.read_pull_answer(candidate) is None
            accepted, left = (accepted + 1, left) if ok else (accepted, left + 1)
    assert accepted > 500 and left > 1000


def test_an_optional_field_set_to_zero_is_present_as_in_protobuf():
    a = PullAnswer(1, b"r", 2, 0, 3)
    a.suggest_broker_id, a.replica_lag_ms = 0, 0
    data = pb.Frame(version=PROTOCOL_VERSION, request_id=3, type=pb.PULL,
                    payload=a.SerializeToString()).SerializeToString()
    got = codec.read_pull_answer(data)[3]
    assert got.HasField("suggest_broker_id") and got.HasField("replica_lag_ms")
    assert pull_agrees(data)
    assert not PullAnswer().HasField("replica_lag_ms")
    with pytest.raises(ValueError):
        PullAnswer().HasField("count")


def test_matched_reads_a_pull_answer_in_c_for_its_own_request_only():
    data = pb.Frame(version=PROTOCOL_VERSION, request_id=6, type=pb.PULL, status=pb.OK,
                    payload=pb.PullResponse(count=2, records=b"ab").SerializeToString()
                    ).SerializeToString()
    got = codec.matched(data, 6, pb.PULL)
    assert isinstance(got[2], PullAnswer) and got[2].records == b"ab"
    assert codec.matched(data, 7, pb.PULL) is None


def test_send_requests_are_written_as_protobuf_writes_them_with_and_without_c(monkeypatch):
    rng = random.Random(10)
    for _ in range(3000):
        want = random_request(rng)
        ask = SendAsk(want.topic, want.queue_id, want.count, want.records, want.producer_group,
                      want.scheduled)
        data = want.SerializeToString()
        assert ask.SerializeToString() == data
        monkeypatch.setattr(wire, "WIRE", None)
        assert ask.SerializeToString() == data
        monkeypatch.setattr(wire, "WIRE", W)
    frame = codec.encode_request(3, pb.SEND, SendAsk("T", 1, 2, b"rr", "g"))
    assert fields(W.parse_send(frame, PROTOCOL_VERSION, pb.SEND)[1]) == ("T", 1, 2, b"rr", "g",
                                                                         False)
