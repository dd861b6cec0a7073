"""min_sync_replicas: a SYNC group that lost slaves keeps acking, degraded,
once ZooKeeper's in-sync set no longer lists them; the answer, the status and
the ISR say so; nothing acked is lost; full acks come back with the slave."""

import subprocess
import sys
import time

import pytest

from duomq.client import Message, Producer, PullConsumer, SendStatus
from duomq.client.remoting import RemotingClient
from duomq.common.message import MessageQueue
from duomq.proto import pb
from duomq.testing.harness import isr_members, master_id, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SYNC = dict(flush="SYNC_FLUSH", replication="SYNC", zk_session_timeout_ms=4000,
            slave_timeout_ms=1000, sync_flush_timeout_ms=1000, segment_size_bytes=1 << 20,
            max_message_bytes=64 << 10, max_pull_bytes=1 << 20)


def status(address):
    r = RemotingClient("min-sync-test")
    try:
        st, err, resp = r.call(address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 5)
        assert st == pb.OK, err
        return resp
    finally:
        r.close()


def bodies(zk, cl, topic):
    with PullConsumer("audit", zookeeper=zk, cluster=cl) as c:
        out = []
        for mq in c.queues(topic):
            out.extend(m.body for m in c.pull(mq, 0, 1000).messages)
        return out


def test_pair_with_min_zero_acks_alone_after_the_master_is_killed(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    old = local_cluster.add_broker("broker-a", 0, min_sync_replicas=0, **SYNC)
    new = local_cluster.add_broker("broker-a", 1, min_sync_replicas=0, **SYNC)
    local_cluster.create_topic("Pair", queues=1)
    with Producer(zookeeper=zk, cluster=cl, send_timeout_ms=3000) as p:
        wait_for(lambda: isr_members(zk, cl) == {0, 1}, what="the slave in the ISR")
        # min 0 acks alone until the master sees the slave listed: then fully
        wait_for(lambda: (r := p.send(Message("Pair", b"probe"))).ok and not r.degraded,
                 what="full SYNC acks")
        full = [p.send(Message("Pair", b"full %d" % i)) for i in range(20)]
        assert all(r.ok and not r.degraded and r.in_sync_replicas == 1 for r in full), full[:3]
        old.kill()
        killed = time.monotonic()
        wait_for(lambda: master_id(zk, cl) == 1, what="the slave to take over")
        wait_for(lambda: p.send(Message("Pair", b"probe after")).ok, what="SEND_OK alone")
        ok_after = time.monotonic() - killed
        alone = [p.send(Message("Pair", b"alone %d" % i)) for i in range(20)]
    assert all(r.status is SendStatus.SEND_OK and r.degraded and r.in_sync_replicas == 0
               for r in alone)
    assert isr_members(zk, cl) == {1}
    s = status(new.address)
    assert s.degraded and (s.in_sync_replicas, s.sync_replicas, s.min_sync_replicas) == (0, 1, 0)
    shown = subprocess.run([sys.executable, "-m", "duomq", "status", "--zookeeper", zk,
                            "--cluster", cl], capture_output=True, text=True, check=True).stdout
    assert "broker-a/1: DEGRADED: 0 slave(s) in sync of sync_replicas 1" in shown, shown
    stored = bodies(zk, cl, "Pair")
    assert all(b"full %d" % i in stored and b"alone %d" % i in stored for i in range(20))
    assert ok_after < 15, ok_after


def test_two_slaves_one_killed_degrades_to_min_then_recovers(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    settings = dict(sync_replicas=2, min_sync_replicas=1, **SYNC)
    master = local_cluster.add_broker("broker-a", 0, **settings)
    local_cluster.add_broker("broker-a", 1, **settings)
    victim = local_cluster.add_broker("broker-a", 2, **settings)
    local_cluster.create_topic("Three", queues=1)
    mq = MessageQueue("Three", "broker-a", 0)
    with Producer(zookeeper=zk, cluster=cl, send_timeout_ms=3000, retry_times_when_send_failed=0) as p, \
            PullConsumer("g", zookeeper=zk, cluster=cl) as c:
        wait_for(lambda: isr_members(zk, cl) == {0, 1, 2}, what="both slaves in the ISR")
        wait_for(lambda: (r := p.send(Message("Three", b"probe"))).ok and not r.degraded,
                 what="full SYNC acks")
        r = p.send(Message("Three", b"full"))
        assert r.ok and not r.degraded and r.in_sync_replicas == 2
        victim.kill()
        killed = time.monotonic()
        # until ZooKeeper stops listing the dead slave, nothing is acked without it
        answers = []
        while isr_members(zk, cl) != {0, 1} and time.monotonic() - killed < 20:
            answers.append(p.send(Message("Three", b"during %d" % len(answers))))
        assert isr_members(zk, cl) == {0, 1}
        assert answers and all(a.status is SendStatus.FLUSH_SLAVE_TIMEOUT
                               or (a.ok and a.degraded and a.in_sync_replicas == 1)
                               for a in answers), [a.status for a in answers]
        wait_for(lambda: p.send(Message("Three", b"probe degraded")).ok, what="degraded acks")
        degraded = [p.send(Message("Three", b"degraded %d" % i)) for i in range(10)]
        assert all(d.ok and d.degraded and d.in_sync_replicas == 1 for d in degraded)
        s = status(master.address)
        assert s.degraded and list(s.isr) == [0, 1]
        got = [m.body for m in c.pull(mq, 0, 1000).messages]
        assert all(b"degraded %d" % i in got for i in range(10))
        victim.start()
        wait_for(lambda: isr_members(zk, cl) == {0, 1, 2}, what="the slave back in the ISR")
        wait_for(lambda: (r := p.send(Message("Three", b"again"))).ok and not r.degraded,
                 what="full acks again")
    assert not status(master.address).degraded


def test_producers_route_around_a_group_that_cannot_ack(local_cluster):
    """Two SYNC groups; one loses its slave: its routes say it cannot ack,
    and sends without a key go to the other group, all SEND_OK. A keyed send
    keeps its queue (and is answered SLAVE_NOT_AVAILABLE there)."""
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    for group in ("broker-a", "broker-b"):
        local_cluster.add_broker(group, 0, **SYNC)
    victim = local_cluster.add_broker("broker-a", 1, **SYNC)
    local_cluster.add_broker("broker-b", 1, **SYNC)
    local_cluster.create_topic("Both", queues=2)
    with Producer(zookeeper=zk, cluster=cl, send_timeout_ms=3000, retry_times_when_send_failed=0) as p:
        wait_for(lambda: {p.send(Message("Both", b"probe")).broker_group for _ in range(8)}
                 == {"broker-a", "broker-b"}, what="both groups acking")
        victim.kill()

        def a_says_it_cannot_ack():
            g = p.route("Both").groups.get("broker-a")
            return g is not None and g.acks is False
        wait_for(a_says_it_cannot_ack, timeout_s=20, what="broker-a's routes to say so")
        rr = [p.send(Message("Both", b"rr %d" % i)) for i in range(40)]
        assert all(r.ok and r.broker_group == "broker-b" for r in rr), \
            {(r.status.value, r.broker_group) for r in rr}
        keyed = [p.send(Message("Both", b"k"), queue=MessageQueue("Both", "broker-a", 0))
                 for _ in range(3)]
        assert {r.status for r in keyed} == {SendStatus.SLAVE_NOT_AVAILABLE}
        victim.start()
        wait_for(lambda: not a_says_it_cannot_ack(), timeout_s=30, what="broker-a acking again")
        wait_for(lambda: {p.send(Message("Both", b"again")).broker_group for _ in range(8)}
                 == {"broker-a", "broker-b"}, what="both groups taking writes again")
