"""Timers through a failover: kill -9 of the master of a SYNC_FLUSH + SYNC
pair with 10,000 acked timers pending, the old master left dead (the new
master has no slave in sync the whole time): every timer is delivered by the
new master, none early, none lost; a copy fired twice (one the old master
fired just before it died) keeps the id its producer was given
(ORIGIN_MESSAGE_ID), and is counted."""

import re
import threading
import time
from collections import Counter

import pytest

from duomq.client import Message, Producer, PushConsumer, SendStatus
from duomq.testing.harness import master_id, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PAIR = dict(flush="SYNC_FLUSH", replication="SYNC", zk_session_timeout_ms=4000,
            slave_timeout_ms=2000, segment_size_bytes=8 << 20, max_message_bytes=64 << 10)


def test_the_new_master_fires_every_acked_timer_while_it_is_alone(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    old = local_cluster.add_broker("broker-a", 0, **PAIR)
    local_cluster.add_broker("broker-a", 1, **PAIR)
    local_cluster.create_topic("Timers", queues=2)
    ids, due = {}, {}
    with Producer(zookeeper=zk, cluster=cl) as p:
        t0 = time.time()
        for k in range(100):                      # 10,000 timers, due over 3 s from t0 + 6 s
            batch = [Message("Timers", b"t%05d" % (k * 100 + i),
                             deliver_at_ms=int((t0 + 6 + (k * 100 + i) * 0.0003) * 1000))
                     for i in range(100)]
            r = p.send_batch(batch)
            assert r.status is SendStatus.SEND_OK          # SYNC: the slave holds them
            for m, mid in zip(batch, r.msg_ids, strict=True):
                ids[m.body] = mid
                due[m.body] = m.deliver_at_ms / 1000
        # a few already due: fired by the old master before it dies, perhaps again after
        early = [Message("Timers", b"e%02d" % i, deliver_at_ms=int((time.time() + 0.2) * 1000))
                 for i in range(20)]
        r = p.send_batch(early)
        for m, mid in zip(early, r.msg_ids, strict=True):
            ids[m.body] = mid
            due[m.body] = m.deliver_at_ms / 1000
    time.sleep(0.5)                                       # the early ones fire on the old master
    assert time.time() - t0 < 5.5, "the sends took too long to kill before the timers are due"
    old.kill()                                            # before the 10,000 are due
    wait_for(lambda: master_id(zk, cl) == 1, what="the slave to take over")
    lock, got = threading.Lock(), {}
    copies: Counter = Counter()

    def on_message(m):
        with lock:
            origin = m.properties["ORIGIN_MESSAGE_ID"]
            copies[m.body] += 1
            got.setdefault(m.body, (time.time(), origin))

    with PushConsumer("timers", topic="Timers", on_message=on_message, zookeeper=zk, cluster=cl,
                      consume_from="first", consume_threads=0).start():
        wait_for(lambda: len(got) == len(due), timeout_s=60,
                 what=lambda: f"every timer ({len(got)} of {len(due)})")
        time.sleep(1.0)
    for body, at in due.items():
        when, origin = got[body]
        assert when >= at - 0.005, f"{body!r} came {at - when:.3f} s early"
        assert origin == ids[body]                       # the id its producer was given
    twice = sum(n - 1 for n in copies.values())
    print(f"{len(due)} timers delivered, {twice} fired twice")
    assert all(copies[b] == 1 for b in due if b.startswith(b"t")), "fired twice though due later"


def test_a_recall_acked_before_a_kill_9_holds_on_the_new_master(local_cluster):
    """Recall half of 200 timers, kill -9 the master at once (the recall
    records just acked, perhaps not yet indexed anywhere): the new master,
    alone, delivers exactly the 100 kept and none of the recalled; a replay
    of a recall to it is refused."""
    from duomq.common.errors import BadRequestError
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    old = local_cluster.add_broker("broker-a", 0, **PAIR)
    local_cluster.add_broker("broker-a", 1, **PAIR)
    local_cluster.create_topic("Timers", queues=1)
    with Producer(zookeeper=zk, cluster=cl) as p:
        at = int(time.time() * 1000) + 6000
        sent = [p.send(Message("Timers", b"r%03d" % i, deliver_at_ms=at)) for i in range(200)]
        for r in sent[::2]:
            p.recall("Timers", r.recall_handle)
        old.kill()
        wait_for(lambda: master_id(zk, cl) == 1, what="the slave to take over")
        with pytest.raises(BadRequestError, match="recalled before"):
            p.recall("Timers", sent[0].recall_handle)
    lock, got = threading.Lock(), Counter()

    def on_message(m):
        with lock:
            got[m.body] += 1

    with PushConsumer("timers", topic="Timers", on_message=on_message, zookeeper=zk, cluster=cl,
                      consume_from="first", consume_threads=0).start():
        wait_for(lambda: len(got) >= 100, timeout_s=30, what=lambda: f"{len(got)} of 100 kept")
        time.sleep(1.5)
    assert set(got) == {b"r%03d" % i for i in range(1, 200, 2)}, "a recalled timer came back"


def test_timers_cut_from_a_log_never_fire_and_the_rest_fire_once(local_cluster):
    """ASYNC pair: 100 timers replicated, 100 more acked by the master alone
    (its slave stopped), the master killed; the slave takes over and stores
    100 timers of its own where the cut tail lay. The old master comes back,
    cuts its tail (the index it made of it is built again) and takes over in
    turn: it fires the replicated and the new master's timers, each once and
    at its time, never one of the cut tail (nor what its stale index named)."""
    from duomq.testing.harness import isr_members
    settings = dict(replication="ASYNC", zk_session_timeout_ms=4000, slave_timeout_ms=2000,
                    segment_size_bytes=1 << 20, max_message_bytes=64 << 10,
                    ha_transfer_batch_bytes=1024, ha_window_bytes=1024)
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    old = local_cluster.add_broker("broker-a", 0, **settings)
    slave = local_cluster.add_broker("broker-a", 1, **settings)
    local_cluster.create_topic("Timers", queues=1)
    at = int(time.time() * 1000) + 25_000
    due = {}
    with Producer(zookeeper=zk, cluster=cl) as p:
        def timers(prefix: bytes) -> None:
            batch = [Message("Timers", prefix + b"%03d" % i, deliver_at_ms=at + i) for i in
                     range(100)]
            for k in range(0, 100, 10):
                assert p.send_batch(batch[k:k + 10]).status is SendStatus.SEND_OK
            due.update({m.body: at + i for i, m in enumerate(batch)})
        timers(b"shared")
        time.sleep(0.5)
        wait_for(lambda: 1 in isr_members(zk, cl), what="the slave in sync")
        slave.suspend()
        timers(b"tail")                           # ASYNC: acked by the master alone
        time.sleep(0.3)                           # indexed (and checkpointed, soon)
    time.sleep(1.2)
    old.kill()
    slave.resume()
    wait_for(lambda: master_id(zk, cl) == 1, what="the slave to take over")
    with Producer(zookeeper=zk, cluster=cl) as p:
        timers(b"new")                            # where the cut tail lay in the log
    old.start()
    wait_for(lambda: "built again" in old.log_tail(50_000), what="the old master's index "
             "built again after its log was cut")
    wait_for(lambda: 0 in isr_members(zk, cl), timeout_s=30, what="the old master in sync")
    time.sleep(1.5)                               # its index caught up and checkpointed
    slave.kill()
    wait_for(lambda: master_id(zk, cl) == 0, what="the old master to take over again")
    got: dict[bytes, list[float]] = {}
    lock = threading.Lock()

    def arrived(m):
        with lock:
            got.setdefault(m.body, []).append(time.time())
    c = PushConsumer("timers", topic="Timers", on_message=arrived, zookeeper=zk, cluster=cl,
                     consume_from="first", consume_threads=0).start()
    cut = int(re.search(r"truncated \d+ bytes \((\d+) records\)",
                        old.log_tail(200_000)).group(1))
    kept = 100 - cut                              # (what the slave had of the tail)
    assert cut > 0
    try:
        want = {b for b in due if not b.startswith(b"tail")} | \
            {b"tail%03d" % i for i in range(kept)}
        wait_for(lambda: want <= set(got), timeout_s=40, what="the shared and new timers")
        time.sleep(1.0)
    finally:
        c.shutdown()
    assert set(got) == want, f"cut from the log and fired: {sorted(set(got) - want)[:5]}"
    assert all(len(v) == 1 for v in got.values()), "a timer fired twice"
    assert all(min(got[b]) >= due[b] / 1000 - 0.002 for b in got), "a timer came early"
    assert "not the timer indexed there" not in old.log_tail(200_000)
