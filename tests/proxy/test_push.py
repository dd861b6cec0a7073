"""The official RocketMQ 5 PushConsumer through ``duomq proxy``: the
server's settings and assignments, every message handled once when the
handler succeeds, a failed one retried after the group's backoff with its
attempt counted."""

from __future__ import annotations

import threading
import time


def push_consumer(config, group, topic, handler):
    from rocketmq.v5.consumer import ConsumeResult, MessageListener, PushConsumer
    from rocketmq.v5.model import FilterExpression

    class Listener(MessageListener):
        def consume(self, message):
            return ConsumeResult.SUCCESS if handler(message) else ConsumeResult.FAILURE

    c = PushConsumer(config, group, Listener(), {topic: FilterExpression("*")},
                     consumption_thread_count=4)
    c.startup()
    return c


def test_a_push_consumer_handles_every_message_once(rmq_config, topic, rmq):
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def handle(m):
        with lock:
            seen[m.message_id] = seen.get(m.message_id, 0) + 1
        return True
    c = push_consumer(rmq_config, "push-once", topic, handle)
    try:
        p = rmq.producer(rmq_config, topic)
        try:
            ids = [p.send(rmq.message(topic, b"p%d" % i)).message_id for i in range(50)]
        finally:
            p.shutdown()
        deadline = time.monotonic() + 30
        while len(seen) < 50 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)                                   # nothing more comes
    finally:
        c.shutdown()
    assert set(seen) == set(ids) and set(seen.values()) == {1}


def test_a_failed_message_is_retried_with_its_attempt_counted(rmq_config, topic, rmq):
    attempts: list[tuple[int, float]] = []

    def handle(m):
        attempts.append((m.delivery_attempt, time.monotonic()))
        return len(attempts) >= 2                         # fails once
    c = push_consumer(rmq_config, "push-retry", topic, handle)
    try:
        p = rmq.producer(rmq_config, topic)
        try:
            p.send(rmq.message(topic, b"flaky"))
        finally:
            p.shutdown()
        deadline = time.monotonic() + 30
        while len(attempts) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(2.0)
    finally:
        c.shutdown()
    assert [a for a, _ in attempts] == [1, 2]             # once again, then acked
    assert attempts[1][1] - attempts[0][1] >= 0.9         # after the first backoff (1 s)
