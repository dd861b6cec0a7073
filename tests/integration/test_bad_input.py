"""Garbage gets an error answer and the broker goes on serving."""

import pytest
import zmq

from duomq.client import Message, Producer
from duomq.common.errors import (
    InvalidNameError,
    MessageTooLargeError,
    TopicNotExistError,
)
from duomq.format import record as rec
from duomq.proto import codec, pb

pytestmark = pytest.mark.integration


@pytest.fixture
def broker(local_cluster, small_store):
    b = local_cluster.add_broker("broker-a", **{**small_store, "max_message_bytes": 4096})
    local_cluster.create_topic("Safe", queues=2)
    return b


@pytest.fixture
def raw(broker):
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 5000)
    sock.connect(broker.address)
    yield sock
    sock.close(0)
    ctx.term()


def answer(sock, *parts):
    sock.send_multipart(list(parts))
    return codec.decode_frame(sock.recv())


def send_req(topic, records, count, queue_id=0):
    return codec.encode_request(5, pb.SEND, pb.SendRequest(topic=topic, queue_id=queue_id,
                                                           count=count, records=records))


def status(raw):
    f = answer(raw, codec.encode_request(99, pb.BROKER_STATUS, pb.BrokerStatusRequest()))
    return codec.decode_response(f)


def good_record(body=b"ok", topic=b"Safe"):
    return rec.encode_record(topic, b"", b"", b"", body, 1)


def query_req(**fields):
    return codec.encode_request(6, pb.QUERY_BY_KEY, pb.QueryByKeyRequest(**fields))


@pytest.mark.parametrize("parts,expected", [
    ([b"\xff\x00garbage"], pb.BAD_REQUEST),
    ([b"two", b"frames"], pb.BAD_REQUEST),
    ([pb.Frame(version=7, request_id=1, type=pb.SEND).SerializeToString()], pb.UNSUPPORTED_VERSION),
    ([pb.Frame(version=1, request_id=1, type=42).SerializeToString()], pb.UNKNOWN_REQUEST_TYPE),
    ([pb.Frame(version=1, request_id=1, type=pb.SEND, payload=b"\x0a\x99").SerializeToString()],
     pb.BAD_REQUEST),
    ([send_req("Safe", b"\x00" * 100, 1)], pb.BAD_REQUEST),
    ([send_req("Safe", good_record(), 2)], pb.BAD_REQUEST),
    ([send_req("Safe", good_record(topic=b"Other"), 1)], pb.BAD_REQUEST),
    ([send_req("Safe", good_record(b"x" * 5000), 1)], pb.MESSAGE_TOO_LARGE),
    ([send_req("Nope", good_record(topic=b"Nope"), 1)], pb.TOPIC_NOT_EXIST),
    ([send_req("bad name!", good_record(topic=b"bad name!"), 1)], pb.INVALID_NAME),
    ([send_req("Safe", good_record(), 1, queue_id=9)], pb.BAD_REQUEST),
    ([send_req("SCHEDULE_TOPIC_XXXX", good_record(topic=b"SCHEDULE_TOPIC_XXXX"), 1)],
     pb.INVALID_NAME),
    ([query_req(topic="Safe", key="")], pb.BAD_REQUEST),
    ([query_req(topic="Safe", key="two keys")], pb.BAD_REQUEST),
    ([query_req(topic="Safe", key=" k")], pb.BAD_REQUEST),
    ([query_req(topic="Safe", key="k", max_num=-1)], pb.BAD_REQUEST),
    ([query_req(topic="Safe", key="k", begin_timestamp_ms=-5)], pb.BAD_REQUEST),
    ([query_req(topic="bad name!", key="k")], pb.INVALID_NAME),
])
def test_garbage_gets_an_error_and_nothing_is_stored(raw, parts, expected):
    before = status(raw)
    f = answer(raw, *parts)
    assert f.status == expected and f.error
    after = status(raw)
    assert after.messages_stored == before.messages_stored
    assert after.bad_requests == before.bad_requests + 1
    # and it still serves a good request
    ok = answer(raw, send_req("Safe", good_record(), 1))
    assert ok.status == pb.OK


def test_producer_surfaces_broker_errors(broker, local_cluster):
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p:
        with pytest.raises(MessageTooLargeError):   # broker limit below the client's
            p.send(Message("Safe", b"x" * 6000))
        with pytest.raises(TopicNotExistError):
            p.send(Message("Nope", b"x"))
        with pytest.raises(InvalidNameError):
            p.send(Message("%DLQ%x y", b"x"))
        assert p.send(Message("Safe", b"fine")).ok


def test_internal_topics_cannot_be_created_or_sent_to(broker, local_cluster):
    from duomq.common.errors import InvalidNameError as Invalid
    with pytest.raises(Invalid, match="reserved for the broker's own use"):
        local_cluster.create_topic("SCHEDULE_TOPIC_XXXX", queues=18)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p:
        with pytest.raises(Invalid, match="reserved for the broker's own use"):
            p.send(Message("SCHEDULE_TOPIC_XXXX", b"x", properties={"REAL_TOPIC": "/abs/path",
                                                                    "REAL_QID": "0"}))
