"""``duomq drill run`` against a dev cluster, as a user runs it: exit code,
report, plot, and a clear refusal when the cluster cannot host a scenario."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def duomq(*args, env, timeout=300):
    return subprocess.run([sys.executable, "-m", "duomq", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def dev(tmp_path, zk_hosts):
    env = dict(os.environ, DUOMQ_DEV_DIR=str(tmp_path / "dev"))
    started = []

    def up(*args):
        p = duomq("dev", "up", "--zookeeper", zk_hosts, "--cluster", f"Drill{len(started)}",
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
