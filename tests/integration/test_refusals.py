"""A master that refuses writes (here: draining for a planned switchover
whose only slave is paused, so the hand-over cannot finish) is retried at
the producer's backoff, not in a storm; and a switchover that is withdrawn
(its node deleted, as ``duomq failover`` does at its timeout) leaves the
master taking writes again."""

import threading
import time

import pytest
from kazoo.client import KazooClient

from duomq.client import Message, Producer
from duomq.coordinator.nodes import SwitchoverNode
from duomq.coordinator.paths import ZkPaths
from duomq.proto import pb
from duomq.testing.harness import master_id, wait_for

pytestmark = pytest.mark.integration


def test_a_draining_master_is_retried_at_the_backoff_and_takes_writes_after_a_withdrawal(
        local_cluster):
    local_cluster.add_broker("broker-a", 0)
    slave = local_cluster.add_broker("broker-a", 1)
    local_cluster.create_topic("Held", 2)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    wait_for(lambda: master_id(zk, cl) == 0, 10, "broker 0 master")
    paths = ZkPaths(cl)
    admin = KazooClient(hosts=zk)
    admin.start(10)
    sends = []
    try:
        with Producer(zookeeper=zk, cluster=cl, send_timeout_ms=20_000,
                      retry_times_when_send_failed=1000) as p:
            assert p.send(Message("Held", b"warm")).ok
            call = p.remoting.call

            def counted(address, type_, req, timeout_s):
                if type_ == pb.SEND:
                    sends.append(time.monotonic())
                return call(address, type_, req, timeout_s)

            p.remoting.call = counted
            slave.suspend()                         # the hand-over cannot finish
            admin.create(paths.switchover("broker-a"), SwitchoverNode(0, 1, time.time()).to_bytes())
            time.sleep(0.5)                         # the master drains
            withdrawn = threading.Timer(4.0, admin.delete, [paths.switchover("broker-a")])
            withdrawn.start()
            t0 = time.monotonic()
            try:
                r = p.send(Message("Held", b"x"))
            finally:
                withdrawn.join()
                slave.resume()
            took = time.monotonic() - t0
    finally:
        admin.stop()
        admin.close()
    assert r.ok, r
    assert master_id(zk, cl) == 0                   # no hand-over happened
    # refused for 4 s: retries 0.1, 0.2, 0.4, 0.8, 1.0, 1.0 ... s apart
    assert len(sends) <= 10, [round(t - sends[0], 3) for t in sends]
    gaps = [b - a for a, b in zip(sends, sends[1:], strict=False)]
    assert min(gaps) >= 0.09, gaps
    assert took < 6.0, took                         # the withdrawal was noticed at once
