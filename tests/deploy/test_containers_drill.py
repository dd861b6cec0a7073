"""`duomq drill run --driver container` against the prod overlay's pods in
containers (a ZooKeeper ensemble of three and the broker pair, secured,
the session's pods of tests/deploy/conftest.py, on which test_containers.py
ran first, the brokers advertising their container IPs so that the
drill on the host reaches them): kill -9 of the master's
container, its container paused (the cgroup freezer), a partition inside its
network namespace, the ZooKeeper leader's container killed. Each drill's
audit must find nothing acked lost."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from duomq.drill.container_driver import ContainerDriver
from duomq.drill.faults import DrillError
from duomq.testing.drill_reports import REPORT_DIR
from duomq.testing.prod_pods import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.containers, pytest.mark.slow]


@pytest.fixture
def pods(prod_pods):
    """The session's pods (tests/deploy/conftest.py), after test_containers.py's
    tests: every broker ready again first."""
    for pod in prod_pods.brokers:
        prod_pods.wait_ready(pod)
    return prod_pods


def zookeeper_of(pods: Cluster) -> str:
    """The ensemble's servers by their container IPs, on the port the pods
    use (the TLS one; the servers' addresses are in the ensemble's
    certificate, prod_pods.secured_docs)."""
    port = pods.cluster_env["DUOMQ_ZOOKEEPER"].split(",")[0].rsplit(":", 1)[1]
    return ",".join(f"{pods.net.addresses[p.name]}:{port}" for p in pods.zk)


def drill(pods: Cluster, scenario: str, report,
          rounds: int = 1) -> tuple[subprocess.CompletedProcess, dict]:
    zookeeper = zookeeper_of(pods)
    p = subprocess.run([sys.executable, "-m", "duomq", "drill", "run", "--driver", "container",
                        "--zookeeper", zookeeper, "--cluster", pods.cluster_env["DUOMQ_CLUSTER"],
                        "--scenario", scenario, "--rounds", str(rounds), "--report", str(report)],
                       capture_output=True, text=True, timeout=600,
                       # the prod overlay is secured: the drill runs as its admin
                       env={**os.environ, "DUOMQ_CREDENTIALS": str(pods.admin_credentials)})
    if p.returncode != 0:
        print(pods.logs())
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-1500:]
    os.makedirs(REPORT_DIR, exist_ok=True)             # kept with the other drills' reports
    shutil.copy(report, os.path.join(REPORT_DIR, f"container-{scenario}.json"))
    return p, json.loads(report.read_text())


def test_kill_master_container(pods, tmp_path):
    p, r = drill(pods, "kill-master", tmp_path / "kill.json")
    (rd,) = r["per_round"]
    assert r["lost"] == 0 and r["split_brain_s"] == 0 and r["guarantees_held"], r
    assert "podman kill -s KILL broker-a-" in rd["fault"]
    assert rd["epoch_after"] == rd["epoch_before"] + 1 and r["rto_s"][0] < 30, rd
    assert r["notes"]["driver"] == "container"


def test_pause_master_container(pods, tmp_path):
    p, r = drill(pods, "pause-master", tmp_path / "pause.json")
    (rd,) = r["per_round"]
    assert r["lost"] == 0 and r["split_brain_s"] == 0 and r["guarantees_held"], r
    assert "podman pause broker-a-" in rd["fault"]
    assert rd["epoch_after"] == rd["epoch_before"] + 1, rd


def test_partition_inside_the_master_container_and_no_rule_left(pods, tmp_path):
    p, r = drill(pods, "partition-master-zookeeper", tmp_path / "part.json")
    (rd,) = r["per_round"]
    assert r["lost"] == 0 and r["split_brain_s"] == 0 and r["guarantees_held"], r
    assert "from ZooKeeper (port 2182)" in rd["fault"]
    tag = r["notes"]["fault_tag"]
    for pod in pods.brokers:                 # removed from each container's namespace
        pid = subprocess.run(["podman", "inspect", "--format", "{{.State.Pid}}", pod.handle.name],
                             capture_output=True, text=True).stdout.strip()
        rules = subprocess.run(["nsenter", "--target", pid, "--net", "iptables", "-S"],
                               capture_output=True, text=True).stdout
        assert tag not in rules
    host_rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
    assert tag not in host_rules                       # nothing was set on the host


def test_replication_reset_inside_the_master_container(pods, tmp_path):
    """`ss -K` in the master container's network namespace: its slave's
    connection reset every 0.5 s for the hold, nothing acked lost."""
    p, r = drill(pods, "reset-replication", tmp_path / "reset.json")
    (rd,) = r["per_round"]
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["guarantees_held"], r
    assert "inside" in rd["fault"] and "1 connection(s)" in rd["fault"], rd["fault"]
    healed = [e["event"] for e in r["timeline"] if e["event"].startswith("heal:")]
    assert healed and " 0 connection(s) destroyed" not in healed[0], healed


def test_kill_the_zookeeper_leader_container(pods, tmp_path):
    p, r = drill(pods, "kill-zookeeper", tmp_path / "zk.json")
    (rd,) = r["per_round"]
    assert r["lost"] == 0 and r["guarantees_held"], r
    assert "ZooKeeper leader" in rd["fault"] and rd["fault"].count("zk-") == 1, rd["fault"]
    # the heal: the killed server's container started, and its server back in the quorum
    healed = [e["event"] for e in r["timeline"] if e["event"].startswith("heal:")]
    assert healed and "podman start zk-" in healed[0] and " (back as " in healed[0], healed


def test_a_zookeeper_server_that_never_comes_back_fails_the_heal(pods, monkeypatch):
    """The container driver's kill-zookeeper heal against a server that
    cannot come back: the killed leader's zoo.cfg (in its pod's emptyDir,
    kept across the restart) is broken while it is down, so its container
    starts and its server exits. The heal must fail with the server's log,
    not report the ensemble whole (as it once did, when a restarted pod could
    not write its zoo.cfg); with the file put back the same heal succeeds,
    and the ensemble is whole for what runs after."""
    monkeypatch.setenv("DUOMQ_CREDENTIALS", str(pods.admin_credentials))   # the TLS CA
    driver = ContainerDriver(zookeeper_of(pods), "never-back")
    fault = driver.kill_zookeeper()
    (pod,) = [p for p in pods.zk if f" {p.handle.name} " in fault]
    cfg = pod.dir / "empty" / "conf" / "zoo.cfg"
    good = cfg.read_text()
    try:
        cfg.write_text(good + "tickTime=never\n")   # the last of a key wins: not a number
        with pytest.raises(DrillError, match="not back in the quorum") as failed:
            driver.start_zookeeper(timeout_s=20)
        assert "log ends" in str(failed.value) and "never" in str(failed.value), failed.value
    finally:
        cfg.write_text(good)
        healed = driver.start_zookeeper()
        driver.close()
    assert f"podman start {pod.handle.name} (back as " in healed, healed
