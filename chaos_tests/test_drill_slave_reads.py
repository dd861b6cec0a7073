"""Drills 5 and 6: a cold backlog is redirected to the slave and comes back
once caught up; with the master dead and no promotion possible, consumers
drain the slave to the end. And pinned reads."""

import os
import threading
import time

import pytest

from duomq.client import Message, Producer, PullConsumer, PullStatus, PushConsumer
from duomq.client.remoting import RemotingClient
from duomq.common.message import MessageQueue
from duomq.proto import pb
from duomq.testing.drill_reports import keep
from duomq.testing.harness import drop_page_cache, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BASE = dict(zk_session_timeout_ms=4000, segment_size_bytes=8 << 20, max_message_bytes=64 << 10,
            max_pull_bytes=1 << 20)




def max_offset(broker):
    r = RemotingClient("probe")
    try:
        return r.call(broker.address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 5)[2] \
            .max_physical_offset
    finally:
        r.close()




def cold_backlog(local_cluster):
    """A master and a read replica (it keeps the roles put across the
    master's restart) with topic Backlog's one queue holding 120 x 256
    records of 1 KB: a ~21 MB backlog nothing on the master has mapped or
    cached, then a fresh, hot ~10 MB tail; both brokers hold all of it.
    Record k's body starts with k (six digits)."""
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    master = local_cluster.add_broker("broker-a", 0, **BASE)
    slave = local_cluster.add_broker("broker-a", 1, promotable="false", **BASE)
    local_cluster.create_topic("Backlog", queues=1)
    body = b"x" * 1000

    def produce(batches, start):
        with Producer(zookeeper=zk, cluster=cl) as p:
            for i in range(start, start + batches):
                p.send_batch([Message("Backlog", b"%06d" % (i * 256 + k) + body)
                              for k in range(256)])

    produce(80, 0)                                           # the backlog ...
    wait_for(lambda: max_offset(slave) == max_offset(master), what="replication")
    master.restart()                                         # ... that nothing has mapped
    drop_page_cache(os.path.join(master.data_dir, "store", "commitlog"))  # ... nor cached
    produce(40, 80)                                          # the hot tail
    wait_for(lambda: max_offset(slave) == max_offset(master), what="replication")
    return zk, cl


def test_cold_backlog_goes_to_the_slave_and_comes_back(local_cluster):
    zk, cl = cold_backlog(local_cluster)
    mq = MessageQueue("Backlog", "broker-a", 0)
    sources = []
    with PullConsumer("catch-up", zookeeper=zk, cluster=cl) as c:
        off, seen = 0, 0
        while (r := c.pull(mq, off, 256)).status is PullStatus.FOUND:
            assert int(r.messages[0].body[:6]) == seen      # in order, nothing skipped
            seen += len(r.messages)
            off = r.next_offset
            sources.append(dict(c.reads_by_broker))
        assert seen == 120 * 256
        by_broker = c.reads_by_broker
    keep("cold_backlog_redirect", {"read": seen,
                                   "pulls_from_master": by_broker.get(("broker-a", 0), 0),
                                   "pulls_from_slave": by_broker.get(("broker-a", 1), 0)})
    assert by_broker.get(("broker-a", 1), 0) > 10, "the cold backlog was not read from the slave"
    # back on the master for the hot tail
    last = sources[-1]
    before = sources[-2]
    assert last.get(("broker-a", 0), 0) > before.get(("broker-a", 0), 0)


def test_a_share_groups_cold_backlog_is_read_at_the_slave(local_cluster):
    """Share consumption (issue 44): the master hands out the cold backlog's
    messages by its consume queue alone and the SimpleConsumer reads their
    bodies at the slave; the hot tail comes from the master. Every message
    is received once, in queue order, and acked at the master."""
    from duomq.client import SimpleConsumer
    zk, cl = cold_backlog(local_cluster)
    seen, sources = 0, []
    with SimpleConsumer("sharers", subscriptions="Backlog", zookeeper=zk, cluster=cl, consume_from="first",
                        invisible_duration_ms=60_000) as c:
        while seen < 120 * 256:
            msgs = c.receive(256, wait_ms=2000)
            assert msgs, f"nothing more after {seen}"
            assert [int(m.body[:6]) for m in msgs] == list(range(seen, seen + len(msgs)))
            assert all(m.delivery_count == 1 for m in msgs)
            c.ack(msgs)
            seen += len(msgs)
            sources.append(dict(c.reads_by_broker))
        assert c.receive(16, wait_ms=500) == []
        by_broker = c.reads_by_broker
    keep("share_cold_backlog_redirect", {"read": seen,
                                         "from_master": by_broker.get(("broker-a", 0), 0),
                                         "from_slave": by_broker.get(("broker-a", 1), 0)})
    assert by_broker.get(("broker-a", 1), 0) > 80 * 256 // 2, by_broker
    assert sources[-1].get(("broker-a", 0), 0) > sources[-2].get(("broker-a", 0), 0), \
        "the hot tail was not read at the master"


def test_master_dead_no_promotion_consumers_drain_the_slave(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    master = local_cluster.add_broker("broker-a", 0, **BASE)
    local_cluster.add_broker("broker-a", 1, promotable="false", **BASE)   # a read replica
    local_cluster.create_topic("Drain", queues=2)
    with Producer(zookeeper=zk, cluster=cl) as p:
        for i in range(20):
            p.send_batch([Message("Drain", b"m%05d" % (i * 100 + k)) for k in range(100)])
    time.sleep(1.0)
    got, lock = set(), threading.Lock()

    def on_message(m):
        with lock:
            got.add(m.body)

    master.kill()                                           # no slave may take over
    consumer = PushConsumer("drainers", topic="Drain", on_message=on_message, zookeeper=zk, cluster=cl,
                            consume_from="first").start()
    try:
        wait_for(lambda: len(got) == 2000, timeout_s=40, what="the slave to be drained")
    finally:
        consumer.shutdown()
    keep("drain_slave_master_dead", {"attempted": 2000, "acked": 2000, "lost": 2000 - len(got)})


def test_pinned_slave_reads_commit_to_the_master(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    local_cluster.add_broker("broker-a", 0, **BASE)
    local_cluster.add_broker("broker-a", 1, **BASE)
    local_cluster.create_topic("Pinned", queues=2)
    with Producer(zookeeper=zk, cluster=cl) as p:
        p.send_batch([Message("Pinned", b"p%d" % i) for i in range(100)])
    seen = []
    consumer = PushConsumer("pinned", topic="Pinned", on_message=lambda m: seen.append(m.body), zookeeper=zk,
                            cluster=cl, consume_from="first", read_from="slave",
                            offset_commit_interval_ms=200).start()
    try:
        wait_for(lambda: len(seen) == 100, what="the pinned reads")
        assert set(k[1] for k in consumer.reads_by_broker) == {1}
    finally:
        consumer.shutdown()
    with PullConsumer("pinned", zookeeper=zk, cluster=cl) as c:
        assert sum(c.committed(MessageQueue("Pinned", "broker-a", q)) for q in (0, 1)) == 100
