"""A pull with nothing new is held and answered at once when a message arrives."""

import threading
import time

import pytest

from duomq.client import Message, Producer, PullConsumer, PullStatus
from duomq.common.message import MessageQueue
from duomq.testing.harness import wait_for

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
@pytest.mark.parametrize("busy_poll_us", [100, 0])   # the serving loop spins, or sleeps at once
@pytest.mark.parametrize("transport", ["native", "zeromq"])   # who reads the client port
def test_held_pull_wakes_when_a_message_arrives(local_cluster, small_store, flush, busy_poll_us,
                                                transport):
    local_cluster.add_broker("broker-a", flush=flush, busy_poll_us=busy_poll_us,
                             client_transport=transport, **small_store)
    local_cluster.create_topic("Waits", queues=1)
    mq = MessageQueue("Waits", "broker-a", 0)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p, \
            PullConsumer("g", zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as c:
        result = {}

        def pull():
            t0 = time.monotonic()
            result["r"] = c.pull(mq, 0, max_wait_ms=10_000)
            result["waited"] = time.monotonic() - t0

        t = threading.Thread(target=pull)
        t.start()
        time.sleep(0.5)               # the pull is now held at the broker
        assert t.is_alive()
        sent_at = time.monotonic()
        p.send(Message("Waits", b"wake up"))
        t.join(10)
        r = result["r"]
        assert r.status is PullStatus.FOUND and r.messages[0].body == b"wake up"
        assert 0.5 <= result["waited"] < 0.5 + 2.0
        assert time.monotonic() - sent_at < 1.0


def test_held_pull_times_out_with_no_new_message(local_cluster, small_store):
    local_cluster.add_broker("broker-a", long_polling_timeout_ms=600, **small_store)
    local_cluster.create_topic("Quiet", queues=1)
    mq = MessageQueue("Quiet", "broker-a", 0)
    with PullConsumer("g", zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as c:
        t0 = time.monotonic()
        r = c.pull(mq, 0, max_wait_ms=5000)   # capped by the broker's 600 ms
        waited = time.monotonic() - t0
        assert r.status is PullStatus.NO_NEW_MESSAGE and r.next_offset == 0
        assert 0.5 < waited < 2.5


@pytest.mark.parametrize("replication", ["ASYNC", "SYNC"])
def test_held_pull_on_a_slave_wakes_when_the_message_is_replicated(local_cluster, small_store,
                                                                   replication):
    """The replication thread wakes the slave's serving thread only while a
    pull is held there: that wake-up must come. Its fallbacks are made slow
    here, so that which path answered shows in seconds, not in what a busy
    machine does to milliseconds: the slave's rounds every 3 s (a round, or
    any other turn of its loop, would find the message too) and the master's
    heartbeats every 8 s (each wakes a slave holding a pull). A wake-up
    answers within the replication's round trip; a missed one, at the next
    round, 1.5 s later on the average. (The ASYNC slave's replication thread
    keeps the broker's priority here: under SCHED_IDLE, ``ha_apply_idle``'s
    default, a machine busy with other work starves it by design, which
    is not what this test asks.)"""
    quiet = dict(ha_heartbeat_ms=8000, replication=replication, ha_apply_idle=False,
                 ha_apply_nice=0, **small_store)
    local_cluster.add_broker("broker-a", 0, **quiet)
    local_cluster.add_broker("broker-a", 1, housekeeping_interval_ms=3000, **quiet)
    local_cluster.create_topic("SlaveWaits", queues=1)
    mq = MessageQueue("SlaveWaits", "broker-a", 0)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p, \
            PullConsumer("g", zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster,
                         read_from="slave") as c:
        assert p.send(Message("SlaveWaits", b"first")).ok   # the link is up and carrying
        wait_for(lambda: c.pull(mq, 0).status is PullStatus.FOUND, what="the first message")
        waits = []
        for i in range(9):   # each pull is held at the slave, then woken by replication
            result = {}

            def pull(offset=1 + i, result=result):
                result["r"] = c.pull(mq, offset, max_wait_ms=20_000)
                result["at"] = time.monotonic()

            t = threading.Thread(target=pull)
            t.start()
            time.sleep(0.3 + 0.037 * i)     # the sends fall all over the slave's round
            assert t.is_alive()
            sent_at = time.monotonic()
            assert p.send(Message("SlaveWaits", b"wake %d" % i)).ok
            t.join(20)
            r = result["r"]
            waits.append(result["at"] - sent_at)
            assert r.status is PullStatus.FOUND and r.messages[0].body == b"wake %d" % i
        assert sorted(waits)[len(waits) // 2] < 0.25, waits


def test_a_held_pull_on_a_sync_master_waits_for_the_slave_not_for_the_store(local_cluster,
                                                                            small_store):
    """SYNC replication: a message stored on the master but not yet held by
    its slave answers no pull, held or new, whatever order the master
    answers pulls and acks in; once the slave has it, the held pull gets it."""
    local_cluster.add_broker("broker-a", 0, replication="SYNC", slave_timeout_ms=1500,
                             **small_store)
    slave = local_cluster.add_broker("broker-a", 1, replication="SYNC", **small_store)
    local_cluster.create_topic("Confirmed", queues=1)
    mq = MessageQueue("Confirmed", "broker-a", 0)
    with Producer(zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as p, \
            PullConsumer("g", zookeeper=local_cluster.zookeeper, cluster=local_cluster.cluster) as c:
        assert p.send(Message("Confirmed", b"first")).ok
        result = {}
        t = threading.Thread(target=lambda: result.update(r=c.pull(mq, 1, max_wait_ms=2500)))
        t.start()
        time.sleep(0.3)                               # held at the master
        slave.suspend()
        try:
            sent = p.send(Message("Confirmed", b"unconfirmed"))
            assert not sent.ok, sent                  # stored, the slave never said it holds it
            t.join(10)
            assert result["r"].status is PullStatus.NO_NEW_MESSAGE, result["r"]
            assert c.pull(mq, 1, max_wait_ms=0).status is PullStatus.NO_NEW_MESSAGE
            late = {}
            t = threading.Thread(target=lambda: late.update(r=c.pull(mq, 1, max_wait_ms=10_000)))
            t.start()
            time.sleep(0.3)                           # held again, then the slave comes back
        finally:
            slave.resume()
        t.join(15)
        assert late["r"].status is PullStatus.FOUND and \
            late["r"].messages[0].body == b"unconfirmed", late["r"]
