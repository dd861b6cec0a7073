"""``duomq drill run`` against a dev cluster, as a user runs it: exit code,
report, plot, and a clear refusal when the cluster cannot host a scenario."""

import json
import os
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def duomq(*args, env, timeout=300):
    return subprocess.run([sys.executable, "-m", "duomq", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def dev(tmp_path, zk_hosts):
    env = dict(os.environ, DUOMQ_DEV_DIR=str(tmp_path / "dev"))
    started = []

    def up(*args, ensemble=False):
        zk = ["--zookeepers", "3"] if ensemble else ["--zookeeper", zk_hosts]
        p = duomq("dev", "up", *zk, "--cluster", f"Drill{len(started)}",
                  "--set", "zk_session_timeout_ms=4000", "--set", "segment_size_bytes=8388608",
                  *args, env=env)
        assert p.returncode == 0, p.stderr
        started.append(True)
        return env
    yield up
    if started:
        duomq("dev", "down", env=env)


def test_kill_master_drill_on_a_sync_pair(dev, tmp_path):
    env = dev("--slaves", "1", "--flush", "sync", "--replication", "sync")
    report, plot = tmp_path / "drill.json", tmp_path / "drill.png"
    p = duomq("drill", "run", "--scenario", "kill-master", "--rounds", "2", "--report",
              str(report), "--plot", str(plot), env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads(report.read_text())
    assert r["rounds"] == 2 and r["lost"] == 0 and r["unexpected"] == 0
    assert r["split_brain_s"] == 0 and r["guarantees_held"]
    assert all(t is not None and t < 20 for t in r["rto_s"]), r["rto_s"]
    assert [pr["epoch_after"] - pr["epoch_before"] for pr in r["per_round"]] == [1, 1]
    assert "guarantees held" in p.stdout and "RTO p50" in p.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_group_without_a_slave_cannot_host_kill_master(dev):
    env = dev()
    p = duomq("drill", "run", "--scenario", "kill-master", "--rounds", "1", env=env)
    assert p.returncode == 2
    assert "has no slave" in p.stderr, p.stderr


def test_external_driver_times_a_fault_somebody_else_injects(dev, tmp_path):
    """--driver external: the drill injects nothing; here the test plays the
    user (`duomq dev kill`, then `duomq dev start`), and the drill times it."""
    env = dev("--slaves", "1", "--flush", "sync", "--replication", "sync")
    report = tmp_path / "external.json"
    drill = subprocess.Popen([sys.executable, "-m", "duomq", "drill", "run", "--scenario",
                              "kill-master", "--driver", "external", "--rounds", "1",
                              "--fault-timeout", "60", "--report", str(report)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in drill.stderr:
            if "waiting for a fault" in line:
                break
        time.sleep(1.0)                                   # some load before the fault
        assert duomq("dev", "kill", "broker-a/0", env=env).returncode == 0
        time.sleep(8.0)                                   # the election, writes at epoch 2
        assert duomq("dev", "start", "broker-a/0", env=env).returncode == 0
        out, err = drill.communicate(timeout=180)
    finally:
        drill.kill()
    assert drill.returncode == 0, out + err
    r = json.loads(report.read_text())
    (rd,) = r["per_round"]
    assert r["lost"] == 0 and rd["epoch_after"] == rd["epoch_before"] + 1
    assert "broker-a/0 gone" in rd["fault"] and 0 < r["rto_s"][0] < 20, r


def test_kill_zookeeper_leader_of_an_ensemble(dev, tmp_path):
    env = dev("--slaves", "1", "--flush", "sync", "--replication", "sync", ensemble=True)
    report = tmp_path / "zk.json"
    p = duomq("drill", "run", "--scenario", "kill-zookeeper", "--rounds", "1", "--report",
              str(report), env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads(report.read_text())
    (rd,) = r["per_round"]
    assert "(leader)" in rd["fault"] and r["lost"] == 0 and r["rto_s"][0] < 20
    assert rd["epoch_after"] == rd["epoch_before"]     # the brokers kept their sessions


def test_kill_zookeeper_needs_an_ensemble(dev):
    env = dev("--slaves", "1")
    p = duomq("drill", "run", "--scenario", "kill-zookeeper", "--rounds", "1", env=env)
    assert p.returncode == 2 and "--zookeepers 3" in p.stderr, p.stderr
