"""`duomq consume --count N` as a user runs it: exactly N printed and
committed, whatever the consumer pulled beyond them."""

import json
import time

import pytest

from duomq.cli.status_cmd import collect
from duomq.client import Message, Producer
from duomq.testing.harness import run_cli

pytestmark = pytest.mark.integration


def committed(local_cluster, group: str) -> int:
    """The group's committed offsets of topic Peek, summed over its queues."""
    st = collect(local_cluster.zookeeper, local_cluster.cluster)
    return sum(q["offset"] for q in st["consumer_lag"]
               if q["consumer_group"] == group and q["topic"] == "Peek")


@pytest.mark.parametrize("mode", [[], ["--orderly"]], ids=["concurrently", "orderly"])
def test_consume_count_prints_and_commits_exactly_that_many(local_cluster, mode):
    local_cluster.add_broker("broker-a", 0)
    local_cluster.create_topic("Peek", queues=4)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p:
        for lo in range(0, 1000, 100):
            assert p.send_batch([Message("Peek", b"m%04d" % i) for i in range(lo, lo + 100)]).ok
    endpoint = ["--zookeeper", local_cluster.zookeeper, "--cluster", local_cluster.cluster]
    group = "peek-" + (mode[0][2:] if mode else "c")
    for want, total in ((5, 5), (3, 8)):             # a second peek goes on from the first
        out = run_cli("consume", "Peek", "--group", group, "--from", "first", "--count",
                      str(want), "--json", *mode, *endpoint).stdout.splitlines()
        msgs, summary = [json.loads(x) for x in out[:-1]], json.loads(out[-1])
        assert len(msgs) == want and summary["consumed"] == want
        assert committed(local_cluster, group) == total
    bad = run_cli("consume", "Peek", "--group", group, "--count", "0", *endpoint, check=False)
    assert bad.returncode == 2 and "--count must be at least 1" in bad.stderr


def test_consume_share_prints_and_acks_exactly_count(local_cluster):
    """Two `duomq consume --share` runs of one group go on from each other:
    exactly the messages printed were acked, none twice, none skipped."""
    local_cluster.add_broker("broker-a", 0)
    local_cluster.create_topic("Peek", queues=4)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p:
        assert p.send_batch([Message("Peek", b"s%03d" % i) for i in range(100)]).ok
    endpoint = ["--zookeeper", local_cluster.zookeeper, "--cluster", local_cluster.cluster]
    seen = []
    for want in (5, 3):
        out = run_cli("consume", "Peek", "--share", "sharers", "--from", "first", "--count",
                      str(want), "--json", *endpoint).stdout.splitlines()
        msgs, summary = [json.loads(x) for x in out[:-1]], json.loads(out[-1])
        assert len(msgs) == want and summary["consumed"] == want
        assert all(m["delivery_count"] == 1 for m in msgs)
        seen += [m["body"] for m in msgs]
    assert len(set(seen)) == 8
    rest = run_cli("consume", "Peek", "--share", "sharers", "--until-idle", "1", "--quiet",
                   "--json", *endpoint).stdout.splitlines()
    assert json.loads(rest[-1])["consumed"] == 92           # nothing printed was left held
    bad = run_cli("consume", "Peek", "--share", "sharers", "--group", "g", *endpoint,
                  check=False)
    assert bad.returncode == 2 and "--share does not take --group" in bad.stderr


@pytest.mark.parametrize("how", [["--share", "newsharers"], ["--group", "newgroup"]],
                         ids=["share", "group"])
def test_a_consume_waiting_at_the_end_of_a_new_group_says_why(local_cluster, how):
    """The README tour's trap: a new group starts at the end, so with
    messages stored and none sent it prints nothing. It says why once, on
    stderr, and takes the next messages sent."""
    import subprocess
    import sys
    local_cluster.add_broker("broker-a", 0)
    local_cluster.create_topic("Waits", queues=2)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p:
        assert p.send_batch([Message("Waits", b"old%d" % i) for i in range(20)]).ok
    endpoint = ["--zookeeper", local_cluster.zookeeper, "--cluster", local_cluster.cluster]
    proc = subprocess.Popen([sys.executable, "-m", "duomq", "consume", "Waits", *how,
                             "--count", "2", *endpoint], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            lines.append(proc.stderr.readline())
            if "waiting for new messages" in lines[-1]:
                break
        assert "--from first reads what is stored already" in lines[-1], lines
        kind = "share group" if how[0] == "--share" else "group"
        assert f"a new {kind} starts at the end" in lines[-1]
        with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p:
            deadline = time.monotonic() + 30      # a push consumer may still be taking its queues
            while proc.poll() is None and time.monotonic() < deadline:
                assert p.send(Message("Waits", b"new")).ok
                time.sleep(0.5)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err
    bodies = [x.split(" ", 2)[2] for x in out.splitlines()]
    assert bodies == ["new", "new"]
    assert "waiting for new messages" not in err      # said once
