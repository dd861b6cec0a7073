"""The consumer features on slave reads (``read_from="slave"``): the slave
filters by tag, serves the group's retry topic, serves a broadcasting
group, and answers lookups, while offsets and sends back go to the master."""

import threading
from collections import defaultdict

import pytest

from duomq.client import Message, Producer, PushConsumer
from duomq.testing.harness import SHORT_DELAYS, wait_for, wait_slaves_hold

pytestmark = pytest.mark.integration

LEVELS = SHORT_DELAYS


class Record:
    def __init__(self, fail_times=0):
        self.lock = threading.Lock()
        self.seen = defaultdict(list)            # body -> [(tags, reconsume_times, topic)]
        self.fail_times = fail_times

    def __call__(self, m):
        with self.lock:
            self.seen[m.body].append((m.tags, m.reconsume_times, m.topic))
            if m.body == b"bad" and len(self.seen[m.body]) <= self.fail_times:
                raise RuntimeError("not yet")


def test_tags_retries_broadcast_and_lookups_on_slave_reads(local_cluster, small_store, tmp_path):
    sync = dict(replication="SYNC", **small_store, **LEVELS)
    local_cluster.add_broker("broker-a", 0, **sync)
    local_cluster.add_broker("broker-a", 1, **sync)
    local_cluster.create_topic("Shop", queues=2)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    with Producer(zookeeper=zk, cluster=cl) as p:
        p.send_batch([Message("Shop", b"m%03d" % i, tags="paid" if i % 2 == 0 else "new",
                              keys=f"order-{i}") for i in range(200)])
        p.send(Message("Shop", b"bad", tags="paid", keys="order-bad"))
    wait_slaves_hold(zk, cl, "Shop")

    paid = Record(fail_times=2)
    c = PushConsumer("billing", topic="Shop", on_message=paid, subscription="paid", zookeeper=zk, cluster=cl,
                     consume_from="first", read_from="slave",
                     offset_commit_interval_ms=200).start()
    everyone = Record()
    b = PushConsumer("audit", topic="Shop", on_message=everyone, zookeeper=zk, cluster=cl,
                     consume_from="first",
                     read_from="slave", message_model="broadcasting",
                     offset_store_dir=str(tmp_path / "offsets")).start()
    try:
        wait_for(lambda: len(paid.seen[b"bad"]) == 3 and len(paid.seen) == 101,
                 what="the paid messages and the retried one")
        wait_for(lambda: len(everyone.seen) == 201, what="the broadcast group")
        found = c.query_by_key("Shop", "order-bad")
    finally:
        c.shutdown()
        b.shutdown()
    assert {tags for v in paid.seen.values() for tags, _, _ in v} == {"paid"}
    assert all(len(v) == 1 for body, v in paid.seen.items() if body != b"bad")
    assert [(r, t) for _, r, t in paid.seen[b"bad"]] == [(0, "Shop"), (1, "Shop"), (2, "Shop")]
    assert c.sent_back == [2, 0]
    # every pull went to the slave, the retry topic's too
    assert {k for k in c.reads_by_broker} == {("broker-a", 1)}
    assert {k for k in b.reads_by_broker} == {("broker-a", 1)}
    assert [m.body for m in found] == [b"bad"]
