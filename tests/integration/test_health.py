"""`duomq health --live|--ready` and `duomq failover --step-down` against real
brokers, as a pod's probes and preStop hook run them."""

import json
import os
import subprocess
import sys

import pytest

from duomq.dev.zookeeper import launch
from duomq.testing.harness import LocalCluster, master_id, wait_for

pytestmark = pytest.mark.integration


def duomq(*args, env=None):
    p = subprocess.run([sys.executable, "-m", "duomq", *args, "--json"], capture_output=True,
                       text=True, timeout=60, env={**os.environ, **(env or {})})
    assert p.returncode in (0, 1), p.stderr
    return p.returncode, json.loads(p.stdout)


def probe(broker, what, timeout=1.0):
    return duomq("health", f"--{what}", "--address", broker.address, "--ha-port",
                 str(broker.ha_port), "--timeout", str(timeout))


def test_probes_of_a_master_and_its_slave(local_cluster):
    master = local_cluster.add_broker("broker-a", 0, replication="SYNC")
    slave = local_cluster.add_broker("broker-a", 1, replication="SYNC", promotable="false",
                                     ha_housekeeping_ms=3000, ha_heartbeat_ms=500)
    wait_for(lambda: probe(slave, "ready")[0] == 0, 20, "the slave to be ready")
    rc, out = probe(master, "live")
    assert rc == 0 and out["ok"] and "replication port" in out["reason"]
    rc, out = probe(master, "ready")
    assert rc == 0 and "master at epoch 1" in out["reason"] and out["role"] == "MASTER"
    rc, out = probe(slave, "ready")
    assert rc == 0 and "slave at epoch 1" in out["reason"]
    # the broker found from its own config, as in a pod: DUOMQ_* variables
    rc, out = duomq("health", "--live", env={"DUOMQ_PORT": str(slave.port),
                                             "DUOMQ_HA_PORT": str(slave.ha_port)})
    assert rc == 0 and out["broker"] == "broker-a/1"

    master.suspend()            # a hung master: not live; its slave stops being ready
    try:
        rc, out = probe(master, "live")
        assert rc == 1 and "no answer" in out["reason"]
        wait_for(lambda: probe(slave, "ready")[0] == 1, 15, "the slave to be unready")
        assert "silent" in probe(slave, "ready")[1]["reason"]
        assert probe(slave, "live")[0] == 0
    finally:
        master.resume()
    wait_for(lambda: probe(slave, "ready")[0] == 0, 20, "the slave to be ready again")


def test_liveness_does_not_depend_on_zookeeper(tmp_path):
    zk = launch(data_dir=str(tmp_path / "zk"))
    c = LocalCluster(zk.connect, "Health", str(tmp_path / "brokers"))
    try:
        b = c.add_broker("broker-a", 0)
        wait_for(lambda: probe(b, "ready")[0] == 0, 20, "the master to be ready")
        zk.stop()
        # the master's lease lapses: it still takes writes (acking what its
        # in-sync set, itself alone here, holds) and says so; and it is alive
        wait_for(lambda: "lease lapsed" in probe(b, "ready")[1]["reason"], 30,
                 "the master's lease to lapse")
        rc, out = probe(b, "ready")
        assert rc == 0 and "acking what every slave of its in-sync set holds" in out["reason"]
        rc, out = probe(b, "live")
        assert rc == 0 and out["ok"]
        b.kill()             # a graceful stop would wait out its ZooKeeper session's close
    finally:
        c.stop_all()
        zk.stop()


def test_step_down_hands_a_master_over_and_lets_a_slave_leave(local_cluster):
    master = local_cluster.add_broker("broker-a", 0, replication="SYNC")
    slave = local_cluster.add_broker("broker-a", 1, replication="SYNC")
    wait_for(lambda: probe(slave, "ready")[0] == 0, 20, "the slave to be ready")
    endpoint = ["--zookeeper", local_cluster.zookeeper, "--cluster", local_cluster.cluster]
    rc, out = duomq("failover", "--step-down", "--address", master.address, *endpoint)
    assert rc == 0 and out["handed_over"] and out["to"] == 1, out
    assert master_id(local_cluster.zookeeper, local_cluster.cluster) == 1
    rc, out = duomq("failover", "--step-down", "--address", master.address, *endpoint)
    assert rc == 0 and not out["handed_over"] and "leaves without a hand-over" in out["message"]
    assert master_id(local_cluster.zookeeper, local_cluster.cluster) == 1
    wait_for(lambda: probe(master, "ready")[0] == 0, 20, "the old master to follow, ready")


def test_a_failover_the_group_cannot_make_is_refused_at_once_and_writes_nothing(local_cluster):
    """`failover --to` a broker that is not in the group names the group's
    brokers; a group with no live slave is refused at once (it waited out
    its 30 s); the master itself as target is nothing to do. No switchover
    node is left and the master stays."""
    import time

    from duomq.coordinator.paths import ZkPaths
    from duomq.testing.harness import read_node
    local_cluster.add_broker("broker-a", 0, replication="SYNC")
    slave = local_cluster.add_broker("broker-a", 1, replication="SYNC")
    local_cluster.add_broker("broker-b", 0)
    wait_for(lambda: probe(slave, "ready")[0] == 0, 20, "the slave to be ready")
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    endpoint = ["--zookeeper", zk, "--cluster", cl]
    paths = ZkPaths(cl)

    def failover(*args):
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, "-m", "duomq", "failover", *args, *endpoint],
                           capture_output=True, text=True, timeout=60)
        return p, time.monotonic() - t0

    p, took = failover("broker-a", "--to", "7")
    assert p.returncode == 2 and took < 5, p.stderr
    assert "broker 7 is not a live broker of 'broker-a': its live brokers are 0, 1" in p.stderr
    p, took = failover("broker-b")
    assert p.returncode == 2 and took < 5, p.stderr
    assert "broker group 'broker-b' has no live slave to hand over to" in p.stderr
    p, _ = failover("broker-a", "--to", "0")
    assert p.returncode == 0 and "broker 0 is already the master" in p.stdout, p.stderr
    for group in ("broker-a", "broker-b"):
        assert read_node(zk, paths.switchover(group)) == {}
        assert master_id(zk, cl, group) == 0


def test_step_down_in_a_secured_brokers_pod_uses_the_brokers_own_keys(secured):
    """The preStop hook of a secured pod: no user's credentials there, only
    the broker's auth_dir; it dials the broker with the broker key and
    writes the switchover request to ZooKeeper as the brokers do."""
    cluster, keys, _admin, master, slave = secured
    wait_for(lambda: probe_env(slave, keys, "health", "--ready")[0] == 0, 20,
             "the slave to be ready")
    rc, out = probe_env(master, keys, "failover", "--step-down")
    assert rc == 0 and out["handed_over"] and out["to"] == 1, out
    assert master_id(cluster.zookeeper, cluster.cluster) == 1


def probe_env(broker, keys, *args):
    """``duomq ARGS`` as in the broker's pod: its settings in DUOMQ_*
    variables, and no user's credentials."""
    return duomq(*args, env={
        "DUOMQ_CREDENTIALS": "", "DUOMQ_ZOOKEEPER": broker.zookeeper,
        "DUOMQ_CLUSTER": broker.cluster, "DUOMQ_PORT": str(broker.port),
        "DUOMQ_HA_PORT": str(broker.ha_port), "DUOMQ_AUTH": "true",
        "DUOMQ_AUTH_DIR": str(keys)})
