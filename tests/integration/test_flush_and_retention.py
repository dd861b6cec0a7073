"""SYNC_FLUSH answers FLUSH_DISK_TIMEOUT when the disk is slow; retention
deletes old segments only once consumer groups are past them."""

import time

import pytest

from duomq.client import Message, Producer, PullConsumer, PullStatus, SendStatus
from duomq.common.message import MessageQueue

pytestmark = pytest.mark.integration


def test_slow_fsync_answers_flush_disk_timeout_and_keeps_the_message(local_cluster, small_store):
    local_cluster.add_broker("broker-a", flush="SYNC_FLUSH", sync_flush_timeout_ms=300,
                             env={"DUOMQ_FAULT_FLUSH_DELAY_MS": "1000"}, **small_store)
    local_cluster.create_topic("Slow", queues=1)
    mq = MessageQueue("Slow", "broker-a", 0)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster,
                  send_timeout_ms=3000) as p, \
            PullConsumer("g", zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as c:
        t0 = time.monotonic()
        r = p.send(Message("Slow", b"stored, not yet durable"))
        waited = time.monotonic() - t0
        assert r.status is SendStatus.FLUSH_DISK_TIMEOUT and not r.ok
        assert r.msg_id and r.queue_offset == 0          # it was stored
        assert 0.25 < waited < 1.0                         # answered at the flush timeout
        # visible to consumers once the (slow) flush completes
        got = c.pull(mq, 0, max_wait_ms=5000)
        assert got.status is PullStatus.FOUND and got.messages[0].msg_id == r.msg_id


def test_retention_waits_for_consumer_groups(local_cluster):
    local_cluster.add_broker("broker-a", segment_size_bytes=64 << 10, max_message_bytes=8 << 10,
                             max_pull_bytes=64 << 10, cq_entries_per_segment=256,
                             file_reserved_hours=0.0001, retention_check_interval_ms=100)
    local_cluster.create_topic("Aging", queues=1)
    mq = MessageQueue("Aging", "broker-a", 0)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p, \
            PullConsumer("slow-reader", zookeeper=local_cluster.zookeeper,
                         cluster=local_cluster.cluster) as c:
        c.commit({mq: 0})                                  # a group that has read nothing
        for _ in range(10):
            p.send_batch([Message("Aging", b"x" * 300)] * 100)
        time.sleep(1.5)                                    # segments are old now; retention ran
        assert c.min_offset(mq) == 0, "deleted data a consumer group still needs"
        c.commit({mq: 700})
        deadline = time.monotonic() + 10
        while c.min_offset(mq) == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        low = c.min_offset(mq)
        assert 0 < low <= 700
        assert c.pull(mq, 0).status is PullStatus.OFFSET_ILLEGAL
        r = c.pull(mq, low, 50)
        assert r.status is PullStatus.FOUND and r.messages[0].queue_offset == low
        assert c.max_offset(mq) == 1000
