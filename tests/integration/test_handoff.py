"""A queue changes hands between live members without re-delivery: the old
owner stops pulling it, finishes the chunks it began, commits, and only then
releases its owner node in ZooKeeper; the new owner takes the node, reads the
commit and pulls. A member killed with kill -9 re-delivers only what it had
not committed. Every delivery is counted by (queue, offset)."""

import pytest

from duomq.client import Message, Producer, PushConsumer
from duomq.coordinator import zk as zkutil
from duomq.coordinator.paths import ZkPaths
from duomq.testing import handoff
from duomq.testing.harness import wait_for

pytestmark = pytest.mark.integration

N = 20_000


@pytest.fixture
def backlog(local_cluster):
    local_cluster.add_broker("broker-a")
    local_cluster.create_topic("Events", queues=8)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    with Producer(zookeeper=zk, cluster=cl) as p:
        for _ in range(N // 500):
            p.send_batch([Message("Events", b"x" * 100)] * 500)
    return zk, cl


def test_a_member_joining_a_busy_group_re_delivers_nothing(backlog):
    zk, cl = backlog
    r = handoff.join(zk, cl, "Events", N)
    assert r["unique"] == N
    assert r["duplicates"] == 0, r
    assert r["by_member"]["b"] > 0, "the newcomer took part of the backlog"
    assert r["unowned_ms"]["queues"] >= 4, r        # four queues moved mid-stream
    assert r["unowned_ms"]["max"] < 5000, r
    assert r["handoffs"]["a"]["timed_out"] == 0


def test_a_member_leaving_cleanly_re_delivers_nothing(backlog):
    zk, cl = backlog
    r = handoff.leave(zk, cl, "Events", N)
    assert r["unique"] == N
    assert r["duplicates"] == 0, r
    assert r["by_member"]["b"] > 0 and r["by_member"]["a"] > r["by_member"]["b"]
    assert r["unowned_ms"]["queues"] >= 4, r


def test_a_killed_member_re_delivers_at_most_what_it_had_not_committed(backlog):
    zk, cl = backlog
    r = handoff.kill(zk, cl, "Events", N)
    assert r["unique"] == N
    assert r["by_member"]["killed"] > 0
    assert r["beyond"] == 0, r          # only messages past the dead member's commits
    assert r["duplicates"] <= r["uncommitted"], r


def test_owner_nodes_name_the_holder_and_go_with_it(local_cluster):
    local_cluster.add_broker("broker-a")
    local_cluster.create_topic("Events", queues=4)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    c = PushConsumer("owners", topic="Events", on_message=lambda m: None, zookeeper=zk, cluster=cl).start()
    client = zkutil.connect(zk)
    root = ZkPaths(cl).group_owners("owners")
    try:
        wait_for(lambda: len(c.held()) == 4, what="all 4 queues held")
        names = client.get_children(root)
        # no retry topic: none of its messages failed yet (made at a first send back)
        assert sorted(names) == sorted([f"Events@broker-a@{q}" for q in range(4)])
        assert {client.get(f"{root}/{n}")[0].decode() for n in names} == {c.client_id}
        c.shutdown()
        assert client.get_children(root) == []            # released on the way out
    finally:
        c.shutdown()
        zkutil.close(client)
