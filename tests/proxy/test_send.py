"""The official RocketMQ 5 Python client sends through ``duomq proxy``:
normal, FIFO and delay messages, read back with duomq's own consumer, with
the client's message id, tag, keys and properties."""

from __future__ import annotations

import time

import pytest

from duomq.proxy.convert import MESSAGE_GROUP, UNIQ_KEY


def test_normal_messages_are_stored_with_what_the_client_gave_them(proxied, topic, rmq_config, rmq):
    cluster, _ = proxied
    p = rmq.producer(rmq_config, topic)
    try:
        receipts = []
        for i in range(20):
            m = rmq.message(topic, b"body-%d" % i, tag="TagA", keys=f"k{i}")
            m.add_property("order", str(i))
            receipts.append(p.send(m))
    finally:
        p.shutdown()
    got = rmq.read_all(cluster, topic, 20)
    assert sorted(m.body for m in got) == sorted(b"body-%d" % i for i in range(20))
    by_body = {m.body: m for m in got}
    for i, r in enumerate(receipts):
        m = by_body[b"body-%d" % i]
        assert m.properties[UNIQ_KEY] == r.message_id           # the client's own id
        assert m.tags == "TagA" and m.keys == f"k{i}" and m.properties["order"] == str(i)
    assert len({m.queue_id for m in got}) > 1                  # spread over the queues


def test_a_message_groups_messages_share_a_queue_in_order(proxied, topic, rmq_config, rmq):
    cluster, _ = proxied
    p = rmq.producer(rmq_config, topic)
    try:
        for i in range(30):
            p.send(rmq.message(topic, b"%s-%02d" % (b"ab"[i % 2:i % 2 + 1], i),
                               message_group=f"g{i % 2}"))
    finally:
        p.shutdown()
    got = rmq.read_all(cluster, topic, 30)
    for g in ("g0", "g1"):
        mine = [m for m in got if m.properties.get(MESSAGE_GROUP) == g]
        assert len(mine) == 15 and len({m.queue_id for m in mine}) == 1
        assert [m.queue_offset for m in mine] == sorted(m.queue_offset for m in mine)
        assert [int(m.body[2:]) for m in mine] == sorted(int(m.body[2:]) for m in mine)


def test_a_delay_message_comes_due_at_its_time(proxied, topic, rmq_config, rmq):
    cluster, _ = proxied
    p = rmq.producer(rmq_config, topic)
    try:
        at = int(time.time() * 1000) + 2000
        r = p.send(rmq.message(topic, b"later", delivery_timestamp=at))
        assert r.recall_handle                                  # a timer: recallable
        assert rmq.read_all(cluster, topic, 1, timeout_s=0.5) == []  # not before its time
    finally:
        p.shutdown()
    got = rmq.read_all(cluster, topic, 1, timeout_s=10)
    assert [m.body for m in got] == [b"later"] and time.time() * 1000 >= at - 5


def test_an_unknown_topic_is_refused_with_the_protocols_code(proxied, rmq_config, rmq):
    from rocketmq.v5.producer import Producer
    p = Producer(rmq_config, ("NoSuchTopic",))
    p.startup()
    try:
        with pytest.raises(Exception, match="NoSuchTopic"):
            p.send(rmq.message("NoSuchTopic", b"x"))
    finally:
        p.shutdown()


def test_a_delay_message_recalled_before_its_time_is_never_delivered(proxied, topic, rmq_config, rmq):
    from rocketmq.v5.exception import BadRequestException
    cluster, _ = proxied
    p = rmq.producer(rmq_config, topic)
    try:
        at = int(time.time() * 1000) + 1500
        r = p.send(rmq.message(topic, b"recalled", delivery_timestamp=at))
        kept = p.send(rmq.message(topic, b"kept", delivery_timestamp=at))
        p.recall_message(topic, r.recall_handle)
        with pytest.raises(BadRequestException, match="recalled before"):
            p.recall_message(topic, r.recall_handle)                   # twice: refused
        with pytest.raises(BadRequestException):
            p.recall_message(topic, "garbage")
        with pytest.raises(Exception, match="topic"):
            p.recall_message("Other", kept.recall_handle)             # another topic's
    finally:
        p.shutdown()
    time.sleep(2.5)
    assert [m.body for m in rmq.read_all(cluster, topic, 1, timeout_s=5)] == [b"kept"]
