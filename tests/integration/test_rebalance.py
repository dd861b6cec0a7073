"""A consumer group splits queues on every membership change, and offsets
carry consumption across members: nothing is skipped."""

import threading
import time

import pytest

from duomq.client import Message, Producer, PushConsumer
from duomq.testing.harness import wait_for

pytestmark = pytest.mark.integration




class Recorder:
    def __init__(self):
        self.seen = []
        self.lock = threading.Lock()

    def __call__(self, msg):
        with self.lock:
            self.seen.append(msg.body)


def test_group_rebalances_when_a_consumer_joins_and_leaves(local_cluster, small_store):
    local_cluster.add_broker("broker-a", **small_store)
    local_cluster.add_broker("broker-b", **small_store)
    local_cluster.create_topic("Events", queues=4)        # 8 queues over two groups
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    r1, r2 = Recorder(), Recorder()
    c1 = PushConsumer("billing", topic="Events", on_message=r1, zookeeper=zk, cluster=cl,
                      consume_from="first",
                      offset_commit_interval_ms=200).start()
    wait_for(lambda: len(c1.held()) == 8, what="c1 to hold all 8 queues")
    with Producer(zookeeper=zk, cluster=cl) as p:
        for i in range(20):
            p.send_batch([Message("Events", b"a%03d-%d" % (i, k)) for k in range(10)])
        wait_for(lambda: len(r1.seen) >= 200, what="c1 to consume the first 200")
        c2 = PushConsumer("billing", topic="Events", on_message=r2, zookeeper=zk, cluster=cl,
                          consume_from="first",
                          offset_commit_interval_ms=200).start()
        wait_for(lambda: len(c1.held()) == 4 and len(c2.held()) == 4, what="a 4/4 split")
        assert set(c1.held()).isdisjoint(c2.held())
        for i in range(20):
            p.send_batch([Message("Events", b"b%03d-%d" % (i, k)) for k in range(10)])
        wait_for(lambda: len(set(r1.seen) | set(r2.seen)) >= 400, what="all 400")
        assert any(b.startswith(b"b") for b in r2.seen), "the newcomer got part of the traffic"
        c1.shutdown()                                    # leaves: c2 takes everything
        wait_for(lambda: len(c2.held()) == 8, what="c2 to take all 8 queues")
        for i in range(10):
            p.send_batch([Message("Events", b"c%03d-%d" % (i, k)) for k in range(10)])
        wait_for(lambda: sum(b.startswith(b"c") for b in r2.seen) >= 100, what="c2 to get the rest")
    c2.shutdown()
    everything = set(r1.seen) | set(r2.seen)
    assert len(everything) == 500
    # at-least-once: duplicates only around a handover, never a gap
    assert len(r1.seen) + len(r2.seen) - 500 < 100
    assert c1.rebalances >= 2 and c2.rebalances >= 2


def test_members_split_queues_by_the_strategy_they_name(local_cluster):
    local_cluster.add_broker("broker-a")
    local_cluster.add_broker("broker-b")
    local_cluster.create_topic("Events", queues=4)        # 8 queues over two groups
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    from duomq.client.consumer.allocate import allocate_by_circle

    def pull_nothing(msg):
        pass

    members = [PushConsumer("circle", topic="Events", on_message=pull_nothing, zookeeper=zk, cluster=cl,
                            allocate_strategy="circle", rebalance_interval_ms=500).start()
               for _ in range(2)]
    try:
        wait_for(lambda: sorted(len(m.held()) for m in members) == [4, 4], what="a 4/4 split")
        ids = [m.client_id for m in members]
        queues = members[0].queues("Events")
        for m in members:
            assert set(m.held()) == set(allocate_by_circle(queues, ids, m.client_id))
            assert {q.broker_group for q in m.held()} == {"broker-a", "broker-b"}
    finally:
        for m in members:
            m.shutdown()
    # a user's strategy: every queue of broker-b to one member, the rest to nobody
    first = []

    def only_b(queues, group_members, me):
        first.append(me)
        return [q for q in queues if q.broker_group == "broker-b"]

    c = PushConsumer("mine", topic="Events", on_message=pull_nothing, zookeeper=zk, cluster=cl,
                     allocate=only_b).start()
    try:
        wait_for(lambda: len(c.held()) == 4, what="the user strategy's 4 queues")
        assert {q.broker_group for q in c.held()} == {"broker-b"} and first
    finally:
        c.shutdown()


def test_flow_control_bounds_the_bytes_held_per_queue(local_cluster):
    local_cluster.add_broker("broker-a")
    local_cluster.create_topic("Big", queues=1)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    with Producer(zookeeper=zk, cluster=cl) as p:
        for _ in range(8):
            p.send_batch([Message("Big", b"x" * (64 << 10)) for _ in range(8)])   # 4 MiB
    peak, seen = [0], []

    def slow(msg):
        pq = c.assigned[c.held()[0]]
        peak[0] = max(peak[0], pq.inflight_bytes)
        seen.append(msg)
        time.sleep(0.01)

    c = PushConsumer("slow", topic="Big", on_message=slow, zookeeper=zk, cluster=cl, consume_from="first",
                     pull_batch_size=4, pull_threshold_size_for_queue_mib=1).start()
    try:
        wait_for(lambda: len(seen) == 64, what="all 64 messages")
    finally:
        c.shutdown()
    # the threshold is checked before each pull: at most one batch beyond it
    assert (1 << 20) <= peak[0] <= (1 << 20) + 4 * (64 << 10), peak[0]
