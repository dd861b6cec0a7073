"""A broker pod's grace period, shared out (common/grace.py), against real
brokers and a real ZooKeeper: the preStop step-down keeps to what the grace
period leaves it when the hand-over cannot finish (its slave hung) and when
ZooKeeper does not answer, and the broker's own stop after SIGTERM keeps to
grace.STOP_S, also with ZooKeeper hung (its watchdog ends it). Together
they fit the grace period (test_k8s_manifests checks the manifests' figures)."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from duomq.client import Message, Producer
from duomq.common.grace import GRACE_ENV, MARGIN_S, STOP_S, handover_budget
from duomq.dev.zookeeper import launch
from duomq.testing.harness import LocalCluster, master_id, wait_for

pytestmark = pytest.mark.integration

GRACE_S = 30.0                          # a pod's grace period: the hand-over gets 10 s
BUDGET_S = handover_budget(GRACE_S)
SLACK_S = 2.5                           # starting Python, importing duomq, closing ZooKeeper


def step_down(master, env_extra=None):
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "duomq", "failover", "--step-down", "--address",
                        master.address, "--zookeeper", master.zookeeper, "--cluster",
                        master.cluster, "--json"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, GRACE_ENV: str(GRACE_S), **(env_extra or {})})
    return p, time.monotonic() - t0


def ready(broker) -> bool:
    p = subprocess.run([sys.executable, "-m", "duomq", "health", "--ready", "--address",
                        broker.address, "--ha-port", str(broker.ha_port), "--json"],
                       capture_output=True, text=True, timeout=60)
    return p.returncode == 0


@pytest.fixture
def pair(tmp_path):
    zk = launch(data_dir=str(tmp_path / "zk"))
    c = LocalCluster(zk.connect, "Grace", str(tmp_path / "brokers"))
    try:
        master = c.add_broker("broker-a", 0, replication="SYNC")
        slave = c.add_broker("broker-a", 1, replication="SYNC")
        wait_for(lambda: ready(slave), 30, "the slave to be in sync")
        yield zk, c, master, slave
    finally:
        c.stop_all()
        zk.stop()


def test_the_budget_is_what_the_stop_and_the_margin_leave():
    assert BUDGET_S == GRACE_S - STOP_S - MARGIN_S == 10
    assert handover_budget(90) == 70


def test_a_hand_over_that_cannot_finish_ends_within_its_budget(pair):
    _zk, c, master, slave = pair
    c.create_topic("T", 1)
    slave.suspend()                     # hung, and lacking what the master takes next:
    try:                                # no one to hand over to
        with Producer(zookeeper=c.zookeeper, cluster=c.cluster, send_timeout_ms=5000,
                      retry_times_when_send_failed=0) as producer:
            producer.send(Message("T", b"stored on the master alone"))
        p, took = step_down(master)
    finally:
        slave.resume()
    assert p.returncode != 0 and "did not finish in" in p.stderr, p.stdout + p.stderr
    assert BUDGET_S - 1 <= took <= BUDGET_S + SLACK_S, took
    # and with time enough, it hands over
    wait_for(lambda: ready(slave), 30, "the slave to be in sync again")
    p, took = step_down(master)
    out = json.loads(p.stdout)
    assert p.returncode == 0 and out.get("to") == 1, out


def test_a_step_down_with_zookeeper_hung_ends_within_its_budget(pair):
    zk, _c, master, _slave = pair
    os.kill(zk.pid, signal.SIGSTOP)
    try:
        p, took = step_down(master)
    finally:
        os.kill(zk.pid, signal.SIGCONT)
    assert p.returncode != 0, p.stdout + p.stderr
    assert took <= BUDGET_S + SLACK_S, took


def test_the_brokers_stop_keeps_to_its_share_even_with_zookeeper_hung(pair):
    zk, _c, master, slave = pair
    t0 = time.monotonic()
    rc = slave.stop(timeout_s=60)       # SIGTERM, as the kubelet after preStop
    took = time.monotonic() - t0
    assert rc == 0 and took < STOP_S, (rc, took)
    os.kill(zk.pid, signal.SIGSTOP)     # a graceful stop would wait on its session's close
    try:
        t0 = time.monotonic()
        rc = master.stop(timeout_s=60)
        took = time.monotonic() - t0
    finally:
        os.kill(zk.pid, signal.SIGCONT)
    # either it closed in time, or its watchdog ended it at STOP_S (exit 3)
    assert rc in (0, 3) and took <= STOP_S + 1.5, (rc, took)
    print(f"stop with ZooKeeper hung: exit {rc} after {took:.1f} s")


def test_a_hand_over_never_goes_to_a_hung_slave(pair):
    """A slave that holds everything but has stopped answering (SIGSTOP):
    its last report said it was in sync, yet the master is not handed to it,
    which would leave the group without a master until its session expired.
    Only a report sent after the hand-over began counts: the step-down ends
    at its budget, the same broker stays master and takes writes, and once
    the slave answers again the hand-over goes through."""
    _zk, c, master, slave = pair
    c.create_topic("T", 1)
    with Producer(zookeeper=c.zookeeper, cluster=c.cluster, send_timeout_ms=5000) as producer:
        assert producer.send(Message("T", b"held by both")).status.name == "SEND_OK"
    wait_for(lambda: ready(slave), 30, "the slave to be in sync")
    slave.suspend()
    try:
        p, took = step_down(master)
        assert p.returncode != 0 and "did not finish in" in p.stderr, p.stdout + p.stderr
        assert took <= BUDGET_S + SLACK_S, took
        assert master_id(c.zookeeper, c.cluster) == 0
        with Producer(zookeeper=c.zookeeper, cluster=c.cluster, send_timeout_ms=5000,
                      retry_times_when_send_failed=0) as producer:
            status = producer.send(Message("T", b"the master goes on")).status.name
        assert status in ("SEND_OK", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"), status
    finally:
        slave.resume()
    wait_for(lambda: ready(slave), 30, "the slave to be in sync again")
    p, _took = step_down(master)
    out = json.loads(p.stdout)
    assert p.returncode == 0 and out.get("to") == 1, out


def test_a_graceful_stop_logs_no_error(pair):
    """Stopping brokers is no failure: their logs say so (the registry logged
    its own closed session as "ZooKeeper session lost" at ERROR)."""
    _zk, _c, master, slave = pair
    for b in (slave, master):
        assert b.stop() == 0
        text = pathlib.Path(b.log_path).read_text()
        assert "ZooKeeper session closed" in text
        assert not [line for line in text.splitlines() if " ERROR " in line], text[-3000:]
