"""Reads pinned to slaves, under faults: ``slave_preferred`` falls back to
the master while its slave is dead and returns once it is back; ``slave``
never reads the master; a bound on staleness (``max_replica_lag_ms``) turns
a slave cut off from its master away, naming its lag, and every answer from
a slave carries its lag. The replication link is cut with iptables on the
master's replication port (127.0.0.1 only; the rules are removed after)."""

import threading
import time

import pytest

from duomq.client import Message, Producer, PullConsumer, PullStatus, PushConsumer
from duomq.common.errors import NoRouteError, ReplicaLagError
from duomq.common.message import MessageQueue
from duomq.testing.harness import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BASE = dict(zk_session_timeout_ms=4000)


class Steady:
    """Sends numbered messages, one batch of 10 every 20 ms, until stopped."""

    def __init__(self, zk, cl, topic):
        self.n = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(zk, cl, topic), daemon=True)
        self.thread.start()

    def _run(self, zk, cl, topic):
        with Producer(zookeeper=zk, cluster=cl) as p:
            while not self.stop.is_set():
                p.send_batch([Message(topic, b"%d" % (self.n + k)) for k in range(10)])
                self.n += 10
                time.sleep(0.02)

    def finish(self) -> int:
        self.stop.set()
        self.thread.join(30)
        return self.n


def reads(c, group="broker-a"):
    return {bid: n for (g, bid), n in c.reads_by_broker.items() if g == group}


def test_slave_preferred_reads_the_master_while_its_slave_is_dead_and_comes_back(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    local_cluster.add_broker("broker-a", 0, **BASE)
    slave = local_cluster.add_broker("broker-a", 1, promotable="false", **BASE)
    local_cluster.create_topic("Pinned", queues=2)
    seen: set[bytes] = set()
    lock = threading.Lock()

    def on_message(m):
        with lock:
            seen.add(m.body)

    c = PushConsumer("pinned", topic="Pinned", on_message=on_message, zookeeper=zk, cluster=cl,
                     consume_from="first", read_from="slave_preferred",
                     long_polling_timeout_ms=1000).start()
    load = Steady(zk, cl, "Pinned")
    try:
        wait_for(lambda: reads(c).get(1, 0) > 20, what="reads served by the slave")
        slave.kill()
        on_master = reads(c).get(0, 0)
        wait_for(lambda: reads(c).get(0, 0) > on_master + 20, 20,
                 what="reads falling back to the master")
        before = len(seen)
        wait_for(lambda: len(seen) > before + 200, what="consumption going on without the slave")
        slave.start()
        on_slave = reads(c).get(1, 0)
        wait_for(lambda: reads(c).get(1, 0) > on_slave + 20, 30,
                 what="reads returning to the slave")
        n = load.finish()
        wait_for(lambda: len(seen) >= n, what=f"all {n} messages")
    finally:
        load.finish()
        c.shutdown()
    assert seen == {b"%d" % i for i in range(n)}           # nothing skipped


def test_read_from_slave_never_reads_the_master(local_cluster):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    local_cluster.add_broker("broker-a", 0, **BASE)
    slave = local_cluster.add_broker("broker-a", 1, promotable="false", **BASE)
    local_cluster.create_topic("Pinned", queues=1)
    mq = MessageQueue("Pinned", "broker-a", 0)
    with Producer(zookeeper=zk, cluster=cl) as p:
        p.send_batch([Message("Pinned", b"m%d" % i) for i in range(10)])
    slave.stop()                                          # leaves the group at once
    with PullConsumer("g", zookeeper=zk, cluster=cl, read_from="slave") as c:
        wait_for(lambda: 1 not in c.members.of("broker-a"), what="the slave's member node gone")
        with pytest.raises(NoRouteError, match="no live slave of group 'broker-a'"):
            c.pull(mq, 0)
    with PullConsumer("g", zookeeper=zk, cluster=cl, read_from="slave_preferred") as c:
        assert len(c.pull(mq, 0).messages) == 10
        assert reads(c) == {0: 1}                          # the master served it


def test_a_bound_on_staleness_turns_a_lagging_slave_away(local_cluster, netfilter):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    master = local_cluster.add_broker("broker-a", 0, **BASE)
    local_cluster.add_broker("broker-a", 1, promotable="false", **BASE)
    local_cluster.create_topic("Fresh", queues=1)
    mq = MessageQueue("Fresh", "broker-a", 0)
    with Producer(zookeeper=zk, cluster=cl) as p:
        p.send_batch([Message("Fresh", b"a%d" % i) for i in range(10)])
    bounded = dict(group="g", max_replica_lag_ms=800)
    with PullConsumer(zookeeper=zk, cluster=cl, read_from="slave", **bounded) as c:
        wait_for(lambda: c.pull(mq, 0).status is PullStatus.FOUND, what="the slave caught up")
        r = c.pull(mq, 0)
        assert r.replica_lag_ms == 0 and len(r.messages) == 10

    netfilter.cut_port(master.ha_port)                           # replication stops; clients go on
    try:
        with Producer(zookeeper=zk, cluster=cl) as p:
            p.send_batch([Message("Fresh", b"b%d" % i) for i in range(10)])
        time.sleep(3.0)                                   # > ha_heartbeat_ms + grace + bound
        with PullConsumer(zookeeper=zk, cluster=cl, read_from="slave", **bounded) as c:
            t0 = time.monotonic()
            with pytest.raises(ReplicaLagError, match=r"slave broker-a/1 is \d+ ms behind its "
                                                      r"master \(the reader's max_replica_lag_ms "
                                                      r"is 800\)") as err:
                c.pull(mq, 0, max_wait_ms=1000)
            assert time.monotonic() - t0 >= 0.9             # it waited out its poll timeout
            assert err.value.lag_ms > 800
            assert reads(c) == {1: reads(c)[1]}             # never the master
        with PullConsumer(zookeeper=zk, cluster=cl, read_from="slave_preferred", **bounded) as c:
            r = c.pull(mq, 0, max_messages=100)
            assert len(r.messages) == 20 and r.replica_lag_ms is None   # the master's answer
            assert reads(c).get(0) == 1
            assert c.replica_lag_ms[("broker-a", 1)] > 800
        with PullConsumer("g", zookeeper=zk, cluster=cl, read_from="slave") as c:   # no bound: served
            r = c.pull(mq, 0, max_messages=100)
            assert len(r.messages) == 10 and r.replica_lag_ms > 800
    finally:
        netfilter.heal()
    with PullConsumer(zookeeper=zk, cluster=cl, read_from="slave", **bounded) as c:
        def fresh():
            try:
                return len(c.pull(mq, 0, max_messages=100).messages) == 20
            except ReplicaLagError:
                return False        # TCP retransmits on its backoff after the heal
        wait_for(fresh, what="the slave back within the bound")
        assert c.pull(mq, 0).replica_lag_ms == 0


def test_spark_slave_preferred_goes_on_while_the_slave_is_dead(spark, local_cluster, tmp_path):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    local_cluster.add_broker("broker-a", 0, **BASE)
    slave = local_cluster.add_broker("broker-a", 1, promotable="false", **BASE)
    local_cluster.create_topic("Clicks", queues=2)
    load = Steady(zk, cl, "Clicks")
    out = str(tmp_path / "out")
    q = (spark.readStream.format("duomq").option("zookeeper", zk).option("cluster", cl)
         .option("topic", "Clicks").option("readFrom", "slave_preferred")
         .option("startingOffsets", "earliest").load()
         .select("queue_id", "queue_offset", "body").writeStream.format("parquet")
         .option("path", out).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(processingTime="500 milliseconds").start())
    try:
        wait_for(lambda: any(p["numInputRows"] for p in q.recentProgress), 60, "a first batch")
        slave.kill()
        # a batch read while the slave is dead: served by the master
        n_dead = load.n
        batch = (spark.read.format("duomq").option("zookeeper", zk).option("cluster", cl)
                 .option("topic", "Clicks").option("readFrom", "slave_preferred").load())
        assert batch.count() >= n_dead
        batches = len(q.recentProgress)
        wait_for(lambda: sum(p["numInputRows"] for p in q.recentProgress[batches:]) > 100, 60,
                 "the streaming query going on without its slave")
        slave.start()
        n = load.finish()
        wait_for(lambda: spark.read.parquet(out).count() >= n, 120, "every message")
        assert q.exception() is None
    finally:
        load.finish()
        q.stop()
    rows = spark.read.parquet(out).collect()
    assert len({(r.queue_id, r.queue_offset) for r in rows}) == len(rows) == n   # each once
    assert sorted(bytes(r.body) for r in rows) == sorted(b"%d" % i for i in range(n))


def test_spark_max_replica_lag_turns_a_cut_off_slave_away(spark, local_cluster, netfilter):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    master = local_cluster.add_broker("broker-a", 0, **BASE)
    local_cluster.add_broker("broker-a", 1, promotable="false", **BASE)
    local_cluster.create_topic("Clicks", queues=1)
    with Producer(zookeeper=zk, cluster=cl) as p:
        p.send_batch([Message("Clicks", b"a%d" % i) for i in range(50)])

    def read(read_from):
        return (spark.read.format("duomq").option("zookeeper", zk).option("cluster", cl)
                .option("topic", "Clicks").option("readFrom", read_from)
                .option("maxReplicaLagMs", 800).option("pollTimeoutMs", 3000).load())

    wait_for(lambda: read("slave").count() == 50, what="the slave serving within the bound")
    netfilter.cut_port(master.ha_port)
    try:
        with Producer(zookeeper=zk, cluster=cl) as p:
            p.send_batch([Message("Clicks", b"b%d" % i) for i in range(50)])
        time.sleep(3.0)
        assert read("slave_preferred").count() == 100            # the master's answer
        with pytest.raises(Exception, match=r"slave broker-a/1 is \d+ ms behind its master"):
            read("slave").count()
    finally:
        netfilter.heal()
