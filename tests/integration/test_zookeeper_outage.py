"""Writes through a ZooKeeper outage (issue: all ZooKeeper servers paused
10 s stopped every write for 8.25 s, then every session expired and the
group failed over although no broker had died).

The test's ZooKeeper server is SIGSTOPped for 10 s under load on an ASYNC
group of a master and two slaves with defaults: the master's lease lapses,
it goes on acking once every in-sync slave holds a write (its readiness
says so), nobody is presumed dead, and when ZooKeeper wakes no session has
ended and the epoch is the same. Every send is stored exactly once, across
every queue. The same outage on a SYNC + SYNC_FLUSH group is the drill's
(chaos_tests/test_drill_cli.py::test_zookeeper_outage_drill_writes_go_on_and_nobody_fails_over:
the same group, load and checks, through `duomq drill run`)."""

import collections
import os
import signal
import time

import pytest

from duomq.cli.health_cmd import broker_status
from duomq.client import Message, Producer
from duomq.drill.checker import ACKED
from duomq.drill.load import Workload, read_back
from duomq.testing.harness import master_info, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]
OUTAGE_S = 10.0


def longest_gap(load: Workload, start: float, end: float) -> float:
    """The longest time within [start, end] without a SEND_OK."""
    acks = sorted(op.ended for op in load.journal() if op.outcome in ACKED
                  and start <= op.ended <= end)
    points = [start, *acks, end]
    return max(b - a for a, b in zip(points, points[1:], strict=False))


def test_writes_go_on_through_a_zookeeper_outage_and_nobody_fails_over(local_cluster, zk_server):
    mode = dict(flush="ASYNC_FLUSH", replication="ASYNC")
    if not zk_server.pid:
        pytest.skip("the ZooKeeper server is not a process of this host (DUOMQ_TEST_ZOOKEEPER)")
    for i in range(3):
        local_cluster.add_broker("broker-a", i, **mode)
    local_cluster.create_topic("Outage", queues=4)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    wait_for(lambda: master_info(zk, cl) is not None, 15, "a master")
    with Producer(zookeeper=zk, cluster=cl) as p:
        wait_for(lambda: p.send(Message("Outage", b"warm")).ok, 20, "the group to ack")
    wait_for(lambda: len(_isr(zk, cl)) == 3, 20, "both slaves in the in-sync set")
    before = master_info(zk, cl)
    load = Workload(zk, cl, "Outage", producers=3, consumers=0).start()
    try:
        wait_for(lambda: load.acked() >= 200, 30, "acked load")
        paused = time.monotonic()
        os.kill(zk_server.pid, signal.SIGSTOP)
        try:
            time.sleep(3.0)
            # the master's lease has lapsed: it acks what both in-sync slaves hold
            st, _ = broker_status(next(b.address for b in local_cluster.brokers
                                       if b.broker_id == before.broker_id), 5)
            assert st.ready and "lease lapsed: acking what every slave" in st.ready_reason, \
                st.ready_reason
            time.sleep(OUTAGE_S - 3.0)
        finally:
            os.kill(zk_server.pid, signal.SIGCONT)
        resumed = time.monotonic()
        time.sleep(5.0)                     # the master renews; nobody is presumed dead
    finally:
        load.stop()
    gap = longest_gap(load, paused, resumed)
    during = sum(1 for op in load.journal() if op.outcome in ACKED
                 and paused <= op.ended <= resumed)
    print(f"{mode['replication']}: {during} SEND_OK during the {OUTAGE_S:g} s outage, "
          f"longest gap {gap:.3f} s")
    assert master_info(zk, cl) == before, "the outage itself caused a failover"
    assert gap < 2.0, f"{gap:.2f} s without a SEND_OK during the outage"
    stored = collections.Counter(body for _, body in read_back(zk, cl, "Outage"))
    twice = [b for b, n in stored.items() if n > 1]
    assert not twice, f"stored more than once: {twice[:5]}"
    acked = {op.body for op in load.journal() if op.outcome in ACKED}
    assert acked <= set(stored), "an acked send is missing"


def _isr(zk, cl):
    from duomq.testing.harness import isr_members
    return isr_members(zk, cl)
