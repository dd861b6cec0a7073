"""``duomq group lag`` and ``duomq group reset-offset`` against a real broker:
a live member moves back to the time given and consumes again from there, a
dry run changes nothing, and a member that starts after a reset starts where
it put the group."""

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from duomq.client import Message, Producer, PushConsumer
from duomq.testing.harness import wait_for

pytestmark = pytest.mark.integration


class Seen:
    def __init__(self):
        self.lock = threading.Lock()
        self.bodies = Counter()

    def __call__(self, m):
        with self.lock:
            self.bodies[m.body] += 1


def duomq(cluster, *args, ok=True):
    env = {**os.environ, "DUOMQ_ZOOKEEPER": cluster.zookeeper, "DUOMQ_CLUSTER": cluster.cluster}
    p = subprocess.run([sys.executable, "-m", "duomq", *args], env=env, capture_output=True,
                       text=True, timeout=60)
    assert (p.returncode == 0) == ok, p.stderr
    return json.loads(p.stdout) if ok and "--json" in args else p


def test_lag_and_a_reset_by_time_moves_live_and_later_members(local_cluster, small_store):
    local_cluster.add_broker("broker-a", **small_store)
    local_cluster.create_topic("Events", queues=2)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    with Producer(zookeeper=zk, cluster=cl) as p:
        for i in range(100):
            p.send(Message("Events", b"old-%d" % i))
        time.sleep(1.1)
        cut = int(time.time() * 1000)
        time.sleep(0.05)
        for i in range(50):
            p.send(Message("Events", b"new-%d" % i))

    lag = duomq(local_cluster, "group", "lag", "--group", "g", "--topic", "Events", "--json")
    assert [q["offset"] for q in lag["queues"]] == [-1, -1] and lag["members"] == 0
    assert sum(q["max_offset"] for q in lag["queues"]) == 150

    seen = Seen()
    c = PushConsumer("g", topic="Events", on_message=seen, zookeeper=zk, cluster=cl, consume_from="first",
                     offset_commit_interval_ms=200).start()
    try:
        wait_for(lambda: len(seen.bodies) == 150, what="the backlog consumed")
        wait_for(lambda: duomq(local_cluster, "group", "lag", "--group", "g",
                               "--json")["total_lag"] == 0, what="the offsets committed")
        lag = duomq(local_cluster, "group", "lag", "--group", "g", "--json")
        assert {q["topic"] for q in lag["queues"]} == {"Events"}    # nothing failed: no retry
        assert lag["members"] == 1

        dry = duomq(local_cluster, "group", "reset-offset", "--group", "g", "--topic", "Events",
                    "--timestamp", str(cut), "--dry-run", "--json")
        assert sum(q["new_offset"] for q in dry["queues"]) == 100       # the first new message
        assert sum(q["old_offset"] for q in dry["queues"]) == 150
        time.sleep(0.5)
        assert sum(seen.bodies.values()) == 150, "a dry run moves nobody"

        done = duomq(local_cluster, "group", "reset-offset", "--group", "g", "--topic", "Events",
                     "--timestamp", str(cut), "--json")
        assert done["members"] == 1 and not done["dry_run"]
        wait_for(lambda: sum(seen.bodies.values()) == 200, what="the reset consumed again")
        time.sleep(0.5)
        assert all(seen.bodies[b"new-%d" % i] == 2 for i in range(50))
        assert all(seen.bodies[b"old-%d" % i] == 1 for i in range(100))
        assert c.resets == 1
        wait_for(lambda: duomq(local_cluster, "group", "lag", "--group", "g",
                               "--json")["total_lag"] == 0, what="the offsets committed again")
    finally:
        c.shutdown()

    # with no member alive, a reset is where the next member starts
    duomq(local_cluster, "group", "reset-offset", "--group", "g", "--topic", "Events",
          "--timestamp", "0", "--json")
    later = Seen()
    c2 = PushConsumer("g", topic="Events", on_message=later, zookeeper=zk, cluster=cl).start()
    try:
        wait_for(lambda: len(later.bodies) == 150, what="everything again from the start")
        time.sleep(0.5)
        assert c2.resets == 0, "a reset published before it started is not applied again"
        assert sum(later.bodies.values()) == 150
    finally:
        c2.shutdown()

    text = duomq(local_cluster, "group", "lag", "--group", "g").stdout
    assert "total lag 0" in text and "Events" in text
    bad = duomq(local_cluster, "group", "reset-offset", "--group", "g", "--topic", "Nope",
                "--timestamp", "1h", ok=False)
    assert bad.returncode == 2 and "Nope" in bad.stderr
    bad = duomq(local_cluster, "group", "reset-offset", "--group", "g", "--topic", "Events",
                "--timestamp", "soon", ok=False)
    assert bad.returncode == 2 and "not a time" in bad.stderr
