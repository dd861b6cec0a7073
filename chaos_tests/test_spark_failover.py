"""Issue 4's failover test: the master is killed under a Structured Streaming
query pinned to slave reads. The query goes on: with no slave left once the
slave is promoted, its tasks wait (``readFrom=slave`` never reads a master),
and read from the old master once it rejoins as a slave; the Parquet output
holds every stored message exactly once."""

import collections
import time

import pytest

from duomq.drill.load import Workload, read_back
from duomq.testing.harness import master_id, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SYNC_PAIR = dict(flush="SYNC_FLUSH", replication="SYNC", zk_session_timeout_ms=4000,
                 slave_timeout_ms=1000, sync_flush_timeout_ms=1000)


def test_master_killed_during_a_slave_pinned_streaming_query(spark, local_cluster, tmp_path):
    zk, cl = local_cluster.zookeeper, local_cluster.cluster
    old = local_cluster.add_broker("broker-a", 0, **SYNC_PAIR)
    local_cluster.add_broker("broker-a", 1, **SYNC_PAIR)
    local_cluster.create_topic("Clicks", queues=2)
    load = Workload(zk, cl, "Clicks", producers=1, consumers=0, send_timeout_ms=4000).start()
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    q = None
    try:
        wait_for(lambda: load.acked() >= 500, what="load before the query")
        q = (spark.readStream.format("duomq").option("zookeeper", zk).option("cluster", cl)
             .option("topic", "Clicks").option("readFrom", "slave")
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 400).load()
             .select("queue_id", "queue_offset", "body").writeStream.format("parquet")
             .option("path", out).option("checkpointLocation", ck)
             .trigger(processingTime="500 milliseconds").start())
        wait_for(lambda: any(p["numInputRows"] for p in q.recentProgress), 60, "a first batch")
        fault_at = time.monotonic()
        old.kill()                                        # kill -9 the master
        wait_for(lambda: master_id(zk, cl) == 1, what="the slave to take over")
        wait_for(lambda: load.first_stored_after(fault_at), what="writes to the new master")
        old.start()                                       # rejoins as the new slave
        wait_for(lambda: load.first_ack_after(time.monotonic() - 0.5), what="SYNC acks again")
    finally:
        load.stop()
    try:
        stored = [b for _q, b in read_back(zk, cl, "Clicks")]
        wait_for(lambda: spark.read.parquet(out).count() >= len(stored), 120,
                 "the query to read every stored message")
        assert q.exception() is None
    finally:
        q.stop()
    rows = spark.read.parquet(out).collect()
    twice = [k for k, n in collections.Counter((r.queue_id, r.queue_offset) for r in rows).items()
             if n > 1]
    assert twice == []
    assert sorted(bytes(r.body) for r in rows) == sorted(stored)
    assert len(rows) > 500
