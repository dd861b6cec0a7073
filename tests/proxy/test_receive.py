"""The official RocketMQ 5 SimpleConsumer receives through ``duomq proxy``
(duomq's share consumption behind it): what a producer sent, with its id,
tag, keys and properties; acks, a message not acked delivered again with
its attempt counted, invisibility changed, tag filters, bad receipts."""

from __future__ import annotations

import time

import pytest


def simple_consumer(config, group, topic, expression="*", wait_s=1):
    from rocketmq.v5.consumer import SimpleConsumer
    from rocketmq.v5.model import FilterExpression
    c = SimpleConsumer(config, group, {topic: FilterExpression(expression)}, wait_s)
    c.startup()
    return c


def receive_all(c, n, invisible_s=20, timeout_s=15.0):
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        got.extend(c.receive(16, invisible_s))
    return got


def send(rmq, config, topic, n, **kw):
    p = rmq.producer(config, topic)
    try:
        return [p.send(rmq.message(topic, b"m%02d" % i, **kw)).message_id for i in range(n)]
    finally:
        p.shutdown()


def test_what_was_sent_is_received_once_and_acked(rmq_config, topic, rmq):
    ids = send(rmq, rmq_config, topic, 20, tag="TagA", keys="k")
    c = simple_consumer(rmq_config, "g-ack", topic)
    try:
        got = receive_all(c, 20)
        assert sorted(m.message_id for m in got) == sorted(ids)          # the producer's ids
        assert sorted(m.body for m in got) == [b"m%02d" % i for i in range(20)]
        m = got[0]
        assert m.tag == "TagA" and m.keys == {"k"} and m.delivery_attempt == 1
        assert not m.corrupted and m.receipt_handle
        for m in got:
            c.ack(m)
        assert c.receive(16, 20) == []                                   # nothing comes back
    finally:
        c.shutdown()


def test_a_message_not_acked_comes_back_with_its_attempt_counted(rmq_config, topic, rmq):
    send(rmq, rmq_config, topic, 1)
    c = simple_consumer(rmq_config, "g-again", topic)
    try:
        first = receive_all(c, 1, invisible_s=1)
        assert len(first) == 1 and first[0].delivery_attempt == 1
        time.sleep(1.5)
        again = receive_all(c, 1, invisible_s=20)
        assert [m.message_id for m in again] == [first[0].message_id]
        assert again[0].delivery_attempt == 2
        from rocketmq.v5.exception import BadRequestException
        with pytest.raises(BadRequestException):
            c.ack(first[0])                                  # the first delivery's: expired
        c.ack(again[0])
    finally:
        c.shutdown()


def test_invisibility_changed_keeps_a_message_then_lets_it_go(rmq_config, topic, rmq):
    send(rmq, rmq_config, topic, 1)
    c = simple_consumer(rmq_config, "g-renew", topic)
    try:
        [m] = receive_all(c, 1, invisible_s=1)
        c.change_invisible_duration(m, 3)                    # kept 3 s from now
        time.sleep(1.5)
        assert c.receive(16, 20) == []                      # still this consumer's
        time.sleep(2.5)
        assert [x.message_id for x in receive_all(c, 1)] == [m.message_id]
    finally:
        c.shutdown()


def test_a_tag_filter_gets_only_its_tags(rmq_config, topic, rmq):
    send(rmq, rmq_config, topic, 5, tag="TagA")
    send(rmq, rmq_config, topic, 5, tag="TagB")
    c = simple_consumer(rmq_config, "g-tags", topic, "TagB")
    try:
        got = receive_all(c, 5)
        time.sleep(0.5)
        got += c.receive(16, 20)
        assert len(got) == 5 and {m.tag for m in got} == {"TagB"}
    finally:
        c.shutdown()
