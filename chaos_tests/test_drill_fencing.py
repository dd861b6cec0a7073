"""Drill 3: a SIGSTOPped master that outlives its session acks nothing after
the takeover. And ASYNC replication: a slave promoted while behind, the old
master truncating the tail the group does not share (the loss is logged)."""

import re
import threading
import time

import pytest

from duomq.client import Message, Producer, SendStatus
from duomq.client.remoting import RemotingClient
from duomq.drill.load import read_back
from duomq.format import record as rec
from duomq.proto import pb
from duomq.testing.drill_reports import keep
from duomq.testing.harness import isr_members, master_id, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BASE = dict(zk_session_timeout_ms=4000, segment_size_bytes=1 << 20, max_message_bytes=64 << 10,
            max_pull_bytes=1 << 20)






@pytest.mark.parametrize("replication", ["ASYNC", "SYNC"])
def test_sigstopped_master_acks_nothing_after_the_takeover(local_cluster, replication):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    settings = dict(BASE, replication=replication, slave_timeout_ms=1000)
    old = local_cluster.add_broker("broker-a", 0, **settings)
    local_cluster.add_broker("broker-a", 1, **settings)
    local_cluster.create_topic("Fence", queues=1)
    with Producer(zookeeper=zk, cluster=cl) as p:
        assert p.send(Message("Fence", b"before")).ok
    # only an in-sync slave may take over: stop the master once the slave is one
    wait_for(lambda: 1 in isr_members(zk, cl), what="the slave to be in sync")
    # a raw client keeps sending straight to the old master's address
    remoting = RemotingClient("fence-io")
    record = rec.encode_record(b"Fence", b"", b"", b"", b"stale", 1)
    answers, stop = [], threading.Event()

    def hammer():
        while not stop.is_set():
            try:
                st, err, _ = remoting.call(old.address, pb.SEND, pb.SendRequest(
                    topic="Fence", queue_id=0, count=1, records=record), 2)
                answers.append((time.monotonic(), st))
            except Exception:
                time.sleep(0.05)

    old.suspend()                                         # SIGSTOP past the session timeout
    stopped_at = time.monotonic()
    t = threading.Thread(target=hammer)
    t.start()
    wait_for(lambda: master_id(zk, cl) == 1, what="the slave to take over")
    took_over = time.monotonic()
    old.resume()                                          # SIGCONT: it wakes up stale
    time.sleep(3.0)
    stop.set()
    t.join(10)
    remoting.close()
    acked_after = [a for a in answers if a[1] == pb.OK]
    keep(f"fencing_sigstop_{replication.lower()}",
         {"attempted": len(answers), "acked_after_takeover": len(acked_after),
          "failover_s": round(took_over - stopped_at, 3),
          "statuses": {pb.Status.Name(s): sum(1 for _, x in answers if x == s)
                       for s in {x for _, x in answers}}})
    assert acked_after == [], "the fenced master acked a write after the takeover"
    wait_for(lambda: "following broker 1" in old.log_tail(10_000), what="the old master to follow")


def test_async_lagging_promotion_truncates_the_old_masters_tail(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    # a 1 KiB window: a stopped slave holds at most 1 KiB of what it has not acked
    settings = dict(BASE, replication="ASYNC", ha_transfer_batch_bytes=1024,
                    ha_window_bytes=1024)
    old = local_cluster.add_broker("broker-a", 0, **settings)
    slave = local_cluster.add_broker("broker-a", 1, **settings)
    local_cluster.create_topic("Lag", queues=1)
    with Producer(zookeeper=zk, cluster=cl) as p:
        for i in range(10):
            assert p.send_batch([Message("Lag", b"shared %d-%d" % (i, k)) for k in range(50)]).ok
        time.sleep(0.5)                                   # replicated
        wait_for(lambda: 1 in isr_members(zk, cl), what="the slave to be in sync")
        slave.suspend()                                   # the slave falls behind ...
        for i in range(4):
            r = p.send_batch([Message("Lag", b"tail %d-%d" % (i, k)) for k in range(50)])
            assert r.status is SendStatus.SEND_OK         # ASYNC: acked by the master alone
    old.kill()                                            # ... and the master dies
    slave.resume()
    wait_for(lambda: master_id(zk, cl) == 1, what="the in-sync slave to take over")
    old.start()
    log_text = wait_for(lambda: re.search(r"truncated (\d+) bytes \((\d+) records\)",
                                          old.log_tail(10_000)), what="the truncation")
    nbytes, records = int(log_text.group(1)), int(log_text.group(2))
    bodies = [b for _q, b in read_back(zk, cl, "Lag")]
    tail_kept = sum(1 for b in bodies if b.startswith(b"tail"))
    keep("async_lagging_promotion", {"attempted": 700, "acked": 700, "lost": 200 - tail_kept,
                                     "truncated_bytes": nbytes, "truncated_records": records})
    assert records > 0 and nbytes > 0                     # the unreplicated tail was cut ...
    assert tail_kept + records == 200                     # ... and counted exactly
    assert sum(1 for b in bodies if b.startswith(b"shared")) == 500
