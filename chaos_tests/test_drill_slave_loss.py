"""Drill 4: the slave is killed under SYNC replication. Sends answer
FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE, never SEND_OK; consumers see them
once ZooKeeper no longer lists the slave in sync (stored and readable, never
stored but hidden: issue 68), while it is still dead; when the slave returns
it catches up and SYNC acks resume."""

import time

import pytest

from duomq.client import Message, Producer, PullConsumer, SendStatus
from duomq.client.remoting import RemotingClient
from duomq.common.message import MessageQueue
from duomq.proto import pb
from duomq.testing.drill_reports import keep
from duomq.testing.harness import isr_members, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]




def status(remoting, broker):
    st, err, resp = remoting.call(broker.address, pb.BROKER_STATUS, pb.BrokerStatusRequest(), 5)
    assert st == pb.OK, err
    return resp


@pytest.fixture
def remoting():
    r = RemotingClient("drill-io")
    yield r
    r.close()


def test_sync_replication_never_acks_without_the_slave(local_cluster, small_store, remoting):
    settings = dict(flush="SYNC_FLUSH", replication="SYNC", slave_timeout_ms=500,
                    sync_flush_timeout_ms=1000, **small_store)
    master = local_cluster.add_broker("broker-a", 0, **settings)
    slave = local_cluster.add_broker("broker-a", 1, **settings)
    local_cluster.create_topic("Safe", queues=1)
    mq = MessageQueue("Safe", "broker-a", 0)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster, send_timeout_ms=4000,
                  retry_times_when_send_failed=0) as p, \
            PullConsumer("g", zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as c:
        wait_for(lambda: len(status(remoting, master).replicas) == 1, what="the slave link")
        wait_for(lambda: p.send(Message("Safe", b"probe")).ok, what="SYNC acks")
        ok = [p.send(Message("Safe", b"ok %d" % i)) for i in range(20)]
        assert all(r.status is SendStatus.SEND_OK for r in ok)
        visible = c.max_offset(mq)
        slave.kill()                                   # kill -9 the slave
        killed_at = time.monotonic()
        degraded = [p.send(Message("Safe", b"degraded %d" % i)) for i in range(10)]
        assert {r.status for r in degraded} <= {SendStatus.FLUSH_SLAVE_TIMEOUT,
                                                SendStatus.SLAVE_NOT_AVAILABLE}
        assert SendStatus.SLAVE_NOT_AVAILABLE in {r.status for r in degraded}
        # the master alone in the in-sync set shows what it stored, the slave still dead
        wait_for(lambda: isr_members(local_cluster.zookeeper, local_cluster.cluster) == {0},
                 what="the in-sync set without the slave")
        wait_for(lambda: c.max_offset(mq) >= visible + 10, 5, "the degraded sends readable")
        bodies = [m.body for m in c.pull(mq, 0, 1000).messages]
        assert all(b"degraded %d" % i in bodies for i in range(10))
        assert not slave.alive()
        slave.start()                                  # it returns, catches up, acks resume
        wait_for(lambda: p.send(Message("Safe", b"again")).ok, what="SYNC acks to resume")
        restored = time.monotonic() - killed_at
    statuses = {}
    for r in ok + degraded:
        statuses[r.status.value] = statuses.get(r.status.value, 0) + 1
    keep("slave_killed_under_sync", {"attempted": len(ok) + len(degraded), "acked": len(ok),
                                     "stored_not_durable": len(degraded),
                                     "sync_restored_s": round(restored, 3), "statuses": statuses})
