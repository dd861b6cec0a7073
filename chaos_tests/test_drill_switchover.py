"""A planned switchover under load (``duomq failover``): the master drains,
hands over to the in-sync slave, follows it; nothing acked is lost."""

import json
import subprocess
import sys
import time

import pytest

from duomq.drill.load import Workload
from duomq.testing.drill_reports import audit

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PAIR = dict(flush="SYNC_FLUSH", replication="SYNC", zk_session_timeout_ms=4000,
            slave_timeout_ms=1000, sync_flush_timeout_ms=1000, segment_size_bytes=1 << 20,
            max_message_bytes=64 << 10, max_pull_bytes=1 << 20)


def duomq(*args, zk, cluster):
    p = subprocess.run([sys.executable, "-m", "duomq", *args, "--zookeeper", zk, "--cluster",
                        cluster, "--json"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_planned_switchover_under_load(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    old = local_cluster.add_broker("broker-a", 0, **PAIR)
    local_cluster.add_broker("broker-a", 1, **PAIR)
    local_cluster.create_topic("Planned", queues=2)
    load = Workload(zk, cl, "Planned", producers=2, consumers=0, send_timeout_ms=4000).start()
    try:
        deadline = time.monotonic() + 20
        while load.acked() < 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        fault_at = time.monotonic()
        out = duomq("failover", "broker-a", zk=zk, cluster=cl)
        assert (out["from"], out["to"], out["epoch"]) == (0, 1, 2)
        deadline = time.monotonic() + 20
        while load.first_ack_after(time.monotonic() - 0.2) is None and time.monotonic() < deadline:
            time.sleep(0.05)                        # SYNC acks again: the old master follows
        time.sleep(0.5)
    finally:
        load.stop()
    report = audit("planned_switchover", load, fault_at, switchover_s=out["seconds"])
    assert report.lost == 0 and report.unexpected == 0 and report.guarantees_held
    assert report.rto_s[0] is not None
    status = duomq("status", zk=zk, cluster=cl)
    roles = {b["id"]: b["role"] for b in status["brokers"]}
    assert roles == {0: "SLAVE", 1: "MASTER"}
    assert "following broker 1 at epoch 2" in old.log_tail(10_000)
