"""Consumer semantics through a failover (kill -9 of the master of a SYNC
pair, then the old master rejoins as the slave): delayed messages are
delivered by the promoted slave, and orderly consumption keeps each queue's
order."""

import threading
import time
from collections import defaultdict

import pytest

from duomq.client import Message, Producer, PushConsumer, SendStatus
from duomq.testing.harness import master_id, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PAIR = dict(flush="SYNC_FLUSH", replication="SYNC", zk_session_timeout_ms=4000,
            slave_timeout_ms=2000, segment_size_bytes=1 << 20, max_message_bytes=64 << 10,
            message_delay_level="200ms 400ms 600ms 1s 2s")


def pair(local_cluster, topic, queues):
    old = local_cluster.add_broker("broker-a", 0, **PAIR)
    local_cluster.add_broker("broker-a", 1, **PAIR)
    local_cluster.create_topic(topic, queues=queues)
    return old


def test_delayed_messages_are_delivered_by_the_new_master(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    old = pair(local_cluster, "Timers", 2)
    t0 = time.time()
    due = {b"t%02d" % i: t0 + 1.5 + i * 0.2 for i in range(30)}
    with Producer(zookeeper=zk, cluster=cl) as p:
        for body, at in due.items():
            r = p.send(Message("Timers", body, deliver_at_ms=int(at * 1000)))
            assert r.status is SendStatus.SEND_OK         # SYNC: the slave holds it
    old.kill()                                             # before the first is due
    wait_for(lambda: master_id(zk, cl) == 1, what="the slave to take over")
    old.start()          # SYNC: consumers see what a slave holds; the old master rejoins as one
    lock = threading.Lock()
    arrivals = defaultdict(list)

    def on_message(m):
        with lock:
            arrivals[m.body].append(time.time())

    with PushConsumer("timers", topic="Timers", on_message=on_message, zookeeper=zk, cluster=cl,
                      consume_from="first").start():
        wait_for(lambda: len(arrivals) == 30, timeout_s=40, what="all 30 timers")
    for body, at in due.items():
        assert min(arrivals[body]) >= at - 0.05, f"{body!r} came early"


def test_orderly_consumption_keeps_queue_order_through_a_failover(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    old = pair(local_cluster, "Ledger", 2)
    lock = threading.Lock()
    order = defaultdict(list)

    def on_message(m):
        time.sleep(0.002)
        with lock:
            order[m.queue_id].append(int(m.body))

    c = PushConsumer("ledger", topic="Ledger", on_message=on_message, zookeeper=zk, cluster=cl,
                     consume_from="first", consume_mode="orderly", pull_batch_size=16,
                     request_timeout_ms=2000).start()
    try:
        wait_for(lambda: len(c.assigned) == 2, what="queues and their locks")
        with Producer(zookeeper=zk, cluster=cl, retry_times_when_send_failed=5) as p:
            for i in range(300):
                assert p.send(Message("Ledger", b"%d" % i),
                              sharding_key=str(i % 2)).status is SendStatus.SEND_OK
            wait_for(lambda: sum(map(len, order.values())) >= 100, what="consumption under way")
            old.kill()
            wait_for(lambda: master_id(zk, cl) == 1,
                     what="the slave to take over")
            old.start()                     # rejoins as the slave: SYNC visibility resumes
            for i in range(300, 400):       # to the new master
                p.send(Message("Ledger", b"%d" % i), sharding_key=str(i % 2))
        wait_for(lambda: sum(map(len, order.values())) >= 400, timeout_s=60,
                 what="everything consumed")
    finally:
        c.shutdown()
    for qid, seq in order.items():
        assert seq == sorted(seq) and len(seq) == len(set(seq)), f"queue {qid} out of order"
    assert sorted(i for seq in order.values() for i in seq) == list(range(400))
